// F32 vectors for the scenario programs: make one, fill it, read its first element (through the
// backend's tensor I/O, so any buffer works). Include after check.h.
#pragma once

#include "ggml-backend.h"
#include "ggml.h"

static inline struct ggml_tensor * vec(struct ggml_context * ctx, const char * name, int n) {
    struct ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    ggml_set_name(t, name);
    return t;
}

// every element of t set to v
static inline void set_all(struct ggml_tensor * t, float v) {
    float buf[256];
    int n = (int) ggml_nelements(t);
    CHECK(n <= 256, "set_all: tensor '%s' has %d elements, at most 256 supported", t->name, n);
    for (int i = 0; i < n; i++) {
        buf[i] = v;
    }
    ggml_backend_tensor_set(t, buf, 0, n * sizeof(float));
}

static inline float get0(struct ggml_tensor * t) {
    float v;
    ggml_backend_tensor_get(t, &v, 0, sizeof(v));
    return v;
}
