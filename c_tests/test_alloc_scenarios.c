// ggml_gallocr where upstream goes wrong, each scenario with its expected numbers:
// - a tensor allocated by this allocator is not "external" in the next graph (ownership);
// - forward and backward graphs sharing tensors, allocated alternately, stay correct;
// - a plan is replayed only for the same graph, never for a different one with equal counts;
// - a result carried over from one graph to the next keeps its bytes, or allocation fails with
//   a message naming it; a buffer that grows takes the carried result along, and a result whose
//   buffer was freed is not mistaken for one of the new buffer, even at the same address;
// - a graph allocated again notices every change the plan depends on, a tensor's shape or op
//   changed in place included;
// - an input the next graph computes from again keeps its bytes, or (lost) the compute is
//   refused naming it.
#include "check.h"
#include "tensors.h"
#include "ggml_rs_ext.h"

#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <stdint.h>

// declared by upstream in the private ggml-impl.h
bool ggml_op_can_inplace(enum ggml_op op);

static ggml_backend_t g_cpu;

static struct ggml_context * new_ctx(size_t n_tensors) {
    struct ggml_init_params p = { n_tensors * ggml_tensor_overhead() + 4 * ggml_graph_overhead(), NULL, true };
    return ggml_init(p);
}

static void fill(struct ggml_tensor * t, float v) {
    int n = (int) ggml_nelements(t);
    float buf[256];
    CHECK(n <= 256, "test tensors are small");
    for (int i = 0; i < n; i++) {
        buf[i] = v + (float) i;
    }
    ggml_backend_tensor_set(t, buf, 0, n * sizeof(float));
}

// a graph of explicit nodes, each flagged for compute as ggml_build_forward_expand would
static struct ggml_cgraph * graph_of(struct ggml_context * ctx, struct ggml_tensor ** nodes, int n) {
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    for (int i = 0; i < n; i++) {
        nodes[i]->flags |= GGML_TENSOR_FLAG_COMPUTE;
        ggml_graph_add_node(g, nodes[i]);
    }
    return g;
}

static bool overlap(const struct ggml_tensor * a, const struct ggml_tensor * b) {
    if (a->buffer != b->buffer) {
        return false;
    }
    uintptr_t a0 = (uintptr_t) a->data, a1 = a0 + ggml_nbytes(a);
    uintptr_t b0 = (uintptr_t) b->data, b1 = b0 + ggml_nbytes(b);
    return a0 < b1 && b0 < a1;
}

// upstream repro (b): b of g1 is read by g2 as a source only; upstream places e, f, g on b's bytes
static void test_tensor_from_an_earlier_allocation_is_not_external(void) {
    struct ggml_context * ctx = new_ctx(32);
    struct ggml_tensor * a = vec(ctx, "a", 4);
    ggml_set_input(a);
    struct ggml_tensor * b = ggml_scale(ctx, a, 2.0f);
    ggml_set_name(b, "b");
    struct ggml_tensor * c = ggml_sqr(ctx, b);
    struct ggml_tensor * d = ggml_add(ctx, c, b);
    ggml_set_output(d);
    struct ggml_cgraph * g1 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g1, d);

    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    CHECK(ggml_gallocr_alloc_graph(ga, g1), "alloc g1");
    fill(a, 0.75f);                               // a[0] = 0.75
    CHECK(ggml_backend_graph_compute(g_cpu, g1) == GGML_STATUS_SUCCESS, "compute g1");
    CHECK_FLOAT(get0(d), 1.5 * 1.5 + 1.5);        // b = 1.5, d = b^2 + b = 3.75

    struct ggml_tensor * e = ggml_scale(ctx, b, 0.5f);
    struct ggml_tensor * f = ggml_sqr(ctx, e);
    struct ggml_tensor * g = ggml_add(ctx, f, b);
    ggml_set_output(g);
    struct ggml_tensor * nodes[3] = { e, f, g };
    struct ggml_cgraph * g2 = graph_of(ctx, nodes, 3);
    CHECK(ggml_gallocr_alloc_graph(ga, g2), "alloc g2");
    CHECK(!overlap(e, b) && !overlap(f, b) && !overlap(g, b), "g2 placed a tensor on b, which it still reads");
    CHECK(ggml_backend_graph_compute(g_cpu, g2) == GGML_STATUS_SUCCESS, "compute g2");
    // e = 0.75, f = 0.5625, g = f + b = 2.0625
    CHECK_FLOAT(get0(g), 0.5625 + 1.5);
    ggml_gallocr_free(ga);
    ggml_free(ctx);
}

// forward and backward graphs share h and y; allocating them alternately must stay correct
static void test_forward_backward_graphs_sharing_tensors(void) {
    struct ggml_context * wctx = new_ctx(4);
    struct ggml_tensor * w = vec(wctx, "w", 16);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(wctx, g_cpu);
    fill(w, 0.5f);

    struct ggml_context * ctx = new_ctx(64);
    struct ggml_tensor * x = vec(ctx, "x", 16);
    ggml_set_input(x);
    struct ggml_tensor * h = ggml_mul(ctx, x, w);
    ggml_set_name(h, "h");
    struct ggml_tensor * y = ggml_sqr(ctx, h);
    ggml_set_name(y, "y");
    ggml_set_output(y);
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);

    struct ggml_tensor * z = ggml_add(ctx, y, h);
    struct ggml_tensor * z2 = ggml_mul(ctx, z, h);
    struct ggml_tensor * out = ggml_scale(ctx, z2, 0.5f);
    ggml_set_name(out, "out");
    ggml_set_output(out);
    struct ggml_cgraph * gb = ggml_new_graph(ctx);
    ggml_build_forward_expand(gb, out);

    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    for (int iter = 0; iter < 20; iter++) {
        float xv = 1.0f + (float) iter;
        struct ggml_cgraph * g = (iter % 2) ? gb : gf;
        CHECK(ggml_gallocr_alloc_graph(ga, g), "alloc iteration %d", iter);
        for (int i = 0; i < ggml_graph_n_nodes(g); i++) {
            for (int j = 0; j < i; j++) {
                struct ggml_tensor * ti = ggml_graph_node(g, i), * tj = ggml_graph_node(g, j);
                // outputs and the tensors read after node i must not be overwritten by it
                bool tj_live = (tj->flags & GGML_TENSOR_FLAG_OUTPUT) != 0;
                for (int k = i; k < ggml_graph_n_nodes(g) && !tj_live; k++) {
                    for (int s = 0; s < GGML_MAX_SRC; s++) {
                        if (ggml_graph_node(g, k)->src[s] == tj && !(k == i && ggml_op_can_inplace(ti->op))) {
                            tj_live = true;
                        }
                    }
                }
                CHECK(!(tj_live && overlap(ti, tj)), "iteration %d: %s overlaps %s, which is still live", iter, ti->name, tj->name);
            }
        }
        fill(x, xv);
        CHECK(ggml_backend_graph_compute(g_cpu, g) == GGML_STATUS_SUCCESS, "compute");
        double hv = xv * 0.5;
        if (g == gf) {
            CHECK_FLOAT(get0(y), hv * hv);
        } else {
            CHECK_FLOAT(get0(out), 0.5 * (hv * hv + hv) * hv);
        }
    }
    ggml_gallocr_free(ga);
    ggml_free(ctx);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
}

// upstream repro (b2): a different graph with the same node and leaf counts must not replay the
// old plan (upstream puts m2 on m0 while it still reads m0: 6 instead of 4)
static void test_same_counts_different_topology_is_planned_anew(void) {
    struct ggml_context * ctx = new_ctx(32);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());

    struct ggml_tensor * a = vec(ctx, "a", 4);
    ggml_set_input(a);
    struct ggml_tensor * n0 = ggml_cont(ctx, a);
    struct ggml_tensor * n1 = ggml_cont(ctx, n0);
    struct ggml_tensor * n2 = ggml_acc(ctx, n1, a, n1->nb[1], n1->nb[2], n1->nb[3], 0);
    ggml_set_output(n2);
    struct ggml_cgraph * g1 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g1, n2);
    CHECK(ggml_gallocr_alloc_graph(ga, g1), "alloc g1");
    fill(a, 1.0f);
    ggml_backend_graph_compute(g_cpu, g1);
    CHECK_FLOAT(get0(n2), 2.0);

    struct ggml_tensor * a2 = vec(ctx, "a2", 4);
    ggml_set_input(a2);
    struct ggml_tensor * m0 = ggml_cont(ctx, a2);
    struct ggml_tensor * m1 = ggml_scale(ctx, m0, 3.0f);
    struct ggml_tensor * m2 = ggml_acc(ctx, m1, m0, m1->nb[1], m1->nb[2], m1->nb[3], 0);
    ggml_set_output(m2);
    struct ggml_cgraph * g2 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g2, m2);
    CHECK(ggml_graph_n_nodes(g1) == ggml_graph_n_nodes(g2), "the scenario needs equal counts");
    CHECK(ggml_gallocr_alloc_graph(ga, g2), "alloc g2");
    CHECK(!overlap(m2, m0), "m2 placed on m0, which it reads");
    fill(a2, 1.0f);
    ggml_backend_graph_compute(g_cpu, g2);
    CHECK_FLOAT(get0(m2), 4.0);    // 3 * 1 + 1

    // the same graph again replays the plan: no new plan (a ggml-rs counter)
    if (!ggml_rs_gallocr_counters) {
        ggml_gallocr_free(ga);
        ggml_free(ctx);
        return;
    }
    uint64_t plans = 0, replays = 0, plans2 = 0, replays2 = 0;
    ggml_rs_gallocr_counters(ga, &plans, &replays);
    CHECK(ggml_gallocr_alloc_graph(ga, g2), "alloc g2 again");
    ggml_rs_gallocr_counters(ga, &plans2, &replays2);
    CHECK(plans2 == plans && replays2 == replays + 1, "replaying the same graph made a new plan (%llu -> %llu)",
          (unsigned long long) plans, (unsigned long long) plans2);
    // a tensor that is where the plan put it, but is now an output: planned anew, and its
    // memory is no longer taken over by the node after it
    bool m2_on_m1 = overlap(m2, m1);
    ggml_set_output(m1);
    CHECK(ggml_gallocr_alloc_graph(ga, g2), "alloc g2 with m1 an output");
    ggml_rs_gallocr_counters(ga, &plans, &replays);
    CHECK(plans == plans2 + 1, "a new output flag was not planned for");
    CHECK(!overlap(m2, m1), "m2 placed on m1, an output (it was before: %d)", m2_on_m1);
    fill(a2, 2.0f);
    ggml_backend_graph_compute(g_cpu, g2);
    CHECK_FLOAT(get0(m1), 6.0);
    CHECK_FLOAT(get0(m2), 8.0);
    ggml_gallocr_free(ga);
    ggml_free(ctx);
}

// upstream repros (c0) and (c1), on the allocator: h of g1 is read by g2
// graph 1 of the carried-result scenarios: h = 2 * x (x[0] = x0), an output, computed
static struct ggml_tensor * compute_h(struct ggml_context * ctx, ggml_gallocr_t ga, float x0) {
    struct ggml_tensor * x = vec(ctx, "x", 8);
    ggml_set_input(x);
    struct ggml_tensor * h = ggml_scale(ctx, x, 2.0f);
    ggml_set_name(h, "h");
    ggml_set_output(h);
    struct ggml_cgraph * g1 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g1, h);
    CHECK(ggml_gallocr_alloc_graph(ga, g1), "alloc g1");
    fill(x, x0);
    ggml_backend_graph_compute(g_cpu, g1);
    CHECK_FLOAT(get0(h), 2.0 * x0);
    return h;
}

static void test_result_carried_over_to_the_next_graph(void) {
    struct ggml_context * ctx = new_ctx(32);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    struct ggml_tensor * h = compute_h(ctx, ga, 3.0f);

    // g2: o = scale(y, 10) + h, h only read
    struct ggml_tensor * y = vec(ctx, "y", 8);
    ggml_set_input(y);
    struct ggml_tensor * t = ggml_scale(ctx, y, 10.0f);
    struct ggml_tensor * o = ggml_add(ctx, t, h);
    ggml_set_output(o);
    struct ggml_tensor * nodes[2] = { t, o };
    struct ggml_cgraph * g2 = graph_of(ctx, nodes, 2);
    struct ggml_tensor * leafs[1] = { y };
    (void) leafs;
    CHECK(ggml_gallocr_alloc_graph(ga, g2), "alloc g2");
    CHECK(!overlap(y, h) && !overlap(t, h) && !overlap(o, h), "g2 placed a tensor on h");
    fill(y, 0.6f);
    ggml_backend_graph_compute(g_cpu, g2);
    CHECK_FLOAT(get0(o), 6.0 + 6.0);

    // (c1): the result handed over as another tensor aliasing its bytes
    struct ggml_tensor * h2 = vec(ctx, "h_alias", 8);
    CHECK(ggml_backend_tensor_alloc(h->buffer, h2, h->data) == GGML_STATUS_SUCCESS, "alias h");
    struct ggml_tensor * u = ggml_scale(ctx, y, 10.0f);
    struct ggml_tensor * p = ggml_add(ctx, u, h2);
    ggml_set_output(p);
    struct ggml_tensor * nodes3[2] = { u, p };
    struct ggml_cgraph * g3 = graph_of(ctx, nodes3, 2);
    CHECK(ggml_gallocr_alloc_graph(ga, g3), "alloc g3");
    CHECK(!overlap(u, h2) && !overlap(p, h2), "g3 placed a tensor on the alias");
    fill(y, 0.6f);
    ggml_backend_graph_compute(g_cpu, g3);
    CHECK_FLOAT(get0(p), 12.0);
    ggml_gallocr_free(ga);
    ggml_free(ctx);
}

// the same, when the memory of h was handed to another graph in between: a named error
static void test_lost_result_is_a_named_error(void) {
    struct ggml_context * ctx = new_ctx(64);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    struct ggml_tensor * x = vec(ctx, "x", 64);
    ggml_set_input(x);
    struct ggml_tensor * h = ggml_scale(ctx, x, 2.0f);
    ggml_set_name(h, "h");
    struct ggml_tensor * hs = ggml_sqr(ctx, h);   // h is read and then freed: its memory is reusable
    ggml_set_output(hs);
    struct ggml_cgraph * g1 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g1, hs);
    CHECK(ggml_gallocr_alloc_graph(ga, g1), "alloc g1");
    fill(x, 1.0f);
    ggml_backend_graph_compute(g_cpu, g1);

    // a graph in between that reuses the whole buffer
    struct ggml_tensor * q = vec(ctx, "q", 64);
    ggml_set_input(q);
    struct ggml_tensor * q1 = ggml_scale(ctx, q, 2.0f);
    ggml_set_name(q1, "q1");
    struct ggml_tensor * q2 = ggml_sqr(ctx, q1);
    ggml_set_name(q2, "q2");
    ggml_set_output(q2);
    struct ggml_cgraph * gm = ggml_new_graph(ctx);
    ggml_build_forward_expand(gm, q2);
    CHECK(ggml_gallocr_alloc_graph(ga, gm), "alloc the graph in between");
    CHECK(overlap(q, h) || overlap(q1, h) || overlap(q2, h), "the scenario needs h's memory to be reused");

    // now read h again
    struct ggml_tensor * r = ggml_scale(ctx, h, 1.0f);
    ggml_set_output(r);
    struct ggml_tensor * nodes[1] = { r };
    struct ggml_cgraph * g2 = graph_of(ctx, nodes, 1);
    log_capture_begin();
    CHECK(!ggml_gallocr_alloc_graph(ga, g2), "reading h after its memory was reused must fail");
    ggml_log_set(NULL, NULL);
    CHECK(strstr(g_log, "tensor 'h'") != NULL, "the message names the tensor: %s", g_log);
    CHECK(strstr(g_log, "graph #1") != NULL && strstr(g_log, "graph #2") != NULL, "the message names the graphs: %s", g_log);
    ggml_gallocr_free(ga);
    ggml_free(ctx);
}

// a carried result moves with its bytes when the buffer must grow for the graph reading it
static void test_carried_result_survives_buffer_growth(void) {
    struct ggml_context * ctx = new_ctx(32);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    struct ggml_tensor * h = compute_h(ctx, ga, 3.0f);
    size_t before = ggml_gallocr_get_buffer_size(ga, 0);

    struct ggml_tensor * big = vec(ctx, "big", 256);
    ggml_set_input(big);
    struct ggml_tensor * s = ggml_sum(ctx, big);
    struct ggml_tensor * o = ggml_add(ctx, ggml_repeat(ctx, s, h), h);
    ggml_set_output(o);
    struct ggml_cgraph * g2 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g2, o);
    // build_forward_expand pulled h in as a node: make it a plain source again
    struct ggml_tensor * nodes[16];
    int n = 0;
    for (int i = 0; i < ggml_graph_n_nodes(g2); i++) {
        if (ggml_graph_node(g2, i) != h) {
            nodes[n++] = ggml_graph_node(g2, i);
        }
    }
    struct ggml_cgraph * g3 = graph_of(ctx, nodes, n);
    CHECK(ggml_gallocr_alloc_graph(ga, g3), "alloc g3");
    CHECK(ggml_gallocr_get_buffer_size(ga, 0) > before, "the scenario needs the buffer to grow");
    float ones[256];
    for (int i = 0; i < 256; i++) {
        ones[i] = 1.0f;
    }
    ggml_backend_tensor_set(big, ones, 0, sizeof(ones));
    ggml_backend_graph_compute(g_cpu, g3);
    CHECK_FLOAT(get0(o), 256.0 + 6.0);
    ggml_gallocr_free(ga);
    ggml_free(ctx);
}

// a result lost because the buffer was reallocated for another graph: a named error
static void test_result_lost_to_reallocation_is_a_named_error(void) {
    struct ggml_context * ctx = new_ctx(32);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    struct ggml_tensor * h = compute_h(ctx, ga, 1.0f);

    struct ggml_tensor * big = vec(ctx, "big", 512);
    ggml_set_input(big);
    struct ggml_tensor * bs = ggml_scale(ctx, big, 2.0f);
    ggml_set_output(bs);
    struct ggml_cgraph * gbig = ggml_new_graph(ctx);
    ggml_build_forward_expand(gbig, bs);
    CHECK(ggml_gallocr_alloc_graph(ga, gbig), "alloc the big graph (reallocates)");

    struct ggml_tensor * r = ggml_scale(ctx, h, 1.0f);
    struct ggml_tensor * nodes[1] = { r };
    struct ggml_cgraph * g2 = graph_of(ctx, nodes, 1);
    log_capture_begin();
    CHECK(!ggml_gallocr_alloc_graph(ga, g2), "reading h from a freed buffer must fail");
    ggml_log_set(NULL, NULL);
    CHECK(strstr(g_log, "tensor 'h'") != NULL && strstr(g_log, "reallocated") != NULL, "message: %s", g_log);
    ggml_gallocr_free(ga);
    ggml_free(ctx);
}

// a buffer type whose buffers always start at the same address (as an allocator that hands a
// freed block back for the next, larger request does)
static uint8_t g_arena[1 << 16] __attribute__((aligned(64)));
static const char * arena_name(ggml_backend_buffer_type_t t) { (void) t; return "arena"; }
static ggml_backend_buffer_t arena_alloc(ggml_backend_buffer_type_t t, size_t size) {
    (void) t;
    CHECK(size <= sizeof(g_arena), "arena too small for %zu bytes", size);
    return ggml_backend_cpu_buffer_from_ptr(g_arena, size);
}
static size_t arena_align(ggml_backend_buffer_type_t t) { (void) t; return 32; }
static bool arena_is_host(ggml_backend_buffer_type_t t) { (void) t; return true; }
static struct ggml_backend_buffer_type g_arena_buft = {
    .iface = { .get_name = arena_name, .alloc_buffer = arena_alloc, .get_alignment = arena_align, .is_host = arena_is_host },
};

static void test_result_lost_to_reallocation_at_the_same_address_is_a_named_error(void) {
    // the compute buffer grows, and the new one starts where the old one did: h's old address
    // now lies inside the new buffer, but its bytes are gone
    struct ggml_context * ctx = new_ctx(32);
    ggml_gallocr_t ga = ggml_gallocr_new(&g_arena_buft);
    struct ggml_tensor * h = compute_h(ctx, ga, 1.0f);

    struct ggml_tensor * big = vec(ctx, "big", 512);
    ggml_set_input(big);
    struct ggml_tensor * bs = ggml_scale(ctx, big, 3.0f);
    ggml_set_name(bs, "bs");
    ggml_set_output(bs);
    struct ggml_cgraph * gbig = ggml_new_graph(ctx);
    ggml_build_forward_expand(gbig, bs);
    CHECK(ggml_gallocr_alloc_graph(ga, gbig), "alloc the big graph (reallocates)");
    CHECK((uint8_t *) big->data >= g_arena && (uint8_t *) big->data < g_arena + sizeof(g_arena), "the new buffer is the arena again");
    float fives[512];
    for (int i = 0; i < 512; i++) {
        fives[i] = 5.0f;
    }
    ggml_backend_tensor_set(big, fives, 0, sizeof(fives));
    ggml_backend_graph_compute(g_cpu, gbig);

    struct ggml_tensor * r = ggml_scale(ctx, h, 1.0f);
    struct ggml_tensor * nodes[1] = { r };
    struct ggml_cgraph * g2 = graph_of(ctx, nodes, 1);
    log_capture_begin();
    CHECK(!ggml_gallocr_alloc_graph(ga, g2), "h's bytes were lost with the old buffer: allocation must fail");
    ggml_log_set(NULL, NULL);
    CHECK(strstr(g_log, "tensor 'h'") != NULL && strstr(g_log, "reallocated") != NULL, "message: %s", g_log);
    ggml_gallocr_free(ga);
    ggml_free(ctx);
}

// a graph allocated again is the same graph only if nothing that the plan depends on changed:
// a source rewired (equal counts), a tensor whose memory the caller took away, a new output flag
static uint64_t n_plans(ggml_gallocr_t ga) {
    uint64_t plans = 0, replays = 0;
    if (ggml_rs_gallocr_counters) {
        ggml_rs_gallocr_counters(ga, &plans, &replays);
    }
    return plans;
}

static void test_replay_notices_every_change(void) {
    struct ggml_context * ctx = new_ctx(32);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    struct ggml_tensor * a = vec(ctx, "a", 8);
    struct ggml_tensor * b = vec(ctx, "b", 8);
    ggml_set_input(a);
    ggml_set_input(b);
    struct ggml_tensor * s = ggml_scale(ctx, a, 2.0f);
    struct ggml_tensor * t = ggml_add(ctx, s, b);
    struct ggml_tensor * v = ggml_view_1d(ctx, t, 4, 0);
    struct ggml_tensor * out = ggml_scale(ctx, v, 10.0f);
    ggml_set_output(out);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, out);
    const bool counted = ggml_rs_gallocr_counters != NULL;

    for (int round = 0; round < 3; round++) {
        uint64_t plans = n_plans(ga);
        CHECK(ggml_gallocr_alloc_graph(ga, g), "alloc, round %d", round);
        CHECK(!counted || n_plans(ga) == plans + (round == 0), "round %d: %s", round, round ? "the same graph was planned anew" : "no plan");
        fill(a, 1.0f);
        fill(b, 100.0f);
        ggml_backend_graph_compute(g_cpu, g);
        CHECK_FLOAT(get0(out), 10.0 * (2.0 * 1.0 + 100.0));
    }

    // t reads a instead of b: the same counts, another graph
    uint64_t plans = n_plans(ga);
    t->src[1] = a;
    CHECK(ggml_gallocr_alloc_graph(ga, g), "alloc with a source rewired");
    CHECK(!counted || n_plans(ga) == plans + 1, "a rewired source was not planned for");
    fill(a, 1.0f);
    fill(b, 100.0f);
    ggml_backend_graph_compute(g_cpu, g);
    CHECK_FLOAT(get0(out), 10.0 * (2.0 * 1.0 + 1.0));
    t->src[1] = b;
    CHECK(ggml_gallocr_alloc_graph(ga, g), "alloc with the source back");
    fill(a, 1.0f);
    fill(b, 100.0f);
    ggml_backend_graph_compute(g_cpu, g);
    CHECK_FLOAT(get0(out), 10.0 * (2.0 * 1.0 + 100.0));

    // the caller takes a tensor's memory away: the same plan, and the tensor is placed again
    plans = n_plans(ga);
    out->data = NULL;
    out->buffer = NULL;
    CHECK(ggml_gallocr_alloc_graph(ga, g), "alloc after out lost its memory");
    CHECK(out->data != NULL && out->buffer != NULL, "out was not placed again");
    CHECK(!counted || n_plans(ga) == plans, "the same graph was planned anew");
    fill(a, 3.0f);
    fill(b, 100.0f);
    ggml_backend_graph_compute(g_cpu, g);
    CHECK_FLOAT(get0(out), 10.0 * (2.0 * 3.0 + 100.0));

    // s becomes an output: planned anew, and s keeps its value after t is computed
    ggml_set_output(s);
    CHECK(ggml_gallocr_alloc_graph(ga, g), "alloc with s an output");
    CHECK(!counted || n_plans(ga) == plans + 1, "a new output flag was not planned for");
    CHECK(!overlap(s, t), "t placed on s, an output");
    fill(a, 5.0f);
    fill(b, 100.0f);
    ggml_backend_graph_compute(g_cpu, g);
    CHECK_FLOAT(get0(s), 10.0);
    CHECK_FLOAT(get0(out), 10.0 * (2.0 * 5.0 + 100.0));
    ggml_gallocr_free(ga);
    ggml_free(ctx);
}

// whether t lies inside the buffer it points at
static bool inside_buffer(const struct ggml_tensor * t) {
    uintptr_t base = (uintptr_t) ggml_backend_buffer_get_base(t->buffer);
    uintptr_t d = (uintptr_t) t->data;
    return t->buffer != NULL && d >= base && d + ggml_nbytes(t) <= base + ggml_backend_buffer_get_size(t->buffer);
}

static void resize(struct ggml_tensor * t, int64_t n) {
    t->ne[0] = n;
    t->nb[1] = t->nb[2] = t->nb[3] = (size_t) n * t->nb[0];
}

// the same tensors, sources and places, but a tensor's shape or op changed after it was placed:
// not the graph the plan was made for (its size; whether it may take its source's memory), so
// the allocation is planned anew (upstream re-plans the grown shape too, by its size check)
static void test_replay_notices_a_changed_shape_or_op(void) {
    struct ggml_context * ctx = new_ctx(16);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    struct ggml_tensor * a = vec(ctx, "a", 8);
    ggml_set_input(a);
    struct ggml_tensor * s = ggml_scale(ctx, a, 2.0f);
    struct ggml_tensor * u = ggml_sqr(ctx, s);
    struct ggml_tensor * out = ggml_scale(ctx, u, 10.0f);
    ggml_set_output(out);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, out);
    struct ggml_tensor * all[] = { a, s, u, out };
    const bool counted = ggml_rs_gallocr_counters != NULL;
    // twice: the second allocation is the replay of the first, the third would be too
    CHECK(ggml_gallocr_alloc_graph(ga, g) && ggml_gallocr_alloc_graph(ga, g), "alloc");

    // every tensor grows from 8 to 64 elements, pointers and places unchanged
    uint64_t plans = n_plans(ga);
    for (int i = 0; i < 4; i++) {
        resize(all[i], 64);
    }
    CHECK(ggml_gallocr_alloc_graph(ga, g), "alloc after the tensors grew");
    CHECK(!counted || n_plans(ga) == plans + 1, "grown tensors were not planned for");
    for (int i = 0; i < 4; i++) {
        CHECK(inside_buffer(all[i]), "%s (%zu bytes now) is not inside the compute buffer (%zu bytes)", all[i]->name, ggml_nbytes(all[i]),
              ggml_gallocr_get_buffer_size(ga, 0));
    }
    fill(a, 1.0f);
    ggml_backend_graph_compute(g_cpu, g);
    float got[64];
    ggml_backend_tensor_get(out, got, 0, sizeof(got));
    for (int i = 0; i < 64; i++) {
        CHECK_FLOAT(got[i], 10.0 * (2.0 * (1.0 + i)) * (2.0 * (1.0 + i)));
    }

    // u (sqr, which may take s's memory) becomes a dup, which may not: it leaves s's memory
    CHECK(ggml_gallocr_alloc_graph(ga, g), "alloc again");
    bool was_in_place = overlap(u, s);
    plans = n_plans(ga);
    u->op = GGML_OP_DUP;
    CHECK(ggml_gallocr_alloc_graph(ga, g), "alloc after u's op changed");
    CHECK(!counted || !was_in_place || n_plans(ga) == plans + 1, "an op that cannot run in place was not planned for");
    CHECK(!overlap(u, s), "u, a dup, placed over its source s");
    fill(a, 1.0f);
    ggml_backend_graph_compute(g_cpu, g);
    CHECK_FLOAT(get0(out), 10.0 * 2.0);
    CHECK(!counted || was_in_place, "the plan did not put u in place of s: the op change above tested nothing");
    ggml_gallocr_free(ga);
    ggml_free(ctx);
}

// issue 11, through a bare gallocr: graph 2 recomputes h from x, which the caller does not set
// again (upstream: y, t and o are placed over x, 40; ggml-rs before: x placed anew without its
// bytes, 10). When graph 1 computed h in place of x, its bytes are gone: the compute is refused,
// naming x, until x is set; when nothing took x's place, x keeps its bytes.
static void carried_input(bool in_place) {
    struct ggml_context * ctx = new_ctx(32);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    struct ggml_tensor * x = vec(ctx, "x", 8);
    ggml_set_input(x);
    struct ggml_tensor * h = ggml_scale(ctx, x, 2.0f);
    if (!in_place) {
        h = ggml_add(ctx, h, x); // x read twice: nothing computes in its place
    }
    ggml_set_name(h, "h");
    ggml_set_output(h);
    struct ggml_cgraph * g1 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g1, h);
    CHECK(ggml_gallocr_alloc_graph(ga, g1), "alloc g1");
    fill(x, 1.0f);
    ggml_backend_graph_compute(g_cpu, g1);
    double hv = in_place ? 2.0 : 3.0;
    CHECK_FLOAT(get0(h), hv);

    struct ggml_tensor * y = vec(ctx, "y", 8);
    ggml_set_input(y);
    struct ggml_tensor * t = ggml_scale(ctx, y, 10.0f);
    struct ggml_tensor * o = ggml_add(ctx, t, h);
    ggml_set_output(o);
    struct ggml_cgraph * g2 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g2, o);
    // in place, g2 computes h over x again: only its first round can find x as g1 left it
    for (int round = 1; round <= (in_place ? 1 : 3); round++) {
        CHECK(ggml_gallocr_alloc_graph(ga, g2), "alloc g2, round %d", round);
        fill(y, (float) round);
        log_capture_begin();
        enum ggml_status st = ggml_backend_graph_compute(g_cpu, g2);
        ggml_log_set(NULL, NULL);
        if (in_place && st != GGML_STATUS_SUCCESS) {
            CHECK(strstr(g_log, "input tensor 'x'") != NULL, "the refusal names x: %s", g_log);
            fill(x, 1.0f);
            CHECK(ggml_backend_graph_compute(g_cpu, g2) == GGML_STATUS_SUCCESS, "compute g2 with x set");
        }
        CHECK_FLOAT(get0(o), 10.0 * round + hv);
    }
    ggml_gallocr_free(ga);
    ggml_free(ctx);
}

static void test_input_carried_into_the_next_graph(void) {
    carried_input(false);
    carried_input(true);
}

int main(int argc, char ** argv) {
    g_only = argc > 1 ? argv[1] : NULL;
    g_cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(g_cpu, 1);
    RUN(test_tensor_from_an_earlier_allocation_is_not_external);
    RUN(test_forward_backward_graphs_sharing_tensors);
    RUN(test_same_counts_different_topology_is_planned_anew);
    RUN(test_result_carried_over_to_the_next_graph);
    RUN(test_lost_result_is_a_named_error);
    RUN(test_carried_result_survives_buffer_growth);
    RUN(test_result_lost_to_reallocation_is_a_named_error);
    RUN(test_result_lost_to_reallocation_at_the_same_address_is_a_named_error);
    RUN(test_replay_notices_every_change);
    RUN(test_replay_notices_a_changed_shape_or_op);
    RUN(test_input_carried_into_the_next_graph);
    ggml_backend_free(g_cpu);
    printf("%d tests passed\n", g_tests_run);
    return 0;
}
