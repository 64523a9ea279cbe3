// static_link: the static library linked with ggml-base's objects into one executable that exports
// nothing, the case where only the weak references of src/ggml/imports.rs can find ggml-base's
// functions (dlsym does not see them), and where ggml-backend-meta's object may not be linked at
// all (nothing else asks for it, and weak references do not pull it out of an archive): then no
// meta buffer can exist and the library must take every buffer type for a plain one.
// scripts/test.sh (step 9) builds it from the stock build's ggml-base objects and runs it.
//
// Allocates a weight context (ggml_backend_alloc_ctx_tensors_from_buft, which asks whether the
// buffer type is a meta one) and a graph (gallocr), and checks that every tensor got memory.

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

#include <stdio.h>

int main(void) {
    struct ggml_init_params pw = { ggml_tensor_overhead() * 2, NULL, true };
    struct ggml_context * cw = ggml_init(pw);
    struct ggml_tensor * w = ggml_new_tensor_1d(cw, GGML_TYPE_F32, 16);
    ggml_backend_buffer_t wb = ggml_backend_alloc_ctx_tensors_from_buft(cw, ggml_backend_cpu_buffer_type());

    struct ggml_init_params p = { ggml_tensor_overhead() * 16 + ggml_graph_overhead(), NULL, true };
    struct ggml_context * ctx = ggml_init(p);
    struct ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
    struct ggml_tensor * b = ggml_add(ctx, a, w);
    ggml_set_input(a);
    ggml_set_output(b);
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, b);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    const bool ok = ggml_gallocr_alloc_graph(ga, gf);

    const int pass = wb && w->data && ok && a->data && b->data;
    printf("weights buffer %s, w %s; alloc_graph %s, a %s, b %s: %s\n", wb ? "made" : "NULL", w->data ? "placed" : "NULL",
           ok ? "true" : "false", a->data ? "placed" : "NULL", b->data ? "placed" : "NULL", pass ? "ok" : "FAIL");
    ggml_gallocr_free(ga);
    ggml_backend_buffer_free(wb);
    ggml_free(ctx);
    ggml_free(cw);
    return pass ? 0 : 1;
}
