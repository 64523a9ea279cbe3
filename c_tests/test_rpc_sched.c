// The scheduler over two processes: an rpc-server on loopback (GGML_RS_RPC_ENDPOINT) and the local
// CPU backend. Weights live on both sides; the result must equal the same graph on the CPU alone,
// over several reset + alloc rounds, with one and with four copies.
#include "check.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-rpc.h"

enum { N = 32 };

struct model {
    struct ggml_context * wctx_rpc, * wctx_cpu;
    ggml_backend_buffer_t wbuf_rpc, wbuf_cpu;
    struct ggml_tensor * w1, * w2, * bias;
};

static void fill_weights(struct model * m) {
    float w[N * N], b[N];
    for (int i = 0; i < N * N; i++) {
        w[i] = (float) ((i * 7) % 11 - 5) / 16.0f;
    }
    for (int i = 0; i < N; i++) {
        b[i] = (float) (i % 3) - 1.0f;
    }
    ggml_backend_tensor_set(m->w1, w, 0, sizeof(w));
    for (int i = 0; i < N * N; i++) {
        w[i] = (float) ((i * 5) % 13 - 6) / 16.0f;
    }
    ggml_backend_tensor_set(m->w2, w, 0, sizeof(w));
    ggml_backend_tensor_set(m->bias, b, 0, sizeof(b));
}

// w1 (and w2) on the first backend, bias on the CPU
static struct model load(ggml_backend_t first, ggml_backend_t cpu) {
    struct model m;
    struct ggml_init_params p = { 8 * ggml_tensor_overhead(), NULL, true };
    m.wctx_rpc = ggml_init(p);
    m.wctx_cpu = ggml_init(p);
    m.w1 = ggml_new_tensor_2d(m.wctx_rpc, GGML_TYPE_F32, N, N);
    m.w2 = ggml_new_tensor_2d(m.wctx_rpc, GGML_TYPE_F32, N, N);
    m.bias = ggml_new_tensor_1d(m.wctx_cpu, GGML_TYPE_F32, N);
    m.wbuf_rpc = ggml_backend_alloc_ctx_tensors(m.wctx_rpc, first);
    m.wbuf_cpu = ggml_backend_alloc_ctx_tensors(m.wctx_cpu, cpu);
    ggml_backend_buffer_set_usage(m.wbuf_rpc, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    ggml_backend_buffer_set_usage(m.wbuf_cpu, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    fill_weights(&m);
    return m;
}

static void unload(struct model * m) {
    ggml_backend_buffer_free(m->wbuf_rpc);
    ggml_backend_buffer_free(m->wbuf_cpu);
    ggml_free(m->wctx_rpc);
    ggml_free(m->wctx_cpu);
}

// out = w2 * relu-ish(sqr(w1 * x) + bias) * 0.5
static struct ggml_cgraph * build(struct ggml_context * ctx, struct model * m, struct ggml_tensor ** x, struct ggml_tensor ** out) {
    *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, N, 4);
    ggml_set_name(*x, "x");
    ggml_set_input(*x);
    struct ggml_tensor * h = ggml_mul_mat(ctx, m->w1, *x);
    h = ggml_add(ctx, ggml_sqr(ctx, h), m->bias);
    h = ggml_mul_mat(ctx, m->w2, h);
    *out = ggml_scale(ctx, h, 0.5f);
    ggml_set_output(*out);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, *out);
    return g;
}

static void run(ggml_backend_t * backends, int n_backends, bool parallel, float results[][4 * N]) {
    struct model m = load(backends[0], backends[n_backends - 1]);
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, n_backends, 256, parallel, true);
    struct ggml_init_params p = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), NULL, true };
    struct ggml_context * ctx = ggml_init(p);
    struct ggml_tensor * x, * out;
    struct ggml_cgraph * g = build(ctx, &m, &x, &out);
    for (int round = 0; round < 4; round++) {
        ggml_backend_sched_reset(sched);
        CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc round %d", round);
        float xv[4 * N];
        for (int i = 0; i < 4 * N; i++) {
            xv[i] = (float) ((i + round * 3) % 9 - 4) / 4.0f;
        }
        ggml_backend_tensor_set(x, xv, 0, sizeof(xv));
        CHECK(ggml_backend_sched_graph_compute(sched, g) == GGML_STATUS_SUCCESS, "compute round %d", round);
        ggml_backend_tensor_get(out, results[round], 0, sizeof(results[round]));
    }
    if (n_backends > 1) {
        CHECK(ggml_backend_sched_get_n_splits(sched) > 1, "the graph should span both backends");
    }
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    unload(&m);
}

int main(void) {
    const char * endpoint = getenv("GGML_RS_RPC_ENDPOINT");
    CHECK(endpoint != NULL, "set GGML_RS_RPC_ENDPOINT to a running rpc-server (host:port)");
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 1);
    float want[4][4 * N], got[4][4 * N];
    run(&cpu, 1, false, want);
    for (int parallel = 0; parallel <= 1; parallel++) {
        ggml_backend_t rpc = ggml_backend_rpc_init(endpoint, 0);
        CHECK(rpc != NULL, "cannot connect to %s", endpoint);
        ggml_backend_t backends[2] = { rpc, cpu };
        run(backends, 2, parallel, got);
        for (int r = 0; r < 4; r++) {
            for (int i = 0; i < 4 * N; i++) {
                CHECK(fabsf(got[r][i] - want[r][i]) <= 1e-4f * (1.0f + fabsf(want[r][i])), "parallel %d round %d value %d: %g vs %g",
                      parallel, r, i, got[r][i], want[r][i]);
            }
        }
        ggml_backend_free(rpc);
        printf("rpc-server %s + CPU (%d copies): 4 rounds equal to the CPU alone\n", endpoint, parallel ? 4 : 1);
    }
    ggml_backend_free(cpu);
    (void) g_tests_run;
    return 0;
}
