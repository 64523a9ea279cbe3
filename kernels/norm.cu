// RMS_NORM and NORM over rows (dim 0), f32. One block per row; the host picks the block size
// (launch.rs: row_block).

extern "C" __global__ void rms_norm_f32(const char *a, TD ta, char *d, TD td, float eps) {
    const i64 r = blockIdx.x;
    const i64 i1 = r % ta.ne[1], i2 = (r / ta.ne[1]) % ta.ne[2], i3 = r / (ta.ne[1] * ta.ne[2]);
    const char *x = a + offs(ta, 0, i1, i2, i3);
    char *y = d + offs(td, 0, i1, i2, i3);
    float s = 0.0f;
    for (i64 i = threadIdx.x; i < ta.ne[0]; i += blockDim.x) {
        const float v = *(const float *)(x + i * ta.nb[0]);
        s += v * v;
    }
    s = block_sum(s);
    const float k = rsqrtf(s / (float)ta.ne[0] + eps);
    for (i64 i = threadIdx.x; i < ta.ne[0]; i += blockDim.x) *(float *)(y + i * td.nb[0]) = *(const float *)(x + i * ta.nb[0]) * k;
}

extern "C" __global__ void norm_f32(const char *a, TD ta, char *d, TD td, float eps) {
    const i64 r = blockIdx.x;
    const i64 i1 = r % ta.ne[1], i2 = (r / ta.ne[1]) % ta.ne[2], i3 = r / (ta.ne[1] * ta.ne[2]);
    const char *x = a + offs(ta, 0, i1, i2, i3);
    char *y = d + offs(td, 0, i1, i2, i3);
    float s = 0.0f;
    for (i64 i = threadIdx.x; i < ta.ne[0]; i += blockDim.x) s += *(const float *)(x + i * ta.nb[0]);
    const float mean = block_sum(s) / (float)ta.ne[0];
    float v2 = 0.0f;
    for (i64 i = threadIdx.x; i < ta.ne[0]; i += blockDim.x) {
        const float v = *(const float *)(x + i * ta.nb[0]) - mean;
        v2 += v * v;
    }
    const float k = rsqrtf(block_sum(v2) / (float)ta.ne[0] + eps);
    for (i64 i = threadIdx.x; i < ta.ne[0]; i += blockDim.x) *(float *)(y + i * td.nb[0]) = (*(const float *)(x + i * ta.nb[0]) - mean) * k;
}
