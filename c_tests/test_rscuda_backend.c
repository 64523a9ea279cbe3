// The Rust CUDA backend (crates/ggml-rs-cuda, libggml_rs_cuda.so) loaded as a module, the way
// GGML_BACKEND_PATH loads it (ggml_backend_load(path)); the program also dlopens it for the C API of
// ggml-cuda.h it exports.
//
// Everywhere: loading logs exactly one line of ggml-rs-cuda (the devices found, or why there are
// none) and never crashes; the registry is "CUDA" with the API version; every function of the
// pinned ggml-cuda.h and the module entry points are exported; the device count agrees between the
// registry and ggml_backend_cuda_get_device_count.
// Without a device (no driver: CI and build machines): ggml_backend_cuda_init and _buffer_type
// answer NULL with an error, the module still scores 1 (ggml_backend_load refuses 0: the registry
// with zero devices is the answer), the description and memory of a missing device are empty, the
// pinned host buffer type exists; then
// the GPU scenarios are skipped, saying so (GGML_RS_CUDA_REQUIRE_GPU=1 makes that a failure).
// With a device (scripts/gpu-check.sh): device props (GPU type, async, events, pinned host
// buffers), async tensor copies and events, then the scheduler scenarios with CUDA + CPU:
// seed-000 (x on the CPU -> scale on CUDA -> sqr on the CPU, reset + alloc 12 rounds, 1 copy and 4
// copies with events) and seed-003 (an encoder graph's result on CUDA read by the next graph on the
// CPU, 3 rounds), and MUL_MAT (mat-vec and cuBLAS paths), SOFT_MAX and RMS_NORM against the CPU.
//
// Usage: test_rscuda_backend <path of libggml_rs_cuda.so> [test name]

#include "check.h"
#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-cuda.h"
#include "ggml.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>

static const char * g_lib_path = NULL;
static void * g_lib = NULL;
static ggml_backend_reg_t g_reg = NULL;
static int g_load_lines = 0;
static char g_load_log[4096];

#define SYM(name) ((__typeof__(&name)) sym(#name))

static void * sym(const char * name) {
    void * p = dlsym(g_lib, name);
    CHECK(p != NULL, "%s is not exported by %s", name, g_lib_path);
    return p;
}

static void count_lines(enum ggml_log_level level, const char * text, void * user) {
    (void) level;
    (void) user;
    if (strstr(text, "ggml-rs-cuda") != NULL) {
        g_load_lines++;
        strncat(g_load_log, text, sizeof(g_load_log) - strlen(g_load_log) - 1);
    }
}

static void test_load_logs_one_line_and_exports_the_api(void) {
    CHECK(g_load_lines == 1, "loading logged %d lines of ggml-rs-cuda: %s", g_load_lines, g_load_log);
    CHECK(g_reg->api_version == GGML_BACKEND_API_VERSION, "api_version %d", g_reg->api_version);
    CHECK(strcmp(ggml_backend_reg_name(g_reg), "CUDA") == 0, "registry name %s", ggml_backend_reg_name(g_reg));
    static const char * names[] = { "ggml_backend_cuda_init", "ggml_backend_is_cuda", "ggml_backend_cuda_buffer_type",
                                    "ggml_backend_cuda_allreduce_tensor", "ggml_backend_cuda_host_buffer_type",
                                    "ggml_backend_cuda_get_device_count", "ggml_backend_cuda_get_device_description",
                                    "ggml_backend_cuda_get_device_memory", "ggml_backend_cuda_register_host_buffer",
                                    "ggml_backend_cuda_unregister_host_buffer", "ggml_backend_cuda_reg", "ggml_backend_init",
                                    "ggml_backend_score" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        sym(names[i]);
    }
    CHECK(SYM(ggml_backend_cuda_get_device_count)() == (int) ggml_backend_reg_dev_count(g_reg), "device counts agree");
    CHECK(SYM(ggml_backend_cuda_reg)() == g_reg, "ggml_backend_cuda_reg is the loaded registry");
    CHECK(ggml_backend_reg_get_proc_address(g_reg, "ggml_backend_get_features") != NULL, "features");
    CHECK(ggml_backend_reg_get_proc_address(g_reg, "ggml_backend_split_buffer_type") == NULL, "no split buffers");
}

static void test_no_device_answers(void) {
    CHECK(strstr(g_load_log, "no CUDA devices") != NULL, "the line says why: %s", g_load_log);
    CHECK(SYM(ggml_backend_cuda_init)(0) == NULL, "no backend without a device");
    CHECK(SYM(ggml_backend_cuda_buffer_type)(0) == NULL, "no buffer type without a device");
    CHECK(SYM(ggml_backend_cuda_init)(-1) == NULL, "negative device");
    int (*score)(void) = (int (*)(void)) sym("ggml_backend_score");
    CHECK(score() == 1, "score %d: ggml_backend_load refuses a module that scores 0", score());
    char desc[16] = "garbage";
    SYM(ggml_backend_cuda_get_device_description)(0, desc, sizeof(desc));
    CHECK(desc[0] == 0, "description of a missing device: '%s'", desc);
    size_t free_b = 1, total_b = 1;
    SYM(ggml_backend_cuda_get_device_memory)(0, &free_b, &total_b);
    CHECK(free_b == 0 && total_b == 0, "memory of a missing device");
    ggml_backend_buffer_type_t hb = SYM(ggml_backend_cuda_host_buffer_type)();
    CHECK(hb != NULL && ggml_backend_buft_is_host(hb), "the pinned host buffer type exists");
    CHECK(!SYM(ggml_backend_is_cuda)(NULL), "NULL is no CUDA backend");
    CHECK(!SYM(ggml_backend_cuda_register_host_buffer)(desc, sizeof(desc)), "no pinning without a device");
}

//
// with a device
//

static ggml_backend_t cuda_backend(void) {
    ggml_backend_t b = ggml_backend_dev_init(ggml_backend_reg_dev_get(g_reg, 0), NULL);
    CHECK(b != NULL, "init of CUDA0");
    CHECK(SYM(ggml_backend_is_cuda)(b), "ggml_backend_is_cuda");
    return b;
}

static struct ggml_context * new_ctx(void) {
    struct ggml_init_params p = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), NULL, true };
    struct ggml_context * ctx = ggml_init(p);
    CHECK(ctx != NULL, "ggml_init");
    return ctx;
}

static struct ggml_tensor * vec(struct ggml_context * ctx, const char * name, int n) {
    struct ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    ggml_set_name(t, name);
    return t;
}

static void set_all(struct ggml_tensor * t, float v) {
    int n = (int) ggml_nelements(t);
    float * buf = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) {
        buf[i] = v;
    }
    ggml_backend_tensor_set(t, buf, 0, n * sizeof(float));
    free(buf);
}

static float get0(struct ggml_tensor * t) {
    float v;
    ggml_backend_tensor_get(t, &v, 0, sizeof(v));
    return v;
}

static void test_device_props_copies_events(void) {
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(g_reg, 0);
    struct ggml_backend_dev_props props;
    ggml_backend_dev_get_props(dev, &props);
    CHECK(props.type == GGML_BACKEND_DEVICE_TYPE_GPU, "type %d", (int) props.type);
    CHECK(props.caps.async && props.caps.events && props.caps.host_buffer, "caps");
    CHECK(props.memory_total > 0 && props.memory_free <= props.memory_total, "memory %zu / %zu", props.memory_free, props.memory_total);
    printf("[%s: %s, %zu MiB] ", props.name, props.description, props.memory_total >> 20);

    ggml_backend_t b = cuda_backend();
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * t = vec(ctx, "t", 1000);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, b);
    CHECK(buf != NULL && !ggml_backend_buffer_is_host(buf), "a device buffer");
    float in[1000], out[1000];
    for (int i = 0; i < 1000; i++) {
        in[i] = (float) i * 0.5f;
    }
    ggml_backend_tensor_set_async(b, t, in, 0, sizeof(in));
    ggml_backend_event_t ev = ggml_backend_event_new(dev);
    CHECK(ev != NULL, "event");
    ggml_backend_event_record(ev, b);
    ggml_backend_event_synchronize(ev);
    memset(out, 0, sizeof(out));
    ggml_backend_tensor_get_async(b, t, out, 0, sizeof(out));
    ggml_backend_synchronize(b);
    CHECK(memcmp(in, out, sizeof(in)) == 0, "async round trip");
    ggml_backend_tensor_memset(t, 0, 0, sizeof(in));
    ggml_backend_tensor_get(t, out, 0, sizeof(out));
    CHECK(out[999] == 0.0f, "memset");
    ggml_backend_event_free(ev);

    // the pinned host buffer type
    ggml_backend_buffer_t hb = ggml_backend_buft_alloc_buffer(SYM(ggml_backend_cuda_host_buffer_type)(), 1 << 20);
    CHECK(hb != NULL && ggml_backend_buffer_is_host(hb), "pinned host buffer");
    ggml_backend_buffer_free(hb);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    ggml_backend_free(b);
}

// seed-000: x (input, CPU) -> n1 = scale(x, 2) on CUDA -> n2 = sqr(n1) on the CPU
static void reset_alloc_loop(bool parallel) {
    ggml_backend_t gpu = cuda_backend();
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { gpu, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, parallel, true);
    CHECK(ggml_backend_sched_get_n_copies(sched) == (parallel ? 4 : 1), "copies %d", ggml_backend_sched_get_n_copies(sched));
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = vec(ctx, "x", 4);
    ggml_set_input(x);
    struct ggml_tensor * n1 = ggml_scale(ctx, x, 2.0f);
    struct ggml_tensor * n2 = ggml_sqr(ctx, n1);
    ggml_set_output(n2);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, n2);
    for (int round = 1; round <= 12; round++) {
        ggml_backend_sched_reset(sched);
        ggml_backend_sched_set_tensor_backend(sched, n1, gpu);
        ggml_backend_sched_set_tensor_backend(sched, n2, cpu);
        CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc round %d", round);
        CHECK(ggml_backend_sched_get_n_splits(sched) == 2, "round %d: %d splits", round, ggml_backend_sched_get_n_splits(sched));
        set_all(x, (float) round);
        CHECK(ggml_backend_sched_graph_compute(sched, g) == GGML_STATUS_SUCCESS, "compute round %d", round);
        float want = (2.0f * round) * (2.0f * round);
        CHECK(get0(n2) == want, "round %d (parallel=%d): n2 = %g, expected %g", round, parallel, get0(n2), want);
    }
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(gpu);
}

static void test_seed_000_one_copy(void) { reset_alloc_loop(false); }
static void test_seed_000_four_copies_with_events(void) { reset_alloc_loop(true); }

// seed-003: an encoder graph computes emb on CUDA; the next graph of the scheduler reads it
static void test_seed_003_result_read_by_the_next_graph(void) {
    ggml_backend_t gpu = cuda_backend();
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { gpu, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * img = vec(ctx, "img", 16);
    ggml_set_input(img);
    struct ggml_tensor * e1 = ggml_scale(ctx, img, 0.5f);
    struct ggml_tensor * emb = ggml_add(ctx, e1, img);
    ggml_set_output(emb);
    struct ggml_cgraph * genc = ggml_new_graph(ctx);
    ggml_build_forward_expand(genc, emb);
    ggml_backend_sched_set_tensor_backend(sched, e1, gpu);
    ggml_backend_sched_set_tensor_backend(sched, emb, gpu);
    CHECK(ggml_backend_sched_alloc_graph(sched, genc), "alloc encoder");
    set_all(img, 2.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, genc) == GGML_STATUS_SUCCESS, "compute encoder");
    CHECK_FLOAT(get0(emb), 3.0);
    CHECK(!ggml_backend_buffer_is_host(emb->buffer), "emb lives on the device");
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
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(gpu);
}

// one graph on `b` with random inputs from `seed`; returns its output (malloc'ed)
static float * run_ops(ggml_backend_t b, int cols, int * n_out) {
    struct ggml_init_params p = { 32 * ggml_tensor_overhead() + ggml_graph_overhead(), NULL, true };
    struct ggml_context * ctx = ggml_init(p);
    const int k = 96, m = 80;
    struct ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, m);
    struct ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, cols);
    struct ggml_tensor * y = ggml_mul_mat(ctx, w, x);             // [m, cols]
    struct ggml_tensor * z = ggml_rms_norm(ctx, y, 1e-5f);
    struct ggml_tensor * s = ggml_soft_max_ext(ctx, z, NULL, 0.7f, 0.0f);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, s);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, b);
    CHECK(buf != NULL, "alloc");
    uint32_t r = 12345;
    float * tmp = malloc(sizeof(float) * k * (m > cols ? m : cols));
    for (int i = 0; i < k * m; i++) {
        r = r * 1664525u + 1013904223u;
        tmp[i] = ((r >> 8) / 16777216.0f - 0.5f);
    }
    ggml_backend_tensor_set(w, tmp, 0, ggml_nbytes(w));
    for (int i = 0; i < k * cols; i++) {
        r = r * 1664525u + 1013904223u;
        tmp[i] = ((r >> 8) / 16777216.0f - 0.5f);
    }
    ggml_backend_tensor_set(x, tmp, 0, ggml_nbytes(x));
    free(tmp);
    CHECK(ggml_backend_graph_compute(b, g) == GGML_STATUS_SUCCESS, "compute on %s", ggml_backend_name(b));
    *n_out = (int) ggml_nelements(s);
    float * out = malloc(ggml_nbytes(s));
    ggml_backend_tensor_get(s, out, 0, ggml_nbytes(s));
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    return out;
}

static void ops_vs_cpu(int cols) {
    ggml_backend_t gpu = cuda_backend();
    ggml_backend_t cpu = ggml_backend_cpu_init();
    int n1, n2;
    float * a = run_ops(gpu, cols, &n1);
    float * b = run_ops(cpu, cols, &n2);
    CHECK(n1 == n2, "sizes");
    double err = 0, ref = 0;
    for (int i = 0; i < n1; i++) {
        err += (a[i] - b[i]) * (double) (a[i] - b[i]);
        ref += b[i] * (double) b[i];
    }
    CHECK(err / ref < 1e-6, "%d columns: normalised squared error %g against the CPU", cols, err / ref);
    free(a);
    free(b);
    ggml_backend_free(cpu);
    ggml_backend_free(gpu);
}

static void test_mat_vec_rms_norm_soft_max_vs_cpu(void) { ops_vs_cpu(1); }
static void test_gemm_rms_norm_soft_max_vs_cpu(void) { ops_vs_cpu(64); }

int main(int argc, char ** argv) {
    g_lib_path = argc > 1 ? argv[1] : getenv("GGML_RS_CUDA_LIB");
    CHECK(g_lib_path != NULL, "usage: %s <path of libggml_rs_cuda.so> [test]", argv[0]);
    g_only = argc > 2 ? argv[2] : NULL;
    ggml_log_set(count_lines, NULL);
    g_reg = ggml_backend_load(g_lib_path);
    ggml_log_set(NULL, NULL);
    CHECK(g_reg != NULL, "ggml_backend_load(%s)", g_lib_path);
    g_lib = dlopen(g_lib_path, RTLD_NOW | RTLD_NOLOAD);
    CHECK(g_lib != NULL, "the module is loaded: %s", dlerror());

    RUN(test_load_logs_one_line_and_exports_the_api);
    if (ggml_backend_reg_dev_count(g_reg) == 0) {
        RUN(test_no_device_answers);
        const char * req = getenv("GGML_RS_CUDA_REQUIRE_GPU");
        printf("SKIP the GPU scenarios: no CUDA device (%.*s)\n", (int) strcspn(g_load_log, "\n"), g_load_log);
        if (req != NULL && strcmp(req, "1") == 0) {
            fprintf(stderr, "GGML_RS_CUDA_REQUIRE_GPU=1 and no CUDA device\n");
            return 1;
        }
    } else {
        RUN(test_device_props_copies_events);
        RUN(test_seed_000_one_copy);
        RUN(test_seed_000_four_copies_with_events);
        RUN(test_seed_003_result_read_by_the_next_graph);
        RUN(test_mat_vec_rms_norm_soft_max_vs_cpu);
        RUN(test_gemm_rms_norm_soft_max_vs_cpu);
    }
    printf("%d tests passed\n", g_tests_run);
    return 0;
}
