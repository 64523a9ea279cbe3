// The Rust CPU backend (crates/ggml-rs-cpu, libggml_rs_cpu.so) as a loadable module beside
// upstream's CPU backend, the way GGML_BACKEND_PATH loads it: ggml_backend_load(path) registers it,
// and the program also dlopens it (RTLD_LOCAL) for the C API of libggml-cpu it exports.
//
// Checks: the registry, device and backend are named RSCPU (upstream's CPU is in the process) with
// the CPU device type, the API version and upstream's get_proc_address names; graphs compute on it
// and give the values computed here by hand; an op it cannot compute is refused by supports_op,
// and computing it anyway fails with GGML_STATUS_FAILED and a log line naming the node (never a
// silent result); the abort callback stops a graph (GGML_STATUS_ABORTED); the thread count is
// settable and changes nothing in the results; ggml_backend_is_cpu of each library answers for
// its own backends only; the drop-in C API (ggml_graph_plan / ggml_graph_compute with and without
// a thread pool, ggml_graph_compute_with_ctx, ggml_new_i32/f32, the element getters and setters,
// the fp conversions, ggml_get_type_traits_cpu's from_float and vec_dot) agrees with upstream's
// libggml-cpu on the same inputs; ggml_cpu_has_* agree with /proc/cpuinfo; use_ref (backend and
// cplan) runs the scalar references.
//
// Usage: test_rscpu_backend <path of libggml_rs_cpu.so> [test name]
// (or GGML_RS_CPU_LIB=<path>). The ops used are ADD, MUL and SOFT_MAX (kernels of the ops families).

#define _GNU_SOURCE // dladdr
#include "check.h"
#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

static const char * g_lib_path = NULL;
static void * g_lib = NULL; // dlopen handle of our library
static ggml_backend_reg_t g_reg = NULL;

#define SYM(name) ((__typeof__(&name)) sym(#name))

static void * sym(const char * name) {
    void * p = dlsym(g_lib, name);
    CHECK(p != NULL, "%s is not exported by %s", name, g_lib_path);
    return p;
}

static ggml_backend_t rs_backend(void) {
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(g_reg, 0);
    ggml_backend_t b = ggml_backend_dev_init(dev, NULL);
    CHECK(b != NULL, "init of our device");
    return b;
}

// a context of tensors without data, its graph allocated in one buffer of `backend`'s type
struct setup {
    struct ggml_context * ctx;
    ggml_backend_buffer_t buf;
};

static struct ggml_context * new_ctx(bool no_alloc) {
    struct ggml_init_params p = { 16 * 1024 * 1024, NULL, no_alloc };
    struct ggml_context * ctx = ggml_init(p);
    CHECK(ctx != NULL, "ggml_init");
    return ctx;
}

static void test_registry_names_and_procs(void) {
    CHECK(g_reg->api_version == GGML_BACKEND_API_VERSION, "api_version %d", g_reg->api_version);
    CHECK(strcmp(ggml_backend_reg_name(g_reg), "RSCPU") == 0, "registry name %s (upstream's CPU is loaded: expected RSCPU)", ggml_backend_reg_name(g_reg));
    CHECK(ggml_backend_reg_dev_count(g_reg) == 1, "one device");
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(g_reg, 0);
    CHECK(strcmp(ggml_backend_dev_name(dev), "RSCPU") == 0, "device name %s", ggml_backend_dev_name(dev));
    CHECK(ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU, "device type %d", (int) ggml_backend_dev_type(dev));
    CHECK(ggml_backend_dev_by_name("RSCPU") == dev, "the registry finds it by name");
    CHECK(ggml_backend_dev_by_name("CPU") != dev, "upstream's CPU keeps its name");
    struct ggml_backend_dev_props props;
    ggml_backend_dev_get_props(dev, &props);
    CHECK(props.caps.buffer_from_host_ptr && !props.caps.async && props.memory_total > 0, "props");
    CHECK(ggml_backend_dev_buffer_type(dev) == ggml_backend_cpu_buffer_type(), "tensors live in ggml's CPU buffer type");
    static const char * names[] = { "ggml_backend_set_n_threads", "ggml_backend_dev_get_extra_bufts", "ggml_backend_get_features",
                                    "ggml_backend_set_abort_callback", "ggml_backend_cpu_numa_init", "ggml_backend_cpu_is_numa",
                                    "ggml_backend_cpu_set_use_ref", "ggml_threadpool_new", "ggml_threadpool_free",
                                    "ggml_backend_cpu_set_threadpool" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        void * ours = ggml_backend_reg_get_proc_address(g_reg, names[i]);
        CHECK(ours != NULL, "get_proc_address(%s) is NULL", names[i]);
        // the function handed out is our library's, not upstream's of the same name
        Dl_info info;
        CHECK(dladdr(ours, &info) && strstr(info.dli_fname, "ggml_rs_cpu") != NULL, "%s points into %s", names[i], info.dli_fname);
    }
    CHECK(ggml_backend_reg_get_proc_address(g_reg, "ggml_backend_no_such_function") == NULL, "unknown name");
    ggml_backend_buffer_type_t * extra = ((ggml_backend_dev_get_extra_bufts_t) ggml_backend_reg_get_proc_address(g_reg, "ggml_backend_dev_get_extra_bufts"))(dev);
    // at most one: CPU_REPACK, unless GGML_RS_CPU_REPACK=0 (test_rscpu_repack tests it)
    CHECK(extra != NULL && (extra[0] == NULL || (strcmp(ggml_backend_buft_name(extra[0]), "CPU_REPACK") == 0 && extra[1] == NULL)), "extra buffer types: none or CPU_REPACK");
    ggml_backend_t b = rs_backend();
    CHECK(strcmp(ggml_backend_name(b), "RSCPU") == 0, "backend name %s", ggml_backend_name(b));
    CHECK(ggml_backend_get_device(b) == dev, "backend's device");
    ggml_backend_free(b);
}

// y = softmax((a + b) * c) over rows of 8, on `backend`; returns the 4 x 8 result
static void add_mul_softmax(ggml_backend_t backend, float out[32], enum ggml_status * status) {
    struct ggml_context * ctx = new_ctx(true);
    struct ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 4);
    struct ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 4);
    struct ggml_tensor * c = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    struct ggml_tensor * y = ggml_soft_max(ctx, ggml_mul(ctx, ggml_add(ctx, a, b), c));
    ggml_set_name(y, "y");
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, y);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    CHECK(buf != NULL, "allocation");
    float av[32], bv[32], cv[8];
    for (int i = 0; i < 32; i++) {
        av[i] = (float) (i % 7) * 0.25f;
        bv[i] = (float) (i / 8) - 1.5f;
    }
    for (int i = 0; i < 8; i++) {
        cv[i] = 0.5f + 0.125f * (float) i;
    }
    ggml_backend_tensor_set(a, av, 0, sizeof(av));
    ggml_backend_tensor_set(b, bv, 0, sizeof(bv));
    ggml_backend_tensor_set(c, cv, 0, sizeof(cv));
    for (int i = 0; i < ggml_graph_n_nodes(g); i++) {
        struct ggml_tensor * n = ggml_graph_node(g, i);
        CHECK(ggml_backend_supports_op(backend, n), "%s supports %s", ggml_backend_name(backend), ggml_op_desc(n));
    }
    *status = ggml_backend_graph_compute(backend, g);
    ggml_backend_tensor_get(y, out, 0, 32 * sizeof(float));
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

static void expected_add_mul_softmax(float want[32]) {
    for (int r = 0; r < 4; r++) {
        double z[8], m = -1e30, s = 0;
        for (int i = 0; i < 8; i++) {
            int k = r * 8 + i;
            z[i] = ((double) (k % 7) * 0.25 + ((double) (k / 8) - 1.5)) * (0.5 + 0.125 * i);
            m = z[i] > m ? z[i] : m;
        }
        for (int i = 0; i < 8; i++) {
            s += exp(z[i] - m);
        }
        for (int i = 0; i < 8; i++) {
            want[r * 8 + i] = (float) (exp(z[i] - m) / s);
        }
    }
}

static void test_graph_computes_and_threads_change_nothing(void) {
    float want[32], got[32], got3[32];
    expected_add_mul_softmax(want);
    ggml_backend_t b = rs_backend();
    enum ggml_status st;
    add_mul_softmax(b, got, &st);
    CHECK(st == GGML_STATUS_SUCCESS, "status %d", (int) st);
    for (int i = 0; i < 32; i++) {
        CHECK_FLOAT(got[i], want[i]);
    }
    ggml_backend_set_n_threads_t set_n = (ggml_backend_set_n_threads_t) ggml_backend_reg_get_proc_address(g_reg, "ggml_backend_set_n_threads");
    set_n(b, 3);
    add_mul_softmax(b, got3, &st);
    CHECK(st == GGML_STATUS_SUCCESS, "status %d with 3 threads", (int) st);
    CHECK(memcmp(got, got3, sizeof(got)) == 0, "3 threads give other bits than 4");
    SYM(ggml_backend_cpu_set_n_threads)(b, 1);
    add_mul_softmax(b, got3, &st);
    CHECK(st == GGML_STATUS_SUCCESS && memcmp(got, got3, sizeof(got)) == 0, "1 thread");
    ggml_backend_free(b);
}

static int g_abort_calls = 0;
static bool abort_now(void * data) {
    g_abort_calls++;
    return data != NULL;
}

static void test_abort_callback_stops_the_graph(void) {
    ggml_backend_t b = rs_backend();
    ggml_backend_set_abort_callback_t set_abort = (ggml_backend_set_abort_callback_t) ggml_backend_reg_get_proc_address(g_reg, "ggml_backend_set_abort_callback");
    float got[32];
    enum ggml_status st;
    int yes = 1;
    set_abort(b, abort_now, &yes);
    g_abort_calls = 0;
    add_mul_softmax(b, got, &st);
    CHECK(st == GGML_STATUS_ABORTED, "status %d, expected ABORTED", (int) st);
    CHECK(g_abort_calls == 1, "asked %d times: the first node's answer stops it", g_abort_calls);
    set_abort(b, abort_now, NULL);
    g_abort_calls = 0;
    add_mul_softmax(b, got, &st);
    CHECK(st == GGML_STATUS_SUCCESS && g_abort_calls == 3, "status %d, asked %d times (once per node)", (int) st, g_abort_calls);
    ggml_backend_free(b);
}

static void custom_op(struct ggml_tensor * dst, const struct ggml_tensor * a, int ith, int nth, void * userdata) {
    (void) dst, (void) a, (void) ith, (void) nth, (void) userdata;
}

static void test_an_op_it_cannot_compute_fails_naming_the_node(void) {
    ggml_backend_t b = rs_backend();
    struct ggml_context * ctx = new_ctx(true);
    struct ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    // a custom op calls a C function of the application: no family of the Rust kernels claims it
    // (if one ever does, pick another op nobody computes)
    struct ggml_tensor * y = ggml_map_custom1(ctx, a, custom_op, 1, NULL);
    ggml_set_name(y, "the_custom_node");
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, y);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, b);
    CHECK(!ggml_backend_supports_op(b, y), "supports_op claims %s", ggml_op_desc(y));
    log_capture_begin();
    enum ggml_status st = ggml_backend_graph_compute(b, g);
    ggml_log_set(NULL, NULL);
    CHECK(st == GGML_STATUS_FAILED, "status %d, expected FAILED", (int) st);
    CHECK(strstr(g_log, "the_custom_node") != NULL, "the log does not name the node: %s", g_log);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    ggml_backend_free(b);
}

static void test_is_cpu_answers_for_its_own_backends(void) {
    ggml_backend_t ours = rs_backend();
    ggml_backend_t theirs = ggml_backend_cpu_init(); // upstream's, linked
    CHECK(SYM(ggml_backend_is_cpu)(ours), "ours is ours");
    CHECK(!SYM(ggml_backend_is_cpu)(theirs), "upstream's backend is not ours");
    CHECK(!SYM(ggml_backend_is_cpu)(NULL), "NULL");
    CHECK(!ggml_backend_is_cpu(ours), "upstream's is_cpu claims ours");
    CHECK(ggml_backend_is_cpu(theirs), "upstream's is_cpu of its own");
    ggml_backend_free(theirs);
    ggml_backend_free(ours);
}

// ggml_graph_compute with a plan, with and without a thread pool, and with a context; compared
// with upstream's libggml-cpu on the same graph
static void test_graph_compute_api_matches_upstream(void) {
    struct ggml_context * ctx = new_ctx(false);
    struct ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 16, 3);
    struct ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 16, 3);
    for (int i = 0; i < 48; i++) {
        ((float *) a->data)[i] = sinf((float) i);
        ((float *) b->data)[i] = cosf((float) i * 0.5f);
    }
    struct ggml_tensor * y = ggml_soft_max(ctx, ggml_add(ctx, a, b));
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, y);
    float want[48], got[48];
    CHECK(ggml_graph_compute_with_ctx(ctx, g, 2) == GGML_STATUS_SUCCESS, "upstream's compute");
    memcpy(want, y->data, sizeof(want));

    memset(y->data, 0, sizeof(got));
    CHECK(SYM(ggml_graph_compute_with_ctx)(ctx, g, 2) == GGML_STATUS_SUCCESS, "our compute_with_ctx");
    memcpy(got, y->data, sizeof(got));
    for (int i = 0; i < 48; i++) {
        CHECK_FLOAT(got[i], want[i]);
    }

    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(3);
    struct ggml_threadpool * tp = SYM(ggml_threadpool_new)(&tpp);
    CHECK(tp != NULL && SYM(ggml_threadpool_get_n_threads)(tp) == 3, "our thread pool");
    struct ggml_cplan plan = SYM(ggml_graph_plan)(g, -1, tp);
    CHECK(plan.n_threads == 3 && plan.threadpool == tp, "a plan takes the pool's threads: %d", plan.n_threads);
    memset(y->data, 0, sizeof(got));
    CHECK(SYM(ggml_graph_compute)(g, &plan) == GGML_STATUS_SUCCESS, "compute on the pool");
    CHECK(memcmp(got, y->data, sizeof(got)) == 0, "the pool gives the same bits");
    SYM(ggml_threadpool_pause)(tp);
    SYM(ggml_threadpool_resume)(tp);
    SYM(ggml_threadpool_free)(tp);

    plan = SYM(ggml_graph_plan)(g, 0, NULL);
    CHECK(plan.n_threads == GGML_DEFAULT_N_THREADS, "default threads %d", plan.n_threads);
    plan.abort_callback = abort_now;
    int yes = 1;
    plan.abort_callback_data = &yes;
    CHECK(SYM(ggml_graph_compute)(g, &plan) == GGML_STATUS_ABORTED, "the plan's abort callback");
    ggml_free(ctx);
}

static void test_element_api_matches_upstream(void) {
    struct ggml_context * ctx = new_ctx(false);
    enum ggml_type types[] = { GGML_TYPE_I8, GGML_TYPE_I16, GGML_TYPE_I32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_F32 };
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        struct ggml_tensor * t = ggml_new_tensor_3d(ctx, types[k], 5, 3, 2);
        struct ggml_tensor * u = ggml_new_tensor_3d(ctx, types[k], 5, 3, 2);
        // a transposed view: the 1d functions walk it in its own index order
        struct ggml_tensor * tv = ggml_transpose(ctx, t);
        struct ggml_tensor * uv = ggml_transpose(ctx, u);
        SYM(ggml_set_f32)(t, 2.75f);
        ggml_set_f32(u, 2.75f);
        CHECK(memcmp(t->data, u->data, ggml_nbytes(t)) == 0, "ggml_set_f32 on %s", ggml_type_name(types[k]));
        SYM(ggml_set_i32)(t, -3);
        ggml_set_i32(u, -3);
        CHECK(memcmp(t->data, u->data, ggml_nbytes(t)) == 0, "ggml_set_i32 on %s", ggml_type_name(types[k]));
        for (int i = 0; i < 30; i++) {
            SYM(ggml_set_f32_1d)(tv, i, (float) i * 1.5f - 7.25f);
            ggml_set_f32_1d(uv, i, (float) i * 1.5f - 7.25f);
        }
        CHECK(memcmp(t->data, u->data, ggml_nbytes(t)) == 0, "ggml_set_f32_1d on a view of %s", ggml_type_name(types[k]));
        for (int i = 0; i < 30; i++) {
            CHECK(SYM(ggml_get_f32_1d)(tv, i) == ggml_get_f32_1d(uv, i), "get_f32_1d %d of %s", i, ggml_type_name(types[k]));
            CHECK(SYM(ggml_get_i32_1d)(tv, i) == ggml_get_i32_1d(uv, i), "get_i32_1d %d of %s", i, ggml_type_name(types[k]));
            SYM(ggml_set_i32_1d)(t, i, i - 11);
            ggml_set_i32_1d(u, i, i - 11);
        }
        CHECK(memcmp(t->data, u->data, ggml_nbytes(t)) == 0, "ggml_set_i32_1d on %s", ggml_type_name(types[k]));
        SYM(ggml_set_f32_nd)(t, 4, 2, 1, 0, 100.5f);
        ggml_set_f32_nd(u, 4, 2, 1, 0, 100.5f);
        SYM(ggml_set_i32_nd)(t, 1, 0, 1, 0, 77);
        ggml_set_i32_nd(u, 1, 0, 1, 0, 77);
        CHECK(memcmp(t->data, u->data, ggml_nbytes(t)) == 0, "the nd setters on %s", ggml_type_name(types[k]));
        CHECK(SYM(ggml_get_f32_nd)(t, 4, 2, 1, 0) == ggml_get_f32_nd(u, 4, 2, 1, 0), "get_f32_nd");
        CHECK(SYM(ggml_get_i32_nd)(t, 1, 0, 1, 0) == ggml_get_i32_nd(u, 1, 0, 1, 0), "get_i32_nd");
    }
    struct ggml_tensor * i = SYM(ggml_new_i32)(ctx, 42);
    struct ggml_tensor * f = SYM(ggml_new_f32)(ctx, -0.5f);
    CHECK(i->type == GGML_TYPE_I32 && ggml_nelements(i) == 1 && *(int32_t *) i->data == 42, "ggml_new_i32");
    CHECK(f->type == GGML_TYPE_F32 && ggml_nelements(f) == 1 && *(float *) f->data == -0.5f, "ggml_new_f32");
    ggml_free(ctx);
}

static void test_conversions_and_type_traits_match_upstream(void) {
    enum { N = 256 };
    float x[N], yo[N], yu[N];
    for (int i = 0; i < N; i++) {
        x[i] = sinf((float) i * 0.37f) * (float) (1 + i % 9) * 3.1f;
    }
    ggml_fp16_t ho[N], hu[N];
    SYM(ggml_cpu_fp32_to_fp16)(x, ho, N);
    ggml_cpu_fp32_to_fp16(x, hu, N);
    CHECK(memcmp(ho, hu, sizeof(ho)) == 0, "fp32_to_fp16");
    SYM(ggml_cpu_fp16_to_fp32)(ho, yo, N);
    ggml_cpu_fp16_to_fp32(hu, yu, N);
    CHECK(memcmp(yo, yu, sizeof(yo)) == 0, "fp16_to_fp32");
    ggml_bf16_t bo[N], bu[N];
    SYM(ggml_cpu_fp32_to_bf16)(x, bo, N);
    ggml_cpu_fp32_to_bf16(x, bu, N);
    CHECK(memcmp(bo, bu, sizeof(bo)) == 0, "fp32_to_bf16");
    SYM(ggml_cpu_bf16_to_fp32)(bo, yo, N);
    ggml_cpu_bf16_to_fp32(bu, yu, N);
    CHECK(memcmp(yo, yu, sizeof(yo)) == 0, "bf16_to_fp32");
    int32_t io[N], iu[N];
    SYM(ggml_cpu_fp32_to_i32)(x, io, N);
    ggml_cpu_fp32_to_i32(x, iu, N);
    CHECK(memcmp(io, iu, sizeof(io)) == 0, "fp32_to_i32");

    // the weight types of the crate: the activation type of the dot product, from_float's bytes
    // (upstream's from_float of Q8_0 is its SIMD quantizer, whose bytes equal the reference), and
    // vec_dot of a row with itself
    enum ggml_type types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K };
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        const struct ggml_type_traits_cpu * o = SYM(ggml_get_type_traits_cpu)(types[k]);
        const struct ggml_type_traits_cpu * u = ggml_get_type_traits_cpu(types[k]);
        const char * tn = ggml_type_name(types[k]);
        CHECK(o->vec_dot_type == u->vec_dot_type, "%s: vec_dot_type %d, upstream %d", tn, o->vec_dot_type, u->vec_dot_type);
        CHECK(o->from_float != NULL && o->vec_dot != NULL && o->nrows == 1, "%s: traits", tn);
        uint8_t wo[2 * N * 4], wu[2 * N * 4], ao[2 * N * 4];
        size_t row = ggml_row_size(types[k], N);
        o->from_float(x, wo, N);
        u->from_float(x, wu, N);
        if (types[k] == GGML_TYPE_F32 || types[k] == GGML_TYPE_F16 || types[k] == GGML_TYPE_BF16 || types[k] == GGML_TYPE_Q8_0) {
            CHECK(memcmp(wo, wu, row) == 0, "%s: from_float bytes differ from upstream's", tn);
        }
        // activations of the dot product, quantized by upstream's from_float of vec_dot_type
        ggml_get_type_traits_cpu(u->vec_dot_type)->from_float(x, ao, N);
        float so = 0, su = 0;
        o->vec_dot(N, &so, 0, wu, 0, ao, 0, 1);
        u->vec_dot(N, &su, 0, wu, 0, ao, 0, 1);
        CHECK(fabsf(so - su) <= 1e-4f * (1 + fabsf(su)), "%s: vec_dot %.9g, upstream %.9g", tn, so, su);
    }
    CHECK(SYM(ggml_get_type_traits_cpu)(GGML_TYPE_IQ2_XXS)->from_float == NULL, "a type the crate has no format for");
}

static int cpuinfo_has(const char * flag) {
    FILE * f = fopen("/proc/cpuinfo", "r");
    if (!f) {
        return -1;
    }
    char line[8192];
    int found = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "flags", 5) == 0) {
            char pat[64];
            snprintf(pat, sizeof(pat), " %s ", flag);
            size_t n = strlen(line);
            if (n && line[n - 1] == '\n') {
                line[n - 1] = ' ';
            }
            found = strstr(line, pat) != NULL;
            break;
        }
    }
    fclose(f);
    return found;
}

// a feature beyond the kernel set capped by GGML_RS_CPU_SIMD reads as absent (upstream's build of
// that set on this machine)
static int capped_away(const char * flag) {
    const char * cap = getenv("GGML_RS_CPU_SIMD");
    if (cap == NULL) {
        return 0;
    }
    if (strcmp(cap, "scalar") == 0) {
        return strcmp(flag, "ssse3") != 0;
    }
    if (strcmp(cap, "avx2") == 0) {
        return strncmp(flag, "avx512", 6) == 0;
    }
    if (strcmp(cap, "avx512") == 0) {
        return strcmp(flag, "avx512_vnni") == 0;
    }
    return 0;
}

// ggml_backend_get_features ends with KERNELS = the active kernel set (the cap, or what the CPU runs)
static void test_features_name_the_kernel_set(void) {
    typedef struct ggml_backend_feature * (*get_features_t)(ggml_backend_reg_t);
    get_features_t get = (get_features_t) ggml_backend_reg_get_proc_address(g_reg, "ggml_backend_get_features");
    CHECK(get != NULL, "ggml_backend_get_features");
    const char * kernels = NULL;
    int avx2 = 0;
    for (struct ggml_backend_feature * f = get(g_reg); f->name != NULL; f++) {
        if (strcmp(f->name, "KERNELS") == 0) {
            kernels = f->value;
        }
        avx2 |= strcmp(f->name, "AVX2") == 0;
    }
    CHECK(kernels != NULL, "no KERNELS entry in the feature list");
    const char * cap = getenv("GGML_RS_CPU_SIMD");
    if (cap != NULL && strcmp(cap, "scalar") == 0) {
        CHECK(strcmp(kernels, "scalar") == 0 && !avx2, "capped at scalar: KERNELS = %s, AVX2 listed: %d", kernels, avx2);
    } else if (cap != NULL && strcmp(cap, "avx2") == 0 && SYM(ggml_cpu_has_avx2)()) {
        CHECK(strcmp(kernels, "avx2") == 0, "capped at avx2: KERNELS = %s", kernels);
    }
    CHECK(avx2 == SYM(ggml_cpu_has_avx2)(), "AVX2 listed %d, ggml_cpu_has_avx2 %d", avx2, SYM(ggml_cpu_has_avx2)());
}

static void test_cpu_has_reads_this_cpu(void) {
    struct {
        int (*fn)(void);
        const char * flag;
    } q[] = {
        { SYM(ggml_cpu_has_avx2), "avx2" },         { SYM(ggml_cpu_has_fma), "fma" },
        { SYM(ggml_cpu_has_f16c), "f16c" },         { SYM(ggml_cpu_has_avx512), "avx512f" },
        { SYM(ggml_cpu_has_avx512_vnni), "avx512_vnni" }, { SYM(ggml_cpu_has_avx512_vbmi), "avx512vbmi" },
        { SYM(ggml_cpu_has_avx512_bf16), "avx512_bf16" }, { SYM(ggml_cpu_has_ssse3), "ssse3" },
    };
    for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
        int want = capped_away(q[i].flag) ? 0 : cpuinfo_has(q[i].flag);
        if (want >= 0) {
            CHECK(q[i].fn() == want, "ggml_cpu_has for %s: %d, /proc/cpuinfo says %d", q[i].flag, q[i].fn(), want);
        }
    }
    CHECK(SYM(ggml_cpu_has_neon)() == 0 && SYM(ggml_cpu_get_sve_cnt)() == 0, "no ARM features on x86");
}

// the layouts the library was built with (ggml_rs_cpu_abi_describe) against the pinned headers,
// both ways: every entry it reports is known here, every entry here is reported
struct abi_entry {
    const char * type_name;
    const char * field;
    int64_t value;
    int64_t align;
};
struct expected {
    const char * type_name;
    const char * field;
    long long value, align;
    int seen;
};
#define S(T) { #T, NULL, (long long) sizeof(struct T), (long long) _Alignof(struct T), 0 }
#define F(T, f) { #T, #f, (long long) offsetof(struct T, f), 0, 0 }
#define K(name) { "const", #name, (long long) (name), 0, 0 }

static void test_layouts_match_the_pinned_headers(void) {
    struct expected table[] = {
        S(ggml_cplan), F(ggml_cplan, work_size), F(ggml_cplan, work_data), F(ggml_cplan, n_threads), F(ggml_cplan, threadpool),
        F(ggml_cplan, abort_callback), F(ggml_cplan, abort_callback_data), F(ggml_cplan, use_ref),
        S(ggml_type_traits_cpu), F(ggml_type_traits_cpu, from_float), F(ggml_type_traits_cpu, vec_dot), F(ggml_type_traits_cpu, vec_dot_type),
        F(ggml_type_traits_cpu, nrows),
        S(ggml_threadpool_params), F(ggml_threadpool_params, cpumask), F(ggml_threadpool_params, n_threads), F(ggml_threadpool_params, prio),
        F(ggml_threadpool_params, poll), F(ggml_threadpool_params, strict_cpu), F(ggml_threadpool_params, paused),
        S(ggml_backend_dev_caps), F(ggml_backend_dev_caps, async), F(ggml_backend_dev_caps, host_buffer),
        F(ggml_backend_dev_caps, buffer_from_host_ptr), F(ggml_backend_dev_caps, events), F(ggml_backend_dev_caps, mmap_support),
        S(ggml_backend_dev_props), F(ggml_backend_dev_props, name), F(ggml_backend_dev_props, description),
        F(ggml_backend_dev_props, memory_free), F(ggml_backend_dev_props, memory_total), F(ggml_backend_dev_props, type),
        F(ggml_backend_dev_props, device_id), F(ggml_backend_dev_props, caps),
        S(ggml_backend_feature), F(ggml_backend_feature, name), F(ggml_backend_feature, value),
        K(GGML_MAX_N_THREADS), K(GGML_DEFAULT_N_THREADS), K(GGML_BACKEND_API_VERSION), K(GGML_TENSOR_FLAG_COMPUTE),
        K(GGML_STATUS_FAILED), K(GGML_STATUS_ABORTED), K(GGML_STATUS_ALLOC_FAILED), K(GGML_MAX_OP_PARAMS), K(GGML_MAX_SRC),
    };
    const size_t n_expected = sizeof(table) / sizeof(table[0]);
    size_t n = 0;
    const struct abi_entry * e = ((const struct abi_entry * (*) (size_t *) ) sym("ggml_rs_cpu_abi_describe"))(&n);
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        struct expected * x = NULL;
        for (size_t k = 0; k < n_expected; k++) {
            bool same_field = (e[i].field == NULL && table[k].field == NULL) ||
                              (e[i].field != NULL && table[k].field != NULL && strcmp(e[i].field, table[k].field) == 0);
            if (strcmp(e[i].type_name, table[k].type_name) == 0 && same_field) {
                x = &table[k];
            }
        }
        if (x == NULL) {
            fprintf(stderr, "the library reports %s.%s, which this test does not know\n", e[i].type_name, e[i].field ? e[i].field : "(size)");
            failures++;
            continue;
        }
        x->seen = 1;
        if (x->value != e[i].value || (x->field == NULL && x->align != e[i].align)) {
            fprintf(stderr, "%s.%s: upstream %lld (align %lld), ours %lld (align %lld)\n", x->type_name, x->field ? x->field : "(size)", x->value,
                    x->align, (long long) e[i].value, (long long) e[i].align);
            failures++;
        }
    }
    for (size_t k = 0; k < n_expected; k++) {
        if (!table[k].seen) {
            fprintf(stderr, "the library does not report %s.%s\n", table[k].type_name, table[k].field ? table[k].field : "(size)");
            failures++;
        }
    }
    CHECK(failures == 0, "%d layout differences", failures);
}

// ggml_backend_cpu_set_use_ref (and ggml_cplan.use_ref) run the scalar reference of every row
// kernel: MUL_MAT of F32 and F16 weights then equals, bit for bit, the reference computed here
// (products exact in double, summed in order, rounded once to float; F32 activations of F16
// weights rounded to F16 first, as the kernels' vec_dot type). Without it, on a CPU with AVX2 the
// SIMD kernels (f32 lanes) round differently somewhere in 2 x 64 x 20 sums of 1000 terms. 20
// activation rows: prompt-sized, so without use_ref the tiled GEMMs (AVX-512) would take them.
enum { REF_K = 1000, REF_ROWS = 64, REF_COLS = 20 };

static void ref_matmul(enum ggml_type wt, const float * w, const float * x, float * out) {
    for (int j = 0; j < REF_COLS; j++) {
        for (int i = 0; i < REF_ROWS; i++) {
            double s = 0;
            for (int k = 0; k < REF_K; k++) {
                float a = w[i * REF_K + k], b = x[j * REF_K + k];
                if (wt == GGML_TYPE_F16) {
                    a = ggml_fp16_to_fp32(ggml_fp32_to_fp16(a));
                    b = ggml_fp16_to_fp32(ggml_fp32_to_fp16(b));
                }
                s += (double) a * (double) b;
            }
            out[j * REF_ROWS + i] = (float) s;
        }
    }
}

// MUL_MAT of `wt` weights on `backend` (or, backend NULL, through our ggml_graph_compute with a
// plan whose use_ref is `plan_use_ref`)
static void use_ref_matmul(ggml_backend_t backend, bool plan_use_ref, enum ggml_type wt, const float * w, const float * x, float * out) {
    struct ggml_context * ctx = new_ctx(backend != NULL);
    struct ggml_tensor * a = ggml_new_tensor_2d(ctx, wt, REF_K, REF_ROWS);
    struct ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, REF_K, REF_COLS);
    struct ggml_tensor * y = ggml_mul_mat(ctx, a, b);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, y);
    static ggml_fp16_t w16[REF_ROWS * REF_K];
    const void * wdata = w;
    if (wt == GGML_TYPE_F16) {
        ggml_fp32_to_fp16_row(w, w16, REF_ROWS * REF_K);
        wdata = w16;
    }
    if (backend != NULL) {
        ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
        CHECK(buf != NULL, "allocation");
        ggml_backend_tensor_set(a, wdata, 0, ggml_nbytes(a));
        ggml_backend_tensor_set(b, x, 0, ggml_nbytes(b));
        CHECK(ggml_backend_graph_compute(backend, g) == GGML_STATUS_SUCCESS, "MUL_MAT %s on RSCPU", ggml_type_name(wt));
        ggml_backend_tensor_get(y, out, 0, ggml_nbytes(y));
        ggml_backend_buffer_free(buf);
    } else {
        memcpy(a->data, wdata, ggml_nbytes(a));
        memcpy(b->data, x, ggml_nbytes(b));
        struct ggml_cplan plan = SYM(ggml_graph_plan)(g, 2, NULL);
        CHECK(!plan.use_ref, "a new plan has use_ref off");
        plan.use_ref = plan_use_ref;
        CHECK(SYM(ggml_graph_compute)(g, &plan) == GGML_STATUS_SUCCESS, "ggml_graph_compute MUL_MAT %s", ggml_type_name(wt));
        memcpy(out, y->data, ggml_nbytes(y));
    }
    ggml_free(ctx);
}

static void test_use_ref_runs_the_scalar_references(void) {
    static float w[REF_ROWS * REF_K], x[REF_COLS * REF_K];
    for (int i = 0; i < REF_ROWS * REF_K; i++) {
        w[i] = sinf((float) i * 0.37f) * (1.0f + (float) (i % 13));
    }
    for (int i = 0; i < REF_COLS * REF_K; i++) {
        x[i] = cosf((float) i * 0.11f) / (1.0f + (float) (i % 7));
    }
    ggml_backend_t b = rs_backend();
    SYM(ggml_backend_cpu_set_n_threads)(b, 2);
    const enum ggml_type types[] = { GGML_TYPE_F32, GGML_TYPE_F16 };
    int simd_differs = 0;
    for (int t = 0; t < 2; t++) {
        float want[REF_ROWS * REF_COLS], got[REF_ROWS * REF_COLS];
        ref_matmul(types[t], w, x, want);
        SYM(ggml_backend_cpu_set_use_ref)(b, true);
        use_ref_matmul(b, false, types[t], w, x, got);
        CHECK(memcmp(got, want, sizeof(got)) == 0, "use_ref: MUL_MAT %s is not the scalar reference (first value %.9g, want %.9g)",
              ggml_type_name(types[t]), got[0], want[0]);
        use_ref_matmul(NULL, true, types[t], w, x, got);
        CHECK(memcmp(got, want, sizeof(got)) == 0, "cplan.use_ref: MUL_MAT %s is not the scalar reference", ggml_type_name(types[t]));
        SYM(ggml_backend_cpu_set_use_ref)(b, false);
        use_ref_matmul(b, false, types[t], w, x, got);
        simd_differs += memcmp(got, want, sizeof(got)) != 0;
        for (int i = 0; i < REF_ROWS * REF_COLS; i++) {
            CHECK(fabsf(got[i] - want[i]) <= 1e-4f * (1.0f + fabsf(want[i])), "SIMD MUL_MAT %s [%d]: %g, reference %g", ggml_type_name(types[t]), i, got[i], want[i]);
        }
    }
    // the switch switches something: the SIMD kernels (AVX2 and up) sum in f32 lanes
    if (SYM(ggml_cpu_has_avx2)()) {
        CHECK(simd_differs > 0, "without use_ref the results are the scalar reference's too: the flag cannot be seen");
    }
    ggml_backend_free(b);
}

int main(int argc, char ** argv) {
    g_lib_path = argc > 1 ? argv[1] : getenv("GGML_RS_CPU_LIB");
    CHECK(g_lib_path != NULL, "usage: %s <libggml_rs_cpu.so> [test] (or GGML_RS_CPU_LIB)", argv[0]);
    g_only = argc > 2 ? argv[2] : NULL;
    ggml_backend_load_all(); // upstream's backends first, as programs do
    g_reg = ggml_backend_load(g_lib_path);
    CHECK(g_reg != NULL, "ggml_backend_load(%s)", g_lib_path);
    g_lib = dlopen(g_lib_path, RTLD_NOW | RTLD_LOCAL);
    CHECK(g_lib != NULL, "dlopen: %s", dlerror());
    RUN(test_layouts_match_the_pinned_headers);
    RUN(test_registry_names_and_procs);
    RUN(test_graph_computes_and_threads_change_nothing);
    RUN(test_abort_callback_stops_the_graph);
    RUN(test_an_op_it_cannot_compute_fails_naming_the_node);
    RUN(test_is_cpu_answers_for_its_own_backends);
    RUN(test_graph_compute_api_matches_upstream);
    RUN(test_element_api_matches_upstream);
    RUN(test_conversions_and_type_traits_match_upstream);
    RUN(test_cpu_has_reads_this_cpu);
    RUN(test_features_name_the_kernel_set);
    RUN(test_use_ref_runs_the_scalar_references);
    printf("%d tests passed\n", g_tests_run);
    return 0;
}
