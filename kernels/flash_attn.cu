// FLASH_ATTN_EXT: q [D, n_q, n_head, n_seq] f32, k [D, n_kv, n_head_kv, ...] and v [Dv, n_kv, ...]
// (F16, BF16, F32, Q8_0 or Q4_0 rows), optional mask (f16) [n_kv, >= n_q, ne32, ne33], optional
// sinks (f32 [n_head]); op_params scale, max_bias (ALiBi), logit_softcap. dst [Dv, n_head, n_q,
// n_seq] f32. Online softmax as ggml's CPU reference (running max M, sum S, rescaled accumulator).
//
// One warp per (query row, KV split, head, sequence); lane l owns elements l, l+32, ... of the
// head (D, Dv <= FA_MAX_D). Grid: x = n_q * n_split (split fastest), y = n_head, z = n_seq;
// block: 32. With n_split 1 the warp covers all of the KV and writes dst. With n_split > 1
// (token generation: few query rows, a long KV, so one warp per row would leave the GPU idle and
// far from its memory bandwidth) each warp covers one contiguous range of ceil(n_kv / n_split)
// KV rows and writes its unnormalised accumulator, M and S to `partial` (records of Dv + 2
// floats, index ((iq3 * n_head + iq2) * n_q + iq1) * n_split + split), and flash_attn_reduce
// combines a row's splits (and the sink) into dst.

#define FA_MAX_D 256
#define FA_PER_LANE (FA_MAX_D / 32)

extern "C" __global__ void flash_attn_ext(const char *q, TD tq, const char *k, TD tk, int type_k, const char *v, TD tv, int type_v, const char *mask, TD tm,
                                          const float *sinks, char *d, TD td, float scale, float max_bias, float softcap, int n_split, float *partial) {
    const int lane = threadIdx.x;
    const i64 iq1 = blockIdx.x / n_split, iq2 = blockIdx.y, iq3 = blockIdx.z;
    const int split = (int)(blockIdx.x % n_split);
    const i64 D = tq.ne[0], Dv = tv.ne[0], n_kv = tk.ne[1];
    const i64 chunk = (n_kv + n_split - 1) / n_split;
    const i64 ic0 = split * chunk, ic1 = ic0 + chunk < n_kv ? ic0 + chunk : n_kv;
    const i64 ik2 = iq2 / (tq.ne[2] / tk.ne[2]), ik3 = iq3 / (tq.ne[3] / tk.ne[3]);
    const i64 iv2 = iq2 / (tq.ne[2] / tv.ne[2]), iv3 = iq3 / (tq.ne[3] / tv.ne[3]);
    if (softcap != 0.0f) scale /= softcap;

    float slope = 1.0f;
    if (max_bias > 0.0f) {
        const int n_head_log2 = 1 << (int)floorf(log2f((float)tq.ne[2]));
        const float m0 = powf(2.0f, -max_bias / n_head_log2);
        const float m1 = powf(2.0f, -(max_bias / 2.0f) / n_head_log2);
        slope = iq2 < n_head_log2 ? powf(m0, (float)(iq2 + 1)) : powf(m1, (float)(2 * (iq2 - n_head_log2) + 1));
    }

    float qv[FA_PER_LANE], acc[FA_PER_LANE];
    const char *qrow = q + offs(tq, 0, iq1, iq2, iq3);
#pragma unroll
    for (int j = 0; j < FA_PER_LANE; j++) {
        const i64 e = lane + 32 * j;
        qv[j] = e < D ? *(const float *)(qrow + e * tq.nb[0]) : 0.0f;
        acc[j] = 0.0f;
    }
    const u16 *mrow = mask ? (const u16 *)(mask + iq1 * tm.nb[1] + (iq2 % tm.ne[2]) * tm.nb[2] + (iq3 % tm.ne[3]) * tm.nb[3]) : 0;

    float M = -INF_F, S = 0.0f;
    for (i64 ic = ic0; ic < ic1; ic++) {
        const float mv = mrow ? slope * h2f(mrow[ic]) : 0.0f;
        if (mv == -INF_F) continue;
        const char *krow = k + ic * tk.nb[1] + ik2 * tk.nb[2] + ik3 * tk.nb[3];
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < FA_PER_LANE; j++) {
            const i64 e = lane + 32 * j;
            if (e < D) s += qv[j] * row_at(krow, type_k, e);
        }
        s = warp_sum(s) * scale;
        if (softcap != 0.0f) s = softcap * tanhf(s);
        s += mv;
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
            ms = expf(M - s);
            M = s;
        } else {
            vs = expf(s - M);
        }
        const char *vrow = v + ic * tv.nb[1] + iv2 * tv.nb[2] + iv3 * tv.nb[3];
#pragma unroll
        for (int j = 0; j < FA_PER_LANE; j++) {
            const i64 e = lane + 32 * j;
            if (e < Dv) acc[j] = acc[j] * ms + vs * row_at(vrow, type_v, e);
        }
        S = S * ms + vs;
    }
    if (n_split > 1) {
        float *rec = partial + (((iq3 * gridDim.y + iq2) * (i64)(gridDim.x / n_split) + iq1) * n_split + split) * (Dv + 2);
#pragma unroll
        for (int j = 0; j < FA_PER_LANE; j++) {
            const i64 e = lane + 32 * j;
            if (e < Dv) rec[e] = acc[j];
        }
        if (lane == 0) {
            rec[Dv] = M;
            rec[Dv + 1] = S;
        }
        return;
    }
    if (sinks) {
        const float s = sinks[iq2];
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
            ms = expf(M - s);
            M = s;
        } else {
            vs = expf(s - M);
        }
#pragma unroll
        for (int j = 0; j < FA_PER_LANE; j++) acc[j] *= ms;
        S = S * ms + vs;
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    char *out = d + iq2 * td.nb[1] + iq1 * td.nb[2] + iq3 * td.nb[3];
#pragma unroll
    for (int j = 0; j < FA_PER_LANE; j++) {
        const i64 e = lane + 32 * j;
        if (e < Dv) *(float *)(out + e * td.nb[0]) = acc[j] * inv;
    }
}

// The second pass of a split flash attention: one warp per (query row, head, sequence) combines
// the n_split records of flash_attn_ext (and the head's sink) into dst: M = the largest M of the
// splits (and the sink), acc = sum of acc_i * exp(M_i - M), S likewise; dst = acc / S (0 when no
// KV row was unmasked and there is no sink, as the one-pass kernel). Grid: x = n_q, y = n_head,
// z = n_seq; block: 32.
extern "C" __global__ void flash_attn_reduce(const float *partial, const float *sinks, char *d, TD td, int n_split) {
    const int lane = threadIdx.x;
    const i64 iq1 = blockIdx.x, iq2 = blockIdx.y, iq3 = blockIdx.z;
    const i64 Dv = td.ne[0];
    const float *recs = partial + ((iq3 * gridDim.y + iq2) * (i64)gridDim.x + iq1) * n_split * (Dv + 2);
    float M = sinks ? sinks[iq2] : -INF_F;
    for (int i = 0; i < n_split; i++) M = fmaxf(M, recs[i * (Dv + 2) + Dv]);
    float acc[FA_PER_LANE];
#pragma unroll
    for (int j = 0; j < FA_PER_LANE; j++) acc[j] = 0.0f;
    float S = 0.0f;
    if (M != -INF_F) {
        for (int i = 0; i < n_split; i++) {
            const float *rec = recs + i * (Dv + 2);
            const float Mi = rec[Dv];
            if (Mi == -INF_F) continue;
            const float w = expf(Mi - M);
            S += rec[Dv + 1] * w;
#pragma unroll
            for (int j = 0; j < FA_PER_LANE; j++) {
                const i64 e = lane + 32 * j;
                if (e < Dv) acc[j] += rec[e] * w;
            }
        }
        if (sinks) S += expf(sinks[iq2] - M);
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    char *out = d + iq2 * td.nb[1] + iq1 * td.nb[2] + iq3 * td.nb[3];
#pragma unroll
    for (int j = 0; j < FA_PER_LANE; j++) {
        const i64 e = lane + 32 * j;
        if (e < Dv) *(float *)(out + e * td.nb[0]) = acc[j] * inv;
    }
}
