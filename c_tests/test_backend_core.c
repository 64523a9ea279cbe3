// ggml-backend without the scheduler, as C callers and backends see it: buffer types and
// buffers, multi-buffers, tensor I/O across host and non-host buffers (plain, 2-d, async),
// copies, placement, events, devices, graph copy and compare_graph_backend.
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

static void test_cpu_buffer_type_is_a_stable_singleton(void) {
    ggml_backend_buffer_type_t a = ggml_backend_cpu_buffer_type();
    ggml_backend_buffer_type_t b = ggml_backend_cpu_buffer_type();
    CHECK(a == b, "two different CPU buffer types");
    CHECK(strcmp(ggml_backend_buft_name(a), "CPU") == 0, "name %s", ggml_backend_buft_name(a));
    CHECK(ggml_backend_buft_is_host(a), "CPU buffers are host memory");
    CHECK(ggml_backend_buft_get_alignment(a) == 32, "alignment %zu", ggml_backend_buft_get_alignment(a));
    CHECK(ggml_backend_buft_get_max_size(a) == SIZE_MAX, "no max size");
    CHECK(ggml_backend_buft_get_device(a) == NULL, "upstream leaves the device of the CPU buffer type unset");
}

static void test_buffer_life_cycle_and_usage(void) {
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), 1000);
    CHECK(buf != NULL, "allocation failed");
    CHECK(ggml_backend_buffer_get_size(buf) == 1000, "size %zu", ggml_backend_buffer_get_size(buf));
    CHECK(((uintptr_t) ggml_backend_buffer_get_base(buf)) % 32 == 0, "base not aligned");
    CHECK(strcmp(ggml_backend_buffer_name(buf), "CPU") == 0, "buffer name");
    CHECK(ggml_backend_buffer_is_host(buf), "host");
    CHECK(ggml_backend_buffer_get_usage(buf) == GGML_BACKEND_BUFFER_USAGE_ANY, "fresh buffers are ANY");
    ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    CHECK(ggml_backend_buffer_get_usage(buf) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS, "usage not kept");
    ggml_backend_buffer_clear(buf, 0x5A);
    const uint8_t * base = (const uint8_t *) ggml_backend_buffer_get_base(buf);
    CHECK(base[0] == 0x5A && base[999] == 0x5A, "clear did not fill the buffer");
    CHECK(ggml_backend_buffer_get_type(buf) == ggml_backend_cpu_buffer_type(), "type");
    CHECK(!ggml_backend_buffer_is_multi_buffer(buf), "not a multi-buffer");
    ggml_backend_buffer_reset(buf); // optional entry absent: nothing happens
    ggml_backend_buffer_free(buf);
    ggml_backend_buffer_free(NULL);

    // zero-sized allocations never reach the buffer type
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_buffer_t empty = ggml_backend_buft_alloc_buffer(fake_backend_buft(fake), 0);
    CHECK(empty != NULL && ggml_backend_buffer_get_size(empty) == 0, "zero-sized buffer");
    CHECK(ggml_backend_buffer_get_base(empty) == NULL, "a zero-sized buffer has no base");
    CHECK(fake_backend_stats(fake)->buffers_alloc == 0, "the fake buffer type was called for 0 bytes");
    ggml_backend_buffer_clear(empty, 1);
    ggml_backend_buffer_free(empty);
    ggml_backend_free(fake);
}

static void test_multi_buffer(void) {
    ggml_backend_t fake = fake_backend_new(NULL);
    struct fake_stats * st = fake_backend_stats(fake);
    ggml_backend_buffer_t parts[2] = {
        ggml_backend_buft_alloc_buffer(fake_backend_buft(fake), 64),
        ggml_backend_buft_alloc_buffer(fake_backend_buft(fake), 32),
    };
    ggml_backend_buffer_t multi = ggml_backend_multi_buffer_alloc_buffer(parts, 2);
    CHECK(ggml_backend_buffer_is_multi_buffer(multi), "not recognised");
    CHECK(!ggml_backend_buffer_is_multi_buffer(parts[0]), "a part is not a multi-buffer");
    CHECK(ggml_backend_buffer_get_size(multi) == 96, "size is the sum: %zu", ggml_backend_buffer_get_size(multi));
    CHECK(ggml_backend_buffer_get_type(multi) == fake_backend_buft(fake), "type of the first part");
    ggml_backend_buffer_set_usage(multi, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    CHECK(ggml_backend_buffer_get_usage(parts[0]) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS &&
          ggml_backend_buffer_get_usage(parts[1]) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS, "usage not propagated");
    ggml_backend_buffer_free(multi);
    CHECK(st->buffers_free == 2, "freeing the multi-buffer freed %d parts", st->buffers_free);
    ggml_backend_free(fake);
}

static void test_cpu_buffer_from_ptr(void) {
    static float mem[64] __attribute__((aligned(32)));
    ggml_backend_buffer_t buf = ggml_backend_cpu_buffer_from_ptr(mem, sizeof(mem));
    CHECK(strcmp(ggml_backend_buffer_name(buf), "CPU_Mapped") == 0, "name %s", ggml_backend_buffer_name(buf));
    CHECK(ggml_backend_buffer_get_base(buf) == mem, "base is the caller's memory");
    CHECK(buf->context == mem, "context is the raw pointer (ggml-cpu relies on it)");
    ggml_backend_buffer_free(buf);
    mem[63] = 1.0f; // still ours
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

static void test_tensor_io_host_and_device(void) {
    ggml_backend_t fake = fake_backend_new(NULL);
    struct fake_stats * st = fake_backend_stats(fake);
    struct two_buffers t = make_two(fake);
    CHECK(st->init_tensor_calls == 2, "init_tensor called %d times", st->init_tensor_calls);

    const float in[6] = { 1, 2, 3, 4, 5, 6 };
    float out[6] = { 0 };
    ggml_backend_tensor_set(t.d, in, 0, sizeof(in));
    ggml_backend_tensor_get(t.d, out, 0, sizeof(out));
    CHECK(memcmp(in, out, sizeof(in)) == 0, "device round trip");
    CHECK(st->set_calls == 1 && st->get_calls == 1, "set/get went through the buffer (%d/%d)", st->set_calls, st->get_calls);

    // offsets and sizes are bytes within the tensor
    const float two[2] = { 20, 30 };
    ggml_backend_tensor_set(t.d, two, 2 * sizeof(float), sizeof(two));
    ggml_backend_tensor_get(t.d, out, 0, sizeof(out));
    CHECK(out[1] == 2 && out[2] == 20 && out[3] == 30 && out[4] == 5, "partial set");

    ggml_backend_tensor_memset(t.d, 0, 4 * sizeof(float), 2 * sizeof(float));
    ggml_backend_tensor_get(t.d, out, 0, sizeof(out));
    CHECK(out[3] == 30 && out[4] == 0 && out[5] == 0, "memset");

    // copies in every direction
    ggml_backend_tensor_copy(t.d, t.h);               // device -> host: get
    CHECK(f32(t.h)[2] == 20, "device to host copy");
    f32(t.h)[0] = 7;
    ggml_backend_tensor_copy(t.h, t.d2);              // host -> device: set
    ggml_backend_tensor_get(t.d2, out, 0, sizeof(out));
    CHECK(out[0] == 7 && out[2] == 20, "host to device copy");
    int before = st->cpy_calls;
    ggml_backend_tensor_copy(t.d, t.d2);              // device -> device: the buffer's cpy_tensor
    CHECK(st->cpy_calls == before + 1, "device to device copy did not use cpy_tensor");
    ggml_backend_tensor_get(t.d2, out, 0, sizeof(out));
    CHECK(out[0] == 1, "device to device copy");

    // another device that declines cpy_tensor from ours: bounce through host memory
    ggml_backend_t other = fake_backend_new(&(struct fake_options){ .name = "OTHER" });
    ggml_backend_buffer_t ob = ggml_backend_buft_alloc_buffer(fake_backend_buft(other), 64);
    struct ggml_tensor * o = ggml_new_tensor_1d(t.ctx, GGML_TYPE_F32, 6);
    struct ggml_tallocr to = ggml_tallocr_new(ob);
    ggml_tallocr_alloc(&to, o);
    ggml_backend_tensor_copy(t.d, o);
    ggml_backend_tensor_get(o, out, 0, sizeof(out));
    CHECK(out[0] == 1 && out[2] == 20 && out[3] == 30, "bounce copy between unrelated devices");
    ggml_backend_buffer_free(ob);
    ggml_backend_free(other);

    float back[4] = { 0 };
#ifndef GGML_RS_ABI_0_9_8 // (the 2-d forms are newer than ggml 0.9.8)
    // 2-d forms: rows of 2 floats, stride 3 floats in the tensor, 2 in the data
    const float rows[4] = { 100, 101, 200, 201 };
    ggml_backend_tensor_set_2d(t.d, rows, 0, 2 * sizeof(float), 2, 3 * sizeof(float), 2 * sizeof(float));
    ggml_backend_tensor_get(t.d, out, 0, sizeof(out));
    CHECK(out[0] == 100 && out[1] == 101 && out[3] == 200 && out[4] == 201, "set_2d");
    ggml_backend_tensor_get_2d(t.d, back, 0, 2 * sizeof(float), 2, 3 * sizeof(float), 2 * sizeof(float));
    CHECK(memcmp(back, rows, sizeof(rows)) == 0, "get_2d");
#endif

    // async forms fall back to synchronous calls when the backend has no async entries
    ggml_backend_tensor_set_async(fake, t.d, in, 0, sizeof(in));
    ggml_backend_synchronize(fake);
    ggml_backend_tensor_get_async(fake, t.d, out, 0, sizeof(out));
    ggml_backend_synchronize(fake);
    CHECK(memcmp(in, out, sizeof(in)) == 0, "async round trip");
#ifndef GGML_RS_ABI_0_9_8
    ggml_backend_tensor_set_2d_async(fake, t.d, rows, 0, 2 * sizeof(float), 2, 3 * sizeof(float), 2 * sizeof(float));
    ggml_backend_tensor_get_2d_async(fake, t.d, back, 0, 2 * sizeof(float), 2, 3 * sizeof(float), 2 * sizeof(float));
    CHECK(memcmp(back, rows, sizeof(rows)) == 0, "async 2-d round trip");
    const float first = rows[0], third = rows[2], fourth = rows[3]; // elements 0, 3, 4 of t.d
#else
    const float first = in[0], third = in[3], fourth = in[4];
#endif
    ggml_backend_tensor_copy_async(fake, fake, t.d, t.d2);
    ggml_backend_tensor_get(t.d2, out, 0, sizeof(out));
    CHECK(out[0] == first, "copy_async");

    // a view takes its bytes from its source
    struct ggml_tensor * v = ggml_view_1d(t.ctx, t.d, 2, 3 * sizeof(float));
    CHECK(ggml_backend_view_init(v) == GGML_STATUS_SUCCESS, "view_init");
    CHECK(v->buffer == t.dev && v->data == (char *) t.d->data + 12, "view placement");
    ggml_backend_tensor_get(v, back, 0, 2 * sizeof(float));
    CHECK(back[0] == third && back[1] == fourth, "reading through a view");
    CHECK(ggml_backend_buffer_copy_tensor(t.d, t.d2), "copy_tensor on the device buffer");

    free_two(&t);
    ggml_backend_free(fake);
}

static void test_events(void) {
    ggml_backend_t fake = fake_backend_new(&(struct fake_options){ .events = true });
    struct fake_stats * st = fake_backend_stats(fake);
    ggml_backend_event_t e = ggml_backend_event_new(ggml_backend_get_device(fake));
    CHECK(e != NULL, "event_new");
    ggml_backend_event_record(e, fake);
    ggml_backend_event_wait(fake, e);
    ggml_backend_event_synchronize(e);
    CHECK(st->events_recorded == 1 && st->events_waited == 1 && st->events_synced == 1, "event calls %d %d %d",
          st->events_recorded, st->events_waited, st->events_synced);
    ggml_backend_event_free(e);
    ggml_backend_event_free(NULL);
    CHECK(ggml_backend_event_new(NULL) == NULL, "a NULL device has no events");
    ggml_backend_t plain = fake_backend_new(NULL);
    CHECK(ggml_backend_event_new(ggml_backend_get_device(plain)) == NULL, "a device without event_new has no events");
    ggml_backend_free(plain);
    ggml_backend_free(fake);
}

static void test_device_and_backend_getters(void) {
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_dev_t dev = ggml_backend_get_device(fake);
    CHECK(strcmp(ggml_backend_dev_name(dev), "FAKE") == 0, "device name");
    CHECK(strcmp(ggml_backend_name(fake), "FAKE") == 0, "backend name");
    CHECK(strcmp(ggml_backend_name(NULL), "NULL") == 0, "NULL backend name");
    CHECK(ggml_backend_guid(NULL) == NULL, "NULL guid");
    CHECK(ggml_backend_guid(fake) != NULL, "guid");
    CHECK(ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_GPU, "type");
    struct ggml_backend_dev_props props;
    memset(&props, 0xAB, sizeof(props));
    ggml_backend_dev_get_props(dev, &props);
    CHECK(props.device_id == NULL && !props.caps.async && props.memory_total == (1u << 30), "props are zeroed then filled");
    size_t fr = 0, total = 0;
    ggml_backend_dev_memory(dev, &fr, &total);
    CHECK(total == (1u << 30), "memory");
    CHECK(ggml_backend_dev_backend_reg(dev) == NULL, "no registry");
    CHECK(ggml_backend_dev_init(dev, NULL) == fake, "dev_init");
    CHECK(ggml_backend_dev_buffer_type(dev) == fake_backend_buft(fake), "device buffer type");
    CHECK(ggml_backend_get_default_buffer_type(fake) == fake_backend_buft(fake), "default buffer type");
    CHECK(ggml_backend_dev_host_buffer_type(dev) == NULL, "optional host buffer type absent");
    CHECK(ggml_backend_dev_supports_buft(dev, fake_backend_buft(fake)), "supports its own buffer type");
    CHECK(!ggml_backend_supports_buft(fake, ggml_backend_cpu_buffer_type()), "cannot read CPU buffers");
    CHECK(!ggml_backend_dev_offload_op(dev, NULL) || true, "offload_op callable");
    CHECK(ggml_backend_get_alignment(fake) == 32, "alignment");
    CHECK(ggml_backend_get_max_size(fake) == SIZE_MAX, "max size");
    ggml_backend_buffer_t b = ggml_backend_alloc_buffer(fake, 128);
    CHECK(b != NULL && ggml_backend_buffer_get_type(b) == fake_backend_buft(fake), "alloc_buffer");
    ggml_backend_buffer_free(b);

    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_dev_t cdev = ggml_backend_get_device(cpu);
    CHECK(ggml_backend_dev_type(cdev) == GGML_BACKEND_DEVICE_TYPE_CPU, "cpu device type");
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(cdev);
    CHECK(reg != NULL && strcmp(ggml_backend_reg_name(reg), "CPU") == 0, "cpu registry");
    CHECK(ggml_backend_reg_dev_count(reg) >= 1 && ggml_backend_reg_dev_get(reg, 0) == cdev, "registry devices");
    CHECK(ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads") != NULL, "proc address");
    CHECK(ggml_backend_reg_get_proc_address(reg, "no_such_function") == NULL, "unknown proc address");
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

// graph: y = sqr(scale(x, 2) + b)
static struct ggml_cgraph * small_graph(struct ggml_context * ctx, struct ggml_tensor ** x, struct ggml_tensor ** b) {
    *x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    *b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    ggml_set_name(*x, "x");
    ggml_set_name(*b, "b");
    ggml_set_input(*x);
    ggml_set_input(*b);
    struct ggml_tensor * s = ggml_scale(ctx, *x, 2.0f);
    struct ggml_tensor * y = ggml_sqr(ctx, ggml_add(ctx, s, *b));
    ggml_set_name(y, "y");
    ggml_set_output(y);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, y);
    return g;
}

struct compare_state {
    int calls;
    double max_err;
};

static bool compare_cb(int i, struct ggml_tensor * t1, struct ggml_tensor * t2, void * ud) {
    struct compare_state * s = (struct compare_state *) ud;
    (void) i;
    float a[8], b[8];
    CHECK(ggml_nelements(t1) == 8, "node size");
    ggml_backend_tensor_get(t1, a, 0, sizeof(a));
    ggml_backend_tensor_get(t2, b, 0, sizeof(b));
    for (int k = 0; k < 8; k++) {
        double e = fabs(a[k] - b[k]);
        if (e > s->max_err) {
            s->max_err = e;
        }
    }
    s->calls++;
    return true;
}

static void test_graph_copy_and_compare(void) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t fake = fake_backend_new(NULL);
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x, * b;
    struct ggml_cgraph * g = small_graph(ctx, &x, &b);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    CHECK(ggml_gallocr_alloc_graph(ga, g), "alloc");
    float xs[8], bs[8];
    for (int i = 0; i < 8; i++) {
        xs[i] = (float) i;
        bs[i] = 1.0f;
    }
    ggml_backend_tensor_set(x, xs, 0, sizeof(xs));
    ggml_backend_tensor_set(b, bs, 0, sizeof(bs));
    CHECK(ggml_backend_graph_compute(cpu, g) == GGML_STATUS_SUCCESS, "compute");
    struct ggml_tensor * y = ggml_graph_node(g, -1);
    CHECK_FLOAT(f32(y)[3], (2.0 * 3 + 1) * (2.0 * 3 + 1));

    struct ggml_backend_graph_copy copy = ggml_backend_graph_copy(fake, g);
    CHECK(copy.graph != NULL && copy.buffer != NULL, "graph copy failed");
    CHECK(ggml_graph_n_nodes(copy.graph) == ggml_graph_n_nodes(g), "node count");
    CHECK(ggml_backend_buffer_get_type(copy.buffer) == fake_backend_buft(fake), "copied into the other backend's buffer type");
    struct ggml_tensor * y2 = ggml_graph_node(copy.graph, -1);
    CHECK(strcmp(y2->name, "y") == 0 && y2->op == GGML_OP_SQR && (y2->flags & GGML_TENSOR_FLAG_OUTPUT), "copied description");
    float got[8];
    ggml_backend_tensor_get(y2, got, 0, sizeof(got));
    CHECK_FLOAT(got[3], 49.0);
    ggml_backend_graph_copy_free(copy);

    struct compare_state st = { 0, 0 };
    CHECK(ggml_backend_compare_graph_backend(cpu, fake, g, compare_cb, &st, NULL, 0), "compare");
    CHECK(st.calls == ggml_graph_n_nodes(g), "callback called %d times for %d nodes", st.calls, ggml_graph_n_nodes(g));
    CHECK(st.max_err == 0.0, "backends disagree by %g", st.max_err);
    CHECK(fake_backend_stats(fake)->graph_computes == ggml_graph_n_nodes(g), "node by node on the second backend");

    // with test nodes: whole graphs, callback only for the listed node
    struct compare_state st2 = { 0, 0 };
    const struct ggml_tensor * only[1] = { y };
    CHECK(ggml_backend_compare_graph_backend(cpu, fake, g, compare_cb, &st2, only, 1), "compare with test nodes");
    CHECK(st2.calls == 1 && st2.max_err == 0.0, "test-node compare");

    ggml_gallocr_free(ga);
    ggml_free(ctx);
    ggml_backend_free(fake);
    ggml_backend_free(cpu);
}

// ggml-alloc.c's, not in a header
bool ggml_op_can_inplace(enum ggml_op op);

// The ops whose result may take an operand's memory are the version's own list (ggml 0.9.8's has
// no CLAMP): asked of every op, against upstream's list of the version compiled against.
static void test_op_can_inplace_is_the_versions_list(void) {
    const enum ggml_op listed[] = {
        GGML_OP_FILL, GGML_OP_SCALE, GGML_OP_DIAG_MASK_ZERO, GGML_OP_DIAG_MASK_INF, GGML_OP_ADD, GGML_OP_ADD_ID, GGML_OP_ADD1,
        GGML_OP_SUB, GGML_OP_MUL, GGML_OP_DIV, GGML_OP_SQR, GGML_OP_SQRT, GGML_OP_LOG, GGML_OP_UNARY, GGML_OP_ROPE, GGML_OP_ROPE_BACK,
        GGML_OP_SILU_BACK, GGML_OP_RMS_NORM, GGML_OP_RMS_NORM_BACK, GGML_OP_SOFT_MAX, GGML_OP_SOFT_MAX_BACK,
#ifndef GGML_RS_ABI_0_9_8
        GGML_OP_CLAMP,
#endif
    };
    for (int op = 0; op < GGML_OP_COUNT; op++) {
        bool want = false;
        for (size_t i = 0; i < sizeof(listed) / sizeof(listed[0]); i++) {
            want = want || (int) listed[i] == op;
        }
        CHECK(ggml_op_can_inplace((enum ggml_op) op) == want, "ggml_op_can_inplace(%s) is %d, upstream's list says %d", ggml_op_name((enum ggml_op) op),
              !want, want);
    }
}

int main(int argc, char ** argv) {
    g_only = argc > 1 ? argv[1] : NULL;
    RUN(test_cpu_buffer_type_is_a_stable_singleton);
    RUN(test_buffer_life_cycle_and_usage);
    RUN(test_multi_buffer);
    RUN(test_cpu_buffer_from_ptr);
    RUN(test_tensor_io_host_and_device);
    RUN(test_events);
    RUN(test_device_and_backend_getters);
    RUN(test_graph_copy_and_compare);
    RUN(test_op_can_inplace_is_the_versions_list);
    printf("%d tests passed\n", g_tests_run);
    return 0;
}
