//! Q4_1 · Q8_1: per block the exact integer sum of the 32 unsigned 4-bit quants times the
//! activations, scaled by the product of the two scales, plus the block minimum times the
//! activations' scaled sum (`m · s`), summed in f32 (upstream's `ggml_vec_dot_q4_1_q8_1_generic`).
//!
//! The AVX2 form keeps 8 lanes of partial sums (as upstream's x86 one does), so it differs from the
//! reference by float rounding only.

use crate::block::{BlockQ4_1, BlockQ8_1};

/// scalar reference of Q4_1 · Q8_1
pub fn q4_1_q8_1_reference(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let (lo, hi) = b.qs.split_at(16);
        let sumi: i32 = a.qs.iter().zip(lo.iter().zip(hi)).map(|(&q, (&l, &h))| (q & 0x0f) as i32 * l as i32 + (q >> 4) as i32 * h as i32).sum();
        sum += (a.d.to_f32() * b.d.to_f32()) * sumi as f32 + a.m.to_f32() * b.s.to_f32();
    }
    sum
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::super::x86::{dot_i8x32, f16_product, hsum_ps, load_i8x32, nibbles_32};
    use crate::block::{BlockQ4_1, BlockQ8_1};

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q4_1_q8_1_avx2(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let mut mins = 0.0f32;
        for (a, b) in x.iter().zip(y) {
            // quants 0..16 are unsigned: dot_i8x32 takes them as the positive side
            let d = _mm256_set1_ps(f16_product(a.d, b.d));
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8x32(nibbles_32(&a.qs), load_i8x32(&b.qs))), acc);
            mins += f16_product(a.m, b.s);
        }
        hsum_ps(acc) + mins
    }
}
