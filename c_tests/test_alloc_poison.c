// GGML_RS_ALLOC_POISON=1 (set by CTest for this program): tensors placed by the allocator are
// filled with a pattern, and a node reading a tensor nothing wrote since is reported by name,
// through ggml_backend_graph_compute and through the scheduler.
#include "check.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

static struct ggml_cgraph * build(struct ggml_context * ctx, struct ggml_tensor ** x, struct ggml_tensor ** w, struct ggml_tensor ** z) {
    *x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    ggml_set_name(*x, "x");
    ggml_set_input(*x);
    *w = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    ggml_set_name(*w, "w_forgotten");
    ggml_set_input(*w);
    struct ggml_tensor * y = ggml_scale(ctx, *x, 2.0f);
    ggml_set_name(y, "y");
    *z = ggml_add(ctx, y, *w);
    ggml_set_name(*z, "z");
    ggml_set_output(*z);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, *z);
    return g;
}

static bool count_observed(struct ggml_tensor * t, bool ask, void * user_data) {
    (void) t;
    if (!ask) {
        ++*(int *) user_data;
    }
    return true;
}

static const float ONES[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };

// computes g, through `sched` when there is one, and returns what was logged meanwhile
static const char * compute_logged(ggml_backend_t cpu, ggml_backend_sched_t sched, struct ggml_cgraph * g) {
    log_capture_begin();
    if (sched) {
        ggml_backend_sched_graph_compute(sched, g);
    } else {
        ggml_backend_graph_compute(cpu, g);
    }
    ggml_log_set(NULL, NULL);
    return g_log;
}

// x set, w forgotten: the read of w is reported by name, x is not
static void expect_forgotten_w_reported(ggml_backend_t cpu, ggml_backend_sched_t sched, struct ggml_cgraph * g, struct ggml_tensor * x) {
    ggml_backend_tensor_set(x, ONES, 0, sizeof(ONES));
    const char * log = compute_logged(cpu, sched, g);
    CHECK(strstr(log, "node 'z'") && strstr(log, "reads tensor 'w_forgotten', which nothing has written"), "log: %s", log);
    CHECK(!strstr(log, "'x'"), "x was written, yet reported: %s", log);
}

// both inputs set: nothing to report, and the right result
static void expect_clean_result(ggml_backend_t cpu, ggml_backend_sched_t sched, struct ggml_cgraph * g,
                                struct ggml_tensor * x, struct ggml_tensor * w, struct ggml_tensor * z) {
    ggml_backend_tensor_set(x, ONES, 0, sizeof(ONES));
    ggml_backend_tensor_set(w, ONES, 0, sizeof(ONES));
    const char * log = compute_logged(cpu, sched, g);
    CHECK(strstr(log, "GGML_RS_ALLOC_POISON") == NULL, "nothing to report, but: %s", log);
    float out[8];
    ggml_backend_tensor_get(z, out, 0, sizeof(out));
    CHECK_FLOAT(out[0], 3.0);
}

static void test_unwritten_input_is_reported(void) {
    CHECK(getenv("GGML_RS_ALLOC_POISON") != NULL, "run with GGML_RS_ALLOC_POISON=1");
    ggml_backend_t cpu = ggml_backend_cpu_init();
    struct ggml_init_params p = { 16 * ggml_tensor_overhead() + ggml_graph_overhead(), NULL, true };
    struct ggml_context * ctx = ggml_init(p);
    struct ggml_tensor * x, * w, * z;
    struct ggml_cgraph * g = build(ctx, &x, &w, &z);

    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    CHECK(ggml_gallocr_alloc_graph(ga, g), "alloc");
    expect_forgotten_w_reported(cpu, NULL, g, x);
    CHECK(ggml_gallocr_alloc_graph(ga, g), "alloc again");
    expect_clean_result(cpu, NULL, g, x, w, z);
    ggml_gallocr_free(ga);
    ggml_free(ctx);

    // through the scheduler, with a fresh graph (the tensors above already have memory, which
    // the scheduler would treat as the caller's and leave alone)
    ctx = ggml_init(p);
    g = build(ctx, &x, &w, &z);
    ggml_backend_sched_t sched = ggml_backend_sched_new(&cpu, NULL, 1, 64, false, true);
    // the eval callback still sees every node in this mode
    int observed = 0;
    ggml_backend_sched_set_eval_callback(sched, count_observed, &observed);
    CHECK(ggml_backend_sched_alloc_graph(sched, g), "sched alloc");
    expect_forgotten_w_reported(cpu, sched, g, x);
    CHECK(observed == ggml_graph_n_nodes(g), "eval callback observed %d of %d nodes", observed, ggml_graph_n_nodes(g));
    ggml_backend_sched_set_eval_callback(sched, NULL, NULL);

    ggml_backend_sched_reset(sched);
    CHECK(ggml_backend_sched_alloc_graph(sched, g), "sched alloc again");
    expect_clean_result(cpu, sched, g, x, w, z);
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
}

int main(int argc, char ** argv) {
    g_only = argc > 1 ? argv[1] : NULL;
    RUN(test_unwritten_input_is_reported);
    printf("%d tests passed\n", g_tests_run);
    return 0;
}
