// Random graphs through the scheduler: for random backend assignments, op support, pipeline
// copies and op offload, the outputs equal the same graph computed on the CPU backend alone
// (bit for bit: the same CPU kernels compute both), over several reset + alloc rounds with new
// inputs. GGML_RS_FUZZ_ITERS sets the number of graphs (default 60).
#include "check.h"
#define UNUSED_TEST_COUNTER (void) g_tests_run; (void) g_only
#include "fake_backend.h"
#include "ggml_rs_ext.h"
#include "rng.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <stdint.h>

static bool g_unsupported[GGML_OP_COUNT];

static bool random_support(const struct ggml_tensor * op) { return !g_unsupported[op->op]; }

#define MAX_T 96

struct built {
    struct ggml_context * ctx;
    struct ggml_cgraph * graph;
    struct ggml_tensor * inputs[8];
    int n_inputs;
    struct ggml_tensor * outputs[MAX_T];
    int n_outputs;
    struct ggml_tensor * nodes[MAX_T];
    int n_nodes;
};

// the same random graph every time for the same seed
static struct built build(uint64_t seed, int len) {
    rng_seed(seed);
    struct built b;
    memset(&b, 0, sizeof(b));
    struct ggml_init_params p = { (MAX_T + 16) * ggml_tensor_overhead() + ggml_graph_overhead(), NULL, true };
    b.ctx = ggml_init(p);
    struct ggml_tensor * pool[MAX_T];
    int n = 0;
    b.n_inputs = 1 + below(4);
    for (int i = 0; i < b.n_inputs; i++) {
        struct ggml_tensor * t = ggml_new_tensor_1d(b.ctx, GGML_TYPE_F32, len);
        ggml_format_name(t, "in%d", i);
        ggml_set_input(t);
        b.inputs[i] = t;
        pool[n++] = t;
    }
    int n_ops = 4 + below(40);
    for (int i = 0; i < n_ops && n < MAX_T; i++) {
        struct ggml_tensor * a = pool[n - 1 - below(n < 4 ? n : 4)];
        struct ggml_tensor * c = pool[below(n)];
        struct ggml_tensor * t;
        switch (below(8)) {
            case 0: t = ggml_add(b.ctx, a, c); break;
            case 1: t = ggml_sub(b.ctx, a, c); break;
            case 2: t = ggml_mul(b.ctx, a, c); break;
            case 3: t = ggml_scale(b.ctx, a, 0.5f + (float) below(4)); break;
            case 4: t = ggml_sqr(b.ctx, ggml_scale(b.ctx, a, 0.25f)); break;
            case 5: t = ggml_cont(b.ctx, ggml_view_1d(b.ctx, a, len, 0)); break;
            case 6: t = ggml_neg(b.ctx, a); break;
            default: t = ggml_add(b.ctx, ggml_scale(b.ctx, a, 0.5f), c); break;
        }
        ggml_format_name(t, "t%d", i);
        pool[n++] = t;
        if (below(6) == 0) {
            ggml_set_output(t);
            b.outputs[b.n_outputs++] = t;
        }
    }
    ggml_set_output(pool[n - 1]);
    b.outputs[b.n_outputs++] = pool[n - 1];
    b.graph = ggml_new_graph(b.ctx);
    for (int i = 0; i < b.n_outputs; i++) {
        ggml_build_forward_expand(b.graph, b.outputs[i]);
    }
    b.n_nodes = ggml_graph_n_nodes(b.graph);
    for (int i = 0; i < b.n_nodes && i < MAX_T; i++) {
        b.nodes[i] = ggml_graph_node(b.graph, i);
    }
    return b;
}

static void set_inputs(struct built * b, uint64_t round) {
    float v[64];
    for (int i = 0; i < b->n_inputs; i++) {
        if (b->inputs[i]->buffer == NULL) {
            continue; // not read by the graph, so not in it
        }
        int len = (int) ggml_nelements(b->inputs[i]);
        for (int k = 0; k < len; k++) {
            v[k] = (float) ((int) ((round * 31 + i * 7 + k * 13) % 17) - 8) / 8.0f;
        }
        ggml_backend_tensor_set(b->inputs[i], v, 0, len * sizeof(float));
    }
}

static void read_outputs(struct built * b, float * out) {
    int len = (int) ggml_nelements(b->outputs[0]);
    for (int i = 0; i < b->n_outputs; i++) {
        ggml_backend_tensor_get(b->outputs[i], out + i * len, 0, len * sizeof(float));
    }
}

int main(void) {
    const char * it = getenv("GGML_RS_FUZZ_ITERS");
    int iters = it ? atoi(it) : 60;
    ggml_backend_t cpu_ref = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu_ref, 1);
    int checked = 0, repeated = 0;
    for (int iter = 0; iter < iters; iter++) {
        uint64_t seed = 1000 + iter;
        int len = 4 + (int) (seed % 5) * 4;
        float want[3][MAX_T * 32], got[MAX_T * 32];

        // reference: the CPU backend alone, through the graph allocator
        struct built ref = build(seed, len);
        ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
        for (int round = 0; round < 3; round++) {
            CHECK(ggml_gallocr_alloc_graph(ga, ref.graph), "reference alloc");
            set_inputs(&ref, round);
            CHECK(ggml_backend_graph_compute(cpu_ref, ref.graph) == GGML_STATUS_SUCCESS, "reference compute");
            read_outputs(&ref, want[round]);
        }
        ggml_gallocr_free(ga);

        // the scheduler, with a random configuration
        g_rng = seed * 31 + 7;
        memset(g_unsupported, 0, sizeof(g_unsupported));
        for (int k = 0; k < 3; k++) {
            int ops[] = { GGML_OP_ADD, GGML_OP_SUB, GGML_OP_MUL, GGML_OP_SCALE, GGML_OP_SQR, GGML_OP_CONT, GGML_OP_UNARY };
            g_unsupported[ops[below(7)]] = below(2);
        }
        bool parallel = below(3) == 0;
        struct fake_options fo = { .events = below(2) == 0, .supports_op = random_support };
        ggml_backend_t fake = fake_backend_new(&fo);
        ggml_backend_t cpu = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(cpu, 1);
        ggml_backend_t backends[2] = { fake, cpu };
        ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 2 * MAX_T, parallel, below(2));
        struct built b = build(seed, len);
        // rounds 3 and 4 repeat round 2's assignments with round 0's and 1's inputs: an
        // unchanged graph, allocated again from the scheduler's memo
        for (int r = 0; r < 5; r++) {
            int round = r % 3;
            ggml_backend_sched_reset(sched);
            g_rng = seed * 131 + (r < 3 ? r : 2);
            for (int i = 0; i < b.n_nodes; i++) {
                int r = below(4);
                if (r == 0 && random_support(b.nodes[i])) {
                    ggml_backend_sched_set_tensor_backend(sched, b.nodes[i], fake);
                } else if (r == 1) {
                    ggml_backend_sched_set_tensor_backend(sched, b.nodes[i], cpu);
                }
            }
            CHECK(ggml_backend_sched_alloc_graph(sched, b.graph), "seed %llu round %d: alloc", (unsigned long long) seed, round);
            set_inputs(&b, round);
            CHECK(ggml_backend_sched_graph_compute(sched, b.graph) == GGML_STATUS_SUCCESS, "compute");
            read_outputs(&b, got);
            int n = b.n_outputs * len;
            for (int k = 0; k < n; k++) {
                bool bad = !(isnan(got[k]) && isnan(want[round][k])) && memcmp(&got[k], &want[round][k], sizeof(float)) != 0;
                if (bad && getenv("GGML_RS_FUZZ_VERBOSE")) {
                    fprintf(stderr, "output %s (#%d of %d) differs\n", b.outputs[k / len]->name, k / len, b.n_outputs);
                    char plan[16384];
                    ggml_rs_sched_dump_plan(sched, b.graph, 0, plan, sizeof(plan));
                    fprintf(stderr, "%s\n", plan);
                }
                bool both_nan = isnan(got[k]) && isnan(want[round][k]);
                CHECK(both_nan || memcmp(&got[k], &want[round][k], sizeof(float)) == 0,
                      "seed %llu round %d (parallel %d, %d splits): output value %d is %g, expected %g",
                      (unsigned long long) seed, round, parallel, ggml_backend_sched_get_n_splits(sched), k, got[k], want[round][k]);
            }
            checked += n;
        }
        if (ggml_rs_sched_counters && !parallel) {
            uint64_t n_splits = 0, n_repeats = 0;
            ggml_rs_sched_counters(sched, &n_splits, &n_repeats);
            CHECK(n_repeats >= 1 && n_splits + n_repeats == 5, "seed %llu: %llu graphs split, %llu allocations repeated",
                  (unsigned long long) seed, (unsigned long long) n_splits, (unsigned long long) n_repeats);
            repeated += (int) n_repeats;
        }
        ggml_backend_sched_free(sched);
        ggml_free(b.ctx);
        ggml_free(ref.ctx);
        ggml_backend_free(cpu);
        ggml_backend_free(fake);
    }
    ggml_backend_free(cpu_ref);
    UNUSED_TEST_COUNTER;
    printf("%d random graphs, %d values equal to the single-backend results, %d allocations repeated unchanged\n", iters, checked, repeated);
    return 0;
}
