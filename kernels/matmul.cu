// MUL_MAT for few columns (token generation, MMVQ-style): dst [ne01, ne11, ne12, ne13] =
// src0 [K, ne01, ne02, ne03]^T x src1 [K, ne11, ne12, ne13], src0 broadcast over planes
// (ne12 % ne02 == 0, ne13 % ne03 == 0). src0: Q8_0, Q4_0, F16, BF16 or F32 (rows contiguous);
// src1: f32 (rows contiguous). The weights are read once per column straight from their blocks,
// dequantized in registers, so the kernel streams the weight bytes (the tg128 bound).
//
// One warp per output element (row i01 of src0, column i11). Each step of the warp covers 256
// elements = 8 blocks of 32: lane l takes block l/4 and its 8 elements (l%4)*8..+7, so the 32 lanes
// read 256 consecutive floats of src1 and 8 consecutive weight blocks.
// Grid: x = ceil(ne01 / MMV_WARPS), y = ne11, z = ne12*ne13; block: 32 x MMV_WARPS.

#define MMV_WARPS 4

__device__ __forceinline__ float dot8(const char *w, int type_w, i64 k0, const float *x) {
    float s = 0.0f;
    if (type_w == T_Q8_0) {
        const u8 *blk = (const u8 *)w + (k0 / QK) * Q8_0_BYTES;
        const int p = (int)(k0 % QK);
        // blocks are 34 bytes and rows a whole number of them: blk + 2 + p is 2-byte aligned, so
        // the 8 quants are 4 halfword loads (the host checks the row stride is even)
        const u16 *q = (const u16 *)(blk + 2 + p);
        const float dd = h2f(*(const u16 *)blk);
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const u16 v = q[j];
            acc += (float)(i8)(v & 0xff) * x[2 * j] + (float)(i8)(v >> 8) * x[2 * j + 1];
        }
        s = acc * dd;
    } else if (type_w == T_Q4_0) {
        const u8 *blk = (const u8 *)w + (k0 / QK) * Q4_0_BYTES;
        const int p = (int)(k0 % QK);
        const float dd = h2f(*(const u16 *)blk);
        const int shift = p >= 16 ? 4 : 0;
        // bytes (p & 15) .. +7 hold these 8 values (low nibbles for the first 16, high for the
        // rest); 18-byte blocks keep them 2-byte aligned
        const u16 *q = (const u16 *)(blk + 2 + (p & 15));
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const u16 v = q[j];
            acc += (float)((int)((v >> shift) & 15) - 8) * x[2 * j] + (float)((int)((v >> (8 + shift)) & 15) - 8) * x[2 * j + 1];
        }
        s = acc * dd;
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) s += row_at(w, type_w, k0 + j) * x[j];
    }
    return s;
}

extern "C" __global__ void mul_mat_vec(const char *w, TD tw, int type_w, const char *xsrc, TD tx, char *d, TD td) {
    const int lane = threadIdx.x % 32;
    const i64 i01 = (i64)blockIdx.x * MMV_WARPS + threadIdx.x / 32;
    if (i01 >= tw.ne[1]) return;
    const i64 i11 = blockIdx.y;
    const i64 i12 = blockIdx.z % tx.ne[2], i13 = blockIdx.z / tx.ne[2];
    const i64 i02 = i12 / (tx.ne[2] / tw.ne[2]), i03 = i13 / (tx.ne[3] / tw.ne[3]);
    const char *wrow = w + i01 * tw.nb[1] + i02 * tw.nb[2] + i03 * tw.nb[3];
    const float *xrow = (const float *)(xsrc + offs(tx, 0, i11, i12, i13));
    const i64 K = tw.ne[0];
    // 16-byte loads of x where its row is 16-byte aligned (k0 steps by 8 floats = 32 bytes)
    const bool x_vec4 = ((u64)xrow & 15) == 0;
    float s = 0.0f;
    const i64 kfull = K - K % 256;
    for (i64 k0 = (i64)lane * 8; k0 < kfull; k0 += 256) {
        float x[8];
        if (x_vec4) {
            const float4 a = *(const float4 *)(xrow + k0), b = *(const float4 *)(xrow + k0 + 4);
            x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w;
            x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++) x[j] = xrow[k0 + j];
        }
        s += dot8(wrow, type_w, k0, x);
    }
    // the tail (K % 256): one element per lane (quantized K is a multiple of 32)
    for (i64 k = kfull + lane; k < K; k += 32) s += row_at(wrow, type_w, k) * xrow[k];
    s = warp_sum(s);
    if (lane == 0) *(float *)(d + offs(td, i01, i11, i12, i13)) = s;
}
