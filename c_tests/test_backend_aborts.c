// Bad input to the backend functions aborts through ggml_abort with a message that names the
// tensor and says what is wrong (upstream aborts on the same conditions, with an assert text).
#include "check.h"
#include "fake_backend.h"

#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <stdint.h>

static struct ggml_context * new_ctx(void) {
    struct ggml_init_params p = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), NULL, true };
    return ggml_init(p);
}

struct two_buffers {
    struct ggml_context * ctx;
    ggml_backend_buffer_t host, dev;
    struct ggml_tensor * h, * d, * d2;
};

// h: 6 floats in a CPU buffer, d and d2: 6 floats in the fake (non-host) buffer
static struct two_buffers make_two(ggml_backend_t fake) {
    struct two_buffers t;
    t.ctx = new_ctx();
    t.h = ggml_new_tensor_1d(t.ctx, GGML_TYPE_F32, 6);
    t.d = ggml_new_tensor_1d(t.ctx, GGML_TYPE_F32, 6);
    t.d2 = ggml_new_tensor_1d(t.ctx, GGML_TYPE_F32, 6);
    ggml_set_name(t.h, "h");
    ggml_set_name(t.d, "d");
    ggml_set_name(t.d2, "d2");
    t.host = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), 1024);
    t.dev = ggml_backend_buft_alloc_buffer(fake_backend_buft(fake), 1024);
    struct ggml_tallocr th = ggml_tallocr_new(t.host);
    struct ggml_tallocr td = ggml_tallocr_new(t.dev);
    CHECK(ggml_tallocr_alloc(&th, t.h) == GGML_STATUS_SUCCESS, "tallocr");
    CHECK(ggml_tallocr_alloc(&td, t.d) == GGML_STATUS_SUCCESS, "tallocr");
    CHECK(ggml_tallocr_alloc(&td, t.d2) == GGML_STATUS_SUCCESS, "tallocr");
    CHECK(t.d2->data == (char *) t.d->data + 32, "tallocr pads to the alignment");
    return t;
}

static void free_two(struct two_buffers * t) {
    ggml_backend_buffer_free(t->host);
    ggml_backend_buffer_free(t->dev);
    ggml_free(t->ctx);
}

static void misaligned_from_ptr(void) {
    static char mem[128] __attribute__((aligned(32)));
    ggml_backend_cpu_buffer_from_ptr(mem + 1, 64);
}

// the abort paths: the message must name the tensor
static ggml_backend_t g_fake;
static void write_out_of_bounds(void) {
    struct two_buffers t = make_two(g_fake);
    float x[8] = { 0 };
    ggml_backend_tensor_set(t.d, x, 4, 6 * sizeof(float));
}
static void read_unallocated(void) {
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_set_name(a, "never_allocated");
    float x[4];
    ggml_backend_tensor_get(a, x, 0, sizeof(x));
}
static void alloc_outside_buffer(void) {
    struct two_buffers t = make_two(g_fake);
    struct ggml_tensor * a = ggml_new_tensor_1d(t.ctx, GGML_TYPE_F32, 1000);
    ggml_set_name(a, "too_big");
    ggml_backend_tensor_alloc(t.dev, a, ggml_backend_buffer_get_base(t.dev));
}
static void copy_different_layouts(void) {
    struct two_buffers t = make_two(g_fake);
    struct ggml_tensor * a = ggml_new_tensor_1d(t.ctx, GGML_TYPE_F32, 5);
    ggml_set_name(a, "five");
    ggml_backend_tensor_copy(t.d, a);
}

static void test_bad_input_aborts_with_a_named_message(void) {
    g_fake = fake_backend_new(NULL);
    expect_abort("write past the end", write_out_of_bounds, "tensor 'd' write out of bounds");
    expect_abort("read unallocated", read_unallocated, "'never_allocated' has no buffer");
    expect_abort("alloc past the end", alloc_outside_buffer, "'too_big'");
    expect_abort("copy between layouts", copy_different_layouts, "layouts differ");
    expect_abort("misaligned from_ptr", misaligned_from_ptr, "must be aligned");
    ggml_backend_free(g_fake);
}

// the constructors' arguments, case by case: the message says which argument is wrong
static ggml_backend_t g_cpu;
static void sched_backends_null(void) { ggml_backend_sched_new(NULL, NULL, 1, 64, false, true); }
static void sched_no_backends(void) { ggml_backend_sched_new(&g_cpu, NULL, 0, 64, false, true); }
static void sched_too_many_backends(void) {
    ggml_backend_t many[17];
    for (int i = 0; i < 17; i++) {
        many[i] = g_cpu;
    }
    ggml_backend_sched_new(many, NULL, 17, 64, false, true);
}
static void sched_backend_null(void) {
    ggml_backend_t b[2] = { NULL, g_cpu };
    ggml_backend_sched_new(b, NULL, 2, 64, false, true);
}
static void sched_last_not_cpu(void) {
    ggml_backend_t b[2] = { g_cpu, g_fake };
    ggml_backend_sched_new(b, NULL, 2, 64, false, true);
}
static void sched_buft_null(void) {
    ggml_backend_t b[2] = { g_fake, g_cpu };
    ggml_backend_buffer_type_t t[2] = { fake_backend_buft(g_fake), NULL };
    ggml_backend_sched_new(b, t, 2, 64, false, true);
}
static void sched_buft_unusable(void) {
    ggml_backend_t b[2] = { g_fake, g_cpu };
    ggml_backend_buffer_type_t t[2] = { fake_backend_buft(g_fake), fake_backend_buft(g_fake) };
    ggml_backend_sched_new(b, t, 2, 64, false, true);
}
static void gallocr_bufts_null(void) { ggml_gallocr_new_n(NULL, 1); }
static void gallocr_no_bufts(void) {
    ggml_backend_buffer_type_t t = ggml_backend_cpu_buffer_type();
    ggml_gallocr_new_n(&t, 0);
}
static void gallocr_buft_null(void) {
    ggml_backend_buffer_type_t t[2] = { ggml_backend_cpu_buffer_type(), NULL };
    ggml_gallocr_new_n(t, 2);
}

static void test_constructor_misuse_aborts_naming_the_argument(void) {
    g_fake = fake_backend_new(NULL);
    g_cpu = ggml_backend_cpu_init();
    expect_abort("sched_new(NULL, NULL, 1)", sched_backends_null, "ggml_backend_sched_new: argument `backends` is NULL");
    expect_abort("sched_new with 0 backends", sched_no_backends, "n_backends is 0; need at least one backend");
    expect_abort("sched_new with 17 backends", sched_too_many_backends, "n_backends is 17; at most 16 backends");
    expect_abort("sched_new with backends[0] NULL", sched_backend_null, "ggml_backend_sched_new: backends[0] is NULL");
    expect_abort("sched_new with a device last", sched_last_not_cpu, "the last backend, backends[1] ('FAKE'), must be a CPU backend");
    expect_abort("sched_new with bufts[1] NULL", sched_buft_null, "ggml_backend_sched_new: bufts[1] is NULL");
    expect_abort("sched_new with an unusable buffer type", sched_buft_unusable, "backends[1] ('CPU') cannot use buffer type bufts[1] ('FAKE')");
    expect_abort("gallocr_new_n(NULL, 1)", gallocr_bufts_null, "ggml_gallocr_new_n: argument `bufts` is NULL");
    expect_abort("gallocr_new_n with 0", gallocr_no_bufts, "ggml_gallocr_new_n: n_bufs is 0");
    expect_abort("gallocr_new_n with bufts[1] NULL", gallocr_buft_null, "ggml_gallocr_new_n: bufts[1] is NULL");
    ggml_backend_free(g_cpu);
    ggml_backend_free(g_fake);
}

int main(int argc, char ** argv) {
    g_only = argc > 1 ? argv[1] : NULL;
    RUN(test_bad_input_aborts_with_a_named_message);
    RUN(test_constructor_misuse_aborts_naming_the_argument);
    printf("%d tests passed\n", g_tests_run);
    return 0;
}
