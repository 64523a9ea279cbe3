// Random graphs through one long-lived ggml_gallocr, changed between allocations the ways a
// caller may change a graph: a node made an output, a source rewired to another tensor (equal
// node and leaf counts), a tensor's memory taken away, or nothing at all (the graph placed last,
// allocated again). After every allocation the outputs must equal the same graph computed in a
// context that gives every tensor memory of its own (ggml_graph_compute_with_ctx: no allocator,
// no sharing), with the same changes made to it. Unchanged rounds must not plan anew.
// GGML_RS_FUZZ_ITERS sets the number of graphs (default 100).
#include "check.h"
#define UNUSED_TEST_COUNTER (void) g_tests_run; (void) g_only
#include "ggml_rs_ext.h"
#include "rng.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <stdint.h>

#define LEN 16
#define MAX_T 64
#define ROUNDS 12

// one copy of the graph: tensors by position (inputs first, then nodes in creation order)
struct copy {
    struct ggml_context * ctx;
    struct ggml_cgraph * graph;
    struct ggml_tensor * t[MAX_T];
    int n_inputs, n;
};

// the same graph for the same seed; `with_memory`: tensors get memory in the context
static struct copy build(uint64_t seed, bool with_memory) {
    rng_seed(seed);
    struct copy c;
    memset(&c, 0, sizeof(c));
    // with memory: the tensors' data, and the work buffer of ggml_graph_compute_with_ctx
    size_t mem = (MAX_T + 8) * (ggml_tensor_overhead() + (with_memory ? LEN * sizeof(float) + 64 : 0)) + ggml_graph_overhead() + (with_memory ? 1 << 20 : 0);
    struct ggml_init_params p = { mem, NULL, !with_memory };
    c.ctx = ggml_init(p);
    c.n_inputs = 1 + below(3);
    for (int i = 0; i < c.n_inputs; i++) {
        c.t[c.n] = ggml_new_tensor_1d(c.ctx, GGML_TYPE_F32, LEN);
        ggml_format_name(c.t[c.n], "in%d", i);
        ggml_set_input(c.t[c.n]);
        c.n++;
    }
    int n_nodes = 8 + below(40);
    for (int i = 0; i < n_nodes; i++) {
        // mostly the last few tensors, as real graphs read
        struct ggml_tensor * a = c.t[below(4) == 0 ? below(c.n) : c.n - 1 - below(c.n < 3 ? c.n : 3)];
        struct ggml_tensor * b = c.t[below(c.n)];
        struct ggml_tensor * r = NULL;
        switch (below(6)) {
            case 0: r = ggml_add(c.ctx, a, b); break;
            case 1: r = ggml_sub(c.ctx, a, b); break;
            case 2: r = ggml_mul(c.ctx, a, b); break;
            case 3: r = ggml_scale(c.ctx, a, 0.5f); break;
            case 4: r = ggml_view_1d(c.ctx, a, LEN, 0); break; // a view: shares its source's memory
            default: r = ggml_cont(c.ctx, a); break;
        }
        ggml_format_name(r, "n%d", i);
        if (below(8) == 0) {
            ggml_set_output(r);
        }
        c.t[c.n++] = r;
    }
    ggml_set_output(c.t[c.n - 1]);
    c.graph = ggml_new_graph(c.ctx);
    ggml_build_forward_expand(c.graph, c.t[c.n - 1]);
    return c;
}

int main(void) {
    UNUSED_TEST_COUNTER;
    const char * it = getenv("GGML_RS_FUZZ_ITERS");
    int iters = it ? atoi(it) : 100;
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 1);
    long checked = 0, unchanged_rounds = 0;
    for (int seed = 1; seed <= iters; seed++) {
        struct copy ours = build(seed, false), ref = build(seed, true);
        ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
        g_rng = (uint64_t) seed * 7919 | 1;
        for (int round = 0; round < ROUNDS; round++) {
            int change = round == 0 ? 0 : below(5);
            // a node of the graph, at the same position in both copies
            int n_nodes = ggml_graph_n_nodes(ours.graph);
            int k = below(n_nodes);
            struct ggml_tensor * ok = ggml_graph_node(ours.graph, k);
            struct ggml_tensor * rk = ggml_graph_node(ref.graph, k);
            if (change == 1) {
                ggml_set_output(ok);
                ggml_set_output(rk);
            } else if (change == 2 && ok->op != GGML_OP_VIEW && k > 0) {
                // source 0 now reads an earlier node (every tensor has the same shape); the node
                // and leaf lists stay as they are
                int j = below(k);
                ok->src[0] = ggml_graph_node(ours.graph, j);
                rk->src[0] = ggml_graph_node(ref.graph, j);
            } else if (change == 3 && ok->view_src == NULL && ok->data != NULL) {
                ok->data = NULL; // the caller takes its memory away
                ok->buffer = NULL;
            }
            uint64_t plans0 = 0, replays0 = 0, plans1 = 0, replays1 = 0;
            if (ggml_rs_gallocr_counters) {
                ggml_rs_gallocr_counters(ga, &plans0, &replays0);
            }
            CHECK(ggml_gallocr_alloc_graph(ga, ours.graph), "graph %d round %d: alloc failed", seed, round);
            if (ggml_rs_gallocr_counters && round > 0 && change == 4) {
                ggml_rs_gallocr_counters(ga, &plans1, &replays1);
                CHECK(plans1 == plans0 && replays1 == replays0 + 1, "graph %d round %d: an unchanged graph was planned anew", seed, round);
                unchanged_rounds++;
            }
            for (int i = 0; i < ours.n_inputs; i++) {
                float v[LEN];
                for (int e = 0; e < LEN; e++) {
                    v[e] = (float) ((seed * 31 + round * 7 + i * 3 + e) % 17) / 8.0f - 1.0f;
                }
                if (ours.t[i]->buffer != NULL) { // an input no node reads is not in the graph
                    ggml_backend_tensor_set(ours.t[i], v, 0, sizeof(v));
                }
                memcpy(ref.t[i]->data, v, sizeof(v));
            }
            CHECK(ggml_backend_graph_compute(cpu, ours.graph) == GGML_STATUS_SUCCESS, "graph %d round %d: compute", seed, round);
            CHECK(ggml_graph_compute_with_ctx(ref.ctx, ref.graph, 1) == GGML_STATUS_SUCCESS, "graph %d round %d: reference", seed, round);
            for (int i = 0; i < n_nodes; i++) {
                struct ggml_tensor * o = ggml_graph_node(ours.graph, i);
                if (!(o->flags & GGML_TENSOR_FLAG_OUTPUT)) {
                    continue;
                }
                float got[LEN];
                ggml_backend_tensor_get(o, got, 0, sizeof(got));
                const float * want = (const float *) ggml_graph_node(ref.graph, i)->data;
                for (int e = 0; e < LEN; e++) {
                    CHECK(got[e] == want[e], "graph %d round %d (change %d): output %s[%d] = %g, expected %g", seed, round, change, o->name,
                          e, got[e], want[e]);
                }
                checked++;
            }
        }
        ggml_gallocr_free(ga);
        ggml_free(ours.ctx);
        ggml_free(ref.ctx);
    }
    ggml_backend_free(cpu);
    printf("%d random graphs, %d rounds each: %ld outputs equal to the unshared computation, %ld unchanged rounds replayed\n", iters,
           ROUNDS, checked, unchanged_rounds);
    return 0;
}
