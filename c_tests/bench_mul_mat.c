// MUL_MAT microbenchmark through the public backend API, the same harness for every backend:
// weights [K, M] of a type × f32 activations [K, N] on the backend named on the command line
// (CPU: upstream's, RSCPU: ours loaded with GGML_BACKEND_PATH), 2 threads by default.
//
//   bench_mul_mat BACKEND TYPE M K N [REPS [THREADS]]
//
// prints one line: `mm BACKEND TYPE M K N median_seconds min_seconds` (wall time of one graph
// compute, REPS runs after one warm-up). The weights and activations are random, the same for
// every backend (fixed seed). The weights go into the device's first extra buffer type when it
// has one (upstream's CPU: CPU_REPACK, weights repacked at load time as llama.cpp loads them
// unless -nr), else into its default buffer type; BENCH_NO_EXTRA=1 keeps them in the default.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_double(const void * a, const void * b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float frand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float) ((rng_state >> 40) / (double) (1 << 24)) * 2.0f - 1.0f;
}

int main(int argc, char ** argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s BACKEND TYPE M K N [REPS [THREADS]]\n", argv[0]);
        return 2;
    }
    const char * name = argv[1];
    const char * tname = argv[2];
    const int64_t m = atoll(argv[3]), k = atoll(argv[4]), n = atoll(argv[5]);
    const int reps = argc > 6 ? atoi(argv[6]) : 5;
    const int threads = argc > 7 ? atoi(argv[7]) : 2;
    if (m <= 0 || k <= 0 || n <= 0 || reps <= 0 || reps > 1000) {
        fprintf(stderr, "bench_mul_mat: bad sizes\n");
        return 2;
    }

    enum ggml_type type = GGML_TYPE_COUNT;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char * tn = ggml_type_name((enum ggml_type) t);
        if (tn && strcmp(tn, tname) == 0) {
            type = (enum ggml_type) t;
        }
    }
    if (type == GGML_TYPE_COUNT) {
        fprintf(stderr, "bench_mul_mat: unknown type %s\n", tname);
        return 2;
    }

    ggml_backend_load_all();
    ggml_backend_dev_t dev = ggml_backend_dev_by_name(name);
    if (!dev) {
        fprintf(stderr, "bench_mul_mat: no device %s (RSCPU needs GGML_BACKEND_PATH)\n", name);
        return 1;
    }
    ggml_backend_t backend = ggml_backend_dev_init(dev, NULL);
    if (!backend) {
        fprintf(stderr, "bench_mul_mat: %s does not start\n", name);
        return 1;
    }
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_set_n_threads_t set_threads = (ggml_backend_set_n_threads_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads");
    if (set_threads) {
        set_threads(backend, threads);
    }

    // the weights' buffer type: the first extra one (repacking) if the device has one and it
    // takes these weights for this product (upstream repacks only some types and shapes)
    struct ggml_init_params ip = { 3 * ggml_tensor_overhead() + ggml_graph_overhead(), NULL, true };
    ggml_backend_buffer_type_t wbuft = ggml_backend_get_default_buffer_type(backend);
    const char * no_extra = getenv("BENCH_NO_EXTRA");
    ggml_backend_dev_get_extra_bufts_t get_extra = (ggml_backend_dev_get_extra_bufts_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    ggml_backend_buffer_type_t * extra = get_extra ? get_extra(dev) : NULL;
    if (extra && extra[0] && !(no_extra && strcmp(no_extra, "1") == 0)) {
        // only the weights in the probe's buffer (the node and activations unallocated)
        struct ggml_context * pctx = ggml_init(ip);
        struct ggml_context * pnode = ggml_init(ip);
        struct ggml_tensor * pa = ggml_new_tensor_2d(pctx, type, k, m);
        struct ggml_tensor * pb = ggml_new_tensor_2d(pnode, GGML_TYPE_F32, k, n);
        struct ggml_tensor * pout = ggml_mul_mat(pnode, pa, pb);
        ggml_backend_buffer_t pbuf = ggml_backend_alloc_ctx_tensors_from_buft(pctx, extra[0]);
        if (pbuf && ggml_backend_dev_supports_op(dev, pout)) {
            wbuft = extra[0];
        }
        if (pbuf) {
            ggml_backend_buffer_free(pbuf);
        }
        ggml_free(pnode);
        ggml_free(pctx);
    }

    struct ggml_context * ctx = ggml_init(ip);
    struct ggml_context * wctx = ggml_init(ip);
    struct ggml_tensor * a = ggml_new_tensor_2d(wctx, type, k, m);
    struct ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n);
    struct ggml_tensor * out = ggml_mul_mat(ctx, a, b);
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, wbuft);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    if (!buf || !wbuf) {
        fprintf(stderr, "bench_mul_mat: no buffer\n");
        return 1;
    }

    float * src = malloc(sizeof(float) * (size_t) (k * (m > n ? m : n)));
    void * q = malloc(ggml_nbytes(a));
    for (int64_t i = 0; i < k * m; i++) {
        src[i] = frand();
    }
    ggml_quantize_chunk(type, src, q, 0, m, k, NULL);
    ggml_backend_tensor_set(a, q, 0, ggml_nbytes(a));
    for (int64_t i = 0; i < k * n; i++) {
        src[i] = frand();
    }
    ggml_backend_tensor_set(b, src, 0, ggml_nbytes(b));

    double * t = malloc(sizeof(double) * reps);
    if (ggml_backend_graph_compute(backend, gf) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "bench_mul_mat: compute failed\n");
        return 1;
    }
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        ggml_backend_graph_compute(backend, gf);
        t[r] = now() - t0;
    }
    qsort(t, reps, sizeof(double), cmp_double);
    fprintf(stderr, "weights in %s\n", ggml_backend_buft_name(wbuft));
    printf("mm %s %s %lld %lld %lld %.6f %.6f\n", name, tname, (long long) m, (long long) k, (long long) n, t[reps / 2], t[0]);

    free(t);
    free(q);
    free(src);
    ggml_backend_buffer_free(buf);
    ggml_backend_buffer_free(wbuf);
    ggml_free(ctx);
    ggml_free(wctx);
    ggml_backend_free(backend);
    return 0;
}
