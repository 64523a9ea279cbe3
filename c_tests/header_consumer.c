// Uses the library through ITS OWN generated headers (include/), with upstream's ggml.h for the
// core types: it must compile with -Wall -Werror, link, and run.
#include "ggml-backend-impl.h"
#include "ggml-rs.h"
// declared here rather than through ggml-cpu.h, which would pull in upstream's ggml-backend.h
ggml_backend_t ggml_backend_cpu_init(void);

#include <stdio.h>
#include <string.h>

int main(void) {
    ggml_backend_buffer_type_t buft = ggml_backend_cpu_buffer_type();
    struct ggml_init_params params = { 8 * ggml_tensor_overhead() + ggml_graph_overhead(), NULL, true };
    struct ggml_context * ctx = ggml_init(params);
    struct ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_set_input(a);
    struct ggml_tensor * b = ggml_scale(ctx, a, 3.0f);
    ggml_set_output(b);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, b);

    ggml_gallocr_t galloc = ggml_gallocr_new(buft);
    if (!ggml_gallocr_alloc_graph(galloc, g)) {
        return 1;
    }
    const float in[4] = { 1, 2, 3, 4 };
    float out[4];
    ggml_backend_tensor_set(a, in, 0, sizeof(in));
    ggml_backend_t cpu = ggml_backend_cpu_init();
    if (ggml_backend_graph_compute(cpu, g) != GGML_STATUS_SUCCESS) {
        return 1;
    }
    ggml_backend_tensor_get(b, out, 0, sizeof(out));
    size_t planned = 0, lower_bound = 0;
    ggml_rs_gallocr_plan_stats(galloc, 0, &planned, &lower_bound);
    printf("%s: 3 * [1 2 3 4] = [%g %g %g %g]; compute buffer %zu bytes (lower bound %zu)\n", ggml_rs_version(), out[0], out[1],
           out[2], out[3], planned, lower_bound);
    ggml_gallocr_free(galloc);
    ggml_backend_free(cpu);
    ggml_free(ctx);
    return (out[3] == 12.0f && GGML_BACKEND_API_VERSION == 2) ? 0 : 1;
}
