// ggml 0.26.0's list allocation (backend interface API 3): ggml_backend_buft_alloc_buffer_n and
// ggml_backend_buft_get_alloc_size_n, and the context functions that go through them. Holds for
// upstream too (CTest runs it on the stock and on our build of that tree). Built against older
// headers (API 2) it has nothing to check and says so (CTest: skipped).
#include "check.h"

#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <stdint.h>

#if GGML_BACKEND_API_VERSION >= 3

// a CPU buffer type with a small largest buffer, so that lists are split over several buffers
static size_t g_max_size = 0;
static size_t small_max_size(ggml_backend_buffer_type_t buft) {
    (void) buft;
    return g_max_size;
}
static ggml_backend_buffer_type_t small_buft(size_t max_size) {
    static struct ggml_backend_buffer_type buft;
    buft = *ggml_backend_cpu_buffer_type();
    buft.iface.get_max_size = small_max_size;
    g_max_size = max_size;
    return &buft;
}

static struct ggml_context * new_ctx(void) {
    struct ggml_init_params p = { 64 * ggml_tensor_overhead(), NULL, true };
    return ggml_init(p);
}

static size_t total_size(ggml_backend_buffer_t buf) {
    return buf ? ggml_backend_buffer_get_size(buf) : 0;
}

static void test_list_in_one_buffer(void) {
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * t[3] = {
        ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10), // 40 bytes, padded to 64
        ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16), // 64
        ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1),  // 4, padded to 32
    };
    ggml_backend_buffer_type_t buft = ggml_backend_cpu_buffer_type();
    size_t size = ggml_backend_buft_get_alloc_size_n(buft, t, 3);
    CHECK(size == 64 + 64 + 32, "get_alloc_size_n = %zu", size);
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer_n(buft, t, 3);
    CHECK(buf != NULL, "alloc_buffer_n returned NULL");
    CHECK(total_size(buf) == size, "buffer of %zu bytes, planned %zu", total_size(buf), size);
    const char * base = (const char *) ggml_backend_buffer_get_base(buf);
    for (int i = 0; i < 3; i++) {
        CHECK(t[i]->buffer == buf, "tensor %d not in the buffer", i);
        CHECK((size_t) ((const char *) t[i]->data - base) % 32 == 0, "tensor %d misaligned", i);
    }
    CHECK((const char *) t[1]->data - (const char *) t[0]->data == 64, "placed in list order");
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

// the list is placed in order, a new buffer whenever the next tensor would exceed the largest
// size: 64 | 64 | 64 + 32 with a largest size of 100
static void test_list_split_over_buffers(void) {
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * t[4] = {
        ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16),
        ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16),
        ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16),
        ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8),
    };
    ggml_backend_buffer_type_t buft = small_buft(100);
    CHECK(ggml_backend_buft_get_alloc_size_n(buft, t, 4) == 64 * 3 + 32, "size %zu", ggml_backend_buft_get_alloc_size_n(buft, t, 4));
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer_n(buft, t, 4);
    CHECK(buf != NULL, "alloc_buffer_n returned NULL");
    CHECK(total_size(buf) == 64 * 3 + 32, "multi-buffer of %zu bytes", total_size(buf));
    CHECK(t[0]->buffer != t[1]->buffer && t[1]->buffer != t[2]->buffer, "one buffer each for the first two");
    CHECK(t[2]->buffer == t[3]->buffer, "the last two share one");
    CHECK(ggml_backend_buffer_get_size(t[0]->buffer) == 64 && ggml_backend_buffer_get_size(t[2]->buffer) == 96, "part sizes");
    CHECK(t[0]->buffer != buf, "a multi-buffer over the parts");
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

// tensors with data and views of them take no space; a view of an allocated tensor gets its
// buffer; an empty list is nothing to allocate
static void test_allocated_tensors_and_views(void) {
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
    ggml_backend_buffer_t pre = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_cpu_buffer_type());
    CHECK(pre != NULL && a->buffer == pre, "context allocation");
    struct ggml_tensor * v = ggml_view_1d(ctx, a, 4, 16);
    struct ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    struct ggml_tensor * list[3] = { a, v, b };
    ggml_backend_buffer_type_t buft = ggml_backend_cpu_buffer_type();
    CHECK(ggml_backend_buft_get_alloc_size_n(buft, list, 3) == 32, "only b needs memory: %zu", ggml_backend_buft_get_alloc_size_n(buft, list, 3));
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer_n(buft, list, 3);
    CHECK(buf != NULL && b->buffer == buf, "b placed");
    CHECK(a->buffer == pre, "a stays where it was");
    CHECK(v->buffer == pre && v->data == (char *) a->data + 16, "the view is initialised in its source's buffer");
    CHECK(ggml_backend_buft_get_alloc_size_n(buft, list, 0) == 0, "empty list: no bytes");
    CHECK(ggml_backend_buft_alloc_buffer_n(buft, list, 0) == NULL, "empty list: no buffer");
    ggml_backend_buffer_free(buf);
    ggml_backend_buffer_free(pre);
    ggml_free(ctx);
}

// a buffer type with its own list entries gets the context's tensors through them
static int g_alloc_n_calls = 0, g_size_n_calls = 0, g_last_n = -1;
static ggml_backend_buffer_t own_alloc_buffer_n(ggml_backend_buffer_type_t buft, struct ggml_tensor ** tensors, int n) {
    (void) tensors;
    g_alloc_n_calls++;
    g_last_n = n;
    return ggml_backend_buft_alloc_buffer(buft, 4096);
}
static size_t own_get_alloc_size_n(ggml_backend_buffer_type_t buft, struct ggml_tensor ** tensors, int n) {
    (void) buft;
    (void) tensors;
    g_size_n_calls++;
    g_last_n = n;
    return 12345;
}

static void test_context_goes_through_the_buffer_types_entries(void) {
    static struct ggml_backend_buffer_type buft;
    buft = *ggml_backend_cpu_buffer_type();
    buft.iface.alloc_buffer_n = own_alloc_buffer_n;
    buft.iface.get_alloc_size_n = own_get_alloc_size_n;
    struct ggml_context * ctx = new_ctx();
    ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
    ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
    CHECK(ggml_backend_alloc_ctx_tensors_from_buft_size(ctx, &buft) == 12345, "the size is the buffer type's");
    CHECK(g_size_n_calls == 1 && g_last_n == 2, "get_alloc_size_n called %d times with %d tensors", g_size_n_calls, g_last_n);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, &buft);
    CHECK(buf != NULL && total_size(buf) == 4096, "the buffer is the buffer type's");
    CHECK(g_alloc_n_calls == 1 && g_last_n == 2, "alloc_buffer_n called %d times with %d tensors", g_alloc_n_calls, g_last_n);
    // the direct calls use them too
    struct ggml_tensor * t = ggml_get_first_tensor(ctx);
    CHECK(ggml_backend_buft_get_alloc_size_n(&buft, &t, 1) == 12345 && g_last_n == 1, "direct get_alloc_size_n");
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

// the context functions agree with the list functions on the context's tensors
static void test_context_size_is_the_list_size(void) {
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * t[3];
    for (int i = 0; i < 3; i++) {
        t[i] = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 7 + i, 3);
    }
    ggml_backend_buffer_type_t buft = small_buft(64);
    size_t want = ggml_backend_buft_get_alloc_size_n(buft, t, 3);
    CHECK(ggml_backend_alloc_ctx_tensors_from_buft_size(ctx, buft) == want, "context %zu, list %zu",
          ggml_backend_alloc_ctx_tensors_from_buft_size(ctx, buft), want);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
    CHECK(total_size(buf) == want, "allocated %zu, planned %zu", total_size(buf), want);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    struct ggml_context * empty = new_ctx();
    CHECK(ggml_backend_alloc_ctx_tensors_from_buft_size(empty, buft) == 0, "empty context: 0 bytes");
    CHECK(ggml_backend_alloc_ctx_tensors_from_buft(empty, buft) == NULL, "empty context: no buffer");
    ggml_free(empty);
}

int main(int argc, char ** argv) {
    g_only = argc > 1 ? argv[1] : NULL;
    RUN(test_list_in_one_buffer);
    RUN(test_list_split_over_buffers);
    RUN(test_allocated_tensors_and_views);
    RUN(test_context_goes_through_the_buffer_types_entries);
    RUN(test_context_size_is_the_list_size);
    printf("%d tests passed\n", g_tests_run);
    return 0;
}

#else

int main(void) {
    printf("backend interface API %d: no list allocation to test (ggml 0.26.0 has it)\n", GGML_BACKEND_API_VERSION);
    return 77;
}

#endif
