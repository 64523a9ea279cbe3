//! Q2_K, Q3_K and Q5_K · Q8_K, the scalar references (upstream's `ggml_vec_dot_q{2,3,5}_K_q8_K_generic`
//! with their integer parts kept exact). Per super-block:
//!
//! - Q2_K: `I = Σ_j (sc_j & 15) · Σ q2·q8` over the 16 sub-blocks of 16 and
//!   `M = Σ_j (sc_j >> 4) · bsums_j`; then `sum += (dy·d)·I − (dy·dmin)·M` (the block's
//!   difference formed first, then added), as the generic code does;
//! - Q3_K: `I = Σ_j (sc_j − 32) · Σ q3·q8` with q3 in −4..=3; then `sum += (d·dy)·I`;
//! - Q5_K: Q4_K's two integers with 5-bit quants (`I = Σ_j sc_j · Σ q5·q8`,
//!   `M = Σ_j m_j · (bsums_2j + bsums_2j+1)`); then, as [`super::q4_k`]'s reference,
//!   `sum = sum + (dy·d)·I − (dy·dmin)·M`.
//!
//! Super-blocks in order, no fused multiply-add. Upstream's generic code keeps Q3_K's and Q5_K's
//! scale sums in 8 float lanes and its AVX2 code in 8 lanes of an fma chain; those orders differ
//! from ours only by float rounding, since every integer above is exact in i32 (and `I`, `M` of
//! Q2_K and Q3_K are below 2²⁴, exact in f32 too).
//!
//! The AVX2 forms ([`x86`]) are upstream's x86 order instead (8 float lanes, fused multiply-adds;
//! see the module): the same exact integers, grouped by lane, and sums that differ from the
//! references' by float rounding only.

use crate::block::{BlockQ2K, BlockQ3K, BlockQ5K, BlockQ8K, QK_K};
use crate::quants::{get_scale_min_k4, q2_get, q3_get, q3_scale, q5_get};

/// a Q2_K super-block's exact integers `(I, M)` (module's text)
pub(crate) fn q2_k_block_ints(a: &BlockQ2K, b: &BlockQ8K) -> (i32, i32) {
    let (mut isum, mut summ) = (0i32, 0i32);
    for j in 0..QK_K / 16 {
        let dot: i32 = (16 * j..16 * j + 16).map(|e| q2_get(a, e) as i32 * b.qs[e] as i32).sum();
        isum += (a.scales[j] & 0xf) as i32 * dot;
        summ += (a.scales[j] >> 4) as i32 * b.bsums[j] as i32;
    }
    (isum, summ)
}

/// a Q3_K super-block's exact integer `I` (module's text)
pub(crate) fn q3_k_block_int(a: &BlockQ3K, b: &BlockQ8K) -> i32 {
    let mut isum = 0i32;
    for j in 0..QK_K / 16 {
        let dot: i32 = (16 * j..16 * j + 16).map(|e| q3_get(a, e) * b.qs[e] as i32).sum();
        isum += q3_scale(a, j) * dot;
    }
    isum
}

/// a Q5_K super-block's exact integers `(I, M)` (module's text)
pub(crate) fn q5_k_block_ints(a: &BlockQ5K, b: &BlockQ8K) -> (i32, i32) {
    let (mut isum, mut summ) = (0i32, 0i32);
    for j in 0..QK_K / 32 {
        let (sc, m) = get_scale_min_k4(j, &a.scales);
        let dot: i32 = (32 * j..32 * j + 32).map(|e| q5_get(a, e) as i32 * b.qs[e] as i32).sum();
        isum += sc as i32 * dot;
        summ += m as i32 * (b.bsums[2 * j] as i32 + b.bsums[2 * j + 1] as i32);
    }
    (isum, summ)
}

/// one Q2_K super-block added to `sum`
#[inline(always)]
pub(crate) fn q2_k_combine(sum: f32, b: &BlockQ8K, isum: i32, summ: i32, d: f32, dmin: f32) -> f32 {
    sum + ((b.d * d) * isum as f32 - (b.d * dmin) * summ as f32)
}

/// one Q5_K super-block added to `sum` (Q4_K's combination)
#[inline(always)]
pub(crate) fn q5_k_combine(sum: f32, b: &BlockQ8K, isum: i32, summ: i32, d: f32, dmin: f32) -> f32 {
    sum + (b.d * d) * isum as f32 - (b.d * dmin) * summ as f32
}

/// scalar reference for Q2_K · Q8_K (module's text)
pub fn q2_k_q8_k_reference(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let (isum, summ) = q2_k_block_ints(a, b);
        sum = q2_k_combine(sum, b, isum, summ, a.d.to_f32(), a.dmin.to_f32());
    }
    sum
}

/// scalar reference for Q3_K · Q8_K (module's text)
pub fn q3_k_q8_k_reference(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        sum += (a.d.to_f32() * b.d) * q3_k_block_int(a, b) as f32;
    }
    sum
}

/// scalar reference for Q5_K · Q8_K (module's text)
pub fn q5_k_q8_k_reference(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let (isum, summ) = q5_k_block_ints(a, b);
        sum = q5_k_combine(sum, b, isum, summ, a.d.to_f32(), a.dmin.to_f32());
    }
    sum
}

/// Q2_K · Q8_K in the order of upstream's tiled K-quant path (`ggml-cpu/tiled`, its AVX2 and
/// AVX-512 VNNI kernels alike), which takes MUL_MATs of 8 or more activation rows: per
/// super-block the exact `(I, M)` of [`q2_k_block_ints`], `r = f32(d) · f32(I)` (rounded),
/// `r = fma(−f32(dmin), f32(M), r)`, `acc = fma(r, dy, acc)`, super-blocks in order
pub fn q2_k_q8_k_tiled(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let (isum, summ) = q2_k_block_ints(a, b);
        let r = (-a.dmin.to_f32()).mul_add(summ as f32, a.d.to_f32() * isum as f32);
        acc = r.mul_add(b.d, acc);
    }
    acc
}

/// Q2_K · Q8_K in the order of upstream's repacked GEMV (`ggml_gemv_q2_K_8x8_q8_K`: its builds
/// with AVX-512 repack Q2_K weights, `q2_K_8x8`): per super-block the exact `(I, M)`,
/// `acc = fma(f32(I), f32(d) · dy, acc)` and `accm = fma(f32(M), f32(dmin) · dy, accm)`, then
/// `acc − accm`
pub fn q2_k_q8_k_gemv(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let (mut acc, mut accm) = (0.0f32, 0.0f32);
    for (a, b) in x.iter().zip(y) {
        let (isum, summ) = q2_k_block_ints(a, b);
        acc = (isum as f32).mul_add(a.d.to_f32() * b.d, acc);
        accm = (summ as f32).mul_add(a.dmin.to_f32() * b.d, accm);
    }
    acc - accm
}

/// Q2_K · Q8_K in the order of upstream's repacked GEMM (`ggml_gemm_q2_K_8x8_q8_K`):
/// [`q2_k_q8_k_gemv`]'s, with the two fmas per half super-block (128 values, 8 sub-blocks)
pub fn q2_k_q8_k_gemm(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let (mut acc, mut accm) = (0.0f32, 0.0f32);
    for (a, b) in x.iter().zip(y) {
        let (ds, ms) = (a.d.to_f32() * b.d, a.dmin.to_f32() * b.d);
        for half in 0..2 {
            let (mut isum, mut summ) = (0i32, 0i32);
            for j in 8 * half..8 * half + 8 {
                let dot: i32 = (16 * j..16 * j + 16).map(|e| q2_get(a, e) as i32 * b.qs[e] as i32).sum();
                isum += (a.scales[j] & 0xf) as i32 * dot;
                summ += (a.scales[j] >> 4) as i32 * b.bsums[j] as i32;
            }
            acc = (isum as f32).mul_add(ds, acc);
            accm = (summ as f32).mul_add(ms, accm);
        }
    }
    acc - accm
}

/// Q3_K · Q8_K in the tiled path's order ([`q2_k_q8_k_tiled`]'s, without the mins)
pub fn q3_k_q8_k_tiled(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let r = a.d.to_f32() * q3_k_block_int(a, b) as f32;
        acc = r.mul_add(b.d, acc);
    }
    acc
}

/// Q5_K · Q8_K in the tiled path's order ([`q2_k_q8_k_tiled`]'s with [`q5_k_block_ints`])
pub fn q5_k_q8_k_tiled(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let (isum, summ) = q5_k_block_ints(a, b);
        let r = (-a.dmin.to_f32()).mul_add(summ as f32, a.d.to_f32() * isum as f32);
        acc = r.mul_add(b.d, acc);
    }
    acc
}

/// the 8 lanes of upstream's x86 order for a block with 16 sub-blocks of 16 ([`x86`]'s text):
/// lane m sums, over the 8 runs of 32 quants, `scale(2k + m/4 of the run's half) · Σ q·y` over
/// the run's bytes `4m..4m + 4`; `q(e)` and `sc(j)` as signed integers
fn lanes16(q: impl Fn(usize) -> i32, sc: impl Fn(usize) -> i32, b: &BlockQ8K) -> [i32; 8] {
    std::array::from_fn(|m| {
        let mut l = 0;
        for run in 0..8 {
            let (h, k) = (run / 4, run % 4);
            let dot: i32 = (32 * run + 4 * m..32 * run + 4 * m + 4).map(|e| q(e) * b.qs[e] as i32).sum();
            l += sc(8 * h + 2 * k + m / 4) * dot;
        }
        l
    })
}

/// Q2_K · Q8_K in upstream's x86 order (the definition; [`x86`]'s text)
pub fn q2_k_q8_k_x86(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let mut acc = [0f32; 8];
    for (a, b) in x.iter().zip(y) {
        let lanes = lanes16(|e| q2_get(a, e) as i32, |j| (a.scales[j] & 0xf) as i32, b);
        let mins = |m: usize| (2 * m..2 * m + 2).map(|j| (a.scales[j] >> 4) as i32 * b.bsums[j] as i32).sum::<i32>();
        let (d, dmin) = (b.d * a.d.to_f32(), -b.d * a.dmin.to_f32());
        for (m, acc) in acc.iter_mut().enumerate() {
            *acc = dmin.mul_add(mins(m) as f32, *acc);
            *acc = d.mul_add(lanes[m] as f32, *acc);
        }
    }
    crate::dot::q8_0::hsum8(acc)
}

/// Q3_K · Q8_K in upstream's x86 order (the definition; [`x86`]'s text)
pub fn q3_k_q8_k_x86(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    let mut acc = [0f32; 8];
    for (a, b) in x.iter().zip(y) {
        let lanes = lanes16(|e| q3_get(a, e), |j| q3_scale(a, j), b);
        let d = b.d * a.d.to_f32();
        for (acc, l) in acc.iter_mut().zip(lanes) {
            *acc = d.mul_add(l as f32, *acc);
        }
    }
    crate::dot::q8_0::hsum8(acc)
}

/// Q5_K · Q8_K in upstream's x86 order (the definition; [`x86`]'s text)
pub fn q5_k_q8_k_x86(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    let mut acc = [0f32; 8];
    let mut summs = 0f32;
    for (a, b) in x.iter().zip(y) {
        let (_, summ) = q5_k_block_ints(a, b);
        let lanes: [i32; 8] = std::array::from_fn(|m| {
            (0..8)
                .map(|j| {
                    let (sc, _) = get_scale_min_k4(j, &a.scales);
                    sc as i32 * (32 * j + 4 * m..32 * j + 4 * m + 4).map(|e| q5_get(a, e) as i32 * b.qs[e] as i32).sum::<i32>()
                })
                .sum()
        });
        let (d, dmin) = (b.d * a.d.to_f32(), -b.d * a.dmin.to_f32());
        summs = dmin.mul_add(summ as f32, summs);
        for (acc, l) in acc.iter_mut().zip(lanes) {
            *acc = d.mul_add(l as f32, *acc);
        }
    }
    crate::dot::q8_0::hsum8(acc) + summs
}

/// Q3_K's 16 scales as bytes `sc − 32` (two's complement), four at a time from the 12 packed
/// bytes: bytes 0..8 / 8..16 take their low 4 bits from the low / high nibbles of bytes 0..8 and
/// their top 2 bits from bytes 8..12, bit pair `2·(j / 4)` for scale j
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn unpack_q3_scales(q: &[u8; 12]) -> [u8; 16] {
    let w = |i: usize| u32::from_le_bytes([q[4 * i], q[4 * i + 1], q[4 * i + 2], q[4 * i + 3]]);
    let (a, b, c) = (w(0), w(1), w(2));
    let (lo, top) = (0x0f0f_0f0f, 0x0303_0303);
    let words =
        [(a & lo) | ((c & top) << 4), (b & lo) | (((c >> 2) & top) << 4), ((a >> 4) & lo) | (((c >> 4) & top) << 4), ((b >> 4) & lo) | (((c >> 6) & top) << 4)];
    let mut out = [0u8; 16];
    for (i, v) in words.into_iter().enumerate() {
        for (k, byte) in v.to_le_bytes().into_iter().enumerate() {
            out[4 * i + k] = byte.wrapping_sub(32);
        }
    }
    out
}

/// The AVX2 forms, in upstream's x86 order (`ggml_vec_dot_q{2,3,5}_K_q8_K`'s AVX2 branches, which
/// its AVX2 and native x86 builds both run). Each super-block yields 8 exact i32 lanes; lane `m`
/// holds the scaled products of the bytes `4m..4m + 4` of every 32-quant run of the block (for
/// Q2_K and Q3_K, whose runs span two sub-blocks of 16, scale `2k` of the run's half on lanes
/// 0..4 and `2k + 1` on lanes 4..8; for Q5_K the run's one sub-block scale). The float side:
///
/// - Q2_K: `dmin' = −dy · f32(dmin)`, `d' = dy · f32(d)`; per block first
///   `acc = fma(dmin', f32(mins_m), acc)` with lane m's mins term
///   `mins_2m · bsums_2m + mins_2m+1 · bsums_2m+1`, then `acc = fma(d', f32(lane_m), acc)`;
/// - Q3_K: `acc = fma(dy · f32(d), f32(lane_m), acc)`, the lanes holding `(q − 4)`-signed quants
///   (the `−4` applied per byte, not through `bsums`);
/// - Q5_K: `acc = fma(dy · f32(d), f32(lane_m), acc)` and, in a scalar beside it,
///   `summs = fma(−dy · f32(dmin), f32(M), summs)` with the block's whole mins integer `M`;
///
/// super-blocks in order, then [`hsum_ps`] of `acc` (for Q5_K plus `summs`).
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::super::q4_k::unpack_scales_mins;
    use super::super::x86::{arr32, f16_pair, hsum_epi32, hsum_ps, load_i8x32, load_u8x32};
    use super::unpack_q3_scales;
    use crate::block::{BlockQ2K, BlockQ3K, BlockQ5K, BlockQ8K};

    /// `v >> n` in each 16-bit lane (a run-time count)
    #[inline]
    #[target_feature(enable = "avx2")]
    fn srl16(v: __m256i, n: usize) -> __m256i {
        _mm256_srl_epi16(v, _mm_cvtsi32_si128(n as i32))
    }

    /// the i16 scales `sc16` (16 lanes, sub-blocks 0..16) of half `h` (sub-blocks 8h..8h+8) in
    /// both 128-bit lanes
    #[inline]
    #[target_feature(enable = "avx2")]
    fn half_scales(sc16: __m256i, h: usize) -> __m256i {
        if h == 0 { _mm256_permute2x128_si256(sc16, sc16, 0x00) } else { _mm256_permute2x128_si256(sc16, sc16, 0x11) }
    }

    /// from the 8 i16 scales of a half (both 128-bit lanes alike), scale `2k` in the low lane and
    /// `2k + 1` in the high lane, as 16 i16s: the scales of a 32-quant run of two sub-blocks of 16
    #[inline]
    #[target_feature(enable = "avx2")]
    fn pick_pair(sch: __m256i, k: usize) -> __m256i {
        let (j0, j1) = (4 * k as i16, 4 * k as i16 + 2);
        _mm256_shuffle_epi8(sch, _mm256_set_m128i(_mm_set1_epi16(j1 | ((j1 + 1) << 8)), _mm_set1_epi16(j0 | ((j0 + 1) << 8))))
    }

    /// the scaled quant products of half `h` (128 values) of a Q2_K super-block in 8 i32 lanes
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn q2k_half(a: &BlockQ2K, b: &BlockQ8K, sc16: __m256i, h: usize) -> __m256i {
        let m3 = _mm256_set1_epi8(3);
        let sch = half_scales(sc16, h);
        let bits = load_u8x32(arr32(&a.qs, 32 * h));
        let mut acc = _mm256_setzero_si256();
        for k in 0..4 {
            let q = _mm256_and_si256(srl16(bits, 2 * k), m3);
            let p = _mm256_maddubs_epi16(q, load_i8x32(arr32(&b.qs, 128 * h + 32 * k)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, pick_pair(sch, k)));
        }
        acc
    }

    /// [`super::q2_k_q8_k_gemv`] bit for bit: each super-block's exact `(I, M)`, two fmas
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q2_k_q8_k_gemv_avx2(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
        let (mut acc, mut accm) = (0.0f32, 0.0f32);
        for (a, b) in x.iter().zip(y) {
            let (lanes, mins) = q2k_lanes(a, b);
            let (d, dmin) = f16_pair(a.d, a.dmin);
            acc = (hsum_epi32(lanes) as f32).mul_add(d * b.d, acc);
            accm = (hsum_epi32(mins) as f32).mul_add(dmin * b.d, accm);
        }
        acc - accm
    }

    /// [`super::q2_k_q8_k_gemm`] bit for bit: per half super-block its exact `(I, M)`, two fmas
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q2_k_q8_k_gemm_avx2(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
        let (mut acc, mut accm) = (0.0f32, 0.0f32);
        for (a, b) in x.iter().zip(y) {
            let (sc16, mins) = q2k_scales_mins(a, b);
            let (d, dmin) = f16_pair(a.d, a.dmin);
            let (ds, ms) = (d * b.d, dmin * b.d);
            let mh = [_mm256_castsi256_si128(mins), _mm256_extracti128_si256(mins, 1)];
            for (h, m) in mh.into_iter().enumerate() {
                let m = _mm_add_epi32(m, _mm_shuffle_epi32(m, 0b01_00_11_10));
                let summ = _mm_cvtsi128_si32(_mm_add_epi32(m, _mm_shuffle_epi32(m, 0b10_11_00_01)));
                acc = (hsum_epi32(q2k_half(a, b, sc16, h)) as f32).mul_add(ds, acc);
                accm = (summ as f32).mul_add(ms, accm);
            }
        }
        acc - accm
    }

    /// one Q2_K super-block's 8 lanes: the scaled quant products and the mins terms (module's
    /// text)
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn q2k_lanes(a: &BlockQ2K, b: &BlockQ8K) -> (__m256i, __m256i) {
        let (sc16, mins) = q2k_scales_mins(a, b);
        (_mm256_add_epi32(q2k_half(a, b, sc16, 0), q2k_half(a, b, sc16, 1)), mins)
    }

    /// a Q2_K super-block's 16 scales as i16 and its mins terms `min_j · bsums_j`, pairs summed
    /// into 8 i32 lanes (lanes 0..4 the first half's sub-blocks, 4..8 the second's)
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn q2k_scales_mins(a: &BlockQ2K, b: &BlockQ8K) -> (__m256i, __m256i) {
        // SAFETY: reads the 16 scale bytes and the 32 bytes of `bsums` (unaligned loads)
        let (sc8, bsums) = unsafe { (_mm_loadu_si128(a.scales.as_ptr().cast()), _mm256_loadu_si256(b.bsums.as_ptr().cast())) };
        let m4 = _mm_set1_epi8(0x0f);
        let mins = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), m4)), bsums);
        (_mm256_cvtepu8_epi16(_mm_and_si128(sc8, m4)), mins)
    }

    /// one Q3_K super-block's 8 lanes (module's text): per run the 2 low bits' products less 4
    /// times the activations of the bytes whose high bit is clear (pairs well inside i16)
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn q3k_lanes(a: &BlockQ3K, b: &BlockQ8K) -> __m256i {
        let sc = unpack_q3_scales(&a.scales);
        // SAFETY: reads the 16 bytes of `sc` (unaligned load)
        let sc16 = _mm256_cvtepi8_epi16(unsafe { _mm_loadu_si128(sc.as_ptr().cast()) });
        // the high bits inverted: a set bit now means "take 4 off"
        let clear = _mm256_xor_si256(load_u8x32(&a.hmask), _mm256_set1_epi8(-1));
        let (m3, one) = (_mm256_set1_epi8(3), _mm256_set1_epi8(1));
        let mut acc = _mm256_setzero_si256();
        for h in 0..2 {
            let sch = half_scales(sc16, h);
            let bits = load_u8x32(arr32(&a.qs, 32 * h));
            for k in 0..4 {
                let y = load_i8x32(arr32(&b.qs, 128 * h + 32 * k));
                let low = _mm256_and_si256(srl16(bits, 2 * k), m3);
                let four = _mm256_slli_epi16(_mm256_and_si256(srl16(clear, 4 * h + k), one), 2);
                let p = _mm256_sub_epi16(_mm256_maddubs_epi16(low, y), _mm256_maddubs_epi16(four, y));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, pick_pair(sch, k)));
            }
        }
        acc
    }

    /// one Q5_K super-block's 8 lanes and its whole mins integer `M` (module's text)
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn q5k_lanes(a: &BlockQ5K, b: &BlockQ8K) -> (__m256i, i32) {
        let sm = unpack_scales_mins(&a.scales);
        // SAFETY: reads the 16 bytes of `sm` and the 32 of `bsums` (unaligned loads)
        let (sm, bsums) = unsafe { (_mm_loadu_si128(sm.as_ptr().cast()), _mm256_loadu_si256(b.bsums.as_ptr().cast())) };
        // mins (i16) · the bsums of each sub-block of 32 (pairs of 16)
        let pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
        let mp = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), pairs);
        let m4 = _mm_add_epi32(mp, _mm_shuffle_epi32(mp, 0b01_00_11_10));
        let summ = _mm_cvtsi128_si32(_mm_add_epi32(m4, _mm_shuffle_epi32(m4, 0b10_11_00_01)));
        // scales as i16 in both 128-bit lanes; a byte shuffle broadcasts scale j
        let sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        let hbits = load_u8x32(&a.qh);
        let (mask, one) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(1));
        let mut acc = _mm256_setzero_si256();
        for g in 0..4 {
            let bits = load_u8x32(arr32(&a.qs, 32 * g));
            for half in 0..2 {
                let j = 2 * g + half;
                let low = _mm256_and_si256(srl16(bits, 4 * half), mask);
                let high = _mm256_slli_epi16(_mm256_and_si256(srl16(hbits, j), one), 4);
                let q = _mm256_or_si256(low, high);
                let p = _mm256_maddubs_epi16(q, load_i8x32(arr32(&b.qs, 32 * j)));
                let s = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((2 * j as i16) | ((2 * j as i16 + 1) << 8)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
            }
        }
        (acc, summ)
    }

    /// Q2_K · Q8_K in upstream's x86 order (module's text)
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q2_k_q8_k_avx2(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for (a, b) in x.iter().zip(y) {
            let (lanes, mins) = q2k_lanes(a, b);
            let (d, dmin) = f16_pair(a.d, a.dmin);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(-b.d * dmin), _mm256_cvtepi32_ps(mins), acc);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(b.d * d), _mm256_cvtepi32_ps(lanes), acc);
        }
        hsum_ps(acc)
    }

    /// Q3_K · Q8_K in upstream's x86 order (module's text)
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q3_k_q8_k_avx2(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for (a, b) in x.iter().zip(y) {
            let lanes = q3k_lanes(a, b);
            let (d, _) = f16_pair(a.d, a.d);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(b.d * d), _mm256_cvtepi32_ps(lanes), acc);
        }
        hsum_ps(acc)
    }

    /// Q5_K · Q8_K in upstream's x86 order (module's text)
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q5_k_q8_k_avx2(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let mut summs = 0.0f32;
        for (a, b) in x.iter().zip(y) {
            let (lanes, summ) = q5k_lanes(a, b);
            let (d, dmin) = f16_pair(a.d, a.dmin);
            summs = (-b.d * dmin).mul_add(summ as f32, summs);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(b.d * d), _mm256_cvtepi32_ps(lanes), acc);
        }
        hsum_ps(acc) + summs
    }

    /// [`super::q2_k_q8_k_tiled`] on this set's integer lanes (the same integers, the same floats)
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q2_k_q8_k_tiled_avx2(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
        let mut acc = 0.0f32;
        for (a, b) in x.iter().zip(y) {
            let (lanes, mins) = q2k_lanes(a, b);
            let (d, dmin) = f16_pair(a.d, a.dmin);
            let r = (-dmin).mul_add(hsum_epi32(mins) as f32, d * hsum_epi32(lanes) as f32);
            acc = r.mul_add(b.d, acc);
        }
        acc
    }

    /// [`super::q3_k_q8_k_tiled`] on this set's integer lanes
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q3_k_q8_k_tiled_avx2(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
        let mut acc = 0.0f32;
        for (a, b) in x.iter().zip(y) {
            let r = a.d.to_f32() * hsum_epi32(q3k_lanes(a, b)) as f32;
            acc = r.mul_add(b.d, acc);
        }
        acc
    }

    /// [`super::q5_k_q8_k_tiled`] on this set's integer lanes
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q5_k_q8_k_tiled_avx2(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
        let mut acc = 0.0f32;
        for (a, b) in x.iter().zip(y) {
            let (lanes, summ) = q5k_lanes(a, b);
            let (d, dmin) = f16_pair(a.d, a.dmin);
            let r = (-dmin).mul_add(summ as f32, d * hsum_epi32(lanes) as f32);
            acc = r.mul_add(b.d, acc);
        }
        acc
    }
}
