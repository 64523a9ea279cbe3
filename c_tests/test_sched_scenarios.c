// The backend scheduler with two backends on a CPU-only machine (a fake device with non-host
// buffers, and the upstream CPU backend), so splits and copies really happen:
// - the caller's graph is never rewritten; reset + alloc of the same graph, with new inputs,
//   recomputes correctly any number of times, with 1 and 4 copies (upstream repro (a): stale 4
//   instead of 16 on the second round);
// - graph_compute honours its graph argument;
// - a result read by the next graph keeps its value, or allocation fails naming it;
// - repeats of unchanged graphs, plans kept only for the same structure;
// - op offload, the eval callback, the split plan dump;
// - and the scenarios across graphs in sched_across_graphs.c (linked into this program).
#include "check.h"
#include "fake_backend.h"
#include "ggml_rs_ext.h"
#include "sched_scenarios.h"
#include "tensors.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

struct ggml_context * new_ctx(void) {
    struct ggml_init_params p = { 256 * ggml_tensor_overhead() + 4 * ggml_graph_overhead(), NULL, true };
    return ggml_init(p);
}

// what a caller may rely on staying as built
struct snapshot {
    int n_nodes, n_leafs;
    struct ggml_tensor * nodes[64];
    struct ggml_tensor * srcs[64][GGML_MAX_SRC];
    struct ggml_tensor * view_src[64];
    int32_t flags[64];
    int32_t leaf_flags[64];
};

static void take(struct snapshot * s, struct ggml_cgraph * g) {
    s->n_nodes = ggml_graph_n_nodes(g);
    s->n_leafs = 0;
    for (int i = 0; i < s->n_nodes; i++) {
        struct ggml_tensor * n = ggml_graph_node(g, i);
        s->nodes[i] = n;
        memcpy(s->srcs[i], n->src, sizeof(n->src));
        s->view_src[i] = n->view_src;
        s->flags[i] = n->flags;
    }
}

static void same(const struct snapshot * a, struct ggml_cgraph * g, const char * when) {
    struct snapshot b;
    take(&b, g);
    CHECK(a->n_nodes == b.n_nodes, "%s: node count changed", when);
    for (int i = 0; i < a->n_nodes; i++) {
        CHECK(a->nodes[i] == b.nodes[i], "%s: node %d moved", when, i);
        CHECK(memcmp(a->srcs[i], b.srcs[i], sizeof(a->srcs[i])) == 0, "%s: sources of node %d (%s) changed", when, i, b.nodes[i]->name);
        CHECK(a->view_src[i] == b.view_src[i], "%s: view_src of node %d changed", when, i);
        CHECK(a->flags[i] == b.flags[i], "%s: flags of node %d changed", when, i);
    }
}

// upstream repro (a): x (input, CPU) -> n1 = scale(x, 2) on FAKE -> n2 = sqr(n1) on CPU
static void reset_alloc_loop(bool parallel, bool events) {
    ggml_backend_t fake = fake_backend_new(&(struct fake_options){ .events = events });
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, parallel, true);
    CHECK(ggml_backend_sched_get_n_copies(sched) == (parallel ? 4 : 1), "copies %d", ggml_backend_sched_get_n_copies(sched));

    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = vec(ctx, "x", 4);
    ggml_set_input(x);
    struct ggml_tensor * n1 = ggml_scale(ctx, x, 2.0f);
    ggml_set_name(n1, "n1");
    struct ggml_tensor * n2 = ggml_sqr(ctx, n1);
    ggml_set_name(n2, "n2");
    ggml_set_output(n2);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, n2);
    struct snapshot built;
    take(&built, g);
    int32_t x_flags = x->flags;

    for (int round = 1; round <= 12; round++) {
        ggml_backend_sched_reset(sched);
        same(&built, g, "after reset");
        ggml_backend_sched_set_tensor_backend(sched, n1, fake);
        ggml_backend_sched_set_tensor_backend(sched, n2, cpu);
        CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc round %d", round);
        same(&built, g, "after alloc");
        CHECK(x->flags == x_flags, "round %d: the input's flags were changed", round);
        CHECK(ggml_backend_sched_get_n_splits(sched) == 2, "round %d: %d splits", round, ggml_backend_sched_get_n_splits(sched));
        CHECK(ggml_backend_sched_get_tensor_backend(sched, n1) == fake, "n1 on FAKE");
        set_all(x, (float) round);
        CHECK(ggml_backend_sched_graph_compute(sched, g) == GGML_STATUS_SUCCESS, "compute round %d", round);
        same(&built, g, "after compute");
        float want = (2.0f * round) * (2.0f * round);
        CHECK(get0(n2) == want, "round %d (parallel=%d): n2 = %g, expected %g", round, parallel, get0(n2), want);
    }
    if (parallel && events) {
        CHECK(fake_backend_stats(fake)->events_recorded > 0, "pipeline parallelism uses the events");
    }
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

static void test_reset_alloc_loop_one_copy(void) { reset_alloc_loop(false, false); }
static void test_reset_alloc_loop_four_copies_with_events(void) { reset_alloc_loop(true, true); }
static void test_reset_alloc_loop_four_copies_without_events(void) { reset_alloc_loop(true, false); }

// repeated compute of the allocated graph (llama's graph reuse), with new inputs
static void test_recompute_allocated_graph(void) {
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = vec(ctx, "x", 4);
    ggml_set_input(x);
    struct ggml_tensor * n1 = ggml_scale(ctx, x, 3.0f);
    struct ggml_tensor * n2 = ggml_add(ctx, n1, x);
    ggml_set_output(n2);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, n2);
    ggml_backend_sched_set_tensor_backend(sched, n1, fake);
    CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc");
    for (int i = 0; i < 5; i++) {
        set_all(x, (float) i);
        CHECK(ggml_backend_sched_graph_compute(sched, g) == GGML_STATUS_SUCCESS, "compute");
        CHECK_FLOAT(get0(n2), 4.0 * i);
    }
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

// upstream computes the previously allocated graph whatever it is given (ggml#976)
static void test_compute_honours_its_graph_argument(void) {
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = vec(ctx, "x", 4);
    ggml_set_input(x);
    struct ggml_tensor * a = ggml_scale(ctx, x, 2.0f);
    ggml_set_output(a);
    struct ggml_cgraph * ga = ggml_new_graph(ctx);
    ggml_build_forward_expand(ga, a);
    struct ggml_tensor * y = vec(ctx, "y", 4);
    ggml_set_input(y);
    struct ggml_tensor * b = ggml_scale(ctx, y, 5.0f);
    ggml_set_output(b);
    struct ggml_cgraph * gb = ggml_new_graph(ctx);
    ggml_build_forward_expand(gb, b);

    CHECK(ggml_backend_sched_alloc_graph(sched, ga), "alloc a");
    set_all(x, 1.0f);
    log_capture_begin();
    CHECK(ggml_backend_sched_graph_compute(sched, gb) == GGML_STATUS_FAILED, "computing another graph than the allocated one");
    ggml_log_set(NULL, NULL);
    CHECK(strstr(g_log, "not the allocated one") != NULL, "message: %s", g_log);
    CHECK(ggml_backend_sched_graph_compute(sched, ga) == GGML_STATUS_SUCCESS, "the allocated graph still computes");
    CHECK_FLOAT(get0(a), 2.0);

    ggml_backend_sched_reset(sched);
    CHECK(ggml_backend_sched_alloc_graph(sched, gb), "alloc b");
    set_all(y, 1.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, gb) == GGML_STATUS_SUCCESS, "compute b");
    CHECK_FLOAT(get0(b), 5.0);
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

// seed-003 shape: an "encoder" graph computes emb on the device; the "language model" graph of
// the same scheduler reads emb (as a source it does not recompute)
static void test_result_read_by_the_next_graph(void) {
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_context * ctx = new_ctx();

    struct ggml_tensor * img = vec(ctx, "img", 16);
    ggml_set_input(img);
    struct ggml_tensor * e1 = ggml_scale(ctx, img, 0.5f);
    struct ggml_tensor * emb = ggml_add(ctx, e1, img);
    ggml_set_name(emb, "emb");
    ggml_set_output(emb);
    struct ggml_cgraph * genc = ggml_new_graph(ctx);
    ggml_build_forward_expand(genc, emb);
    ggml_backend_sched_set_tensor_backend(sched, e1, fake);
    ggml_backend_sched_set_tensor_backend(sched, emb, fake);
    CHECK(ggml_backend_sched_alloc_graph(sched, genc), "alloc encoder");
    set_all(img, 2.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, genc) == GGML_STATUS_SUCCESS, "compute encoder");
    CHECK_FLOAT(get0(emb), 3.0);
    CHECK(ggml_backend_buffer_get_type(emb->buffer) == fake_backend_buft(fake), "emb lives on the device");

    // the language model reads emb: tok * 10 + emb on the CPU
    struct ggml_tensor * tok = vec(ctx, "tok", 16);
    ggml_set_input(tok);
    struct ggml_tensor * t = ggml_scale(ctx, tok, 10.0f);
    struct ggml_tensor * out = ggml_add(ctx, t, emb);
    ggml_set_output(out);
    struct ggml_cgraph * glm = ggml_new_graph(ctx);
    t->flags |= GGML_TENSOR_FLAG_COMPUTE;
    out->flags |= GGML_TENSOR_FLAG_COMPUTE;
    ggml_graph_add_node(glm, t);
    ggml_graph_add_node(glm, out);
    for (int round = 0; round < 3; round++) {
        ggml_backend_sched_reset(sched);
        ggml_backend_sched_set_tensor_backend(sched, out, cpu);
        CHECK(ggml_backend_sched_alloc_graph(sched, glm), "alloc language model, round %d", round);
        set_all(tok, 1.0f + round);
        CHECK(ggml_backend_sched_graph_compute(sched, glm) == GGML_STATUS_SUCCESS, "compute language model");
        CHECK_FLOAT(get0(out), 10.0 * (1 + round) + 3.0);
    }

    // a graph in between takes the device memory: reading emb again is a named error
    struct ggml_tensor * z = vec(ctx, "z", 16);
    ggml_set_input(z);
    struct ggml_tensor * z1 = ggml_scale(ctx, z, 2.0f);
    ggml_set_name(z1, "z1");
    struct ggml_tensor * z2 = ggml_add(ctx, z1, z);
    ggml_set_name(z2, "z2");
    ggml_set_output(z2);
    struct ggml_cgraph * gz = ggml_new_graph(ctx);
    ggml_build_forward_expand(gz, z2);
    ggml_backend_sched_reset(sched);
    ggml_backend_sched_set_tensor_backend(sched, z1, fake);
    ggml_backend_sched_set_tensor_backend(sched, z2, fake);
    CHECK(ggml_backend_sched_alloc_graph(sched, gz), "alloc the graph in between");
    ggml_backend_sched_reset(sched);
    ggml_backend_sched_set_tensor_backend(sched, out, cpu);
    log_capture_begin();
    CHECK(!ggml_backend_sched_alloc_graph(sched, glm), "emb's memory was reused: allocation must fail");
    ggml_log_set(NULL, NULL);
    CHECK(strstr(g_log, "tensor 'emb'") != NULL, "the message names the tensor: %s", g_log);

    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

static bool offload_mul_mat(const struct ggml_tensor * op) { return op->op == GGML_OP_MUL_MAT; }

static void op_offload(bool on) {
    ggml_backend_t fake = fake_backend_new(&(struct fake_options){ .offload_op = offload_mul_mat });
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, on);

    struct ggml_context * wctx = new_ctx();
    struct ggml_tensor * w = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, 4, 4);
    ggml_set_name(w, "w");
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(wctx, cpu);
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    float wv[16];
    for (int i = 0; i < 16; i++) {
        wv[i] = (i % 5 == 0) ? 1.0f : 0.0f; // identity
    }
    ggml_backend_tensor_set(w, wv, 0, sizeof(wv));

    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 2);
    ggml_set_name(x, "x");
    ggml_set_input(x);
    struct ggml_tensor * y = ggml_mul_mat(ctx, w, x);
    ggml_set_output(y);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, y);
    CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc");
    CHECK(ggml_backend_sched_get_tensor_backend(sched, y) == (on ? fake : cpu), "op_offload=%d: mul_mat ran on %s", on,
          ggml_backend_name(ggml_backend_sched_get_tensor_backend(sched, y)));
    float xv[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    ggml_backend_tensor_set(x, xv, 0, sizeof(xv));
    CHECK(ggml_backend_sched_graph_compute(sched, g) == GGML_STATUS_SUCCESS, "compute");
    float yv[8];
    ggml_backend_tensor_get(y, yv, 0, sizeof(yv));
    CHECK(memcmp(xv, yv, sizeof(xv)) == 0, "identity weights");
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

static void test_op_offload_on(void) { op_offload(true); }
static void test_op_offload_off(void) { op_offload(false); }

struct cb_state {
    int asked, observed;
    int stop_after;
};

static bool eval_cb(struct ggml_tensor * t, bool ask, void * ud) {
    struct cb_state * s = (struct cb_state *) ud;
    if (ask) {
        s->asked++;
        return strncmp(t->name, "obs", 3) == 0; // observe only nodes named obs*
    }
    s->observed++;
    return s->observed < s->stop_after;
}

static void test_eval_callback(void) {
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = vec(ctx, "x", 4);
    ggml_set_input(x);
    struct ggml_tensor * cur = x;
    struct ggml_tensor * nodes[6];
    for (int i = 0; i < 6; i++) {
        cur = ggml_scale(ctx, cur, 2.0f);
        ggml_format_name(cur, i % 2 ? "obs%d" : "n%d", i);
        nodes[i] = cur;
    }
    ggml_set_output(cur);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, cur);

    struct cb_state st = { 0, 0, 100 };
    ggml_backend_sched_set_eval_callback(sched, eval_cb, &st);
    for (int i = 0; i < 6; i++) {
        ggml_backend_sched_set_tensor_backend(sched, nodes[i], fake);
    }
    CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc");
    set_all(x, 1.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, g) == GGML_STATUS_SUCCESS, "compute");
    CHECK(st.asked == 6 && st.observed == 3, "asked %d, observed %d", st.asked, st.observed);
    CHECK_FLOAT(get0(cur), 64.0);

    // returning false cancels the rest of the compute
    ggml_backend_sched_reset(sched);
    struct cb_state st2 = { 0, 0, 1 };
    ggml_backend_sched_set_eval_callback(sched, eval_cb, &st2);
    for (int i = 0; i < 6; i++) {
        ggml_backend_sched_set_tensor_backend(sched, nodes[i], fake);
    }
    CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc");
    set_all(x, 1.0f);
    int before = fake_backend_stats(fake)->nodes_computed;
    ggml_backend_sched_graph_compute(sched, g);
    CHECK(st2.observed == 1 && st2.asked == 2, "asked %d, observed %d after asking to stop", st2.asked, st2.observed);
    CHECK(fake_backend_stats(fake)->nodes_computed - before == 2, "%d nodes ran after the stop",
          fake_backend_stats(fake)->nodes_computed - before - 2);
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

static bool no_sqr(const struct ggml_tensor * op) { return op->op != GGML_OP_SQR; }

static void test_split_plan_dump_and_fallback(void) {
    ggml_backend_t fake = fake_backend_new(&(struct fake_options){ .supports_op = no_sqr });
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = vec(ctx, "x", 4);
    ggml_set_input(x);
    struct ggml_tensor * a = ggml_scale(ctx, x, 2.0f);
    ggml_set_name(a, "a");
    struct ggml_tensor * b = ggml_sqr(ctx, a);       // FAKE cannot: falls back to the CPU
    ggml_set_name(b, "b");
    struct ggml_tensor * c = ggml_scale(ctx, b, 3.0f);
    ggml_set_name(c, "c");
    ggml_set_output(c);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, c);
    ggml_backend_sched_set_tensor_backend(sched, a, fake);
    CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc");
    CHECK(ggml_backend_sched_get_tensor_backend(sched, b) == cpu, "sqr falls back to the CPU");
    CHECK(ggml_backend_sched_get_tensor_backend(sched, c) == fake, "c follows a (spread down from FAKE)");
    CHECK(ggml_backend_sched_get_n_splits(sched) == 3, "splits: %d", ggml_backend_sched_get_n_splits(sched));
    set_all(x, 1.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, g) == GGML_STATUS_SUCCESS, "compute");
    CHECK_FLOAT(get0(c), 12.0);

    if (ggml_rs_sched_dump_plan) {
    char json[4096];
    size_t n = ggml_rs_sched_dump_plan(sched, g, 0, json, sizeof(json));
    CHECK(n > 0 && n < sizeof(json), "json dump of %zu bytes", n);
    CHECK(strstr(json, "\"splits\":[") && strstr(json, "\"backend\":\"FAKE\"") && strstr(json, "\"tensor\":\"a\""), "json: %s", json);
    char dot[4096];
    n = ggml_rs_sched_dump_plan(sched, g, 1, dot, sizeof(dot));
    CHECK(n > 0 && strstr(dot, "digraph sched") && strstr(dot, "cluster_2") && strstr(dot, "copy"), "dot: %s", dot);
    }
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

static void test_reserve_and_sizes(void) {
    ggml_backend_t fake = fake_backend_new(&(struct fake_options){ .supports_op = no_sqr });
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    // x lives on the device: a follows it there; sqr is not supported there and runs on the CPU
    struct ggml_context * wctx = new_ctx();
    struct ggml_tensor * x = vec(wctx, "x", 64);
    ggml_backend_buffer_t xbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, fake_backend_buft(fake));
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * a = ggml_scale(ctx, x, 2.0f);
    struct ggml_tensor * b = ggml_sqr(ctx, a);
    ggml_set_output(b);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, b);
    size_t sizes[2] = { 0, 0 };
    ggml_backend_sched_reserve_size(sched, g, sizes);
    CHECK(sizes[0] > 0 && sizes[1] > 0, "reserve_size: %zu %zu", sizes[0], sizes[1]);
    CHECK(ggml_backend_sched_get_buffer_size(sched, fake) == 0, "reserve_size allocates nothing");
    CHECK(ggml_backend_sched_reserve(sched, g), "reserve");
    CHECK(ggml_backend_sched_get_buffer_size(sched, fake) == sizes[0] && ggml_backend_sched_get_buffer_size(sched, cpu) == sizes[1],
          "reserved %zu/%zu, measured %zu/%zu", ggml_backend_sched_get_buffer_size(sched, fake),
          ggml_backend_sched_get_buffer_size(sched, cpu), sizes[0], sizes[1]);
    CHECK(ggml_backend_sched_get_buffer_type(sched, fake) == fake_backend_buft(fake), "buffer type");
    CHECK(ggml_backend_sched_get_n_backends(sched) == 2 && ggml_backend_sched_get_backend(sched, 1) == cpu, "backends");
    // after reserve, allocating the same graph needs no new buffer
    int allocs = fake_backend_stats(fake)->buffers_alloc;
    CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc");
    CHECK(fake_backend_stats(fake)->buffers_alloc == allocs, "alloc after reserve allocated a new buffer");
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_buffer_free(xbuf);
    ggml_free(wctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

// reset + alloc of an unchanged graph repeats the last allocation (ggml-rs: from its memo); any
// change to the graph's tensors, the user's assignments or the weights' buffers is seen
static void counters(ggml_backend_sched_t sched, uint64_t * n_splits, uint64_t * n_repeats) {
    *n_splits = *n_repeats = 0;
    if (ggml_rs_sched_counters) {
        ggml_rs_sched_counters(sched, n_splits, n_repeats);
    }
}

static void test_repeat_only_what_did_not_change(void) {
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    // w: a weight on the device; x (input) -> n1 = scale(x, 2) -> n2 = mul(n1, w) -> n3 = sqr(n2)
    struct ggml_context * wctx = new_ctx();
    struct ggml_tensor * w = vec(wctx, "w", 4);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, fake_backend_buft(fake));
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    set_all(w, 3.0f);
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = vec(ctx, "x", 4);
    ggml_set_input(x);
    struct ggml_tensor * n1 = ggml_scale(ctx, x, 2.0f);
    struct ggml_tensor * n2 = ggml_mul(ctx, n1, w);
    struct ggml_tensor * n3 = ggml_sqr(ctx, n2);
    ggml_set_output(n3);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, n3);
    ggml_backend_t n1_on = cpu;
    float scale = 2.0f, wv = 3.0f;
    uint64_t splits0 = 0, repeats0 = 0, n_splits, n_repeats;
    ggml_backend_buffer_t hbuf = NULL;

    for (int round = 1; round <= 10; round++) {
        // round 4: another user assignment; round 6: another op parameter; round 8: the
        // weight moves to a host buffer, so the mul follows it to the CPU
        if (round == 4) {
            n1_on = fake;
        }
        if (round == 6) {
            scale = 5.0f;
            memcpy(n1->op_params, &scale, sizeof(scale));
        }
        if (round == 8) {
            hbuf = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), 64);
            ggml_backend_buffer_set_usage(hbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
            w->buffer = NULL;
            w->data = NULL;
            CHECK(ggml_backend_tensor_alloc(hbuf, w, ggml_backend_buffer_get_base(hbuf)) == GGML_STATUS_SUCCESS, "move w");
            wv = 7.0f;
            set_all(w, wv);
        }
        counters(sched, &splits0, &repeats0);
        ggml_backend_sched_reset(sched);
        ggml_backend_sched_set_tensor_backend(sched, n1, n1_on);
        CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc round %d", round);
        counters(sched, &n_splits, &n_repeats);
        set_all(x, (float) round);
        CHECK(ggml_backend_sched_graph_compute(sched, g) == GGML_STATUS_SUCCESS, "compute round %d", round);
        float v = scale * round * wv;
        CHECK_FLOAT(get0(n3), v * v);
        CHECK(ggml_backend_sched_get_tensor_backend(sched, n1) == n1_on, "round %d: n1 where the user put it", round);
        CHECK(ggml_backend_sched_get_tensor_backend(sched, n2) == (round >= 8 ? cpu : fake), "round %d: mul next to its weight", round);
        if (ggml_rs_sched_counters) {
            bool changed = round == 1 || round == 4 || round == 6 || round == 8;
            CHECK(n_splits - splits0 == (changed ? 1u : 0u) && n_repeats - repeats0 == (changed ? 0u : 1u),
                  "round %d: %s expected, split %llu, repeated %llu", round, changed ? "a new split" : "a repeat",
                  (unsigned long long) (n_splits - splits0), (unsigned long long) (n_repeats - repeats0));
        }
    }
    ggml_backend_sched_free(sched);
    ggml_backend_buffer_free(hbuf);
    ggml_free(ctx);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

// x (input) -> scale(x, 2) -> mul(., w) -> sqr, built anew in `ctx` emptied first: the same
// addresses, new tensors (llama.cpp builds each graph in the same memory)
static struct ggml_cgraph * build_xw(struct ggml_context * ctx, struct ggml_tensor * w, struct ggml_tensor ** x, struct ggml_tensor ** out) {
    ggml_reset(ctx);
    *x = vec(ctx, "x", 4);
    ggml_set_input(*x);
    *out = ggml_sqr(ctx, ggml_mul(ctx, ggml_scale(ctx, *x, 2.0f), w));
    ggml_set_output(*out);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, *out);
    return g;
}

// a program whose graphs were all built anew (the memo never held, so memos are taken less and
// less often; each kept the first one's split plan) and that then allocates one graph again and
// again: from its second allocation on, each is repeated (ggml-rs before: up to 32 allocations
// went the whole way first)
static void test_repeat_after_graphs_built_anew(void) {
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_context * wctx = new_ctx();
    struct ggml_tensor * w = vec(wctx, "w", 4);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, fake_backend_buft(fake));
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    set_all(w, 3.0f);
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x, * out;
    struct ggml_cgraph * g = NULL;
    for (int round = 1; round <= 48; round++) {
        bool anew = round <= 40;
        if (anew) {
            g = build_xw(ctx, w, &x, &out);
        }
        uint64_t splits0, repeats0, n_splits, n_repeats;
        counters(sched, &splits0, &repeats0);
        ggml_backend_sched_reset(sched);
        CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc round %d", round);
        counters(sched, &n_splits, &n_repeats);
        set_all(x, (float) round);
        CHECK(ggml_backend_sched_graph_compute(sched, g) == GGML_STATUS_SUCCESS, "compute round %d", round);
        CHECK_FLOAT(get0(out), (6.0 * round) * (6.0 * round));
        if (ggml_rs_sched_counters) {
            // built anew with the structure of the last graph: the split plan is kept (neither
            // split nor repeated); the graph allocated again as it is: split once, then repeated
            bool repeat = round > 41, kept = round > 1 && anew;
            CHECK(n_splits - splits0 == (repeat || kept ? 0u : 1u) && n_repeats - repeats0 == (repeat ? 1u : 0u),
                  "round %d (%s): %s expected, split %llu, repeated %llu", round, anew ? "built anew" : "the same graph",
                  repeat ? "a repeat" : kept ? "the plan kept" : "a new split", (unsigned long long) (n_splits - splits0),
                  (unsigned long long) (n_repeats - repeats0));
        }
    }
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

// one variant of a graph built anew in `ctx` emptied first (the same addresses each time):
// xin (input, 16 floats) -> x = view of n floats at x_off -> scale -> mul(., w on the device)
// -> sqr or sqrt; `mark` flags the mul an output
struct anew_shape {
    int n, x_off;
    float scale;
    bool sqrt, mark;
};

static struct ggml_cgraph * build_anew(struct ggml_context * ctx, struct ggml_tensor * w, struct anew_shape s, struct ggml_tensor ** xin,
                                       struct ggml_tensor ** n1, struct ggml_tensor ** out) {
    ggml_reset(ctx);
    *xin = vec(ctx, "xin", 16);
    ggml_set_input(*xin);
    struct ggml_tensor * x = ggml_view_1d(ctx, *xin, s.n, (size_t) s.x_off * sizeof(float));
    *n1 = ggml_scale(ctx, x, s.scale);
    struct ggml_tensor * n2 = ggml_mul(ctx, *n1, w);
    if (s.mark) {
        ggml_set_output(n2);
    }
    *out = s.sqrt ? ggml_sqrt(ctx, n2) : ggml_sqr(ctx, n2);
    ggml_set_output(*out);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, *out);
    return g;
}

// a graph built anew with the structure of the last one split keeps its split plan (ggml-rs:
// neither split again nor repeated from the memo); one differing in a shape, an op parameter,
// an op, a view offset, a flag or a user assignment is split again, and every graph computes
// its own values (a plan kept wrongly would copy the old shape into the device)
static void test_plan_kept_only_for_the_same_structure(void) {
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_context * wctx = new_ctx();
    struct ggml_tensor * w = vec(wctx, "w", 4);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, fake_backend_buft(fake));
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    set_all(w, 3.0f);
    struct ggml_context * ctx = new_ctx();
    struct {
        struct anew_shape s;
        bool user; // n1 put on the device by the user
        bool split; // a new split expected (else the plan is kept)
        const char * what;
    } rounds[] = {
        { { 4, 0, 2.0f, false, false }, false, true, "the first graph" },
        { { 4, 0, 2.0f, false, false }, false, false, "the same structure" },
        { { 8, 0, 2.0f, false, false }, false, true, "another shape" },
        { { 8, 0, 2.0f, false, false }, false, false, "the same structure" },
        { { 8, 0, 5.0f, false, false }, false, true, "another op parameter" },
        { { 8, 0, 5.0f, false, false }, false, false, "the same structure" },
        { { 8, 0, 5.0f, true, false }, false, true, "another op" },
        { { 8, 4, 5.0f, true, false }, false, true, "another view offset" },
        { { 8, 4, 5.0f, true, false }, false, false, "the same structure" },
        { { 8, 4, 5.0f, true, true }, false, true, "another flag" },
        { { 8, 4, 5.0f, true, true }, true, true, "a user assignment" },
        { { 8, 4, 5.0f, true, true }, true, false, "the same structure and assignment" },
        { { 8, 4, 5.0f, true, true }, false, true, "no user assignment" },
    };
    for (int round = 0; round < (int) (sizeof(rounds) / sizeof(rounds[0])); round++) {
        struct anew_shape s = rounds[round].s;
        struct ggml_tensor * xin, * n1, * out;
        struct ggml_cgraph * g = build_anew(ctx, w, s, &xin, &n1, &out);
        uint64_t splits0, repeats0, n_splits, n_repeats;
        counters(sched, &splits0, &repeats0);
        ggml_backend_sched_reset(sched);
        if (rounds[round].user) {
            ggml_backend_sched_set_tensor_backend(sched, n1, fake);
        }
        CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc round %d", round);
        counters(sched, &n_splits, &n_repeats);
        float xv[16], got[16];
        for (int k = 0; k < 16; k++) {
            xv[k] = (float) (round + k);
        }
        ggml_backend_tensor_set(xin, xv, 0, sizeof(xv));
        CHECK(ggml_backend_sched_graph_compute(sched, g) == GGML_STATUS_SUCCESS, "compute round %d", round);
        CHECK(ggml_nelements(out) == s.n, "round %d: %lld outputs", round, (long long) ggml_nelements(out));
        ggml_backend_tensor_get(out, got, 0, (size_t) s.n * sizeof(float));
        for (int k = 0; k < s.n; k++) {
            double v = s.scale * xv[s.x_off + k] * 3.0;
            CHECK_FLOAT(got[k], s.sqrt ? sqrt(v) : v * v);
        }
        if (rounds[round].user) {
            CHECK(ggml_backend_sched_get_tensor_backend(sched, n1) == fake, "round %d: n1 where the user put it", round);
        }
        if (ggml_rs_sched_counters) {
            bool split = rounds[round].split;
            CHECK(n_splits - splits0 == (split ? 1u : 0u) && n_repeats == repeats0, "round %d (%s): %s expected, split %llu, repeated %llu", round,
                  rounds[round].what, split ? "a new split" : "the plan kept", (unsigned long long) (n_splits - splits0),
                  (unsigned long long) (n_repeats - repeats0));
        }
    }
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

int main(int argc, char ** argv) {
    g_only = argc > 1 ? argv[1] : NULL;
    RUN(test_reset_alloc_loop_one_copy);
    RUN(test_reset_alloc_loop_four_copies_with_events);
    RUN(test_reset_alloc_loop_four_copies_without_events);
    RUN(test_recompute_allocated_graph);
    RUN(test_repeat_only_what_did_not_change);
    RUN(test_repeat_after_graphs_built_anew);
    RUN(test_plan_kept_only_for_the_same_structure);
    RUN(test_compute_honours_its_graph_argument);
    RUN(test_result_read_by_the_next_graph);
    RUN(test_op_offload_on);
    RUN(test_op_offload_off);
    RUN(test_eval_callback);
    RUN(test_split_plan_dump_and_fallback);
    RUN(test_reserve_and_sizes);
    RUN(test_input_carried_into_the_next_graph);
    RUN(test_input_carried_into_the_next_graph_two_backends);
    RUN(test_graph_placed_in_a_freed_compute_buffer);
    RUN(test_result_in_a_freed_compute_buffer_is_named);
    RUN(test_unlisted_source_on_a_remote_device_is_copied);
    RUN(test_realloc_debug_counts_real_reallocations);
    RUN(test_reserved_buffer_holds_every_smaller_shape);
    printf("%d tests passed\n", g_tests_run);
    return 0;
}
