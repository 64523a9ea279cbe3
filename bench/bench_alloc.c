// Benchmarks of the graph allocator and the scheduler, built twice from the same source: against
// upstream's ggml-base (reference) and against ggml-rs. scripts/bench.sh runs both, interleaved,
// and prints the tables with ratios. Output: one "key value" line per measurement.
//
//   bench_alloc quality   compute-buffer bytes for llama-shaped graphs and two seeded corpora of
//                         random DAGs, the first family and the "mixed" one (mixed_dag.h); with
//                         ggml-rs also the live-bytes lower bound (GGML_RS_ALLOC_PLANNER picks the
//                         placement: greedy-by-size gives the benchmark's reference column)
//   bench_alloc time      gallocr reserve / first alloc_graph / replayed alloc_graph of a
//                         ~2000-node llama-shaped graph, and the scheduler's reset + alloc_graph
//                         over two backends, and graph_compute overhead with tiny ops (medians)
//
// No tensor memory is touched: weights live in "virtual" buffers with a fake base address, and
// the allocator benchmarks use a buffer type that allocates nothing (as upstream's test-alloc).
#include "fake_backend.h"
#include "ggml_rs_ext.h"
#include "rng.h"
#include "mixed_dag.h"

#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// ---- a buffer type with no memory behind it

static uint8_t * const VIRTUAL_BASE = (uint8_t *) 0x100000000ull;

static void * vb_base(ggml_backend_buffer_t b) { (void) b; return VIRTUAL_BASE; }
static void vb_nop_clear(ggml_backend_buffer_t b, uint8_t v) { (void) b; (void) v; }
static void vb_nop_set(ggml_backend_buffer_t b, struct ggml_tensor * t, const void * d, size_t o, size_t s) { (void) b; (void) t; (void) d; (void) o; (void) s; }
static void vb_nop_get(ggml_backend_buffer_t b, const struct ggml_tensor * t, void * d, size_t o, size_t s) { (void) b; (void) t; (void) d; (void) o; (void) s; }

static struct ggml_backend_buffer_i virtual_buffer_i = {
    .get_base = vb_base, .set_tensor = vb_nop_set, .get_tensor = vb_nop_get, .clear = vb_nop_clear,
};

static const char * vbt_name(ggml_backend_buffer_type_t t) { (void) t; return "virtual"; }
static ggml_backend_buffer_t vbt_alloc(ggml_backend_buffer_type_t t, size_t size) { return ggml_backend_buffer_init(t, virtual_buffer_i, NULL, size); }
static size_t vbt_align(ggml_backend_buffer_type_t t) { (void) t; return 32; }
static bool vbt_is_host(ggml_backend_buffer_type_t t) { (void) t; return true; }

static struct ggml_backend_buffer_type virtual_buft = {
    .iface = { .get_name = vbt_name, .alloc_buffer = vbt_alloc, .get_alignment = vbt_align, .is_host = vbt_is_host },
};

// a buffer of type `buft` at a fake address: tensors "live" there without memory
static ggml_backend_buffer_t virtual_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    ggml_backend_buffer_t b = ggml_backend_buffer_init(buft, virtual_buffer_i, NULL, size);
    ggml_backend_buffer_set_usage(b, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    return b;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void * a, const void * b) {
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double median(double * v, int n) {
    qsort(v, n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---- llama-shaped graphs

struct llama_shape {
    const char * name;
    int n_layer, n_tokens, n_kv, n_embd, n_head, n_head_kv, n_ff, n_vocab;
    bool flash_attn;
};

struct llama_graph {
    struct ggml_context * wctx, * ctx;
    struct ggml_cgraph * graph;
    ggml_backend_buffer_t wbuf[2];
    struct ggml_tensor ** layer_weights; // the weights of each layer, 12 per layer
    struct ggml_tensor * tok_embd, * out_norm, * output;
    struct llama_shape shape;
};

static void build_llama_graph(struct llama_graph * g);

static struct ggml_tensor * weight(struct ggml_context * ctx, int64_t a, int64_t b) {
    return b > 1 ? ggml_new_tensor_2d(ctx, GGML_TYPE_F16, a, b) : ggml_new_tensor_1d(ctx, GGML_TYPE_F32, a);
}

// A decoder stack as llama.cpp builds it (attention with a KV cache, SwiGLU FFN), with the
// weights and the KV cache in virtual buffers. `split` >= 0 puts layers >= split in the second
// weight buffer (the second backend's); `cpu_embd` puts the token embeddings there too.
static struct llama_graph build_llama_on(const struct llama_shape * s, ggml_backend_buffer_type_t wbuft0, ggml_backend_buffer_type_t wbuft1, int split, int cpu_embd) {
    struct llama_graph g;
    memset(&g, 0, sizeof(g));
    int n_w = 16 + s->n_layer * 14;
    struct ggml_init_params wp = { (size_t) n_w * ggml_tensor_overhead(), NULL, true };
    g.wctx = ggml_init(wp);
    struct ggml_context * w = g.wctx;
    const int hd = s->n_embd / s->n_head;

    struct ggml_tensor * tok_embd = weight(w, s->n_embd, s->n_vocab);
    struct ggml_tensor * out_norm = weight(w, s->n_embd, 1);
    struct ggml_tensor * output = weight(w, s->n_embd, s->n_vocab);
    struct ggml_tensor ** lw = calloc((size_t) s->n_layer * 12, sizeof(*lw));
    for (int l = 0; l < s->n_layer; l++) {
        struct ggml_tensor ** x = lw + l * 12;
        x[0] = weight(w, s->n_embd, 1);                      // attn_norm
        x[1] = weight(w, s->n_embd, s->n_embd);              // wq
        x[2] = weight(w, s->n_embd, hd * s->n_head_kv);      // wk
        x[3] = weight(w, s->n_embd, hd * s->n_head_kv);      // wv
        x[4] = weight(w, s->n_embd, s->n_embd);              // wo
        x[5] = weight(w, s->n_embd, 1);                      // ffn_norm
        x[6] = weight(w, s->n_embd, s->n_ff);                // gate
        x[7] = weight(w, s->n_embd, s->n_ff);                // up
        x[8] = weight(w, s->n_ff, s->n_embd);                // down
        x[9] = ggml_new_tensor_3d(w, GGML_TYPE_F16, hd, s->n_kv, s->n_head_kv); // k cache
        x[10] = ggml_new_tensor_3d(w, GGML_TYPE_F16, hd, s->n_kv, s->n_head_kv); // v cache
    }
    // place weights in virtual buffers: the first part, the second part
    size_t off[2] = { 0, 0 };
    g.wbuf[0] = virtual_buffer(wbuft0, (size_t) 1 << 46);
    g.wbuf[1] = virtual_buffer(wbuft1 ? wbuft1 : wbuft0, (size_t) 1 << 46);
    for (struct ggml_tensor * t = ggml_get_first_tensor(w); t; t = ggml_get_next_tensor(w, t)) {
        int part = 0;
        if (split >= 0 && t == tok_embd) {
            part = cpu_embd; // llama.cpp keeps the token embeddings in host memory
        } else if (split >= 0) {
            for (int l = split; l < s->n_layer; l++) {
                for (int k = 0; k < 11; k++) {
                    part |= lw[l * 12 + k] == t;
                }
            }
            part |= (t == out_norm || t == output);
        }
        ggml_backend_tensor_alloc(g.wbuf[part], t, VIRTUAL_BASE + off[part]);
        off[part] += (ggml_nbytes(t) + 31) / 32 * 32;
    }
    g.layer_weights = lw;
    g.tok_embd = tok_embd;
    g.out_norm = out_norm;
    g.output = output;
    g.shape = *s;
    struct ggml_init_params cp = { (size_t) (s->n_layer * 80 + 64) * ggml_tensor_overhead() + ggml_graph_overhead_custom(8192, false), NULL, true };
    g.ctx = ggml_init(cp);
    build_llama_graph(&g);
    return g;
}

// (Re)builds the graph of `g` over its weights, in its context emptied first: a new graph at the
// same addresses, as llama.cpp builds each of its graphs in the same memory
static void build_llama_graph(struct llama_graph * g) {
    const struct llama_shape * s = &g->shape;
    struct ggml_context * c = g->ctx;
    ggml_reset(c);
    const int hd = s->n_embd / s->n_head;
    struct ggml_tensor ** lw = g->layer_weights;
    struct ggml_tensor * tok_embd = g->tok_embd, * out_norm = g->out_norm, * output = g->output;
    struct ggml_tensor * tokens = ggml_new_tensor_1d(c, GGML_TYPE_I32, s->n_tokens);
    ggml_set_input(tokens);
    struct ggml_tensor * pos = ggml_new_tensor_1d(c, GGML_TYPE_I32, s->n_tokens);
    ggml_set_input(pos);
    struct ggml_tensor * mask = ggml_new_tensor_2d(c, GGML_TYPE_F16, s->n_kv, s->n_tokens);
    ggml_set_input(mask);
    g->graph = ggml_new_graph_custom(c, 8192, false);
    struct ggml_tensor * cur = ggml_get_rows(c, tok_embd, tokens);
    for (int l = 0; l < s->n_layer; l++) {
        struct ggml_tensor ** x = lw + l * 12;
        struct ggml_tensor * inp = cur;
        cur = ggml_mul(c, ggml_rms_norm(c, cur, 1e-5f), x[0]);
        struct ggml_tensor * q = ggml_reshape_3d(c, ggml_mul_mat(c, x[1], cur), hd, s->n_head, s->n_tokens);
        struct ggml_tensor * k = ggml_reshape_3d(c, ggml_mul_mat(c, x[2], cur), hd, s->n_head_kv, s->n_tokens);
        struct ggml_tensor * v = ggml_mul_mat(c, x[3], cur);
        q = ggml_rope_ext(c, q, pos, NULL, hd, 0, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        k = ggml_rope_ext(c, k, pos, NULL, hd, 0, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        // store into the caches (views of the cache tensors), read the whole window back
        struct ggml_tensor * kc = ggml_view_3d(c, x[9], hd, s->n_tokens, s->n_head_kv, x[9]->nb[1], x[9]->nb[2], 0);
        struct ggml_tensor * vc = ggml_view_3d(c, x[10], hd, s->n_tokens, s->n_head_kv, x[10]->nb[1], x[10]->nb[2], 0);
        struct ggml_tensor * kst = ggml_cpy(c, ggml_permute(c, k, 0, 2, 1, 3), kc);
        struct ggml_tensor * vst = ggml_cpy(c, ggml_permute(c, ggml_reshape_3d(c, v, hd, s->n_head_kv, s->n_tokens), 0, 2, 1, 3), vc);
        // the cache stores come before the attention in the graph, as llama orders them
        ggml_build_forward_expand(g->graph, kst);
        ggml_build_forward_expand(g->graph, vst);
        struct ggml_tensor * K = x[9];
        struct ggml_tensor * V = x[10];
        struct ggml_tensor * qp = ggml_permute(c, q, 0, 2, 1, 3);
        struct ggml_tensor * attn;
        if (s->flash_attn) {
            attn = ggml_flash_attn_ext(c, qp, K, V, mask, 1.0f / 8.0f, 0.0f, 0.0f);
            attn = ggml_reshape_2d(c, attn, s->n_embd, s->n_tokens);
        } else {
            struct ggml_tensor * kq = ggml_mul_mat(c, K, qp);
            kq = ggml_soft_max_ext(c, kq, mask, 1.0f / 8.0f, 0.0f);
            struct ggml_tensor * vt = ggml_cont(c, ggml_transpose(c, ggml_reshape_2d(c, V, hd * s->n_head_kv, s->n_kv)));
            struct ggml_tensor * kqv = ggml_mul_mat(c, ggml_reshape_3d(c, vt, s->n_kv, hd, s->n_head_kv), kq);
            attn = ggml_cont_2d(c, ggml_permute(c, kqv, 0, 2, 1, 3), s->n_embd, s->n_tokens);
        }
        cur = ggml_add(c, ggml_mul_mat(c, x[4], attn), inp);
        struct ggml_tensor * ffn_in = cur;
        cur = ggml_mul(c, ggml_rms_norm(c, cur, 1e-5f), x[5]);
        struct ggml_tensor * gate = ggml_mul_mat(c, x[6], cur);
        struct ggml_tensor * up = ggml_mul_mat(c, x[7], cur);
        cur = ggml_mul_mat(c, x[8], ggml_swiglu_split(c, gate, up));
        cur = ggml_add(c, cur, ffn_in);
    }
    cur = ggml_mul(c, ggml_rms_norm(c, cur, 1e-5f), out_norm);
    cur = ggml_mul_mat(c, output, cur);
    ggml_set_output(cur);
    ggml_build_forward_expand(g->graph, cur);
}

static struct llama_graph build_llama(const struct llama_shape * s, ggml_backend_buffer_type_t wbuft0, ggml_backend_buffer_type_t wbuft1, int split) {
    return build_llama_on(s, wbuft0, wbuft1, split, 0);
}

static void free_llama(struct llama_graph * g) {
    ggml_backend_buffer_free(g->wbuf[0]);
    ggml_backend_buffer_free(g->wbuf[1]);
    ggml_free(g->ctx);
    ggml_free(g->wctx);
    free(g->layer_weights);
}

// ---- random DAGs (as in the allocator anchors: unary, concat, slice + cont, add with a view,
// fresh tensors; random outputs)


static struct ggml_cgraph * random_dag(struct ggml_context * ctx, uint64_t seed, int n_ops, int window) {
    rng_seed(seed);
    struct ggml_tensor ** pool = malloc(sizeof(*pool) * (size_t) (n_ops + 8));
    int n = 0;
    for (int i = 0; i < 4; i++) {
        pool[n] = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 64 * (1 + (int) (rnd() % 64)));
        ggml_set_input(pool[n++]);
    }
    for (int i = 0; i < n_ops; i++) {
        struct ggml_tensor * a = pool[n - 1 - (int) (rnd() % (uint64_t) (n < window ? n : window))];
        struct ggml_tensor * b = pool[n - 1 - (int) (rnd() % (uint64_t) (n < window ? n : window))];
        struct ggml_tensor * t;
        switch (rnd() % 6) {
            case 0: t = ggml_scale(ctx, a, 0.5f); break;
            case 1: t = ggml_sqr(ctx, a); break;
            case 2: t = ggml_concat(ctx, a, b, 0); break;
            case 3: {
                int64_t len = a->ne[0] / 2 > 0 ? a->ne[0] / 2 : 1;
                t = ggml_cont(ctx, ggml_view_1d(ctx, a, len, 0));
                break;
            }
            case 4: {
                int64_t len = a->ne[0] < b->ne[0] ? a->ne[0] : b->ne[0];
                t = ggml_add(ctx, ggml_view_1d(ctx, a, len, 0), ggml_view_1d(ctx, b, len, 0));
                break;
            }
            default: t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 64 * (1 + (int) (rnd() % 64))); ggml_set_input(t); break;
        }
        if (ggml_nelements(t) > 65536) {
            t = ggml_cont(ctx, ggml_view_1d(ctx, t, 4096, 0));
        }
        if (rnd() % 20 == 0) {
            ggml_set_output(t);
        }
        pool[n++] = t;
    }
    ggml_set_output(pool[n - 1]);
    struct ggml_cgraph * g = ggml_new_graph_custom(ctx, 8192, false);
    for (int i = 0; i < n; i++) {
        if (pool[i]->flags & GGML_TENSOR_FLAG_OUTPUT) {
            ggml_build_forward_expand(g, pool[i]);
        }
    }
    free(pool);
    return g;
}

// the external leafs of a mixed graph: weights at fake addresses in a virtual buffer
struct external_place {
    ggml_backend_buffer_t buffer;
    size_t used;
};

static void place_external(struct ggml_tensor * t, void * user) {
    struct external_place * e = user;
    ggml_backend_tensor_alloc(e->buffer, t, VIRTUAL_BASE + e->used);
    e->used += (ggml_nbytes(t) + 31) / 32 * 32;
}

// graph `seed` of the mixed corpus, in a new context, its external leafs in a new virtual buffer
static struct ggml_cgraph * mixed_corpus_graph(int seed, struct ggml_context ** ctx, ggml_backend_buffer_t * ext) {
    struct ggml_init_params p = { 4096 * ggml_tensor_overhead() + ggml_graph_overhead_custom(8192, false), NULL, true };
    *ctx = ggml_init(p);
    *ext = virtual_buffer(&virtual_buft, (size_t) 1 << 40);
    rng_seed(7777 + (uint64_t) seed); // the size and window of the graph, then the graph
    int n_ops = 800 + below(700), window = 4 + below(28);
    struct external_place e = { *ext, 0 };
    return mixed_dag(*ctx, 1000 + (uint64_t) seed, n_ops, window, place_external, &e);
}

static void report_plan(const char * name, ggml_gallocr_t ga) {
    size_t planned = ggml_gallocr_get_buffer_size(ga, 0), lb = 0;
    if (ggml_rs_gallocr_plan_stats) {
        ggml_rs_gallocr_plan_stats(ga, 0, NULL, &lb);
    }
    printf("quality %s %zu %zu\n", name, planned, lb);
}

static const struct llama_shape SHAPES[] = {
    { "llama-tiny-t32",     4,   32,  256,  256,  4,  4,   688, 32000, false },
    { "llama-1b-t128",     16,  128, 1024, 2048, 32,  8,  5632, 32000, false },
    { "llama-1b-t128-fa",  16,  128, 1024, 2048, 32,  8,  5632, 32000, true },
    { "llama-8b-t512",     32,  512, 4096, 4096, 32,  8, 14336, 128256, false },
    { "llama-8b-t512-fa",  32,  512, 4096, 4096, 32,  8, 14336, 128256, true },
    { "llama-8b-t1",       32,    1, 4096, 4096, 32,  8, 14336, 128256, false },
    { "llama-70b-t256",    80,  256, 2048, 8192, 64,  8, 28672, 128256, false },
};

static int quality(void) {
    for (size_t i = 0; i < sizeof(SHAPES) / sizeof(SHAPES[0]); i++) {
        struct llama_graph g = build_llama(&SHAPES[i], &virtual_buft, NULL, -1);
        ggml_gallocr_t ga = ggml_gallocr_new(&virtual_buft);
        if (!ggml_gallocr_reserve(ga, g.graph)) {
            return 1;
        }
        report_plan(SHAPES[i].name, ga);
        ggml_gallocr_free(ga);
        free_llama(&g);
    }
    for (int window = 6; window <= 24; window += 18) {
        for (int seed = 0; seed < 60; seed++) {
            struct ggml_init_params p = { 4096 * ggml_tensor_overhead() + ggml_graph_overhead_custom(8192, false), NULL, true };
            struct ggml_context * ctx = ggml_init(p);
            struct ggml_cgraph * g = random_dag(ctx, (uint64_t) seed, 400, window);
            ggml_gallocr_t ga = ggml_gallocr_new(&virtual_buft);
            if (!ggml_gallocr_reserve(ga, g)) {
                return 1;
            }
            char name[64];
            snprintf(name, sizeof(name), "random-w%d-s%d", window, seed);
            report_plan(name, ga);
            ggml_gallocr_free(ga);
            ggml_free(ctx);
        }
    }
    // the second family (mixed_dag.h): 100 seeded graphs of about 250-650 nodes
    for (int seed = 0; seed < 100; seed++) {
        struct ggml_context * ctx;
        ggml_backend_buffer_t ext;
        struct ggml_cgraph * g = mixed_corpus_graph(seed, &ctx, &ext);
        ggml_gallocr_t ga = ggml_gallocr_new(&virtual_buft);
        if (!ggml_gallocr_reserve(ga, g)) {
            return 1;
        }
        char name[64];
        snprintf(name, sizeof(name), "mixed-s%d-n%d", seed, ggml_graph_n_nodes(g));
        report_plan(name, ga);
        ggml_gallocr_free(ga);
        ggml_backend_buffer_free(ext);
        ggml_free(ctx);
    }
    return 0;
}

// tensors keep the placement of the previous round: clear it for a first allocation (the
// weights stay where they are)
static void forget_placement(struct llama_graph * g) {
    for (int i = 0; i < ggml_graph_n_nodes(g->graph); i++) {
        struct ggml_tensor * n = ggml_graph_node(g->graph, i);
        n->data = NULL;
        n->buffer = NULL;
    }
    for (int i = 0; i < g->graph->n_leafs; i++) {
        struct ggml_tensor * l = g->graph->leafs[i];
        if (l->buffer != g->wbuf[0]) {
            l->data = NULL;
            l->buffer = NULL;
        }
    }
}

// The scheduler over two backends on a 60-layer llama-shaped graph in three splits (token
// embeddings in host memory, the first half of the layers on the fake device, the rest on the
// CPU), as llama.cpp runs a partly offloaded model: reset + alloc_graph `reps` times, of the same
// graph (`new_graph` false) or of a graph built anew each time at the same addresses (true, the
// build itself not timed). Times (seconds) go to `t` when given. Returns the number of splits, or
// -1 when an allocation failed.
static const struct llama_shape SPLIT3 = { "llama-60l-split3", 60, 64, 256, 512, 8, 8, 1536, 32000, false };

static int sched_split3(int reps, bool new_graph, double * t, int * n_nodes) {
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 8192, false, false);
    struct llama_graph g = build_llama_on(&SPLIT3, fake_backend_buft(fake), ggml_backend_cpu_buffer_type(), SPLIT3.n_layer / 2, 1);
    int n_splits = -1;
    if (ggml_backend_sched_reserve(sched, g.graph)) {
        n_splits = 0;
        for (int r = 0; r < reps; r++) {
            if (new_graph) {
                build_llama_graph(&g);
            }
            double t0 = now();
            ggml_backend_sched_reset(sched);
            if (!ggml_backend_sched_alloc_graph(sched, g.graph)) {
                n_splits = -1;
                break;
            }
            if (t) {
                t[r] = now() - t0;
            }
        }
    }
    if (n_splits == 0) {
        n_splits = ggml_backend_sched_get_n_splits(sched);
    }
    if (n_nodes) {
        *n_nodes = ggml_graph_n_nodes(g.graph);
    }
    if (ggml_rs_sched_counters && getenv("GGML_RS_BENCH_VERBOSE")) {
        uint64_t n_split_graphs = 0, n_repeats = 0;
        ggml_rs_sched_counters(sched, &n_split_graphs, &n_repeats);
        fprintf(stderr, "sched_split3 new_graph=%d: %llu graphs split, %llu allocations repeated\n", new_graph, (unsigned long long) n_split_graphs, (unsigned long long) n_repeats);
    }
    ggml_backend_sched_free(sched);
    free_llama(&g);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
    return n_splits;
}

static int REPS_ENV(void) { const char * r = getenv("GGML_RS_BENCH_REPS"); return r ? atoi(r) : 41; }
#define REPS_MAX 41

static int timing(void) {
    // gallocr on a ~2000-node graph
    const struct llama_shape * s = &SHAPES[6];
    struct llama_graph g = build_llama(s, &virtual_buft, NULL, -1);
    printf("nodes %d\n", ggml_graph_n_nodes(g.graph));
    const int REPS = REPS_ENV() < REPS_MAX ? REPS_ENV() : REPS_MAX;
    double t_reserve[REPS_MAX], t_first[REPS_MAX], t_replay[REPS_MAX];
    for (int r = 0; r < REPS; r++) {
        ggml_gallocr_t ga = ggml_gallocr_new(&virtual_buft);
        double t0 = now();
        ggml_gallocr_reserve(ga, g.graph);
        t_reserve[r] = now() - t0;
        ggml_gallocr_free(ga);
        forget_placement(&g);
        ga = ggml_gallocr_new(&virtual_buft);
        t0 = now();
        ggml_gallocr_alloc_graph(ga, g.graph);
        t_first[r] = now() - t0;
        t0 = now();
        ggml_gallocr_alloc_graph(ga, g.graph);
        t_replay[r] = now() - t0;
        ggml_gallocr_free(ga);
    }
    printf("time gallocr_reserve_us %.1f\n", 1e6 * median(t_reserve, REPS));
    printf("time gallocr_alloc_first_us %.1f\n", 1e6 * median(t_first, REPS));
    printf("time gallocr_alloc_replay_us %.1f\n", 1e6 * median(t_replay, REPS));
    free_llama(&g);

    // gallocr reserve of the first 20 graphs of the mixed corpus (irregular graphs, where the
    // offline placement runs): the sum of the medians
    double t_mixed = 0;
    for (int seed = 0; seed < 20; seed++) {
        struct ggml_context * mctx;
        ggml_backend_buffer_t ext;
        struct ggml_cgraph * mg = mixed_corpus_graph(seed, &mctx, &ext);
        double t[REPS_MAX];
        for (int r = 0; r < REPS; r++) {
            ggml_gallocr_t ga = ggml_gallocr_new(&virtual_buft);
            double t0 = now();
            ggml_gallocr_reserve(ga, mg);
            t[r] = now() - t0;
            ggml_gallocr_free(ga);
        }
        t_mixed += median(t, REPS);
        ggml_backend_buffer_free(ext);
        ggml_free(mctx);
    }
    printf("time gallocr_reserve_mixed20_us %.1f\n", 1e6 * t_mixed);

    // scheduler: reset + alloc_graph of the same ~2000-node graph over two backends
    ggml_backend_t fake = fake_backend_new(NULL);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 8192, false, false);
    struct llama_shape small = *s;
    small.n_embd = 512;
    small.n_ff = 1536;
    small.n_head = 8;
    small.n_head_kv = 8;
    small.n_vocab = 32000;
    small.n_kv = 256;
    small.n_tokens = 64;
    struct llama_graph gs = build_llama(&small, fake_backend_buft(fake), ggml_backend_cpu_buffer_type(), small.n_layer / 2);
    double t_sched[REPS_MAX];
    if (!ggml_backend_sched_reserve(sched, gs.graph)) {
        return 1;
    }
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        ggml_backend_sched_reset(sched);
        if (!ggml_backend_sched_alloc_graph(sched, gs.graph)) {
            return 1;
        }
        t_sched[r] = now() - t0;
    }
    printf("splits %d\n", ggml_backend_sched_get_n_splits(sched));
    printf("time sched_reset_alloc_us %.1f\n", 1e6 * median(t_sched, REPS));
    ggml_backend_sched_free(sched);
    free_llama(&gs);

    int n3 = 0, splits3 = sched_split3(REPS, false, t_sched, &n3);
    if (splits3 < 0) {
        return 1;
    }
    printf("split3 %d %d\n", n3, splits3);
    printf("time sched3_same_us %.1f\n", 1e6 * median(t_sched, REPS));
    if (sched_split3(REPS, true, t_sched, NULL) < 0) {
        return 1;
    }
    printf("time sched3_new_us %.1f\n", 1e6 * median(t_sched, REPS));

    // graph_compute overhead: 2000 tiny ops on the CPU backend through the scheduler
    ggml_backend_sched_t sched1 = ggml_backend_sched_new(&cpu, NULL, 1, 8192, false, false);
    struct ggml_init_params p = { 2100 * ggml_tensor_overhead() + ggml_graph_overhead_custom(4096, false), NULL, true };
    struct ggml_context * ctx = ggml_init(p);
    struct ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_set_input(x);
    struct ggml_tensor * cur = x;
    for (int i = 0; i < 2000; i++) {
        cur = ggml_scale(ctx, cur, 1.0f);
    }
    ggml_set_output(cur);
    struct ggml_cgraph * gt = ggml_new_graph_custom(ctx, 4096, false);
    ggml_build_forward_expand(gt, cur);
    ggml_backend_sched_alloc_graph(sched1, gt);
    float one[4] = { 1, 1, 1, 1 };
    ggml_backend_tensor_set(x, one, 0, sizeof(one));
    double t_compute[REPS_MAX];
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        ggml_backend_sched_graph_compute(sched1, gt);
        t_compute[r] = now() - t0;
    }
    printf("time sched_compute_2000_tiny_ops_us %.1f\n", 1e6 * median(t_compute, REPS));
    ggml_backend_sched_free(sched1);
    ggml_free(ctx);
    ggml_backend_free(cpu);
    ggml_backend_free(fake);
    return 0;
}

// one operation in a loop, for a profiler: reserve, first (alloc_graph with a new plan), replay
// (alloc_graph of the same graph again), sched (reset + alloc_graph over two backends), sched3 /
// sched3new (the same / a new 60-layer graph in three splits, see `sched_split3`), reserve-mixed
// (reserve of 20 graphs of the mixed corpus);
// GGML_RS_BENCH_SHAPE picks another graph
static int profile(const char * what, int n) {
    const char * shape = getenv("GGML_RS_BENCH_SHAPE"); // index into SHAPES, default the ~2800-node graph
    const struct llama_shape * s = &SHAPES[shape ? atoi(shape) % (int) (sizeof(SHAPES) / sizeof(SHAPES[0])) : 6];
    if (strcmp(what, "reserve-mixed") == 0) {
        // reserve of the first 20 graphs of the mixed corpus, n times each
        for (int seed = 0; seed < 20; seed++) {
            struct ggml_context * mctx;
            ggml_backend_buffer_t ext;
            struct ggml_cgraph * mg = mixed_corpus_graph(seed, &mctx, &ext);
            for (int r = 0; r < n; r++) {
                ggml_gallocr_t ga = ggml_gallocr_new(&virtual_buft);
                ggml_gallocr_reserve(ga, mg);
                ggml_gallocr_free(ga);
            }
            ggml_backend_buffer_free(ext);
            ggml_free(mctx);
        }
        return 0;
    }
    struct llama_graph g = build_llama(s, &virtual_buft, NULL, -1);
    if (strcmp(what, "sched3") == 0 || strcmp(what, "sched3new") == 0) {
        free_llama(&g);
        return sched_split3(n, strcmp(what, "sched3new") == 0, NULL, NULL) < 0;
    }
    if (strcmp(what, "sched") == 0) {
        ggml_backend_t fake = fake_backend_new(NULL);
        ggml_backend_t cpu = ggml_backend_cpu_init();
        ggml_backend_t backends[2] = { fake, cpu };
        ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 8192, false, false);
        struct llama_graph gs = build_llama(s, fake_backend_buft(fake), ggml_backend_cpu_buffer_type(), s->n_layer / 2);
        for (int r = 0; r < n; r++) {
            ggml_backend_sched_reset(sched);
            if (!ggml_backend_sched_alloc_graph(sched, gs.graph)) {
                return 1;
            }
        }
        ggml_backend_sched_free(sched);
        free_llama(&gs);
        ggml_backend_free(cpu);
        ggml_backend_free(fake);
    } else {
        ggml_gallocr_t ga = ggml_gallocr_new(&virtual_buft);
        for (int r = 0; r < n; r++) {
            if (strcmp(what, "reserve") == 0) {
                ggml_gallocr_free(ga);
                ga = ggml_gallocr_new(&virtual_buft);
                ggml_gallocr_reserve(ga, g.graph);
            } else if (strcmp(what, "first") == 0) {
                ggml_gallocr_free(ga);
                ga = ggml_gallocr_new(&virtual_buft);
                forget_placement(&g);
                ggml_gallocr_alloc_graph(ga, g.graph);
            } else {
                ggml_gallocr_alloc_graph(ga, g.graph);
            }
        }
        ggml_gallocr_free(ga);
    }
    free_llama(&g);
    return 0;
}

int main(int argc, char ** argv) {
    const char * mode = argc > 1 ? argv[1] : "quality";
    printf("library %s\n", ggml_rs_version ? ggml_rs_version() : "upstream ggml-base");
    if (strcmp(mode, "quality") == 0) {
        return quality();
    }
    if (strcmp(mode, "time") == 0) {
        return timing();
    }
    if (strcmp(mode, "profile") == 0 && argc > 2) {
        return profile(argv[2], argc > 3 ? atoi(argv[3]) : 1000);
    }
    fprintf(stderr, "usage: %s quality|time|profile reserve|first|replay|sched|sched3|sched3new|reserve-mixed [N]\n", argv[0]);
    return 2;
}
