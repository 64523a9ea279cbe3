//! Q8_0 · Q8_0 and Q4_0 · Q8_0: per block an exact integer sum of 32 products, scaled by the
//! product of the two f16 scales and summed in f32.
//!
//! The reference sums the blocks in order (upstream's generic C). Q8_0 · Q8_0 at the SIMD levels
//! is [`q8_0_q8_0_x86`] bit for bit: upstream's x86 order (8 lanes, one fused multiply-add per
//! lane and block, blocks in order, its horizontal sum), which its native builds use for token
//! generation and, through llamafile's tiles, for prompts; the multi-row forms (`gemv.rs`,
//! `qgemm.rs`) sum the same way, so logits match upstream's native CPU bit for bit.
//! Q4_0 · Q8_0's SIMD versions keep two accumulators of 8 lanes: they differ from the reference
//! by float rounding only (the tests check the integer part exactly, with scales that are
//! powers of two, and bound the rest by `(n_blocks + 8) · 2⁻²³ · Σ|d·x·y|`).

use crate::block::{BlockQ4_0, BlockQ8_0};

pub type Q8_0Dot = fn(&[BlockQ8_0], &[BlockQ8_0]) -> f32;
pub type Q4_0Dot = fn(&[BlockQ4_0], &[BlockQ8_0]) -> f32;

/// scalar reference of Q8_0 · Q8_0 (upstream's `ggml_vec_dot_q8_0_q8_0_generic`)
pub fn q8_0_q8_0_reference(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let sumi: i32 = a.qs.iter().zip(&b.qs).map(|(&p, &q)| p as i32 * q as i32).sum();
        sum += sumi as f32 * (a.d.to_f32() * b.d.to_f32());
    }
    sum
}

/// Q8_0 · Q8_0 as upstream's x86 builds sum it (`ggml_vec_dot_q8_0_q8_0`'s AVX2 / AVX-512
/// branch, and llamafile's `tinyBLAS_Q0_AVX` per output of a prompt tile): 8 lanes, lane j the
/// exact integer sum of quants 4j..4j+4 of a block; per block `d = f32(dx) · f32(dy)` rounded
/// once, then `lane = fma(d, lane sum, lane)`, blocks in order; at the end [`hsum8`]. The
/// definition the SIMD kernels and tiles are tested against bit for bit.
///
/// The integer sums are the true products; upstream's `vpsignb` form wraps where both quants
/// are -128, which activations never hold (the quantizer's range is -127..=127).
pub fn q8_0_q8_0_x86(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let mut acc = [0f32; 8];
    for (a, b) in x.iter().zip(y) {
        let d = a.d.to_f32() * b.d.to_f32();
        for (j, lane) in acc.iter_mut().enumerate() {
            let s: i32 = (4 * j..4 * j + 4).map(|i| a.qs[i] as i32 * b.qs[i] as i32).sum();
            *lane = d.mul_add(s as f32, *lane);
        }
    }
    hsum8(acc)
}

/// upstream's horizontal sum of 8 lanes (`hsum_float_8`, llamafile's `hsum`): the halves added
/// (lane i + lane i + 4), then lanes 0 + 2 and 1 + 3, then those two
pub fn hsum8(v: [f32; 8]) -> f32 {
    let h: [f32; 4] = std::array::from_fn(|i| v[i] + v[i + 4]);
    (h[0] + h[2]) + (h[1] + h[3])
}

/// Q4_0 · Q8_0 as upstream's x86 builds sum it where the weights are not repacked
/// (`ggml_vec_dot_q4_0_q8_0`'s AVX2 branch, and llamafile's `tinyBLAS_Q0_AVX` per output of a
/// prompt): [`q8_0_q8_0_x86`]'s order on the weights `n - 8` (8 lanes of 4-product sums, one fma
/// per lane and block by `f32(dx) · f32(dy)`, then [`hsum8`])
pub fn q4_0_q8_0_x86(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let mut acc = [0f32; 8];
    for (a, b) in x.iter().zip(y) {
        let d = a.d.to_f32() * b.d.to_f32();
        let w = |i: usize| if i < 16 { (a.qs[i] & 0x0f) as i32 - 8 } else { (a.qs[i - 16] >> 4) as i32 - 8 };
        for (j, lane) in acc.iter_mut().enumerate() {
            let s: i32 = (4 * j..4 * j + 4).map(|i| w(i) * b.qs[i] as i32).sum();
            *lane = d.mul_add(s as f32, *lane);
        }
    }
    hsum8(acc)
}

/// scalar reference of Q4_0 · Q8_0 (upstream's `ggml_vec_dot_q4_0_q8_0_generic`)
pub fn q4_0_q8_0_reference(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let mut sumi = 0i32;
        for j in 0..16 {
            let v0 = (a.qs[j] & 0x0f) as i32 - 8;
            let v1 = (a.qs[j] >> 4) as i32 - 8;
            sumi += v0 * b.qs[j] as i32 + v1 * b.qs[j + 16] as i32;
        }
        sum += sumi as f32 * (a.d.to_f32() * b.d.to_f32());
    }
    sum
}

/// Q4_0 · Q8_0 in upstream's repacked order (`ggml_gemv_q4_0_8x8_q8_0` and
/// `ggml_gemm_q4_0_8x8_q8_0`, AVX2 and AVX-512 paths alike; [`super::Order`]): per block the
/// exact integer sum of the 32 products (weights `n - 8`), then `acc = fma(f32(isum), f32(dx) ·
/// f32(dy), acc)`, the scale product rounded first, blocks in order; no horizontal float sum.
/// The definition the SIMD kernels and prompt tiles are tested against bit for bit.
pub fn q4_0_q8_0_repack(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let mut acc = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let mut sumi = 0i32;
        for j in 0..16 {
            sumi += ((a.qs[j] & 0x0f) as i32 - 8) * b.qs[j] as i32 + ((a.qs[j] >> 4) as i32 - 8) * b.qs[j + 16] as i32;
        }
        acc = (sumi as f32).mul_add(a.d.to_f32() * b.d.to_f32(), acc);
    }
    acc
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::super::x86::{dot_i8x32, f16_product, hsum_epi32, hsum_ps, load_i8x32, nibbles_32};
    use crate::block::{BlockQ4_0, BlockQ8_0};

    /// One accumulator, blocks in order: [`super::q8_0_q8_0_x86`] bit for bit; `$block(a, b)`
    /// gives a block pair's 8 integer lane sums.
    macro_rules! upstream_order {
        ($x:ident, $y:ident, $block:expr) => {{
            let mut acc = _mm256_setzero_ps();
            for (a, b) in $x.iter().zip($y) {
                let d = _mm256_set1_ps(f16_product(a.d, b.d));
                acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps($block(a, b)), acc);
            }
            hsum_ps(acc)
        }};
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q8_0_q8_0_avx2(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        upstream_order!(x, y, |a: &BlockQ8_0, b: &BlockQ8_0| dot_i8x32(load_i8x32(&a.qs), load_i8x32(&b.qs)))
    }

    /// vpdpbusd does the 4-product sums in one instruction (unsigned |x| · sign-adjusted y)
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
    pub(crate) fn q8_0_q8_0_vnni(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        upstream_order!(x, y, |a: &BlockQ8_0, b: &BlockQ8_0| {
            let (qa, qb) = (load_i8x32(&a.qs), load_i8x32(&b.qs));
            _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(qa, qa), _mm256_sign_epi8(qb, qa))
        })
    }

    /// [`super::q4_0_q8_0_repack`] bit for bit: each block's integer sum, then one fma
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q4_0_q8_0_repack_avx2(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        let mut acc = 0.0f32;
        for (a, b) in x.iter().zip(y) {
            let isum = hsum_epi32(dot_i8x32(_mm256_sub_epi8(nibbles_32(&a.qs), _mm256_set1_epi8(8)), load_i8x32(&b.qs)));
            acc = (isum as f32).mul_add(f16_product(a.d, b.d), acc);
        }
        acc
    }

    /// [`super::q4_0_q8_0_x86`] bit for bit
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q4_0_q8_0_avx2(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        upstream_order!(x, y, |a: &BlockQ4_0, b: &BlockQ8_0| { dot_i8x32(_mm256_sub_epi8(nibbles_32(&a.qs), _mm256_set1_epi8(8)), load_i8x32(&b.qs),) })
    }

    /// the nibbles (0..16) are already unsigned: Σ q·y − 8·Σ y, both with vpdpbusd;
    /// [`super::q4_0_q8_0_x86`] bit for bit
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
    pub(crate) fn q4_0_q8_0_vnni(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        upstream_order!(x, y, |a: &BlockQ4_0, b: &BlockQ8_0| {
            let qb = load_i8x32(&b.qs);
            let zero = _mm256_setzero_si256();
            let qy = _mm256_dpbusd_epi32(zero, nibbles_32(&a.qs), qb);
            let sy = _mm256_dpbusd_epi32(zero, _mm256_set1_epi8(8), qb);
            _mm256_sub_epi32(qy, sy)
        })
    }
}
