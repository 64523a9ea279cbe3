// Graphs of the "mixed" family (mixed_dag.h, the benchmark's second corpus) through ggml_gallocr
// on the CPU backend: the outputs must equal the same graph computed with every tensor in memory
// of its own (ggml_backend_alloc_ctx_tensors: no sharing), so every placement the planner makes on
// these graphs, offline ones included, is sound. And the compute buffer is never larger than
// upstream's placement (GGML_RS_ALLOC_PLANNER=upstream) or plain greedy-by-size of the same
// lifetimes (=greedy-by-size; except within 1/4096 of the bound, where the planner keeps
// upstream's placement), and never below the live-bytes lower bound.
// GGML_RS_FUZZ_ITERS sets the number of graphs (default 16).
#include "check.h"
#define UNUSED_TEST_COUNTER (void) g_tests_run; (void) g_only
#include "ggml_rs_ext.h"
#include "mixed_dag.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <math.h>
#include <stdint.h>

// the external leafs: memory of their own in a CPU buffer made for them
struct externals {
    struct ggml_context * ctx; // holds nothing: the tensors are the graph's
    struct ggml_tensor * t[512];
    int n;
};

static void note_external(struct ggml_tensor * t, void * user) {
    struct externals * e = user;
    if (e->n < 512) {
        e->t[e->n++] = t;
    }
}

// deterministic contents for every leaf (index inputs below their bound), the same in both runs
static void fill_leafs(struct ggml_cgraph * g) {
    for (int i = 0; i < g->n_leafs; i++) {
        struct ggml_tensor * l = g->leafs[i];
        int64_t n = ggml_nelements(l);
        if (l->type == GGML_TYPE_I32) {
            int bound = atoi(l->name + 4); // "rows<N>"
            int32_t * v = malloc(sizeof(int32_t) * (size_t) n);
            for (int64_t k = 0; k < n; k++) {
                v[k] = (int32_t) ((k * 7 + i) % (bound > 0 ? bound : 1));
            }
            ggml_backend_tensor_set(l, v, 0, ggml_nbytes(l));
            free(v);
        } else {
            float * v = malloc(sizeof(float) * (size_t) n);
            for (int64_t k = 0; k < n; k++) {
                v[k] = 0.25f * (float) ((k * 13 + i * 5) % 17) - 2.0f;
            }
            ggml_backend_tensor_set(l, v, 0, ggml_nbytes(l));
            free(v);
        }
    }
}

static float * read_output(struct ggml_tensor * t) {
    float * v = malloc(ggml_nbytes(t));
    ggml_backend_tensor_get(t, v, 0, ggml_nbytes(t));
    return v;
}

static bool same(float a, float b) {
    if (isnan(a) || isnan(b)) {
        return isnan(a) && isnan(b);
    }
    return a == b || fabsf(a - b) <= 1e-4f * fmaxf(1.0f, fabsf(a));
}

// the compute-buffer bytes of a reservation of `g` with planner `planner` (NULL: the default)
static size_t reserved_with(const char * planner, struct ggml_cgraph * g, size_t * lower_bound) {
    if (planner) {
        setenv("GGML_RS_ALLOC_PLANNER", planner, 1);
    } else {
        unsetenv("GGML_RS_ALLOC_PLANNER");
    }
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    CHECK(ggml_gallocr_reserve(ga, g), "reserve with planner %s", planner ? planner : "(default)");
    size_t size = ggml_gallocr_get_buffer_size(ga, 0);
    if (lower_bound && ggml_rs_gallocr_plan_stats) {
        ggml_rs_gallocr_plan_stats(ga, 0, NULL, lower_bound);
    }
    ggml_gallocr_free(ga);
    unsetenv("GGML_RS_ALLOC_PLANNER");
    return size;
}

static long checked;

static void one_graph(ggml_backend_t cpu, uint64_t seed) {
    struct ggml_init_params p = { 4096 * ggml_tensor_overhead() + ggml_graph_overhead_custom(8192, false), NULL, true };
    struct ggml_context * ctx = ggml_init(p);
    struct externals ext = { 0 };
    rng_seed(seed);
    int n_ops = 300 + below(400), window = 4 + below(28);
    struct ggml_cgraph * g = mixed_dag(ctx, 2000 + seed, n_ops, window, note_external, &ext);
    // the external leafs in a buffer of their own
    size_t ext_size = 0;
    for (int i = 0; i < ext.n; i++) {
        ext_size += GGML_PAD(ggml_nbytes(ext.t[i]), 64);
    }
    ggml_backend_buffer_t ext_buf = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), ext_size + 64);
    struct ggml_tallocr ta = ggml_tallocr_new(ext_buf);
    for (int i = 0; i < ext.n; i++) {
        ggml_tallocr_alloc(&ta, ext.t[i]);
    }

    // sizes: never above upstream's or greedy-by-size's, never below the bound
    size_t lb = 0;
    size_t ours = reserved_with(NULL, g, &lb), up = reserved_with("upstream", g, NULL), greedy = reserved_with("greedy-by-size", g, NULL);
    int nodes = ggml_graph_n_nodes(g);
    CHECK(ours <= up, "graph %d (%d nodes): ours %zu bytes, upstream's placement %zu", (int) seed, nodes, ours, up);
    // within 1/4096 of the bound the planner keeps upstream's placement (plan time, see plan.rs)
    CHECK(ours <= greedy || (lb && ours - ours / 4096 <= lb), "graph %d (%d nodes): ours %zu bytes, greedy-by-size %zu", (int) seed, nodes, ours, greedy);
    CHECK(lb == 0 || ours >= lb, "graph %d: %zu bytes, below the lower bound %zu", (int) seed, ours, lb);

    // the reference: every tensor of the context in memory of its own
    ggml_backend_buffer_t own = ggml_backend_alloc_ctx_tensors(ctx, cpu);
    CHECK(own != NULL, "graph %d: memory for the reference", (int) seed);
    fill_leafs(g);
    CHECK(ggml_backend_graph_compute(cpu, g) == GGML_STATUS_SUCCESS, "graph %d: reference compute", (int) seed);
    int n_out = 0;
    float * expected[256];
    struct ggml_tensor * outs[256];
    for (int i = 0; i < ggml_graph_n_nodes(g) && n_out < 256; i++) {
        struct ggml_tensor * t = ggml_graph_node(g, i);
        if (t->flags & GGML_TENSOR_FLAG_OUTPUT) {
            outs[n_out] = t;
            expected[n_out++] = read_output(t);
        }
    }
    // the same graph placed by the allocator: forget the reference's memory (not the externals')
    for (struct ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->buffer == own) {
            t->data = NULL;
            t->buffer = NULL;
        }
    }
    ggml_backend_buffer_free(own);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    CHECK(ggml_gallocr_alloc_graph(ga, g), "graph %d: alloc_graph", (int) seed);
    CHECK(ggml_gallocr_get_buffer_size(ga, 0) == ours, "graph %d: alloc_graph planned %zu bytes, reserve %zu", (int) seed, ggml_gallocr_get_buffer_size(ga, 0), ours);
    fill_leafs(g);
    CHECK(ggml_backend_graph_compute(cpu, g) == GGML_STATUS_SUCCESS, "graph %d: compute", (int) seed);
    for (int k = 0; k < n_out; k++) {
        float * got = read_output(outs[k]);
        int64_t n = ggml_nelements(outs[k]), bad = -1;
        for (int64_t e = 0; e < n && bad < 0; e++) {
            if (!same(got[e], expected[k][e])) {
                bad = e;
            }
        }
        CHECK(bad < 0, "graph %d: output %d (%s) differs at %lld: %g, expected %g", (int) seed, k, ggml_op_desc(outs[k]), (long long) bad,
              got[bad < 0 ? 0 : bad], expected[k][bad < 0 ? 0 : bad]);
        checked++;
        free(got);
        free(expected[k]);
    }
    ggml_gallocr_free(ga);
    ggml_backend_buffer_free(ext_buf);
    ggml_free(ctx);
}

int main(void) {
    UNUSED_TEST_COUNTER;
    setvbuf(stdout, NULL, _IONBF, 0);
    const char * iters = getenv("GGML_RS_FUZZ_ITERS");
    int n = iters ? atoi(iters) : 16;
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 2);
    for (int s = 0; s < n; s++) {
        one_graph(cpu, (uint64_t) s);
    }
    ggml_backend_free(cpu);
    printf("%d mixed graphs: %ld outputs equal to the unshared computation, compute buffers never above upstream's placement or "
           "greedy-by-size\n", n, checked);
    return 0;
}
