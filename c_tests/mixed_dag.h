// The "mixed" family of random graphs (bench_alloc's second corpus, test_alloc_mixed): unlike
// the first family and unlike llama. 2-D F32 tensors from 4 B to 256 KiB, sizes spread over the
// orders of magnitude; in-place-able ops (unary, scale, rms_norm, soft_max, add/mul with
// broadcasting) and others (transpose + cont, concat, small mul_mat, get_rows, sum_rows); views
// as operands; input, plain and external leafs; operands mostly recent, sometimes from far back;
// several outputs. The same seed always gives the same graph.
#pragma once

#include "rng.h"

#include "ggml-backend.h"
#include "ggml.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define MIXED_MAX_ELEMS 65536

// a random shape of at most MIXED_MAX_ELEMS elements, 1 element included
static struct ggml_tensor * mixed_leaf(struct ggml_context * ctx) {
    // sizes spread evenly over the orders of magnitude, 4 B .. 256 KiB
    int64_t ne0 = (int64_t) 1 << below(9);                 // 1 .. 256
    int64_t ne1 = (int64_t) 1 << below(17 - (int) __builtin_ctzll((uint64_t) ne0));
    ne1 += below((int) ne1) / 2;
    ne1 = ne0 * ne1 > MIXED_MAX_ELEMS ? MIXED_MAX_ELEMS / ne0 : ne1;
    return ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, ne1);
}

// a tensor of the window [n - window, n) that `ok` accepts for `a`, or NULL
static struct ggml_tensor * mixed_partner(struct ggml_tensor ** pool, int n, int window, struct ggml_tensor * a,
                                          bool (*ok)(const struct ggml_tensor *, const struct ggml_tensor *)) {
    int w = n < window ? n : window, start = below(w);
    for (int k = 0; k < w; k++) {
        struct ggml_tensor * b = pool[n - 1 - (start + k) % w];
        if (b->type == GGML_TYPE_F32 && ok(a, b)) {
            return b;
        }
    }
    return NULL;
}

static bool ok_repeat(const struct ggml_tensor * a, const struct ggml_tensor * b) { return ggml_can_repeat(b, a); }
static bool ok_concat1(const struct ggml_tensor * a, const struct ggml_tensor * b) { return a->ne[0] == b->ne[0] && a->ne[1] + b->ne[1] <= MIXED_MAX_ELEMS / a->ne[0]; }
static bool ok_mul_mat(const struct ggml_tensor * a, const struct ggml_tensor * b) { return a->ne[0] == b->ne[0] && a->ne[1] * b->ne[1] <= MIXED_MAX_ELEMS; }

// `external` gives the external leafs their memory (called once for each, as it is made);
// get_rows' index inputs are named "rows<N>": their values must be below N
static struct ggml_cgraph * mixed_dag(struct ggml_context * ctx, uint64_t seed, int n_ops, int window, void (*external)(struct ggml_tensor *, void *),
                                      void * user) {
    rng_seed(seed);
    struct ggml_tensor ** pool = malloc(sizeof(*pool) * (size_t) (n_ops + 8));
    int n = 0;
    for (int i = 0; i < n_ops; i++) {
        // mostly a recent tensor, sometimes one from anywhere before (a long lifetime)
        struct ggml_tensor * a = n == 0 ? NULL : below(6) == 0 ? pool[below(n)] : pool[n - 1 - below(n < window ? n : window)];
        int op = n < 4 ? 0 : below(20);
        struct ggml_tensor * t = NULL, * b;
        switch (op) {
            case 0: case 1: case 2: { // a leaf: input, plain or external (weights)
                t = mixed_leaf(ctx);
                int kind = below(3);
                if (kind == 0) {
                    ggml_set_input(t);
                } else if (kind == 2) {
                    external(t, user);
                }
                break;
            }
            case 3: t = ggml_scale(ctx, a, 0.5f); break;
            case 4: t = ggml_sqr(ctx, a); break;
            case 5: t = ggml_silu(ctx, a); break;
            case 6: t = ggml_rms_norm(ctx, a, 1e-5f); break;
            case 7: t = ggml_soft_max(ctx, a); break;
            case 8: case 9: // elementwise with broadcasting (a partner that repeats into a)
                b = mixed_partner(pool, n, window, a, ok_repeat);
                t = b ? (below(2) ? ggml_add(ctx, a, b) : ggml_mul(ctx, a, b)) : ggml_gelu(ctx, a);
                break;
            case 10: t = ggml_cont(ctx, ggml_transpose(ctx, a)); break;
            case 11: // concat along rows, or along columns of a transposed copy
                b = mixed_partner(pool, n, window, a, ok_concat1);
                t = b ? ggml_concat(ctx, a, b, 1) : ggml_sum_rows(ctx, a);
                break;
            case 12: // a small mul_mat
                b = mixed_partner(pool, n, window, a, ok_mul_mat);
                t = b ? ggml_mul_mat(ctx, a, b) : ggml_sum_rows(ctx, a);
                break;
            case 13: { // get_rows with an index input
                struct ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1 + below((int) (MIXED_MAX_ELEMS / a->ne[0] < 64 ? MIXED_MAX_ELEMS / a->ne[0] : 64)));
                ggml_set_input(idx);
                ggml_format_name(idx, "rows%lld", (long long) a->ne[1]);
                t = ggml_get_rows(ctx, a, idx);
                break;
            }
            case 14: t = ggml_sum_rows(ctx, a); break;
            case 15: case 16: { // a view (rows of a) as the operand of an in-place-able op or a cont
                int64_t r0 = below((int) a->ne[1]), nr = 1 + below((int) (a->ne[1] - r0));
                struct ggml_tensor * v = ggml_view_2d(ctx, a, a->ne[0], nr, a->nb[1], (size_t) r0 * a->nb[1]);
                t = op == 15 ? ggml_cont(ctx, v) : ggml_scale(ctx, v, 2.0f);
                break;
            }
            case 17: // a view kept as a view: later ops read it (keeps a alive)
                t = ggml_view_2d(ctx, a, a->ne[0], 1 + below((int) a->ne[1]), a->nb[1], 0);
                break;
            default: { // in place over a fresh operand chain: a op a
                b = mixed_partner(pool, n, window, a, ok_repeat);
                t = ggml_add(ctx, a, b ? b : a);
                break;
            }
        }
        if (below(12) == 0 && t->op != GGML_OP_NONE) {
            ggml_set_output(t);
        }
        pool[n++] = t;
    }
    int last = n - 1;
    while (pool[last]->op == GGML_OP_NONE) {
        last--;
    }
    ggml_set_output(pool[last]);
    struct ggml_cgraph * g = ggml_new_graph_custom(ctx, 8192, false);
    for (int i = 0; i < n; i++) {
        if (pool[i]->flags & GGML_TENSOR_FLAG_OUTPUT) {
            ggml_build_forward_expand(g, pool[i]);
        }
    }
    free(pool);
    return g;
}
