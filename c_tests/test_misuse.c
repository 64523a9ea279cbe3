// Misuse and failure cases, each with what upstream does (scripts/test.sh checks that upstream
// fails the ones that reproduce its bugs):
// - ggml_backend_alloc_ctx_tensors_from_buft whose third buffer cannot be allocated returns NULL
//   and leaves no tensor pointing into the buffers it freed, so a retry places them all
//   (upstream: the tensors keep data/buffer in freed memory, a retry skips them);
// - a node whose source is computed by an op but is neither a node nor a leaf of the graph (a
//   hand-built graph) makes the allocation fail with both named, in the graph allocator and in
//   the scheduler (upstream: the source is allocated, never computed, and read as it is);
// - ggml_backend_sched_reserve (or split_graph) of another graph between alloc_graph and
//   graph_compute makes the compute fail with a message (upstream: the graph is allocated anew,
//   its inputs are lost; after split_graph, the other graph's splits run: a crash);
// - a compute buffer that cannot be allocated once is tried a second time by the scheduler, as
//   upstream does with one backend (upstream, with two: the allocation fails).
#include "check.h"
#include "fake_backend.h"
#include "tensors.h"

#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

static struct ggml_context * new_ctx(void) {
    struct ggml_init_params p = { 64 * ggml_tensor_overhead() + 2 * ggml_graph_overhead(), NULL, true };
    return ggml_init(p);
}

// Scenario: a context of four 16-float tensors and a view of the first, on a buffer type whose
// buffers hold one tensor each (so four buffers), the third of which cannot be allocated; plus
// a view of a tensor allocated before, which the call initialises too.
// Expected: NULL, both buffers made before the failure freed, and every tensor as before the
// call; then the same call with the buffer type working places every tensor, and each one reads
// back what was written. Invariant: a failed call leaves nothing pointing into freed memory.
static void test_failed_ctx_alloc_leaves_nothing_in_freed_memory(void) {
    ggml_backend_t fake = fake_backend_new(&(struct fake_options){ .max_size = 64 });
    struct fake_stats * st = fake_backend_stats(fake);
    ggml_backend_buffer_type_t buft = fake_backend_buft(fake);

    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * w = vec(ctx, "w", 16); // allocated before the call, elsewhere
    ggml_backend_buffer_t wbuf = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), 64);
    struct ggml_tallocr wt = ggml_tallocr_new(wbuf);
    CHECK(ggml_tallocr_alloc(&wt, w) == GGML_STATUS_SUCCESS, "tallocr w");
    struct ggml_tensor * w_view = ggml_view_1d(ctx, w, 4, 8 * sizeof(float));
    ggml_set_name(w_view, "w_view");
    void * w_view_data = w_view->data;
    CHECK(w_view_data != NULL && w_view->buffer == NULL, "a view of an allocated tensor has data, no buffer yet");

    // in context order: w, w_view, a, a_view (the first buffer), b, c (refused), d
    struct ggml_tensor * t[4];
    const char * names[4] = { "a", "b", "c", "d" };
    struct ggml_tensor * a_view = NULL;
    for (int i = 0; i < 4; i++) {
        t[i] = vec(ctx, names[i], 16);
        if (i == 0) {
            a_view = ggml_view_1d(ctx, t[0], 4, 4 * sizeof(float));
            ggml_set_name(a_view, "a_view");
        }
    }
    struct ggml_tensor * all[6] = { t[0], t[1], t[2], t[3], a_view, w_view };

    for (int round = 0; round < 2; round++) {
        fake_backend_fail_allocs(fake, 2, 1);
        int allocs = st->buffers_alloc, frees = st->buffers_free;
        log_capture_begin();
        ggml_backend_buffer_t buf = round == 0 ? ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft)
                                               : ggml_backend_alloc_ctx_tensors(ctx, fake);
        ggml_log_set(NULL, NULL);
        CHECK(buf == NULL, "round %d: the third buffer failed: NULL expected", round);
        CHECK(st->buffers_alloc - allocs == 2 && st->buffers_free - frees == 2 && st->buffers_refused == round + 1,
              "round %d: two buffers made and freed, one refused (made %d, freed %d, refused %d)", round,
              st->buffers_alloc - allocs, st->buffers_free - frees, st->buffers_refused);
        for (int i = 0; i < 5; i++) {
            CHECK(all[i]->data == NULL && all[i]->buffer == NULL,
                  "round %d: tensor '%s' points into a freed buffer after the failed call (data %p, buffer %p)", round,
                  all[i]->name, all[i]->data, (void *) all[i]->buffer);
        }
        CHECK(w_view->data == w_view_data && w_view->buffer == NULL, "round %d: the view of 'w' is as before the call", round);
        CHECK(w->buffer == wbuf, "round %d: 'w' keeps its own buffer", round);
    }

    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
    CHECK(buf != NULL, "the retry places the tensors");
    for (int i = 0; i < 4; i++) {
        CHECK(t[i]->buffer != NULL && t[i]->data != NULL, "tensor '%s' placed by the retry", t[i]->name);
        set_all(t[i], (float) (i + 1));
    }
    CHECK(a_view->buffer == t[0]->buffer && a_view->data == (char *) t[0]->data + 4 * sizeof(float), "a_view points into 'a'");
    CHECK(w_view->buffer == wbuf && w_view->data == w_view_data, "w_view initialised on 'w'");
    for (int i = 0; i < 4; i++) {
        CHECK_FLOAT(get0(t[i]), i + 1);
    }
    CHECK_FLOAT(get0(a_view), 1.0);
    ggml_backend_buffer_free(buf);
    ggml_backend_buffer_free(wbuf);
    ggml_free(ctx);
    ggml_backend_free(fake);
}

// h = scale(x, 2) computed by an op, but left out of a hand-built graph whose node o reads it
struct unlisted_graph {
    struct ggml_context * ctx;
    struct ggml_tensor * x, * h, * o;
    struct ggml_cgraph * bad, * good;
};

static struct unlisted_graph make_unlisted(bool through_view) {
    struct unlisted_graph u;
    u.ctx = new_ctx();
    u.x = vec(u.ctx, "x", 4);
    ggml_set_input(u.x);
    u.h = ggml_scale(u.ctx, u.x, 2.0f);
    ggml_set_name(u.h, "h");
    struct ggml_tensor * read = u.h;
    if (through_view) {
        read = ggml_view_1d(u.ctx, u.h, 4, 0);
        ggml_set_name(read, "h_view");
    }
    u.o = ggml_add(u.ctx, read, u.x);
    ggml_set_name(u.o, "o");
    ggml_set_output(u.o);
    u.bad = ggml_new_graph(u.ctx);
    ggml_graph_add_node(u.bad, u.o); // o only: h is neither a node nor a leaf
    u.good = ggml_new_graph(u.ctx);
    ggml_build_forward_expand(u.good, u.o);
    return u;
}

// A chain of 16 nodes in its own context, allocated first by the allocators of the tests below:
// upstream sizes its hash set by the node and leaf counts, and aborts when a small graph reads
// more tensors than that (here x and h are in neither list); after a larger graph it has room
// and shows what it does with the unlisted source.
static struct ggml_context * warm_ctx;
static struct ggml_cgraph * warm_graph(void) {
    warm_ctx = new_ctx();
    struct ggml_tensor * t = vec(warm_ctx, "w0", 4);
    ggml_set_input(t);
    for (int i = 0; i < 16; i++) {
        t = ggml_scale(warm_ctx, t, 1.0f);
    }
    ggml_set_output(t);
    struct ggml_cgraph * g = ggml_new_graph(warm_ctx);
    ggml_build_forward_expand(g, t);
    return g;
}

// Scenario: gallocr_alloc_graph of the graph {o}, where o = h + x and h = 2x is in neither list.
// Expected: false, with a message naming o and h; the same tensors in a graph built by
// ggml_build_forward_expand compute o = 3x. Upstream: true, and o reads h's memory, which
// nothing computed. Invariant: nothing is allocated that the graph reads but never computes.
static void unlisted_source_gallocr(bool through_view) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    struct unlisted_graph u = make_unlisted(through_view);
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    CHECK(ggml_gallocr_alloc_graph(galloc, warm_graph()), "a larger graph first");
    log_capture_begin();
    bool ok = ggml_gallocr_alloc_graph(galloc, u.bad);
    if (ok) { // upstream: o computed from h's memory, which nothing computed
        set_all(u.x, 1.0f);
        ggml_backend_graph_compute(cpu, u.bad);
        fprintf(stderr, "o = %g (3 if h were computed)\n", get0(u.o));
    }
    ggml_log_set(NULL, NULL);
    CHECK(!ok, "a graph reading a tensor it never computes was allocated");
    CHECK(strstr(g_log, "node 'o' reads tensor 'h'") != NULL && strstr(g_log, "neither a node nor a leaf") != NULL, "message: %s", g_log);

    CHECK(ggml_gallocr_alloc_graph(galloc, u.good), "the complete graph allocates");
    set_all(u.x, 1.0f);
    CHECK(ggml_backend_graph_compute(cpu, u.good) == GGML_STATUS_SUCCESS, "compute");
    CHECK_FLOAT(get0(u.o), 3.0);
    ggml_gallocr_free(galloc);
    ggml_free(u.ctx);
    ggml_free(warm_ctx);
    ggml_backend_free(cpu);
}

static void test_unlisted_source_named_by_gallocr(void) { unlisted_source_gallocr(false); }
static void test_unlisted_source_via_a_view_named_by_gallocr(void) { unlisted_source_gallocr(true); }

// The same through the scheduler, with the CPU alone and with a device in front of it.
static void unlisted_source_sched(bool two_backends) {
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    int n = two_backends ? 2 : 1;
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends + 2 - n, NULL, n, 64, false, true);
    struct unlisted_graph u = make_unlisted(false);
    CHECK(ggml_backend_sched_alloc_graph(sched, warm_graph()), "a larger graph first");
    ggml_backend_sched_reset(sched);
    log_capture_begin();
    bool ok = ggml_backend_sched_alloc_graph(sched, u.bad);
    if (ok) {
        set_all(u.x, 1.0f);
        ggml_backend_sched_graph_compute(sched, u.bad);
        fprintf(stderr, "o = %g (3 if h were computed)\n", get0(u.o));
    }
    ggml_log_set(NULL, NULL);
    CHECK(!ok, "a graph reading a tensor it never computes was allocated (%d backends)", n);
    CHECK(strstr(g_log, "node 'o' reads tensor 'h'") != NULL, "message: %s", g_log);

    ggml_backend_sched_reset(sched);
    CHECK(ggml_backend_sched_alloc_graph(sched, u.good), "the complete graph allocates");
    set_all(u.x, 1.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, u.good) == GGML_STATUS_SUCCESS, "compute");
    CHECK_FLOAT(get0(u.o), 3.0);
    ggml_backend_sched_free(sched);
    ggml_free(u.ctx);
    ggml_free(warm_ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

static void test_unlisted_source_named_by_sched_one_backend(void) { unlisted_source_sched(false); }
static void test_unlisted_source_named_by_sched_two_backends(void) { unlisted_source_sched(true); }

// Scenario: alloc_graph(ga), input x set, then reserve(gb) of a larger graph, then
// graph_compute(ga). Expected: GGML_STATUS_FAILED and a message that names the reserve; after
// reset + alloc_graph + setting x again, ga computes 2x. After a reserve of ga itself the compute
// allocates ga again in the same places (ga computes 2x with x as set). Upstream: the compute allocates ga anew (the
// reserve reset the scheduler), over memory the reserve planned for gb, and reads whatever x's
// new place holds. Invariant: a compute never reads inputs from memory given to another graph.
static void test_reserve_between_alloc_and_compute_refused(void) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_sched_t sched = ggml_backend_sched_new(&cpu, NULL, 1, 64, false, true);
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = vec(ctx, "x", 16);
    ggml_set_input(x);
    struct ggml_tensor * a = ggml_scale(ctx, x, 2.0f);
    ggml_set_name(a, "a");
    ggml_set_output(a);
    struct ggml_cgraph * ga = ggml_new_graph(ctx);
    ggml_build_forward_expand(ga, a);
    // gb: a larger graph, whose plan puts other tensors where x was
    struct ggml_tensor * y = vec(ctx, "y", 64);
    ggml_set_input(y);
    struct ggml_tensor * b = ggml_sqr(ctx, ggml_scale(ctx, ggml_add(ctx, y, y), 3.0f));
    ggml_set_name(b, "b");
    ggml_set_output(b);
    struct ggml_cgraph * gb = ggml_new_graph(ctx);
    ggml_build_forward_expand(gb, b);

    CHECK(ggml_backend_sched_alloc_graph(sched, ga), "alloc ga");
    set_all(x, 1.0f);
    CHECK(ggml_backend_sched_reserve(sched, gb), "reserve gb");
    log_capture_begin();
    enum ggml_status st = ggml_backend_sched_graph_compute(sched, ga);
    ggml_log_set(NULL, NULL);
    CHECK(st == GGML_STATUS_FAILED, "compute after a reserve of another graph: status %d, a = %g", (int) st, get0(a));
    CHECK(strstr(g_log, "ggml_backend_sched_reserve of another graph") != NULL, "message: %s", g_log);
    // refused until the caller allocates again
    log_capture_begin();
    CHECK(ggml_backend_sched_graph_compute(sched, ga) == GGML_STATUS_FAILED, "still refused");
    ggml_log_set(NULL, NULL);

    CHECK(ggml_backend_sched_alloc_graph(sched, ga), "alloc ga again");
    set_all(x, 1.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, ga) == GGML_STATUS_SUCCESS, "compute ga");
    CHECK_FLOAT(get0(a), 2.0);

    // a reserve of the allocated graph itself keeps its allocation
    ggml_backend_sched_reset(sched);
    CHECK(ggml_backend_sched_alloc_graph(sched, ga), "alloc ga");
    set_all(x, 4.0f);
    CHECK(ggml_backend_sched_reserve(sched, ga), "reserve ga");
    CHECK(ggml_backend_sched_graph_compute(sched, ga) == GGML_STATUS_SUCCESS, "compute ga after reserving ga");
    CHECK_FLOAT(get0(a), 8.0);

    // reset after the reserve: compute allocates the graph itself, as documented. x was computed
    // over in place by the last compute and nobody can set it inside this call, so the compute is
    // refused naming x (never run on its lost bytes); allocated and set again, it computes
    ggml_backend_sched_reset(sched);
    CHECK(ggml_backend_sched_alloc_graph(sched, ga), "alloc ga");
    CHECK(ggml_backend_sched_reserve(sched, gb), "reserve gb");
    ggml_backend_sched_reset(sched);
    log_capture_begin();
    st = ggml_backend_sched_graph_compute(sched, ga);
    ggml_log_set(NULL, NULL);
    CHECK(st == GGML_STATUS_FAILED, "reset, then compute allocates; x is lost: status %d", (int) st);
    CHECK(strstr(g_log, "input tensor 'x'") != NULL, "message names x: %s", g_log);
    ggml_backend_sched_reset(sched);
    CHECK(ggml_backend_sched_alloc_graph(sched, ga), "alloc ga");
    set_all(x, 5.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, ga) == GGML_STATUS_SUCCESS, "compute ga");
    CHECK_FLOAT(get0(a), 10.0);
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
}

// Scenario: as above with ggml_backend_sched_split_graph in place of the reserve, over two
// backends (so the split has copies): split_graph(gb) between alloc_graph(ga) and
// graph_compute(ga). Expected: GGML_STATUS_FAILED naming split_graph; split_graph(ga) itself:
// the compute allocates ga again, and computes 2x^2 or fails naming the input that moved.
// Upstream: the compute runs gb's splits over ga's allocation (a crash), and after a split of
// ga itself it computes with copies that have no memory (a = 0).
static void test_split_graph_between_alloc_and_compute_refused(void) {
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = vec(ctx, "x", 16);
    ggml_set_input(x);
    struct ggml_tensor * x2 = ggml_sqr(ctx, x);
    struct ggml_tensor * a = ggml_scale(ctx, x2, 2.0f);
    ggml_set_name(a, "a");
    ggml_set_output(a);
    struct ggml_cgraph * ga = ggml_new_graph(ctx);
    ggml_build_forward_expand(ga, a);
    struct ggml_tensor * y = vec(ctx, "y", 64);
    ggml_set_input(y);
    struct ggml_tensor * b = ggml_scale(ctx, ggml_sqr(ctx, y), 3.0f);
    ggml_set_output(b);
    struct ggml_cgraph * gb = ggml_new_graph(ctx);
    ggml_build_forward_expand(gb, b);

    for (int same = 0; same < 2; same++) {
        ggml_backend_sched_reset(sched);
        ggml_backend_sched_set_tensor_backend(sched, x2, fake); // x is copied to the device
        CHECK(ggml_backend_sched_alloc_graph(sched, ga), "alloc ga");
        set_all(x, 3.0f);
        ggml_backend_sched_split_graph(sched, same ? ga : gb);
        log_capture_begin();
        enum ggml_status st = ggml_backend_sched_graph_compute(sched, ga);
        ggml_log_set(NULL, NULL);
        if (!same) {
            CHECK(st == GGML_STATUS_FAILED, "compute after a split of another graph: status %d", (int) st);
            CHECK(strstr(g_log, "ggml_backend_sched_split_graph of another graph") != NULL, "message: %s", g_log);
        } else if (st == GGML_STATUS_SUCCESS) {
            CHECK_FLOAT(get0(a), 18.0);
        } else {
            CHECK(st == GGML_STATUS_FAILED && strstr(g_log, "input 'x' moved") != NULL, "status %d, message: %s", (int) st, g_log);
        }
    }
    ggml_backend_sched_reset(sched);
    CHECK(ggml_backend_sched_alloc_graph(sched, ga), "alloc ga");
    set_all(x, 1.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, ga) == GGML_STATUS_SUCCESS, "compute ga");
    CHECK_FLOAT(get0(a), 2.0);
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

// Scenario: a scheduler with the fake device and the CPU; the device's buffer type refuses its
// next allocation (once), then twice in a row. Expected: once: alloc_graph succeeds (a warning
// says the allocation was tried again) and the graph computes; twice: alloc_graph returns false
// with the buffer type named, and the next alloc_graph succeeds. Upstream tries again only with
// one backend (its allocator then has one buffer type and plans by itself in alloc_graph, and the
// scheduler reserves after that failed); with two it returns false at once.
static void test_transient_buffer_failure_tried_again_once(void) {
    ggml_backend_t fake = fake_backend_new(NULL);
    struct fake_stats * st = fake_backend_stats(fake);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 64, false, true);
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = vec(ctx, "x", 16);
    ggml_set_input(x);
    struct ggml_tensor * x2 = ggml_sqr(ctx, x);
    struct ggml_tensor * a = ggml_scale(ctx, x2, 2.0f);
    ggml_set_name(a, "a");
    ggml_set_output(a);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, a);
    // computed on the device (the input stays on the CPU: one copy)
    ggml_backend_sched_set_tensor_backend(sched, x2, fake);
    ggml_backend_sched_set_tensor_backend(sched, a, fake);

    fake_backend_fail_allocs(fake, 0, 1);
    log_capture_begin();
    bool ok = ggml_backend_sched_alloc_graph(sched, g);
    ggml_log_set(NULL, NULL);
    CHECK(st->buffers_refused == 1, "the first compute buffer was refused (%d)", st->buffers_refused);
    CHECK(ok, "a buffer refused once is had on the second try; log: %s", g_log);
    CHECK(strstr(g_log, "trying once more") != NULL, "the second try is logged: %s", g_log);
    set_all(x, 3.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, g) == GGML_STATUS_SUCCESS, "compute");
    CHECK_FLOAT(get0(a), 18.0);

    // a larger graph needs a larger buffer, refused twice: a failure, then the next try works
    struct ggml_tensor * y = vec(ctx, "y", 64);
    ggml_set_input(y);
    struct ggml_tensor * y2 = ggml_sqr(ctx, y);
    struct ggml_tensor * b = ggml_scale(ctx, y2, 2.0f);
    ggml_set_output(b);
    struct ggml_cgraph * gb = ggml_new_graph(ctx);
    ggml_build_forward_expand(gb, b);
    ggml_backend_sched_reset(sched);
    ggml_backend_sched_set_tensor_backend(sched, y2, fake);
    ggml_backend_sched_set_tensor_backend(sched, b, fake);
    fake_backend_fail_allocs(fake, 0, 2);
    log_capture_begin();
    ok = ggml_backend_sched_alloc_graph(sched, gb);
    ggml_log_set(NULL, NULL);
    CHECK(!ok && st->buffers_refused == 3, "refused twice: the allocation fails (refused %d)", st->buffers_refused);
    CHECK(strstr(g_log, "FAKE") != NULL, "the message names the buffer type: %s", g_log);
    ggml_backend_sched_reset(sched);
    ggml_backend_sched_set_tensor_backend(sched, y2, fake);
    ggml_backend_sched_set_tensor_backend(sched, b, fake);
    CHECK(ggml_backend_sched_alloc_graph(sched, gb), "the next allocation works");
    CHECK(ggml_backend_sched_get_tensor_backend(sched, b) == fake, "b computed on the device");
    set_all(y, 2.0f);
    CHECK(ggml_backend_sched_graph_compute(sched, gb) == GGML_STATUS_SUCCESS, "compute");
    CHECK_FLOAT(get0(b), 8.0);
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
}

int main(int argc, char ** argv) {
    g_only = argc > 1 ? argv[1] : NULL;
    RUN(test_failed_ctx_alloc_leaves_nothing_in_freed_memory);
    RUN(test_unlisted_source_named_by_gallocr);
    RUN(test_unlisted_source_via_a_view_named_by_gallocr);
    RUN(test_unlisted_source_named_by_sched_one_backend);
    RUN(test_unlisted_source_named_by_sched_two_backends);
    RUN(test_reserve_between_alloc_and_compute_refused);
    RUN(test_split_graph_between_alloc_and_compute_refused);
    RUN(test_transient_buffer_failure_tried_again_once);
    printf("%d tests passed\n", g_tests_run);
    return 0;
}
