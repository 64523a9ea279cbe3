// ROPE, modes NORMAL (0: rotate pairs (i0, i0 + 1)) and NEOX (2: rotate pairs (i, i + n_dims/2)),
// with YaRN, optional frequency factors and the rotated section's offset, as ggml's
// ggml_rope_ext (+ ggml_rope_set_offset). The host computes theta_scale = freq_base^(-2/n_dims)
// and the YaRN correction dims (ggml_rope_yarn_corr_dims).
// src [ne0 head dim, ne1 heads, ne2 tokens, ne3], pos (i32) [ne2], freq_factors (f32, may be
// NULL) [>= n_dims/2]. Elements [n_offs, n_offs + n_dims) of each row are rotated, the others
// copied. One thread per pair of elements (i0, i0 + 1) of a row.

__device__ __forceinline__ float yarn_ramp(float low, float high, int r0) {
    const float y = (float)(r0 / 2 - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

extern "C" __global__ void rope_op(const char *a, TD ta, int type_a, const int *pos, const float *freq_factors, char *d, TD td, int type_d, int n_dims,
                                   int n_offs, int neox, float theta_scale, float freq_scale, float ext_factor, float attn_factor, float corr0,
                                   float corr1) {
    const i64 half_ne0 = ta.ne[0] / 2;
    const i64 n = half_ne0 * ta.ne[1] * ta.ne[2] * ta.ne[3];
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const int i0 = (int)(i % half_ne0) * 2;
        i64 r = i / half_ne0;
        const i64 i1 = r % ta.ne[1];
        r /= ta.ne[1];
        const i64 i2 = r % ta.ne[2], i3 = r / ta.ne[2];
        const char *x = a + offs(ta, 0, i1, i2, i3);
        char *y = d + offs(td, 0, i1, i2, i3);
        if (i0 < n_offs || i0 >= n_offs + n_dims) {
            // outside the rotated section: copied
            store_f(y + i0 * td.nb[0], type_d, load_f(x + i0 * ta.nb[0], type_a));
            store_f(y + (i0 + 1) * td.nb[0], type_d, load_f(x + (i0 + 1) * ta.nb[0], type_a));
            continue;
        }
        // r0: the pair's index inside the rotated section (what theta, the frequency factor and
        // the YaRN ramp are functions of)
        const int r0 = i0 - n_offs;
        const float ff = freq_factors ? freq_factors[r0 / 2] : 1.0f;
        // theta = pos * theta_scale^(r0/2), by repeated multiplication as ggml's CPU rope cache
        // builds it (powf rounds differently, and the CPU is what results are compared with)
        float theta_base = (float)pos[i2];
        for (int j = 0; j < r0 / 2; j++) theta_base *= theta_scale;
        const float theta_extrap = theta_base / ff;
        const float theta_interp = freq_scale * theta_extrap;
        float theta = theta_interp, mscale = attn_factor;
        if (ext_factor != 0.0f) {
            const float mix = yarn_ramp(corr0, corr1, r0) * ext_factor;
            theta = theta_interp * (1.0f - mix) + theta_extrap * mix;
            mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
        }
        const float c = cosf(theta) * mscale, s = sinf(theta) * mscale;
        const i64 j0 = n_offs + (neox ? r0 / 2 : r0);
        const i64 j1 = j0 + (neox ? n_dims / 2 : 1);
        const float x0 = load_f(x + j0 * ta.nb[0], type_a), x1 = load_f(x + j1 * ta.nb[0], type_a);
        store_f(y + j0 * td.nb[0], type_d, x0 * c - x1 * s);
        store_f(y + j1 * td.nb[0], type_d, x0 * s + x1 * c);
    }
}
