// Shared by every kernel file of ggml-rs's CUDA backend: the backend prepends this text to each
// file before NVRTC compiles it, so the kernels need no include path and no CUDA headers (the GPU
// machines carry NVRTC as a wheel, without the toolkit's headers).
//
// A tensor is passed as its address and a TD: ggml's ne (elements per dimension) and nb (byte
// strides), so every kernel reads and writes ggml's strided layout as it is (views, permutes).

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef signed char i8;

struct TD {
    i64 ne[4];
    i64 nb[4];
};

// ggml_type values this backend reads or writes (ggml.h)
#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q8_0 8
#define T_I32 26
#define T_I64 27
#define T_BF16 30

#define INF_F __int_as_float(0x7f800000)
#define QK 32            // elements per Q4_0 / Q8_0 block
#define Q8_0_BYTES 34    // f16 scale + 32 x int8
#define Q4_0_BYTES 18    // f16 scale + 16 bytes of nibbles

// f16 <-> f32 through the conversion instructions, round to nearest even (as ggml's)
__device__ __forceinline__ float h2f(u16 h) {
    float f;
    asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ u16 f2h(float f) {
    u16 h;
    asm("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
    return h;
}
// bf16 is the high half of an f32; rounding to nearest even as ggml_compute_fp32_to_bf16 (NaN kept quiet)
__device__ __forceinline__ float bf2f(u16 b) { return __uint_as_float(((u32)b) << 16); }
__device__ __forceinline__ u16 f2bf(float f) {
    u32 u = __float_as_uint(f);
    if ((u & 0x7fffffff) > 0x7f800000) return (u16)((u >> 16) | 64);
    return (u16)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

__device__ __forceinline__ u16 rd16(const u8 *p) { return (u16)p[0] | ((u16)p[1] << 8); }

// one element of a float tensor of type t at byte address p
__device__ __forceinline__ float load_f(const char *p, int t) {
    if (t == T_F32) return *(const float *)p;
    if (t == T_F16) return h2f(*(const u16 *)p);
    return bf2f(*(const u16 *)p);
}
__device__ __forceinline__ void store_f(char *p, int t, float v) {
    if (t == T_F32) *(float *)p = v;
    else if (t == T_F16) *(u16 *)p = f2h(v);
    else *(u16 *)p = f2bf(v);
}

// element i (0..31) of a Q8_0 / Q4_0 block
__device__ __forceinline__ float q8_0_at(const u8 *blk, int i) { return h2f(rd16(blk)) * (float)(i8)blk[2 + i]; }
__device__ __forceinline__ float q4_0_at(const u8 *blk, int i) {
    u8 q = blk[2 + (i & 15)];
    int v = i < 16 ? (q & 15) : (q >> 4);
    return h2f(rd16(blk)) * (float)(v - 8);
}

// element i0 of a row (any type this backend reads)
__device__ __forceinline__ float row_at(const char *row, int t, i64 i0) {
    if (t == T_Q8_0) return q8_0_at((const u8 *)row + (i0 / QK) * Q8_0_BYTES, (int)(i0 % QK));
    if (t == T_Q4_0) return q4_0_at((const u8 *)row + (i0 / QK) * Q4_0_BYTES, (int)(i0 % QK));
    if (t == T_F32) return ((const float *)row)[i0];
    if (t == T_F16) return h2f(((const u16 *)row)[i0]);
    return bf2f(((const u16 *)row)[i0]);
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// sum / max over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread gets it
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float s_sum[32];
    v = warp_sum(v);
    const int w = threadIdx.x / 32, l = threadIdx.x % 32, nw = blockDim.x / 32;
    __syncthreads();
    if (l == 0) s_sum[w] = v;
    __syncthreads();
    v = l < nw ? s_sum[l] : 0.0f;
    return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v) {
    __shared__ float s_max[32];
    v = warp_max(v);
    const int w = threadIdx.x / 32, l = threadIdx.x % 32, nw = blockDim.x / 32;
    __syncthreads();
    if (l == 0) s_max[w] = v;
    __syncthreads();
    v = l < nw ? s_max[l] : -INF_F;
    return warp_max(v);
}

// flat index -> 4-d index of a tensor's ne
__device__ __forceinline__ void unravel(i64 i, const i64 *ne, i64 *ix) {
    ix[0] = i % ne[0]; i /= ne[0];
    ix[1] = i % ne[1]; i /= ne[1];
    ix[2] = i % ne[2];
    ix[3] = i / ne[2];
}
__device__ __forceinline__ i64 offs(const TD &t, i64 i0, i64 i1, i64 i2, i64 i3) {
    return i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}
