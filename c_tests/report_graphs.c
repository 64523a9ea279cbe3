// report_graphs: C graphs allocated by the graph allocator and the scheduler, each followed by
// its memory plan report (ggml_rs_gallocr_write_report / ggml_rs_sched_write_report) and the
// places read back from its tensors, for scripts/check_report.py to compare:
//
//   OUT/<k>.json   the report of allocation k (the last plan)
//   OUT/<k>.tsv    ADDRESS<TAB>BUFFER TYPE<TAB>OFFSET<TAB>NBYTES<TAB>NAME of every tensor of the
//                  graph (nodes, leafs, sources, view sources) in a compute buffer:
//                  OFFSET = data - ggml_backend_buffer_get_base(buffer), NBYTES = ggml_nbytes
//
//   0  gallocr on the CPU: views, reshapes, a transpose, ops that compute in place, an output
//   1  the same allocator, a second graph that reads the first one's output (a carried result)
//   2  gallocr with two buffer types (CPU and the fake device's), nodes split between them
//   3  the scheduler over the fake device and the CPU, nodes assigned to both: splits, copies
//
//   report_graphs OUT

#include "fake_backend.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "ggml_rs_ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char * out_dir;

static void fail(const char * what) {
    fprintf(stderr, "report_graphs: %s\n", what);
    exit(1);
}

static void record(FILE * f, struct ggml_tensor * t) {
    if (t->buffer && t->data && ggml_backend_buffer_get_usage(t->buffer) == GGML_BACKEND_BUFFER_USAGE_COMPUTE) {
        const char * base = (const char *) ggml_backend_buffer_get_base(t->buffer);
        fprintf(f, "%p\t%s\t%zu\t%zu\t%s\n", (void *) t, ggml_backend_buft_name(ggml_backend_buffer_get_type(t->buffer)),
                (size_t) ((const char *) t->data - base), ggml_nbytes(t), t->name);
    }
}

// OUT/<k>.tsv: every tensor the graph reaches, read back
static void read_back(int k, struct ggml_cgraph * g) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.tsv", out_dir, k);
    FILE * f = fopen(path, "w");
    if (!f) {
        fail(path);
    }
    for (int i = 0; i < ggml_graph_n_nodes(g); i++) {
        struct ggml_tensor * t = ggml_graph_node(g, i);
        record(f, t);
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            if (t->src[j]) {
                record(f, t->src[j]);
                if (t->src[j]->view_src) {
                    record(f, t->src[j]->view_src);
                }
            }
        }
        if (t->view_src) {
            record(f, t->view_src);
        }
    }
    fclose(f);
}

static const char * report_path(int k) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/%d.json", out_dir, k);
    return path;
}

static struct ggml_context * new_ctx(void) {
    struct ggml_init_params p = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), NULL, true };
    return ggml_init(p);
}

// x -> a = 2x -> b = a^2 (in place) -> c = b + a -> views, reshape, transpose -> y = sum(...)
static struct ggml_tensor * body(struct ggml_context * ctx, struct ggml_tensor * x, struct ggml_tensor ** mid) {
    struct ggml_tensor * a = ggml_scale(ctx, x, 2.0f);
    ggml_set_name(a, "a");
    struct ggml_tensor * b = ggml_sqr(ctx, a);
    ggml_set_name(b, "b");
    struct ggml_tensor * c = ggml_add(ctx, b, a);
    ggml_set_name(c, "c");
    struct ggml_tensor * half = ggml_view_1d(ctx, c, 32, 32 * sizeof(float));
    ggml_set_name(half, "c_hi");
    struct ggml_tensor * m = ggml_reshape_2d(ctx, half, 8, 4);
    struct ggml_tensor * tr = ggml_cont(ctx, ggml_transpose(ctx, m));
    ggml_set_name(tr, "c_hi_T");
    struct ggml_tensor * d = ggml_add(ctx, ggml_sqr(ctx, tr), tr);
    ggml_set_name(d, "d");
    if (mid) {
        *mid = c;
    }
    return ggml_sum(ctx, d);
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    if (!ggml_rs_gallocr_write_report || !ggml_rs_sched_write_report) {
        fail("the loaded library is not ggml-rs (no ggml_rs_*_write_report)");
    }
    ggml_backend_t cpu = ggml_backend_cpu_init();
    struct fake_options fo = { 0 };
    fo.name = "FAKE";
    ggml_backend_t fake = fake_backend_new(&fo);

    // 0, 1: one allocator, two graphs; the second reads the first one's output
    struct ggml_context * ctx = new_ctx();
    struct ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 64);
    ggml_set_name(x, "x");
    ggml_set_input(x);
    struct ggml_tensor * c = NULL;
    struct ggml_tensor * y = body(ctx, x, &c);
    ggml_set_name(y, "y");
    ggml_set_output(y);
    ggml_set_output(c);
    struct ggml_cgraph * g0 = ggml_new_graph(ctx);
    ggml_build_forward_expand(g0, y);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    if (!ggml_gallocr_alloc_graph(ga, g0) || !ggml_rs_gallocr_write_report(ga, report_path(0), 0)) {
        fail("graph 0");
    }
    read_back(0, g0);

    // listed node by node, so that c is read, not recomputed: it keeps its place (carried)
    struct ggml_context * ctx1 = new_ctx();
    struct ggml_tensor * h = ggml_scale(ctx1, c, 0.5f);
    ggml_set_name(h, "h");
    struct ggml_tensor * e = ggml_sqr(ctx1, h);
    ggml_set_name(e, "e");
    struct ggml_tensor * z = ggml_add(ctx1, e, c);
    ggml_set_name(z, "z");
    ggml_set_output(z);
    struct ggml_cgraph * g1 = ggml_new_graph(ctx1);
    ggml_graph_add_node(g1, h);
    ggml_graph_add_node(g1, e);
    ggml_graph_add_node(g1, z);
    if (!ggml_gallocr_alloc_graph(ga, g1) || !ggml_rs_gallocr_write_report(ga, report_path(1), 0)) {
        fail("graph 1");
    }
    read_back(1, g1);

    // 2: two buffer types, the middle of the graph on the fake device's
    struct ggml_context * ctx2 = new_ctx();
    struct ggml_tensor * x2 = ggml_new_tensor_1d(ctx2, GGML_TYPE_F32, 64);
    ggml_set_name(x2, "x2");
    ggml_set_input(x2);
    struct ggml_tensor * y2 = body(ctx2, x2, NULL);
    ggml_set_output(y2);
    struct ggml_cgraph * g2 = ggml_new_graph(ctx2);
    ggml_build_forward_expand(g2, y2);
    ggml_backend_buffer_type_t bufts[2] = { ggml_backend_cpu_buffer_type(), fake_backend_buft(fake) };
    ggml_gallocr_t ga2 = ggml_gallocr_new_n(bufts, 2);
    int n2 = ggml_graph_n_nodes(g2);
    int * node_ids = calloc((size_t) n2, sizeof(int));
    int leaf_ids[64] = { 0 };
    for (int i = 0; i < n2; i++) {
        node_ids[i] = (i >= n2 / 3 && i < 2 * n2 / 3) ? 1 : 0;
    }
    if (!ggml_gallocr_reserve_n(ga2, g2, node_ids, leaf_ids) || !ggml_gallocr_alloc_graph(ga2, g2)
        || !ggml_rs_gallocr_write_report(ga2, report_path(2), 0)) {
        fail("graph 2");
    }
    read_back(2, g2);

    // 3: the scheduler, the fake device first; the first half of the nodes on the CPU
    struct ggml_context * ctx3 = new_ctx();
    struct ggml_tensor * x3 = ggml_new_tensor_1d(ctx3, GGML_TYPE_F32, 64);
    ggml_set_name(x3, "x3");
    ggml_set_input(x3);
    struct ggml_tensor * y3 = body(ctx3, x3, NULL);
    ggml_set_output(y3);
    struct ggml_cgraph * g3 = ggml_new_graph(ctx3);
    ggml_build_forward_expand(g3, y3);
    ggml_backend_t backends[2] = { fake, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 256, false, true);
    for (int i = 0; i < ggml_graph_n_nodes(g3); i++) {
        ggml_backend_sched_set_tensor_backend(sched, ggml_graph_node(g3, i), i < ggml_graph_n_nodes(g3) / 2 ? cpu : fake);
    }
    if (!ggml_backend_sched_alloc_graph(sched, g3) || !ggml_rs_sched_write_report(sched, report_path(3), 0)) {
        fail("graph 3");
    }
    read_back(3, g3);
    printf("4 graphs allocated and reported; splits of the scheduler's: %d\n", ggml_backend_sched_get_n_splits(sched));

    ggml_backend_sched_free(sched);
    ggml_gallocr_free(ga2);
    ggml_gallocr_free(ga);
    free(node_ids);
    ggml_free(ctx3);
    ggml_free(ctx2);
    ggml_free(ctx1);
    ggml_free(ctx);
    ggml_backend_free(fake);
    ggml_backend_free(cpu);
    return 0;
}
