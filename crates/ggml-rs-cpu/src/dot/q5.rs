//! Q5_0 · Q8_0 and Q5_1 · Q8_1: per block an exact integer sum of 32 products of the 5-bit quants
//! with the activations, scaled by the product of the two scales (Q5_1 adds `m · s`, the min
//! times the activations' scaled sum), summed in f32.
//!
//! The AVX2 versions expand the fifth bits with a byte shuffle and compare, then use the Q4_0
//! machinery; they keep 8 lanes of partial sums, so they differ from the reference by float
//! rounding only (the tests check integer-exact cases bit for bit and bound the rest).

use crate::block::{BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use crate::quants::unpack5;

pub type Q5_0Dot = fn(&[BlockQ5_0], &[BlockQ8_0]) -> f32;
pub type Q5_1Dot = fn(&[BlockQ5_1], &[BlockQ8_1]) -> f32;

/// scalar reference of Q5_0 · Q8_0 (upstream's `ggml_vec_dot_q5_0_q8_0_generic`)
pub fn q5_0_q8_0_reference(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let q = unpack5(&a.qs, &a.qh);
        let sumi: i32 = q.iter().zip(&b.qs).map(|(&p, &v)| (p as i32 - 16) * v as i32).sum();
        sum += (a.d.to_f32() * b.d.to_f32()) * sumi as f32;
    }
    sum
}

/// scalar reference of Q5_1 · Q8_1 (upstream's `ggml_vec_dot_q5_1_q8_1_generic`)
pub fn q5_1_q8_1_reference(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let q = unpack5(&a.qs, &a.qh);
        let sumi: i32 = q.iter().zip(&b.qs).map(|(&p, &v)| p as i32 * v as i32).sum();
        sum += (a.d.to_f32() * b.d.to_f32()) * sumi as f32 + a.m.to_f32() * b.s.to_f32();
    }
    sum
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::super::x86::{dot_i8x32, f16_product, hsum_ps, load_i8x32, nibbles_32};
    use crate::block::{BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};

    /// the 32 quants (0..32) of a block: nibbles, plus 16 where bit i of `qh` is set
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn quants5(qs: &[u8; 16], qh: &[u8; 4]) -> __m256i {
        let h = _mm256_set1_epi32(u32::from_le_bytes(*qh) as i32);
        // byte i takes byte i / 8 of qh, then tests bit i % 8 of it
        let spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
        let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        let bytes = _mm256_and_si256(_mm256_shuffle_epi8(h, spread), bit);
        let set = _mm256_cmpeq_epi8(bytes, bit);
        _mm256_or_si256(nibbles_32(qs), _mm256_and_si256(set, _mm256_set1_epi8(16)))
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q5_0_q8_0_avx2(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for (a, b) in x.iter().zip(y) {
            let q = _mm256_sub_epi8(quants5(&a.qs, &a.qh), _mm256_set1_epi8(16));
            let d = _mm256_set1_ps(f16_product(a.d, b.d));
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8x32(q, load_i8x32(&b.qs))), acc);
        }
        hsum_ps(acc)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q5_1_q8_1_avx2(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let mut mins = 0.0f32;
        for (a, b) in x.iter().zip(y) {
            // quants 0..32 are unsigned: dot_i8x32 takes them as the positive side
            let d = _mm256_set1_ps(f16_product(a.d, b.d));
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8x32(quants5(&a.qs, &a.qh), load_i8x32(&b.qs))), acc);
            mins += f16_product(a.m, b.s);
        }
        hsum_ps(acc) + mins
    }
}
