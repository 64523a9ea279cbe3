// SOFT_MAX with ggml_soft_max_ext's inputs: x [ne00, ne01, ne02, ne03] f32, optional mask (f32 or
// f16) [ne00, >= ne01, ne12, ne13] broadcast over planes, scale, ALiBi max_bias (slope per head
// i02), optional sinks (f32 [ne02]: one extra logit per head that takes part in the max and the sum
// but has no output). One block per row.

__device__ __forceinline__ float alibi_slope(float max_bias, i64 h, i64 n_head) {
    if (max_bias <= 0.0f) return 1.0f;
    const int n_head_log2 = 1 << (int)floorf(log2f((float)n_head));
    const float m0 = powf(2.0f, -max_bias / n_head_log2);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / n_head_log2);
    return h < n_head_log2 ? powf(m0, (float)(h + 1)) : powf(m1, (float)(2 * (h - n_head_log2) + 1));
}

extern "C" __global__ void soft_max_f32(const char *a, TD ta, const char *mask, TD tm, int type_m, const float *sinks, char *d, TD td, float scale, float max_bias) {
    const i64 r = blockIdx.x;
    const i64 i1 = r % ta.ne[1], i2 = (r / ta.ne[1]) % ta.ne[2], i3 = r / (ta.ne[1] * ta.ne[2]);
    const char *x = a + offs(ta, 0, i1, i2, i3);
    const char *m = mask ? mask + offs(tm, 0, i1, i2 % tm.ne[2], i3 % tm.ne[3]) : 0;
    char *y = d + offs(td, 0, i1, i2, i3);
    const float slope = alibi_slope(max_bias, i2, ta.ne[2]);
    const i64 n = ta.ne[0];
    float mx = -INF_F;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = *(const float *)(x + i * ta.nb[0]) * scale + (m ? slope * load_f(m + i * tm.nb[0], type_m) : 0.0f);
        mx = fmaxf(mx, v);
    }
    mx = block_max(mx);
    const float sink = sinks ? sinks[i2] : -INF_F;
    mx = fmaxf(mx, sink);
    float s = 0.0f;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = *(const float *)(x + i * ta.nb[0]) * scale + (m ? slope * load_f(m + i * tm.nb[0], type_m) : 0.0f);
        const float e = expf(v - mx);
        *(float *)(y + i * td.nb[0]) = e;
        s += e;
    }
    s = block_sum(s);
    if (sinks) s += expf(sink - mx);
    const float inv = 1.0f / s;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) *(float *)(y + i * td.nb[0]) *= inv;
}
