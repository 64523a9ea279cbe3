//! Q4_K · Q8_K. Per super-block two exact integer sums: `Σ_j sc[j] · Σ q4·q8` over the 8
//! sub-blocks and `Σ_j m[j] · (bsums)` for the mins; then, in f32 and in block order,
//! `sum += (dy·d)·sumi − (dy·dmin)·summ`. The SIMD versions compute the same two integers and do
//! the same float operations in the same order, so they equal the reference bit for bit.

use crate::block::{BlockQ4K, BlockQ8K};
use crate::quants::get_scale_min_k4;
use crate::simd::Level;

pub type Q4KDot = fn(&[BlockQ4K], &[BlockQ8K]) -> f32;

/// the 8 scales and 8 mins of a block, and its mins term `Σ_j m[j] · (bsums[2j] + bsums[2j+1])`
#[inline(always)]
fn scales_and_mins(a: &BlockQ4K, b: &BlockQ8K) -> ([u8; 8], i32) {
    let mut sc = [0u8; 8];
    let mut summ = 0i32;
    for j in 0..8 {
        let (s, m) = get_scale_min_k4(j, &a.scales);
        sc[j] = s;
        summ += m as i32 * (b.bsums[2 * j] as i32 + b.bsums[2 * j + 1] as i32);
    }
    (sc, summ)
}

/// the 8 scales (bytes 0..8) and 8 mins (bytes 8..16) of a block, four at a time: the low 6 bits
/// of bytes 0..4 / 4..8 are scales / mins 0..4; scales / mins 4..8 take their low 4 bits from
/// the low / high nibbles of bytes 8..12 and their top 2 bits from the top of bytes 0..4 / 4..8
#[inline(always)]
pub(crate) fn unpack_scales_mins(q: &[u8; 12]) -> [u8; 16] {
    let w = |i: usize| u32::from_le_bytes([q[4 * i], q[4 * i + 1], q[4 * i + 2], q[4 * i + 3]]);
    let (a, b, c) = (w(0), w(1), w(2));
    let sc_lo = a & 0x3f3f_3f3f;
    let m_lo = b & 0x3f3f_3f3f;
    let sc_hi = (c & 0x0f0f_0f0f) | (((a >> 6) & 0x0303_0303) << 4);
    let m_hi = ((c >> 4) & 0x0f0f_0f0f) | (((b >> 6) & 0x0303_0303) << 4);
    let mut out = [0u8; 16];
    for (i, v) in [sc_lo, sc_hi, m_lo, m_hi].into_iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
    out
}

#[inline(always)]
fn combine(sum: f32, b: &BlockQ8K, sumi: i32, summ: i32, d: f32, dmin: f32) -> f32 {
    sum + (b.d * d) * sumi as f32 - (b.d * dmin) * summ as f32
}

/// scalar reference (upstream's `ggml_vec_dot_q4_K_q8_K_generic`, integers kept exact)
pub fn q4_k_q8_k_reference(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let (sc, summ) = scales_and_mins(a, b);
        let mut sumi = 0i32;
        for g in 0..4 {
            let (mut lo, mut hi) = (0i32, 0i32);
            for l in 0..32 {
                let q = a.qs[32 * g + l];
                lo += (q & 0xf) as i32 * b.qs[64 * g + l] as i32;
                hi += (q >> 4) as i32 * b.qs[64 * g + 32 + l] as i32;
            }
            sumi += sc[2 * g] as i32 * lo + sc[2 * g + 1] as i32 * hi;
        }
        sum = combine(sum, b, sumi, summ, a.d.to_f32(), a.dmin.to_f32());
    }
    sum
}

/// the Q4_K · Q8_K kernel of `level`
pub fn select_q4_k(level: Level) -> Q4KDot {
    assert!(level <= crate::simd::detected(), "select_q4_k: {} is not supported by this CPU", level.name());
    match level {
        Level::Scalar => q4_k_q8_k_reference,
        #[cfg(target_arch = "x86_64")]
        _ => |x, y| {
            // SAFETY: selected only when the CPU has AVX2, FMA and F16C (asserted above)
            unsafe { x86::q4_k_q8_k_avx2(x, y) }
        },
        #[cfg(not(target_arch = "x86_64"))]
        _ => q4_k_q8_k_reference,
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::super::x86::{arr32, f16_pair, hsum_epi32, load_i8x32, load_u8x32};
    use super::{combine, unpack_scales_mins};
    use crate::block::{BlockQ4K, BlockQ8K};

    /// one superblock: (Σ scale · nibble · y, Σ min · bsums pair), both exact integers
    macro_rules! q4k_block {
        ($a:expr, $b:expr, $mask:expr) => {{
            let (a, b, mask): (&BlockQ4K, &BlockQ8K, __m256i) = ($a, $b, $mask);
            let sm = unpack_scales_mins(&a.scales);
            // SAFETY: reads the 16 bytes of `sm` and the 32 of `bsums` (unaligned loads)
            let (sm, bsums) = unsafe { (_mm_loadu_si128(sm.as_ptr().cast()), _mm256_loadu_si256(b.bsums.as_ptr().cast())) };
            // the mins term: mins (i16) · pairwise sums of bsums
            let pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
            let mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
            let m4 = _mm_madd_epi16(mins, pairs);
            let m4 = _mm_add_epi32(m4, _mm_shuffle_epi32(m4, 0b01_00_11_10));
            let summ = _mm_cvtsi128_si32(_mm_add_epi32(m4, _mm_shuffle_epi32(m4, 0b10_11_00_01)));
            // the scales as i16 in both halves; a byte shuffle broadcasts scale j
            let sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
            let mut acc = _mm256_setzero_si256();
            for g in 0..4 {
                let q = load_u8x32(arr32(&a.qs, 32 * g));
                let lo = _mm256_and_si256(q, mask);
                let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
                // nibble (≤ 15) · byte (≤ 128) pairs fit i16 without saturating
                let plo = _mm256_maddubs_epi16(lo, load_i8x32(arr32(&b.qs, 64 * g)));
                let phi = _mm256_maddubs_epi16(hi, load_i8x32(arr32(&b.qs, 64 * g + 32)));
                let (j0, j1) = (4 * g as i16, 4 * g as i16 + 2);
                let s0 = _mm256_shuffle_epi8(sc, _mm256_set1_epi16(j0 | ((j0 + 1) << 8)));
                let s1 = _mm256_shuffle_epi8(sc, _mm256_set1_epi16(j1 | ((j1 + 1) << 8)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(plo, s0));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(phi, s1));
            }
            (hsum_epi32(acc), summ)
        }};
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn q4_k_q8_k_avx2(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
        let mut sum = 0.0f32;
        let mask = _mm256_set1_epi8(0x0f);
        for (a, b) in x.iter().zip(y) {
            let (sumi, summ) = q4k_block!(a, b, mask);
            let (d, dmin) = f16_pair(a.d, a.dmin);
            sum = combine(sum, b, sumi, summ, d, dmin);
        }
        sum
    }

    /// `R` rows `stride` bytes apart from `w` · `y`, each summed as [`q4_k_q8_k_avx2`] sums it
    /// (superblock by superblock, the rows side by side)
    ///
    /// # Safety
    /// rows `w + r · stride` (r < R) readable for `y.len()` blocks and aligned for them; `out`
    /// writable for R floats
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) unsafe fn q4_k_rows<const R: usize>(w: *const u8, stride: usize, y: &[BlockQ8K], out: *mut f32) {
        let mut sum = [0.0f32; R];
        let mask = _mm256_set1_epi8(0x0f);
        for (i, b) in y.iter().enumerate() {
            for r in 0..R {
                // SAFETY: block i of row r, aligned (caller)
                let a = unsafe { &*w.add(r * stride).cast::<BlockQ4K>().add(i) };
                let (sumi, summ) = q4k_block!(a, b, mask);
                let (d, dmin) = f16_pair(a.d, a.dmin);
                sum[r] = combine(sum[r], b, sumi, summ, d, dmin);
            }
        }
        for r in 0..R {
            // SAFETY: R writable floats (caller)
            unsafe { out.add(r).write_unaligned(sum[r]) };
        }
    }
}
