// GET_ROWS and SET_ROWS.
//
// GET_ROWS: src0 [ne00, ne01, ne02, ne03], idx (i32) [ne10, ne11, ne12], dst [ne00, ne10, ne11, ne12]:
// dst row (i10, i11, i12) is src0 row (idx[i10, i11, i12], i11, i12). One block per dst row.
extern "C" __global__ void get_rows(const char *a, TD ta, int type_a, const char *idx, TD ti, int type_i, char *d, TD td, int type_d) {
    const i64 r = blockIdx.x;
    const i64 i10 = r % ti.ne[0], i11 = (r / ti.ne[0]) % ti.ne[1], i12 = r / (ti.ne[0] * ti.ne[1]);
    const char *pi = idx + offs(ti, i10, i11, i12, 0);
    const i64 i01 = type_i == T_I32 ? (i64) * (const int *)pi : *(const i64 *)pi;
    const char *row = a + offs(ta, 0, i01, i11, i12);
    char *out = d + offs(td, 0, i10, i11, i12);
    for (i64 i0 = threadIdx.x; i0 < ta.ne[0]; i0 += blockDim.x) {
        const float v = type_a == T_F32 || type_a == T_F16 || type_a == T_BF16 ? load_f(row + i0 * ta.nb[0], type_a) : row_at(row, type_a, i0);
        store_f(out + i0 * td.nb[0], type_d, v);
    }
}

// SET_ROWS: src0 (f32) [ne00, ne01, ne02, ne03], idx (i64 or i32) [ne01, ne11, ne12] broadcast over
// planes (ne02 % ne11 == 0, ne03 % ne12 == 0): dst row (idx[i01, i02 % ne11, i03 % ne12], i02, i03)
// = src0 row (i01, i02, i03). Float destinations: one block per source row.
extern "C" __global__ void set_rows_f(const char *a, TD ta, const char *idx, TD ti, int type_i, char *d, TD td, int type_d) {
    const i64 r = blockIdx.x;
    const i64 i01 = r % ta.ne[1], i02 = (r / ta.ne[1]) % ta.ne[2], i03 = r / (ta.ne[1] * ta.ne[2]);
    const char *pi = idx + offs(ti, i01, i02 % ti.ne[1], i03 % ti.ne[2], 0);
    const i64 i1 = type_i == T_I32 ? (i64) * (const int *)pi : *(const i64 *)pi;
    const char *src = a + offs(ta, 0, i01, i02, i03);
    char *out = d + offs(td, 0, i1, i02, i03);
    for (i64 i0 = threadIdx.x; i0 < ta.ne[0]; i0 += blockDim.x) {
        store_f(out + i0 * td.nb[0], type_d, *(const float *)(src + i0 * ta.nb[0]));
    }
}

// SET_ROWS into Q8_0: one thread per 32-element block, quantized as ggml's quantize_row_q8_0_ref
// and upstream's CUDA quantize_f32_q8_0_block: d = amax / 127, q = roundf(x * (1/d)) (halves
// away from zero, not rintf's to even). Grid: one block of threads per source row.
extern "C" __global__ void set_rows_q8_0(const char *a, TD ta, const char *idx, TD ti, int type_i, char *d, TD td) {
    const i64 r = blockIdx.x;
    const i64 i01 = r % ta.ne[1], i02 = (r / ta.ne[1]) % ta.ne[2], i03 = r / (ta.ne[1] * ta.ne[2]);
    const char *pi = idx + offs(ti, i01, i02 % ti.ne[1], i03 % ti.ne[2], 0);
    const i64 i1 = type_i == T_I32 ? (i64) * (const int *)pi : *(const i64 *)pi;
    const char *src = a + offs(ta, 0, i01, i02, i03);
    u8 *out = (u8 *)(d + offs(td, 0, i1, i02, i03));
    for (i64 ib = threadIdx.x; ib < ta.ne[0] / QK; ib += blockDim.x) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(*(const float *)(src + (ib * QK + j) * ta.nb[0])));
        const float dd = amax / 127.0f;
        const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
        u8 *blk = out + ib * Q8_0_BYTES;
        const u16 h = f2h(dd);
        blk[0] = (u8)(h & 0xff);
        blk[1] = (u8)(h >> 8);
        for (int j = 0; j < QK; j++) blk[2 + j] = (u8)(i8)roundf(*(const float *)(src + (ib * QK + j) * ta.nb[0]) * id);
    }
}
