// The Rust CPU backend's extra buffer type CPU_REPACK (crates/ggml-rs-cpu/src/backend/repack.rs),
// where llama.cpp places weights unless --repack 0 / -nr. Two modes: Plain (the default: the
// weights upstream's x86 CPU repacks, Q4_0 / Q4_K with rows % 8 == 0, as their own bytes in
// huge-page memory) and Tiles (GGML_RS_CPU_REPACK=1 where the CPU has AVX-512 VNNI: every type of
// the tiled int8 GEMM, Q8_0 / Q4_0 / Q4_K / Q6_K, also repacked once when set).
//
// Checks: the device lists it (unless GGML_RS_CPU_REPACK=0), named CPU_REPACK, not host memory,
// supported by the device, in the mode the environment asks for; a tensor there takes its original
// size (Plain) or that plus the repacked blocks (Tiles); MUL_MAT on a weight there gives bit for
// bit what the same weight in a plain CPU buffer gives, for prompt-sized and token-sized
// activations; after a partial set_tensor, a memset_tensor and a tensor copy into it, the results
// follow the new bytes; get_tensor gives back the bytes set; supports_op refuses any op on it but
// MUL_MAT (GET_ROWS, ADD), a view of it as weights, a tensor of a type the mode does not take, and
// F16 activations.
//
// Usage: [GGML_RS_CPU_REPACK=1|0] test_rscpu_repack <path of libggml_rs_cpu.so> [test name] (or
// GGML_RS_CPU_LIB=<path>); with GGML_RS_CPU_REPACK=0 it checks that the type is not listed.

#include "check.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

#include <stdbool.h>
#include <stdint.h>
#include <strings.h>

static ggml_backend_reg_t g_reg = NULL;
static ggml_backend_dev_t g_dev = NULL;
static ggml_backend_buffer_type_t g_repack = NULL;
static bool g_tiles = false; // the mode: Tiles (every qgemm type, tiles after the bytes) or Plain

static const enum ggml_type TYPES[] = { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K };
enum { K = 512, ROWS = 40 };

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { // xorshift64*, in [-1, 1)
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (float) ((g_rng * 2685821657736338717ull) >> 40) / (float) (1 << 23) - 1.0f;
}

static void fill(float * x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        x[i] = frand();
    }
}

// `rows` rows of K random weights quantized to `type` (malloc'd, the caller frees)
static void * quantized(enum ggml_type type, int rows) {
    float * f = malloc(sizeof(float) * K * rows);
    fill(f, (size_t) K * rows);
    void * q = malloc(ggml_row_size(type, K) * rows);
    ggml_quantize_chunk(type, f, q, 0, rows, K, NULL);
    free(f);
    return q;
}

static struct ggml_context * new_ctx(void) {
    struct ggml_init_params p = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), NULL, true };
    struct ggml_context * ctx = ggml_init(p);
    CHECK(ctx != NULL, "ggml_init");
    return ctx;
}

static void test_the_device_lists_it(void) {
    CHECK(strcmp(ggml_backend_buft_name(g_repack), "CPU_REPACK") == 0, "name %s", ggml_backend_buft_name(g_repack));
    CHECK(!ggml_backend_buft_is_host(g_repack), "CPU_REPACK is not host memory (as upstream's)");
    CHECK(ggml_backend_dev_supports_buft(g_dev, g_repack), "the device takes its own extra buffer type");
    CHECK(ggml_backend_buft_get_device(g_repack) == g_dev, "its device is ours");
    // Tiles: a repackable tensor takes more than its bytes (the repacked blocks after them);
    // Plain: its bytes; another tensor its bytes in both
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, K, ROWS);
    struct ggml_tensor * f = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, ROWS);
    size_t got = ggml_backend_buft_get_alloc_size(g_repack, w);
    CHECK(g_tiles ? got > ggml_nbytes(w) : got == ggml_nbytes(w), "q4_0 weights (%s mode): %zu bytes for %zu", g_tiles ? "Tiles" : "Plain", got, ggml_nbytes(w));
    CHECK(ggml_backend_buft_get_alloc_size(g_repack, f) == ggml_nbytes(f), "f32 is not repacked");
    ggml_free(ctx);
}

// one weight of `type` in the repack buffer and the same in a plain CPU buffer, the products of
// each with 1, 20 and 37 activation columns computed on our backend, compared bit for bit
struct pair {
    struct ggml_context * wctx, * pctx, * gctx;
    ggml_backend_buffer_t wbuf, pbuf, gbuf;
    struct ggml_tensor * w, * p;  // repacked, plain
    struct ggml_tensor * x[3];    // activations
    struct ggml_tensor * yw[3], * yp[3];
    struct ggml_cgraph * g;
};

static const int COLS[3] = { 1, 20, 37 };

static struct pair make_pair(ggml_backend_t be, enum ggml_type type, const void * bytes) {
    struct pair s;
    s.wctx = new_ctx();
    s.pctx = new_ctx();
    s.gctx = new_ctx();
    s.w = ggml_new_tensor_2d(s.wctx, type, K, ROWS);
    s.p = ggml_new_tensor_2d(s.pctx, type, K, ROWS);
    s.wbuf = ggml_backend_alloc_ctx_tensors_from_buft(s.wctx, g_repack);
    s.pbuf = ggml_backend_alloc_ctx_tensors(s.pctx, be);
    CHECK(s.wbuf != NULL && s.pbuf != NULL, "weight buffers");
    CHECK(ggml_backend_buffer_get_type(s.wbuf) == g_repack, "the weight's buffer is of CPU_REPACK");
    ggml_backend_tensor_set(s.w, bytes, 0, ggml_nbytes(s.w));
    ggml_backend_tensor_set(s.p, bytes, 0, ggml_nbytes(s.p));
    s.g = ggml_new_graph(s.gctx);
    for (int i = 0; i < 3; i++) {
        s.x[i] = ggml_new_tensor_2d(s.gctx, GGML_TYPE_F32, K, COLS[i]);
        s.yw[i] = ggml_mul_mat(s.gctx, s.w, s.x[i]);
        s.yp[i] = ggml_mul_mat(s.gctx, s.p, s.x[i]);
        ggml_build_forward_expand(s.g, s.yw[i]);
        ggml_build_forward_expand(s.g, s.yp[i]);
    }
    s.gbuf = ggml_backend_alloc_ctx_tensors(s.gctx, be);
    CHECK(s.gbuf != NULL, "activation buffer");
    for (int i = 0; i < 3; i++) {
        float * x = malloc(ggml_nbytes(s.x[i]));
        fill(x, (size_t) K * COLS[i]);
        ggml_backend_tensor_set(s.x[i], x, 0, ggml_nbytes(s.x[i]));
        free(x);
    }
    return s;
}

static void free_pair(struct pair * s) {
    ggml_backend_buffer_free(s->wbuf);
    ggml_backend_buffer_free(s->pbuf);
    ggml_backend_buffer_free(s->gbuf);
    ggml_free(s->wctx);
    ggml_free(s->pctx);
    ggml_free(s->gctx);
}

static void expect_same(ggml_backend_t be, struct pair * s, const char * what) {
    CHECK(ggml_backend_graph_compute(be, s->g) == GGML_STATUS_SUCCESS, "%s: compute", what);
    for (int i = 0; i < 3; i++) {
        CHECK(ggml_backend_dev_supports_op(g_dev, s->yw[i]), "%s: MUL_MAT on the repacked weight is supported", what);
        size_t n = (size_t) ROWS * COLS[i];
        float * a = malloc(n * sizeof(float));
        float * b = malloc(n * sizeof(float));
        ggml_backend_tensor_get(s->yw[i], a, 0, n * sizeof(float));
        ggml_backend_tensor_get(s->yp[i], b, 0, n * sizeof(float));
        for (size_t e = 0; e < n; e++) {
            CHECK(memcmp(&a[e], &b[e], sizeof(float)) == 0 && !isnan(a[e]), "%s %s, %d columns: element %zu (row %zu, column %zu): repacked %.9g, plain %.9g",
                  ggml_type_name(s->w->type), what, COLS[i], e, e % ROWS, e / ROWS, a[e], b[e]);
        }
        free(a);
        free(b);
    }
}

static void test_mul_mat_equals_the_plain_buffer(void) {
    ggml_backend_t be = ggml_backend_dev_init(g_dev, NULL);
    ggml_backend_set_n_threads_t set_n = (ggml_backend_set_n_threads_t) ggml_backend_reg_get_proc_address(g_reg, "ggml_backend_set_n_threads");
    CHECK(set_n != NULL, "ggml_backend_set_n_threads");
    set_n(be, 2);
    for (size_t t = 0; t < sizeof(TYPES) / sizeof(TYPES[0]); t++) {
        enum ggml_type type = TYPES[t];
        if (!g_tiles && type != GGML_TYPE_Q4_0 && type != GGML_TYPE_Q4_K) {
            continue; // Plain mode takes what upstream repacks only
        }
        size_t rs = ggml_row_size(type, K);
        void * bytes = quantized(type, ROWS);
        struct pair s = make_pair(be, type, bytes);
        expect_same(be, &s, "as set");

        // get_tensor: the bytes set, whole and in part
        unsigned char * back = malloc(ggml_nbytes(s.w));
        ggml_backend_tensor_get(s.w, back, 0, ggml_nbytes(s.w));
        CHECK(memcmp(back, bytes, ggml_nbytes(s.w)) == 0, "%s: get_tensor gives back the bytes set", ggml_type_name(type));
        ggml_backend_tensor_get(s.w, back, 3 * rs + 5, 2 * rs);
        CHECK(memcmp(back, (unsigned char *) bytes + 3 * rs + 5, 2 * rs) == 0, "%s: a part of it", ggml_type_name(type));

        // a partial write (rows 17 .. 19 and a piece of 33 of other weights) into both: the
        // repacked blocks it touches follow
        void * other = quantized(type, ROWS);
        ggml_backend_tensor_set(s.w, (unsigned char *) other + 17 * rs, 17 * rs, 3 * rs);
        ggml_backend_tensor_set(s.p, (unsigned char *) other + 17 * rs, 17 * rs, 3 * rs);
        ggml_backend_tensor_set(s.w, (unsigned char *) other + 33 * rs + 7, 33 * rs + 7, rs / 2);
        ggml_backend_tensor_set(s.p, (unsigned char *) other + 33 * rs + 7, 33 * rs + 7, rs / 2);
        expect_same(be, &s, "after a partial set_tensor");

        // memset of the last rows (zero bytes: zero scales, products 0)
        ggml_backend_tensor_memset(s.w, 0, 36 * rs, 4 * rs);
        ggml_backend_tensor_memset(s.p, 0, 36 * rs, 4 * rs);
        expect_same(be, &s, "after memset_tensor");

        // a copy from a plain tensor into the repacked one (no cpy_tensor: through set_tensor)
        ggml_backend_tensor_set(s.p, other, 0, ggml_nbytes(s.p));
        ggml_backend_tensor_copy(s.p, s.w);
        expect_same(be, &s, "after ggml_backend_tensor_copy");
        ggml_backend_tensor_get(s.w, back, 0, ggml_nbytes(s.w));
        CHECK(memcmp(back, other, ggml_nbytes(s.w)) == 0, "%s: get_tensor after the copy", ggml_type_name(type));

        free(back);
        free(other);
        free(bytes);
        free_pair(&s);
    }
    ggml_backend_free(be);
}

static void test_other_ops_on_it_are_refused(void) {
    struct ggml_context * wctx = new_ctx();
    struct ggml_tensor * w = ggml_new_tensor_2d(wctx, GGML_TYPE_Q4_0, K, ROWS);
    struct ggml_tensor * f = ggml_new_tensor_2d(wctx, GGML_TYPE_F16, K, ROWS);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, g_repack);
    CHECK(wbuf != NULL, "repack buffer");
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, 20);
    struct ggml_tensor * x16 = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, K, 20);
    struct ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 4);
    struct ggml_tensor * ok = ggml_mul_mat(ctx, w, x);
    CHECK(ggml_backend_dev_supports_op(g_dev, ok), "MUL_MAT of the repacked weight and F32 activations");
    struct ggml_tensor * refused[] = {
        ggml_get_rows(ctx, w, ids),                                                    // another op reading it
        ggml_add(ctx, w, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, ROWS)),             // ADD with it as a source
        ggml_mul_mat(ctx, ggml_view_2d(ctx, w, K, 16, w->nb[1], 0), x),                // a view of it as weights
        ggml_mul_mat(ctx, f, x),                                                       // a type that is not repacked
        ggml_mul_mat(ctx, w, x16),                                                     // F16 activations
    };
    const char * what[] = { "GET_ROWS", "ADD", "MUL_MAT of a view", "MUL_MAT of F16 weights there", "MUL_MAT with F16 activations" };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        CHECK(!ggml_backend_dev_supports_op(g_dev, refused[i]), "%s on a tensor of CPU_REPACK is refused", what[i]);
    }
    // by mode: Q8_0 weights (upstream's x86 CPU does not repack them; the tiles do) and Q4_0
    // weights of 20 rows (upstream repacks rows % 8 == 0 only)
    struct ggml_context * mctx = new_ctx();
    struct ggml_tensor * w8 = ggml_new_tensor_2d(mctx, GGML_TYPE_Q8_0, K, ROWS);
    struct ggml_tensor * w20 = ggml_new_tensor_2d(mctx, GGML_TYPE_Q4_0, K, 20);
    ggml_backend_buffer_t mbuf = ggml_backend_alloc_ctx_tensors_from_buft(mctx, g_repack);
    CHECK(mbuf != NULL, "repack buffer");
    CHECK(ggml_backend_dev_supports_op(g_dev, ggml_mul_mat(ctx, w8, x)) == g_tiles, "MUL_MAT of Q8_0 weights there: %s in %s mode",
          g_tiles ? "taken" : "refused", g_tiles ? "Tiles" : "Plain");
    CHECK(ggml_backend_dev_supports_op(g_dev, ggml_mul_mat(ctx, w20, x)) == g_tiles, "MUL_MAT of Q4_0 weights of 20 rows there: %s in %s mode",
          g_tiles ? "taken" : "refused", g_tiles ? "Tiles" : "Plain");
    ggml_backend_buffer_free(mbuf);
    ggml_free(mctx);
    // the same ops on a plain CPU buffer's tensors are the kernels' to take (not refused for the buffer)
    struct ggml_context * pctx = new_ctx();
    struct ggml_tensor * pw = ggml_new_tensor_2d(pctx, GGML_TYPE_Q4_0, K, ROWS);
    ggml_backend_buffer_t pbuf = ggml_backend_alloc_ctx_tensors_from_buft(pctx, ggml_backend_dev_buffer_type(g_dev));
    CHECK(ggml_backend_dev_supports_op(g_dev, ggml_get_rows(ctx, pw, ids)), "GET_ROWS of a plain q4_0 tensor");
    ggml_backend_buffer_free(pbuf);
    ggml_backend_buffer_free(wbuf);
    ggml_free(pctx);
    ggml_free(ctx);
    ggml_free(wctx);
}

// whether /proc/cpuinfo lists avx512_vnni
static bool cpu_has_vnni(void) {
    FILE * f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) {
        return false;
    }
    char line[8192];
    bool has = false;
    while (!has && fgets(line, sizeof line, f) != NULL) {
        has = strncmp(line, "flags", 5) == 0 && strstr(line, " avx512_vnni") != NULL;
    }
    fclose(f);
    return has;
}

int main(int argc, char ** argv) {
    const char * lib = argc > 1 ? argv[1] : getenv("GGML_RS_CPU_LIB");
    CHECK(lib != NULL, "usage: %s <libggml_rs_cpu.so> [test] (or GGML_RS_CPU_LIB)", argv[0]);
    g_only = argc > 2 ? argv[2] : NULL;
    g_reg = ggml_backend_load(lib);
    CHECK(g_reg != NULL, "ggml_backend_load(%s)", lib);
    g_dev = ggml_backend_reg_dev_get(g_reg, 0);
    ggml_backend_dev_get_extra_bufts_t get_extra =
        (ggml_backend_dev_get_extra_bufts_t) ggml_backend_reg_get_proc_address(g_reg, "ggml_backend_dev_get_extra_bufts");
    CHECK(get_extra != NULL, "ggml_backend_dev_get_extra_bufts");
    ggml_backend_buffer_type_t * extra = get_extra(g_dev);
    CHECK(extra != NULL, "the list");
    g_repack = extra[0];
    const char * want = getenv("GGML_RS_CPU_REPACK");
    if (want != NULL && (strcmp(want, "0") == 0 || strcasecmp(want, "off") == 0)) {
        CHECK(g_repack == NULL, "CPU_REPACK is listed with GGML_RS_CPU_REPACK=%s", want);
        printf("not listed with GGML_RS_CPU_REPACK=%s: 1 test passed\n", want);
        return 0;
    }
    CHECK(g_repack != NULL, "the device lists CPU_REPACK (GGML_RS_CPU_REPACK=%s)", want ? want : "unset");
    // the mode, from a Q4_0 tensor's size there; Tiles exactly where asked for and the CPU runs
    // them (AVX-512 VNNI, the SIMD level not capped)
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, K, ROWS);
    g_tiles = ggml_backend_buft_get_alloc_size(g_repack, w) > ggml_nbytes(w);
    ggml_free(ctx);
    const char * simd = getenv("GGML_RS_CPU_SIMD");
    bool asked = want != NULL && strcmp(want, "1") == 0;
    if (asked && cpu_has_vnni() && (simd == NULL || *simd == 0)) {
        CHECK(g_tiles, "GGML_RS_CPU_REPACK=1 on a CPU with AVX-512 VNNI: Tiles mode");
    }
    CHECK(asked || !g_tiles, "without GGML_RS_CPU_REPACK=1: Plain mode");
    CHECK(extra[1] == NULL, "one extra buffer type");
    RUN(test_the_device_lists_it);
    RUN(test_mul_mat_equals_the_plain_buffer);
    RUN(test_other_ops_on_it_are_refused);
    printf("%s mode: %d tests passed\n", g_tiles ? "Tiles" : "Plain", g_tests_run);
    return 0;
}
