//! TQ1_0 and TQ2_0 · Q8_K: per block the exact integer sum of the ternary weights times the
//! activations, scaled by `f16(d) · d_y`, summed in f32 (upstream's `ggml_vec_dot_tq1_0_q8_K_generic`,
//! `ggml_vec_dot_tq2_0_q8_K_generic`).
//!
//! **Upstream's x86 order** ([`x86`], the AVX2 branches of `ggml_vec_dot_tq{1,2}_0_q8_K`, run by
//! its AVX2 and native x86 builds alike): per block 8 exact i32 lanes, lane `m` =
//! `Σ t_e · y_e` over the elements `e` with `(e mod 32) / 4 = m` (t the stored digit 0..=2, the
//! weight plus one) less `Σ y_e` over `e` in `32m..32m + 32` (`bsums_2m + bsums_2m+1`); then
//! `acc = fma(f32(lane_m), dy · f32(d), acc)`, blocks in order, and the horizontal sum of the 8
//! lanes ([`super::x86::hsum_ps`]). The lanes are exact, so only the float steps fix the bits.

use crate::block::{BlockQ8K, BlockTq1_0, BlockTq2_0};
use crate::quants::{tq1_0_trits, tq2_0_trits};

fn ternary_sum(t: &[i8; 256], y: &BlockQ8K) -> i32 {
    t.iter().zip(&y.qs).map(|(&a, &b)| a as i32 * b as i32).sum()
}

/// scalar reference of TQ1_0 · Q8_K
pub fn tq1_0_q8_k_reference(x: &[BlockTq1_0], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        sum += ternary_sum(&tq1_0_trits(a), b) as f32 * (a.d.to_f32() * b.d);
    }
    sum
}

/// scalar reference of TQ2_0 · Q8_K
pub fn tq2_0_q8_k_reference(x: &[BlockTq2_0], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        sum += ternary_sum(&tq2_0_trits(a), b) as f32 * (b.d * a.d.to_f32());
    }
    sum
}

/// a block's 8 lanes of upstream's x86 order (module's text), from the weights in element order
fn x86_lanes(t: &[i8; 256], y: &BlockQ8K) -> [i32; 8] {
    std::array::from_fn(|m| {
        let prod: i32 = (0..256).filter(|e| (e % 32) / 4 == m).map(|e| (t[e] as i32 + 1) * y.qs[e] as i32).sum();
        prod - (y.bsums[2 * m] as i32 + y.bsums[2 * m + 1] as i32)
    })
}

/// the x86 order's float steps over blocks' lanes (module's text)
fn x86_sum(blocks: impl Iterator<Item = ([i32; 8], f32)>) -> f32 {
    let mut acc = [0f32; 8];
    for (lanes, d) in blocks {
        for (a, l) in acc.iter_mut().zip(lanes) {
            *a = (l as f32).mul_add(d, *a);
        }
    }
    crate::dot::q8_0::hsum8(acc)
}

/// TQ1_0 · Q8_K in upstream's x86 order (the definition; module's text)
pub fn tq1_0_q8_k_x86(x: &[BlockTq1_0], y: &[BlockQ8K]) -> f32 {
    x86_sum(x.iter().zip(y).map(|(a, b)| (x86_lanes(&tq1_0_trits(a), b), b.d * a.d.to_f32())))
}

/// TQ2_0 · Q8_K in upstream's x86 order (the definition; module's text)
pub fn tq2_0_q8_k_x86(x: &[BlockTq2_0], y: &[BlockQ8K]) -> f32 {
    x86_sum(x.iter().zip(y).map(|(a, b)| (x86_lanes(&tq2_0_trits(a), b), b.d * a.d.to_f32())))
}

/// The AVX2 forms of [`tq1_0_q8_k_x86`] and [`tq2_0_q8_k_x86`]: the stored digits (0..=2)
/// unpacked to bytes in element order, 32 at a time against the 32 activations they multiply
/// (`vpmaddubsw`, i16 sums far from saturating), so byte `b` of every run lands in lane `b / 4`.
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::super::x86::{arr32, f16_pair, hsum_ps, load_i8x32, load_u8x32};
    use crate::block::{BlockQ8K, BlockTq1_0, BlockTq2_0};

    /// base-3 digit of packed bytes: with `p = 3ⁿ`, `((q · p) mod 256) · 3 >> 8` is digit n
    /// (most significant first) of the byte's fixed-point fraction; `q` as 16 u16 lanes, `p` per
    /// lane
    #[inline]
    #[target_feature(enable = "avx2")]
    fn digit16(q: __m256i, p: __m256i) -> __m256i {
        let frac = _mm256_and_si256(_mm256_mullo_epi16(q, p), _mm256_set1_epi16(0xff));
        _mm256_srli_epi16(_mm256_mullo_epi16(frac, _mm256_set1_epi16(3)), 8)
    }

    /// the digits of 32 packed bytes, byte for byte; within each 128-bit lane bytes 0..8 take
    /// the powers `p_lo`, bytes 8..16 `p_hi` (u16 lanes)
    #[inline]
    #[target_feature(enable = "avx2")]
    fn digits(q: __m256i, p_lo: __m256i, p_hi: __m256i) -> __m256i {
        let z = _mm256_setzero_si256();
        let lo = digit16(_mm256_unpacklo_epi8(q, z), p_lo);
        let hi = digit16(_mm256_unpackhi_epi8(q, z), p_hi);
        _mm256_packus_epi16(lo, hi)
    }

    /// `3ⁿ` for the low 128-bit lane and `3ᵐ` for the high one, as u16 lanes
    #[inline]
    #[target_feature(enable = "avx2")]
    fn pows(n: u32, m: u32) -> __m256i {
        _mm256_set_m128i(_mm_set1_epi16(3i16.pow(m)), _mm_set1_epi16(3i16.pow(n)))
    }

    /// a block's lanes from the i16 products of its eight 32-element runs
    #[inline]
    #[target_feature(enable = "avx2")]
    fn lanes(sum16: __m256i, b: &BlockQ8K) -> __m256i {
        // SAFETY: reads the 32 bytes of `bsums` (unaligned load)
        let bsums = unsafe { _mm256_loadu_si256(b.bsums.as_ptr().cast()) };
        let ones = _mm256_set1_epi16(1);
        _mm256_sub_epi32(_mm256_madd_epi16(sum16, ones), _mm256_madd_epi16(bsums, ones))
    }

    /// one TQ1_0 block's lanes (module's text)
    #[inline]
    #[target_feature(enable = "avx2")]
    fn tq1_lanes(a: &BlockTq1_0, b: &BlockQ8K) -> __m256i {
        let y = |c: usize| load_i8x32(arr32(&b.qs, 32 * c));
        // digits 0..5 of bytes 0..32: elements 32n..32n + 32
        let q = load_u8x32(arr32(&a.qs, 0));
        let mut sum = _mm256_setzero_si256();
        for n in 0..5 {
            let p = pows(n, n);
            sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(digits(q, p, p), y(n as usize)));
        }
        // digits n of bytes 32..48: elements 160 + 16n..; two digits per run (n, n + 1)
        // SAFETY: reads the 16 bytes 32..48 of `qs` (unaligned load)
        let tail = unsafe { _mm_loadu_si128(a.qs[32..48].as_ptr().cast()) };
        let tail2 = _mm256_set_m128i(tail, tail);
        for (c, n) in [(5, 0), (6, 2)] {
            let p = pows(n, n + 1);
            sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(digits(tail2, p, p), y(c)));
        }
        // the last run: digit 4 of bytes 32..48, then digits 0..4 of the 4 bytes of `qh`
        // (elements 240 + 4n..)
        let qh = _mm_set1_epi32(i32::from_le_bytes(a.qh));
        let last = _mm256_set_m128i(qh, tail);
        let p_lo = _mm256_set_m128i(_mm_set_epi16(3, 3, 3, 3, 1, 1, 1, 1), _mm_set1_epi16(81));
        let p_hi = _mm256_set_m128i(_mm_set_epi16(27, 27, 27, 27, 9, 9, 9, 9), _mm_set1_epi16(81));
        sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(digits(last, p_lo, p_hi), y(7)));
        lanes(sum, b)
    }

    /// one TQ2_0 block's lanes (module's text): 2-bit fields `l` of bytes 32g..32g + 32 are
    /// elements 128g + 32l..
    #[inline]
    #[target_feature(enable = "avx2")]
    fn tq2_lanes(a: &BlockTq2_0, b: &BlockQ8K) -> __m256i {
        let m3 = _mm256_set1_epi8(3);
        let mut sum = _mm256_setzero_si256();
        for g in 0..2 {
            let q = load_u8x32(arr32(&a.qs, 32 * g));
            for l in 0..4 {
                let t = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * l as i32)), m3);
                sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(t, load_i8x32(arr32(&b.qs, 128 * g + 32 * l))));
            }
        }
        lanes(sum, b)
    }

    /// [`super::tq1_0_q8_k_x86`] bit for bit
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn tq1_0_q8_k_avx2(x: &[BlockTq1_0], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for (a, b) in x.iter().zip(y) {
            let l = tq1_lanes(a, b);
            let (d, _) = f16_pair(a.d, a.d);
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(l), _mm256_set1_ps(b.d * d), acc);
        }
        hsum_ps(acc)
    }

    /// [`super::tq2_0_q8_k_x86`] bit for bit
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn tq2_0_q8_k_avx2(x: &[BlockTq2_0], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for (a, b) in x.iter().zip(y) {
            let l = tq2_lanes(a, b);
            let (d, _) = f16_pair(a.d, a.d);
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(l), _mm256_set1_ps(b.d * d), acc);
        }
        hsum_ps(acc)
    }
}
