// The scheduler across graphs, the second half of test_sched_scenarios (linked into that program;
// its main runs these):
// - an input the next graph computes from again keeps its value, or the compute is refused
//   naming it (one backend, and two);
// - GGML_SCHED_DEBUG_REALLOC aborts only for a buffer that really grows;
// - a graph whose tensors point into compute buffers the scheduler freed (a bigger graph
//   reallocated them) is placed anew without reading the freed buffers; a result that was in
//   them is named;
// - a tensor with data that is neither a node nor a leaf (ggml_graph_add_node graphs) goes with
//   its buffer, as a leaf, so a reader on another backend gets a copy;
// - with one backend: the buffer a llama.cpp-style reservation sizes holds every smaller shape.

#include "check.h"
#include "fake_backend.h"
#include "ggml_rs_ext.h"
#include "sched_scenarios.h"
#include "tensors.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

// graph 2 of the carried-input scenarios: o = scale(y, 10) + h, h pulled in again with its sources
static struct ggml_cgraph * reads_h(struct ggml_context * ctx, struct ggml_tensor * h, struct ggml_tensor ** y, struct ggml_tensor ** o) {
    *y = vec(ctx, "y", 4);
    ggml_set_input(*y);
    struct ggml_tensor * t = ggml_scale(ctx, *y, 10.0f);
    ggml_set_name(t, "t");
    *o = ggml_add(ctx, t, h);
    ggml_set_name(*o, "o");
    ggml_set_output(*o);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, *o);
    return g;
}

// compute, capturing the log; returns the status
static enum ggml_status compute_logged(ggml_backend_sched_t sched, struct ggml_cgraph * g) {
    log_capture_begin();
    enum ggml_status st = ggml_backend_sched_graph_compute(sched, g);
    ggml_log_set(NULL, NULL);
    return st;
}

// issue 11: one scheduler, one CPU backend. Graph 1: x (input) -> h = scale(x, 2). Graph 2:
// o = scale(y, 10) + h, h pulled in again, so graph 2 recomputes h from x, which the caller does
// not set again. Upstream: 40 (y, t, o placed over x and h); ggml-rs before: 10, silently.
// (a) graph 1 computed h in place of x (upstream's plan too): x's bytes are gone; computing graph
//     2 without setting x is refused, naming x (or gives 12); x set again gives 12;
// (b) x read twice by graph 1 (nothing in its place): x keeps its bytes, o = 13;
// (c) a bigger graph in between took x's memory: refused, naming x, until x is set again.
void test_input_carried_into_the_next_graph(void) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_sched_t sched = ggml_backend_sched_new(&cpu, NULL, 1, 64, false, true);
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor *y, *o;

    // (a)
    struct ggml_tensor * x = vec(ctx, "x", 4);
    ggml_set_input(x);
    struct ggml_tensor * h = ggml_scale(ctx, x, 2.0f);
    ggml_set_name(h, "h");
    ggml_set_output(h);
    struct ggml_cgraph * g1 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g1, h);
    CHECK(ggml_backend_sched_alloc_graph(sched, g1), "alloc graph 1");
    set_all(x, 1.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, g1) == GGML_STATUS_SUCCESS, "compute graph 1");
    CHECK_FLOAT(get0(h), 2.0);
    struct ggml_cgraph * g2 = reads_h(ctx, h, &y, &o);
    ggml_backend_sched_reset(sched);
    CHECK(ggml_backend_sched_alloc_graph(sched, g2), "alloc graph 2");
    set_all(y, 1.0f);
    if (compute_logged(sched, g2) == GGML_STATUS_SUCCESS) {
        CHECK_FLOAT(get0(o), 12.0);
    } else {
        CHECK(strstr(g_log, "input tensor 'x'") != NULL, "the refusal names x: %s", g_log);
    }
    set_all(x, 1.0f);
    CHECK(compute_logged(sched, g2) == GGML_STATUS_SUCCESS, "compute graph 2 with x set: %s", g_log);
    CHECK_FLOAT(get0(o), 12.0);

    // (b)
    struct ggml_tensor * x2 = vec(ctx, "x2", 4);
    ggml_set_input(x2);
    struct ggml_tensor * h2 = ggml_add(ctx, ggml_scale(ctx, x2, 2.0f), x2);
    ggml_set_name(h2, "h2");
    ggml_set_output(h2);
    struct ggml_cgraph * g3 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g3, h2);
    ggml_backend_sched_reset(sched);
    CHECK(ggml_backend_sched_alloc_graph(sched, g3), "alloc graph 3");
    set_all(x2, 1.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, g3) == GGML_STATUS_SUCCESS, "compute graph 3");
    CHECK_FLOAT(get0(h2), 3.0);
    struct ggml_cgraph * g4 = reads_h(ctx, h2, &y, &o);
    for (int round = 1; round <= 3; round++) {
        ggml_backend_sched_reset(sched);
        CHECK(ggml_backend_sched_alloc_graph(sched, g4), "alloc graph 4, round %d", round);
        set_all(y, (float) round);
        CHECK(compute_logged(sched, g4) == GGML_STATUS_SUCCESS, "compute graph 4: %s", g_log);
        CHECK_FLOAT(get0(o), 10.0 * round + 3.0);
    }

    // (c)
    struct ggml_tensor * z = vec(ctx, "z", 64);
    ggml_set_input(z);
    struct ggml_tensor * z2 = ggml_sqr(ctx, ggml_scale(ctx, z, 2.0f));
    ggml_set_output(z2);
    struct ggml_cgraph * gz = ggml_new_graph(ctx);
    ggml_build_forward_expand(gz, z2);
    ggml_backend_sched_reset(sched);
    CHECK(ggml_backend_sched_alloc_graph(sched, gz), "alloc the graph in between");
    set_all(z, 5.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, gz) == GGML_STATUS_SUCCESS, "compute the graph in between");
    ggml_backend_sched_reset(sched);
    CHECK(ggml_backend_sched_alloc_graph(sched, g4), "alloc graph 4 again");
    set_all(y, 1.0f);
    CHECK(compute_logged(sched, g4) != GGML_STATUS_SUCCESS, "x2 lost its bytes and was not set: o = %g", get0(o));
    CHECK(strstr(g_log, "input tensor 'x2'") != NULL, "the refusal names x2: %s", g_log);
    set_all(x2, 3.0f);
    CHECK(compute_logged(sched, g4) == GGML_STATUS_SUCCESS, "compute graph 4 with x2 set: %s", g_log);
    CHECK_FLOAT(get0(o), 10.0 + 9.0);

    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
}

// the same with two backends: h computed on the device from x on the CPU, then recomputed there
// by the next graph, read through the scheduler's copy of x
void test_input_carried_into_the_next_graph_two_backends(void) {
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = vec(ctx, "x", 4);
    ggml_set_input(x);
    struct ggml_tensor * h = ggml_add(ctx, ggml_scale(ctx, x, 2.0f), x);
    ggml_set_name(h, "h");
    ggml_set_output(h);
    struct ggml_cgraph * g1 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g1, h);
    ggml_backend_sched_set_tensor_backend(sched, h, fake);
    CHECK(ggml_backend_sched_alloc_graph(sched, g1), "alloc graph 1");
    set_all(x, 1.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, g1) == GGML_STATUS_SUCCESS, "compute graph 1");
    CHECK_FLOAT(get0(h), 3.0);
    struct ggml_tensor *y, *o;
    struct ggml_cgraph * g2 = reads_h(ctx, h, &y, &o);
    for (int round = 1; round <= 3; round++) {
        ggml_backend_sched_reset(sched);
        ggml_backend_sched_set_tensor_backend(sched, h, fake);
        CHECK(ggml_backend_sched_alloc_graph(sched, g2), "alloc graph 2, round %d", round);
        set_all(y, (float) round);
        CHECK(compute_logged(sched, g2) == GGML_STATUS_SUCCESS, "compute graph 2: %s", g_log);
        CHECK_FLOAT(get0(o), 10.0 * round + 3.0);
    }
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

// issue 11: with GGML_SCHED_DEBUG_REALLOC=2 only a compute buffer that is really reallocated
// aborts: a smaller graph after a bigger one, on one backend, is placed in the buffer it has
// (ggml-rs before: abort on every new plan)
static struct ggml_cgraph * chain_graph(struct ggml_context * ctx, int n) {
    struct ggml_tensor * x = vec(ctx, "x", n);
    ggml_set_input(x);
    struct ggml_tensor * a = ggml_scale(ctx, x, 2.0f);
    struct ggml_tensor * b = ggml_sqr(ctx, a);
    struct ggml_tensor * c = ggml_add(ctx, b, a);
    ggml_set_output(c);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, c);
    return g;
}

static void realloc_debug_smaller_graph(void) {
    setenv("GGML_SCHED_DEBUG_REALLOC", "2", 1);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_sched_t sched = ggml_backend_sched_new(&cpu, NULL, 1, 64, false, true);
    unsetenv("GGML_SCHED_DEBUG_REALLOC");
    struct ggml_context * ctx = new_ctx();
    struct ggml_cgraph * big = chain_graph(ctx, 64);
    struct ggml_cgraph * small = chain_graph(ctx, 8);
    CHECK(ggml_backend_sched_alloc_graph(sched, big), "alloc the big graph");
    size_t size = ggml_backend_sched_get_buffer_size(sched, cpu);
    for (int round = 0; round < 3; round++) {
        ggml_backend_sched_reset(sched);
        CHECK(ggml_backend_sched_alloc_graph(sched, small), "alloc the small graph");
        ggml_backend_sched_reset(sched);
        CHECK(ggml_backend_sched_alloc_graph(sched, big), "alloc the big graph again");
    }
    CHECK(ggml_backend_sched_get_buffer_size(sched, cpu) == size, "the buffer did not change");
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
}

static void realloc_debug_growth(void) {
    setenv("GGML_SCHED_DEBUG_REALLOC", "2", 1);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_sched_t sched = ggml_backend_sched_new(&cpu, NULL, 1, 64, false, true);
    unsetenv("GGML_SCHED_DEBUG_REALLOC");
    struct ggml_context * ctx = new_ctx();
    CHECK(ggml_backend_sched_alloc_graph(sched, chain_graph(ctx, 8)), "alloc the small graph");
    ggml_backend_sched_reset(sched);
    ggml_backend_sched_alloc_graph(sched, chain_graph(ctx, 64)); // grows the buffer: aborts
}

// x (input) -> n1 = scale(x, 2) on FAKE -> n2 = sqr(n1) on the CPU, n elements
struct scale_sqr {
    int n;
    struct ggml_tensor * x, * n1, * n2;
    struct ggml_cgraph * g;
};

static struct scale_sqr scale_sqr_new(struct ggml_context * ctx, int n, int k) {
    struct scale_sqr s = { n, NULL, NULL, NULL, NULL };
    s.x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    ggml_format_name(s.x, "x%d.%d", n, k);
    ggml_set_input(s.x);
    s.n1 = ggml_scale(ctx, s.x, 2.0f);
    ggml_format_name(s.n1, "n1.%d.%d", n, k);
    s.n2 = ggml_sqr(ctx, s.n1);
    ggml_format_name(s.n2, "n2.%d.%d", n, k);
    ggml_set_output(s.n2);
    s.g = ggml_new_graph(ctx);
    ggml_build_forward_expand(s.g, s.n2);
    return s;
}

// reset, allocate, compute with x = v; checks every element of n2. n2 goes to the CPU, or with
// cpu NULL where the scheduler puts it (after n1: on FAKE, whose supports_op is then asked)
static void scale_sqr_run(ggml_backend_sched_t sched, ggml_backend_t fake, ggml_backend_t cpu, const struct scale_sqr * s, float v, const char * what) {
    ggml_backend_sched_reset(sched);
    ggml_backend_sched_set_tensor_backend(sched, s->n1, fake);
    if (cpu) {
        ggml_backend_sched_set_tensor_backend(sched, s->n2, cpu);
    }
    CHECK(ggml_backend_sched_alloc_graph(sched, s->g), "%s: alloc %s", what, ggml_get_name(s->n2));
    CHECK(ggml_backend_sched_get_tensor_backend(sched, s->n1) == fake, "%s: %s on FAKE", what, ggml_get_name(s->n1));
    float * buf = (float *) malloc(s->n * sizeof(float));
    for (int i = 0; i < s->n; i++) {
        buf[i] = v + (float) (i % 7);
    }
    ggml_backend_tensor_set(s->x, buf, 0, s->n * sizeof(float));
    CHECK(ggml_backend_sched_graph_compute(sched, s->g) == GGML_STATUS_SUCCESS, "%s: compute %s", what, ggml_get_name(s->n2));
    ggml_backend_tensor_get(s->n2, buf, 0, s->n * sizeof(float));
    for (int i = 0; i < s->n; i++) {
        float want = (2.0f * (v + (float) (i % 7))) * (2.0f * (v + (float) (i % 7)));
        CHECK(buf[i] == want, "%s: %s[%d] = %g, expected %g", what, ggml_get_name(s->n2), i, buf[i], want);
    }
    free(buf);
}

// as a CUDA backend does in supports_op: look at the type of each source's buffer
static bool looks_at_source_buffers(const struct ggml_tensor * op) {
    for (int i = 0; i < GGML_MAX_SRC; i++) {
        if (op->src[i] && op->src[i]->buffer && ggml_backend_buft_name(ggml_backend_buffer_get_type(op->src[i]->buffer))[0] == 0) {
            return false;
        }
    }
    return true;
}

// A graph allocated again after a bigger graph made the scheduler reallocate its compute
// buffers: the graph's tensors still point into the freed buffers (tensor->buffer). The
// scheduler places them anew without reading the freed buffers, nor letting a backend's
// supports_op read them, also when the graph was allocated so many graphs before the
// reallocation that the allocator's recent history no longer holds it. The fake scribbles over
// the struct of a buffer freed just before it allocates (as malloc may at any time): reading a
// freed buffer crashes here, without valgrind.
void test_graph_placed_in_a_freed_compute_buffer(void) {
    ggml_backend_t fake = fake_backend_new(&(struct fake_options){ .scribble_freed_buffers = true, .supports_op = looks_at_source_buffers });
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_init_params p = { 512 * ggml_tensor_overhead() + 32 * ggml_graph_overhead(), NULL, true };
    struct ggml_context * ctx = ggml_init(p);

    struct scale_sqr small = scale_sqr_new(ctx, 4, 0);
    struct scale_sqr big = scale_sqr_new(ctx, 4096, 0);
    scale_sqr_run(sched, fake, cpu, &small, 1.0f, "small");
    int allocs = fake_backend_stats(fake)->buffers_alloc;
    scale_sqr_run(sched, fake, cpu, &big, 2.0f, "big");
    CHECK(fake_backend_stats(fake)->buffers_alloc > allocs, "the big graph reallocates the device's compute buffer");
    scale_sqr_run(sched, fake, cpu, &small, 3.0f, "small after big");
    scale_sqr_run(sched, fake, cpu, &big, 4.0f, "big again");
    // the scheduler decides where n2 goes, asking the fake's supports_op
    struct scale_sqr small2 = scale_sqr_new(ctx, 4, 100);
    struct scale_sqr big2 = scale_sqr_new(ctx, 8192, 100);
    scale_sqr_run(sched, fake, NULL, &small2, 1.5f, "small, n2 placed by the scheduler");
    scale_sqr_run(sched, fake, NULL, &big2, 2.5f, "bigger, n2 placed by the scheduler");
    scale_sqr_run(sched, fake, NULL, &small2, 3.5f, "small after bigger, n2 placed by the scheduler");

    // the small graph, then many other graphs (the allocator's history forgets it), then a
    // bigger one that reallocates, then the small one again
    scale_sqr_run(sched, fake, cpu, &small, 5.0f, "small before many");
    for (int k = 1; k <= 12; k++) {
        struct scale_sqr other = scale_sqr_new(ctx, 4 + k, k);
        scale_sqr_run(sched, fake, cpu, &other, (float) k, "another graph");
    }
    struct scale_sqr huge = scale_sqr_new(ctx, 16384, 0);
    allocs = fake_backend_stats(fake)->buffers_alloc;
    scale_sqr_run(sched, fake, cpu, &huge, 6.0f, "huge");
    CHECK(fake_backend_stats(fake)->buffers_alloc > allocs, "the huge graph reallocates the device's compute buffer");
    scale_sqr_run(sched, fake, cpu, &small, 7.0f, "small after many and huge");
    scale_sqr_run(sched, fake, cpu, &big, 8.0f, "big after huge");

    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

// A result of a graph, read by a later graph (ggml_graph_add_node: it is neither a node nor a
// leaf of that graph) after a bigger graph reallocated the compute buffer that held it: the
// allocation fails naming it, without reading the freed buffer.
void test_result_in_a_freed_compute_buffer_is_named(void) {
    ggml_backend_t fake = fake_backend_new(&(struct fake_options){ .scribble_freed_buffers = true });
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_init_params p = { 64 * ggml_tensor_overhead() + 8 * ggml_graph_overhead(), NULL, true };
    struct ggml_context * ctx = ggml_init(p);

    struct scale_sqr small = scale_sqr_new(ctx, 4, 0);
    struct scale_sqr big = scale_sqr_new(ctx, 4096, 0);
    scale_sqr_run(sched, fake, cpu, &small, 1.0f, "small");
    scale_sqr_run(sched, fake, cpu, &big, 2.0f, "big");
    // r = n1 of the small graph + 1, on the CPU
    struct ggml_tensor * r = ggml_scale_bias(ctx, small.n1, 1.0f, 1.0f);
    ggml_set_name(r, "r");
    ggml_set_output(r);
    r->flags |= GGML_TENSOR_FLAG_COMPUTE;
    struct ggml_cgraph * gr = ggml_new_graph(ctx);
    ggml_graph_add_node(gr, r);
    ggml_backend_sched_reset(sched);
    ggml_backend_sched_set_tensor_backend(sched, r, cpu);
    log_capture_begin();
    CHECK(!ggml_backend_sched_alloc_graph(sched, gr), "n1's compute buffer was freed: allocation must fail");
    ggml_log_set(NULL, NULL);
    CHECK(strstr(g_log, "tensor 'n1.4.0'") != NULL && strstr(g_log, "reallocated") != NULL, "the message names the tensor and why: %s", g_log);

    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

// A tensor with data on a device whose memory the CPU cannot read, read by a node on the CPU in
// a graph built with ggml_graph_add_node (so it is neither a node nor a leaf of the graph): a
// weight (op NONE, in a buffer of the device), and a result of an earlier graph on the device.
// Its backend is the one of its buffer, as for a leaf, and the CPU reads a copy (upstream gives
// it the CPU, its reader's backend, and the CPU reads device memory: with an rpc-server, a
// segfault; the fake's remote memory crashes the same way).
void test_unlisted_source_on_a_remote_device_is_copied(void) {
    ggml_backend_t fake = fake_backend_new(&(struct fake_options){ .remote = true });
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_context * ctx = new_ctx();

    // a weight in a buffer of the device
    struct ggml_init_params pw = { 4 * ggml_tensor_overhead(), NULL, true };
    struct ggml_context * wctx = ggml_init(pw);
    struct ggml_tensor * w = vec(wctx, "w", 16);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, fake_backend_buft(fake));
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    set_all(w, 5.0f);

    // a result of an earlier graph, computed on the device: emb = img * 0.5 + img
    struct ggml_tensor * img = vec(ctx, "img", 16);
    ggml_set_input(img);
    struct ggml_tensor * e1 = ggml_scale(ctx, img, 0.5f);
    struct ggml_tensor * emb = ggml_add(ctx, e1, img);
    ggml_set_name(emb, "emb");
    ggml_set_output(emb);
    struct ggml_cgraph * genc = ggml_new_graph(ctx);
    ggml_build_forward_expand(genc, emb);
    ggml_backend_sched_set_tensor_backend(sched, e1, fake);
    ggml_backend_sched_set_tensor_backend(sched, emb, fake);
    CHECK(ggml_backend_sched_alloc_graph(sched, genc), "alloc encoder");
    set_all(img, 2.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, genc) == GGML_STATUS_SUCCESS, "compute encoder");
    CHECK_FLOAT(get0(emb), 3.0);
    CHECK(ggml_backend_buffer_get_type(emb->buffer) == fake_backend_buft(fake), "emb lives on the device");

    // out = tok * 10 + w + emb on the CPU
    struct ggml_tensor * tok = vec(ctx, "tok", 16);
    ggml_set_input(tok);
    struct ggml_tensor * t = ggml_scale(ctx, tok, 10.0f);
    struct ggml_tensor * tw = ggml_add(ctx, t, w);
    struct ggml_tensor * out = ggml_add(ctx, tw, emb);
    ggml_set_name(out, "out");
    ggml_set_output(out);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    struct ggml_tensor * nodes[3] = { t, tw, out };
    for (int i = 0; i < 3; i++) {
        nodes[i]->flags |= GGML_TENSOR_FLAG_COMPUTE;
        ggml_graph_add_node(g, nodes[i]);
    }
    for (int round = 0; round < 3; round++) {
        ggml_backend_sched_reset(sched);
        for (int i = 0; i < 3; i++) {
            ggml_backend_sched_set_tensor_backend(sched, nodes[i], cpu);
        }
        CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc, round %d", round);
        CHECK(ggml_backend_sched_get_tensor_backend(sched, w) == fake, "round %d: the weight w goes with its buffer (FAKE), got %s", round,
              ggml_backend_sched_get_tensor_backend(sched, w) ? ggml_backend_name(ggml_backend_sched_get_tensor_backend(sched, w)) : "none");
        CHECK(ggml_backend_sched_get_tensor_backend(sched, emb) == fake, "round %d: emb goes with its buffer (FAKE), got %s", round,
              ggml_backend_sched_get_tensor_backend(sched, emb) ? ggml_backend_name(ggml_backend_sched_get_tensor_backend(sched, emb)) : "none");
        set_all(tok, 1.0f + round);
        CHECK(ggml_backend_sched_graph_compute(sched, g) == GGML_STATUS_SUCCESS, "compute, round %d", round);
        CHECK_FLOAT(get0(out), 10.0 * (1 + round) + 5.0 + 3.0);
    }

    ggml_backend_sched_free(sched);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

void test_realloc_debug_counts_real_reallocations(void) {
    realloc_debug_smaller_graph();
    if (ggml_rs_sched_counters) {
        // ggml-rs also counts a one-buffer scheduler's buffer that grows (upstream never does)
        expect_abort("a buffer that grows", realloc_debug_growth, "unexpected graph reallocation");
    }
}

// issue 11: llama.cpp reserves the compute buffer once from its worst-case graph, then decodes
// batches of every shape up to it; the buffer must never grow (GGML_SCHED_NO_REALLOC). A
// llama-shaped graph: per layer norm, q/k/v projections, attention over n_kv cached positions
// with a mask, output projection, residual, gated feed-forward; then the rows to output and the
// logits. The planner's own placement is not monotone in the sizes: before, some smaller shapes
// needed a few bytes more than the reservation.
struct lm_dims {
    int embd, head, ff, layers, ctx, vocab, ubatch;
};

enum { LM_MAX_LAYERS = 8 };

struct lm_weights {
    struct lm_dims d;
    struct ggml_context * ctx;
    ggml_backend_buffer_t buf;
    struct ggml_tensor * norm[LM_MAX_LAYERS], * wq[LM_MAX_LAYERS], * wk[LM_MAX_LAYERS], * wv[LM_MAX_LAYERS], * wo[LM_MAX_LAYERS], * ffn_norm[LM_MAX_LAYERS];
    struct ggml_tensor * up[LM_MAX_LAYERS], * gate[LM_MAX_LAYERS], * down[LM_MAX_LAYERS];
    struct ggml_tensor * kc[LM_MAX_LAYERS], * vc[LM_MAX_LAYERS], * tok_embd, * out_norm, * out;
};

// weights in `buft`
static void lm_weights_init(struct lm_weights * w, struct lm_dims d, ggml_backend_buffer_type_t buft) {
    struct ggml_init_params p = { 128 * ggml_tensor_overhead(), NULL, true };
    w->d = d;
    w->ctx = ggml_init(p);
    for (int l = 0; l < d.layers; l++) {
        w->norm[l] = ggml_new_tensor_1d(w->ctx, GGML_TYPE_F32, d.embd);
        w->ffn_norm[l] = ggml_new_tensor_1d(w->ctx, GGML_TYPE_F32, d.embd);
        w->wq[l] = ggml_new_tensor_2d(w->ctx, GGML_TYPE_F32, d.embd, d.embd);
        w->wo[l] = ggml_new_tensor_2d(w->ctx, GGML_TYPE_F32, d.embd, d.embd);
        w->wk[l] = ggml_new_tensor_2d(w->ctx, GGML_TYPE_F32, d.embd, d.embd);
        w->wv[l] = ggml_new_tensor_2d(w->ctx, GGML_TYPE_F32, d.embd, d.embd);
        w->up[l] = ggml_new_tensor_2d(w->ctx, GGML_TYPE_F32, d.embd, d.ff);
        w->gate[l] = ggml_new_tensor_2d(w->ctx, GGML_TYPE_F32, d.embd, d.ff);
        w->down[l] = ggml_new_tensor_2d(w->ctx, GGML_TYPE_F32, d.ff, d.embd);
        w->kc[l] = ggml_new_tensor_1d(w->ctx, GGML_TYPE_F32, d.embd * d.ctx);
        w->vc[l] = ggml_new_tensor_1d(w->ctx, GGML_TYPE_F32, d.embd * d.ctx);
    }
    w->out_norm = ggml_new_tensor_1d(w->ctx, GGML_TYPE_F32, d.embd);
    w->tok_embd = ggml_new_tensor_2d(w->ctx, GGML_TYPE_F32, d.embd, d.vocab);
    w->out = ggml_new_tensor_2d(w->ctx, GGML_TYPE_F32, d.embd, d.vocab);
    w->buf = ggml_backend_alloc_ctx_tensors_from_buft(w->ctx, buft);
    ggml_backend_buffer_set_usage(w->buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    ggml_backend_buffer_clear(w->buf, 0);
}

static struct ggml_cgraph * lm_graph(struct ggml_context * ctx, const struct lm_weights * w, int n_tokens, int n_kv, int n_outputs) {
    const struct lm_dims d = w->d;
    const int hd = d.embd / d.head;
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    struct ggml_tensor * tokens = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    ggml_set_name(tokens, "inp_tokens");
    ggml_set_input(tokens);
    struct ggml_tensor * inp = ggml_get_rows(ctx, w->tok_embd, tokens);
    struct ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_kv, n_tokens);
    ggml_set_name(mask, "kq_mask");
    ggml_set_input(mask);
    struct ggml_tensor * out_ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_outputs);
    ggml_set_name(out_ids, "inp_out_ids");
    ggml_set_input(out_ids);
    struct ggml_tensor * cur = inp;
    for (int l = 0; l < d.layers; l++) {
        struct ggml_tensor * x = ggml_mul(ctx, ggml_rms_norm(ctx, cur, 1e-5f), w->norm[l]);
        // the new keys and values go to the cache (after the n_kv - n_tokens cached ones)
        const size_t at = (size_t) (n_kv - n_tokens) * d.embd * sizeof(float);
        ggml_build_forward_expand(g, ggml_cpy(ctx, ggml_mul_mat(ctx, w->wk[l], x), ggml_view_1d(ctx, w->kc[l], d.embd * n_tokens, at)));
        ggml_build_forward_expand(g, ggml_cpy(ctx, ggml_mul_mat(ctx, w->wv[l], x), ggml_view_1d(ctx, w->vc[l], d.embd * n_tokens, at)));
        struct ggml_tensor * q = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, w->wq[l], x), hd, d.head, n_tokens);
        q = ggml_permute(ctx, q, 0, 2, 1, 3);
        struct ggml_tensor * k = ggml_view_3d(ctx, w->kc[l], hd, n_kv, d.head, hd * sizeof(float), hd * d.ctx * sizeof(float), 0);
        struct ggml_tensor * kq = ggml_mul_mat(ctx, k, q);
        kq = ggml_soft_max_ext(ctx, kq, mask, 0.125f, 0.0f);
        struct ggml_tensor * v = ggml_view_3d(ctx, w->vc[l], n_kv, hd, d.head, d.ctx * sizeof(float), d.ctx * hd * sizeof(float), 0);
        struct ggml_tensor * kqv = ggml_mul_mat(ctx, v, kq);
        kqv = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), d.embd, n_tokens);
        struct ggml_tensor * attn = ggml_mul_mat(ctx, w->wo[l], kqv);
        if (l == d.layers - 1) {
            attn = ggml_get_rows(ctx, attn, out_ids);
            cur = ggml_get_rows(ctx, cur, out_ids);
        }
        cur = ggml_add(ctx, attn, cur);
        struct ggml_tensor * y = ggml_mul(ctx, ggml_rms_norm(ctx, cur, 1e-5f), w->ffn_norm[l]);
        struct ggml_tensor * up = ggml_mul_mat(ctx, w->up[l], y);
        struct ggml_tensor * gate = ggml_silu(ctx, ggml_mul_mat(ctx, w->gate[l], y));
        cur = ggml_add(ctx, ggml_mul_mat(ctx, w->down[l], ggml_mul(ctx, up, gate)), cur);
    }
    cur = ggml_mul(ctx, ggml_rms_norm(ctx, cur, 1e-5f), w->out_norm);
    struct ggml_tensor * logits = ggml_mul_mat(ctx, w->out, cur);
    ggml_set_name(logits, "logits");
    ggml_set_output(logits);
    ggml_build_forward_expand(g, logits);
    return g;
}

static bool no_soft_max(const struct ggml_tensor * op) { return op->op != GGML_OP_SOFT_MAX; }

static size_t buffer_sizes(ggml_backend_sched_t sched, ggml_backend_t * backends, int n) {
    size_t h = 0;
    for (int i = 0; i < n; i++) {
        h = h * 1000003u + ggml_backend_sched_get_buffer_size(sched, backends[i]);
    }
    return h;
}

// Returns the number of shapes whose allocation changed the reserved buffers (0: none). With two
// backends, the weights live on a device that computes everything but the soft max (several
// splits per layer, two compute buffers).
static int reserve_holds_every_shape(struct lm_dims d, bool two_backends, const char * debug_realloc) {
    if (debug_realloc) {
        setenv("GGML_SCHED_DEBUG_REALLOC", debug_realloc, 1);
    }
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t fake = two_backends ? fake_backend_new(&(struct fake_options){ .supports_op = no_soft_max }) : NULL;
    ggml_backend_t backends[2] = { two_backends ? fake : cpu, cpu };
    const int n_backends = two_backends ? 2 : 1;
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, n_backends, 4096, false, true);
    unsetenv("GGML_SCHED_DEBUG_REALLOC");
    struct lm_weights w;
    lm_weights_init(&w, d, two_backends ? fake_backend_buft(fake) : ggml_backend_cpu_buffer_type());
    struct ggml_init_params p = { 1024 * ggml_tensor_overhead() + ggml_graph_overhead(), NULL, true };
    // as llama.cpp: worst case (a full ubatch over the whole context), one token, worst case again
    const int reserve[3][3] = { { d.ubatch, d.ctx, d.ubatch }, { 1, d.ctx, 1 }, { d.ubatch, d.ctx, d.ubatch } };
    for (int i = 0; i < 3; i++) {
        struct ggml_context * ctx = ggml_init(p);
        CHECK(ggml_backend_sched_reserve(sched, lm_graph(ctx, &w, reserve[i][0], reserve[i][1], reserve[i][2])), "reserve %d", i);
        ggml_free(ctx);
    }
    const size_t reserved = buffer_sizes(sched, backends, n_backends);
    int grew = 0;
    for (int n_kv = 32; n_kv <= d.ctx; n_kv += 32) {
        if (n_kv < d.ubatch) {
            continue;
        }
        for (int n_tokens = 1; n_tokens <= d.ubatch; n_tokens += 1 + n_tokens / 8) {
            for (int all = 0; all <= 1; all++) {
                const int n_outputs = all ? n_tokens : 1;
                struct ggml_context * ctx = ggml_init(p);
                struct ggml_cgraph * g = lm_graph(ctx, &w, n_tokens, n_kv, n_outputs);
                ggml_backend_sched_reset(sched);
                CHECK(ggml_backend_sched_alloc_graph(sched, g), "alloc n_tokens %d n_kv %d n_outputs %d", n_tokens, n_kv, n_outputs);
                if (buffer_sizes(sched, backends, n_backends) != reserved && grew++ == 0) {
                    fprintf(stderr, "\n  %d backend(s), head %d embd %d ff %d layers %d ctx %d vocab %d ubatch %d: n_tokens %d, n_kv %d, "
                            "n_outputs %d: a compute buffer grew\n", n_backends, d.head, d.embd, d.ff, d.layers, d.ctx, d.vocab, d.ubatch,
                            n_tokens, n_kv, n_outputs);
                }
                ggml_free(ctx);
            }
        }
    }
    ggml_backend_sched_free(sched);
    ggml_backend_buffer_free(w.buf);
    ggml_free(w.ctx);
    ggml_backend_free(cpu);
    if (fake) {
        ggml_backend_free(fake);
    }
    return grew;
}

void test_reserved_buffer_holds_every_smaller_shape(void) {
    // the first three grew a buffer before, by a few bytes, at some smaller shape (the third
    // with two backends only); the last two did not
    const struct lm_dims dims[] = {
        { 384, 8, 768, 3, 32, 865, 16 },
        { 448, 8, 928, 2, 32, 1965, 16 },
        { 448, 8, 1016, 2, 256, 2908, 64 },
        { 64, 4, 172, 3, 256, 4000, 32 },
        { 96, 4, 256, 3, 512, 3000, 16 },
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
        failed += reserve_holds_every_shape(dims[i], false, NULL) != 0;
        failed += reserve_holds_every_shape(dims[i], true, NULL) != 0;
    }
    CHECK(failed == 0, "%d reservations did not hold", failed);
    // as a GGML_SCHED_NO_REALLOC build: no abort either
    reserve_holds_every_shape(dims[0], false, "1");
    reserve_holds_every_shape(dims[2], true, "1");
}
