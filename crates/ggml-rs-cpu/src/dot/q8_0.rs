//! Q8_0 · Q8_0 and Q4_0 · Q8_0: per block an exact integer sum of 32 products, scaled by the
//! product of the two f16 scales and summed in f32.
//!
//! The reference sums the blocks in order; the SIMD versions keep 8 lanes of partial sums (as
//! upstream's AVX2 code does), so their result differs from the reference by float rounding only:
//! the tests check the integer part exactly (scales that are powers of two make every float
//! operation exact) and bound the rest by `(n_blocks + 8) · 2⁻²³ · Σ|d·x·y|`.

use crate::block::{BlockQ4_0, BlockQ8_0};
use crate::simd::Level;

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

/// Q8_0 · Q8_0 summed as upstream's x86 CPU backend sums it (`ggml_vec_dot_q8_0_q8_0` for one
/// activation row, llamafile's tinyBLAS_Q0_AVX for more, AVX2 and AVX-512 builds alike; the
/// repacking buffer type takes no Q8_0 on x86): 8 f32 lanes, lane i adding
/// `d_x·d_y · Σ products 4i..4i+4` by fused multiply-add for each block in order, then lanes
/// `i + (i+4)`, then `(t0 + t2) + (t1 + t3)`. The SIMD kernels follow this order exactly.
pub fn q8_0_q8_0_upstream_order(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let mut acc = [0.0f32; 8];
    for (a, b) in x.iter().zip(y) {
        let d = a.d.to_f32() * b.d.to_f32();
        for (i, lane) in acc.iter_mut().enumerate() {
            let s: i32 = (4 * i..4 * i + 4).map(|k| a.qs[k] as i32 * b.qs[k] as i32).sum();
            *lane = d.mul_add(s as f32, *lane);
        }
    }
    let t = [acc[0] + acc[4], acc[1] + acc[5], acc[2] + acc[6], acc[3] + acc[7]];
    (t[0] + t[2]) + (t[1] + t[3])
}

/// the Q8_0 · Q8_0 kernel of `level`
pub fn select_q8_0(level: Level) -> Q8_0Dot {
    assert!(level <= crate::simd::detected(), "select_q8_0: {} is not supported by this CPU", level.name());
    match level {
        Level::Scalar => q8_0_q8_0_reference,
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 | Level::Avx512 => |x, y| {
            // SAFETY: selected only when the CPU has AVX2, FMA and F16C (asserted above)
            unsafe { x86::q8_0_q8_0_avx2(x, y) }
        },
        #[cfg(target_arch = "x86_64")]
        Level::Avx512Vnni => |x, y| {
            // SAFETY: selected only when the CPU has AVX-512 VL and VNNI (asserted above)
            unsafe { x86::q8_0_q8_0_vnni(x, y) }
        },
        #[cfg(not(target_arch = "x86_64"))]
        _ => q8_0_q8_0_reference,
    }
}

/// the Q4_0 · Q8_0 kernel of `level`
pub fn select_q4_0(level: Level) -> Q4_0Dot {
    assert!(level <= crate::simd::detected(), "select_q4_0: {} is not supported by this CPU", level.name());
    match level {
        Level::Scalar => q4_0_q8_0_reference,
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 | Level::Avx512 => |x, y| {
            // SAFETY: selected only when the CPU has AVX2, FMA and F16C (asserted above)
            unsafe { x86::q4_0_q8_0_avx2(x, y) }
        },
        #[cfg(target_arch = "x86_64")]
        Level::Avx512Vnni => |x, y| {
            // SAFETY: selected only when the CPU has AVX-512 VL and VNNI (asserted above)
            unsafe { x86::q4_0_q8_0_vnni(x, y) }
        },
        #[cfg(not(target_arch = "x86_64"))]
        _ => q4_0_q8_0_reference,
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::super::x86::{dot_i8x32, f16_product, hsum_ps, load_i8x32, nibbles_32};
    use crate::block::{BlockQ4_0, BlockQ8_0};

    /// Two blocks per step into two accumulators, so the FMA latency does not serialise the
    /// blocks; `$block(a, b)` gives a block pair's 8 integer lane sums.
    macro_rules! two_accumulators {
        ($x:ident, $y:ident, $block:expr) => {{
            let n = $x.len().min($y.len());
            let (x, y) = (&$x[..n], &$y[..n]);
            let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            let (xc, yc) = (x.chunks_exact(2), y.chunks_exact(2));
            for (a, b) in xc.zip(yc) {
                let d0 = _mm256_set1_ps(f16_product(a[0].d, b[0].d));
                let d1 = _mm256_set1_ps(f16_product(a[1].d, b[1].d));
                acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps($block(&a[0], &b[0])), acc0);
                acc1 = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps($block(&a[1], &b[1])), acc1);
            }
            if n % 2 == 1 {
                let (a, b) = (&x[n - 1], &y[n - 1]);
                let d = _mm256_set1_ps(f16_product(a.d, b.d));
                acc0 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps($block(a, b)), acc0);
            }
            hsum_ps(_mm256_add_ps(acc0, acc1))
        }};
    }

    /// One accumulator, the blocks in order: upstream's x86 CPU backend computes every Q8_0 ·
    /// Q8_0 product (`ggml_vec_dot_q8_0_q8_0` for one activation row, llamafile's tinyBLAS_Q0_AVX
    /// for two or more: the same terms in the same order) as 8 f32 lanes,
    /// lane i += d_x·d_y · (the int sum of products 4i..4i+4) by FMA, block after block, then
    /// (lo + hi) and the pairwise sum of [`hsum_ps`]. Summing the same terms in this order gives
    /// upstream's result bit for bit ([`super::q8_0_q8_0_upstream_order`]).
    macro_rules! one_accumulator {
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
    pub(super) fn q8_0_q8_0_avx2(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        one_accumulator!(x, y, |a: &BlockQ8_0, b: &BlockQ8_0| dot_i8x32(load_i8x32(&a.qs), load_i8x32(&b.qs)))
    }

    /// vpdpbusd does the 4-product sums in one instruction (unsigned |x| · sign-adjusted y)
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
    pub(super) fn q8_0_q8_0_vnni(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        one_accumulator!(x, y, |a: &BlockQ8_0, b: &BlockQ8_0| {
            let (qa, qb) = (load_i8x32(&a.qs), load_i8x32(&b.qs));
            _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(qa, qa), _mm256_sign_epi8(qb, qa))
        })
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn q4_0_q8_0_avx2(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        two_accumulators!(x, y, |a: &BlockQ4_0, b: &BlockQ8_0| { dot_i8x32(_mm256_sub_epi8(nibbles_32(&a.qs), _mm256_set1_epi8(8)), load_i8x32(&b.qs),) })
    }

    /// the nibbles (0..16) are already unsigned: Σ q·y − 8·Σ y, both with vpdpbusd
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
    pub(super) fn q4_0_q8_0_vnni(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        two_accumulators!(x, y, |a: &BlockQ4_0, b: &BlockQ8_0| {
            let qb = load_i8x32(&b.qs);
            let zero = _mm256_setzero_si256();
            let qy = _mm256_dpbusd_epi32(zero, nibbles_32(&a.qs), qb);
            let sy = _mm256_dpbusd_epi32(zero, _mm256_set1_epi8(8), qb);
            _mm256_sub_epi32(qy, sy)
        })
    }
}

#[cfg(test)]
mod upstream_order_tests {
    use half::f16;

    use super::*;
    use crate::rng::XorShift;
    use crate::simd::Level;

    /// random blocks with scales of every magnitude: the float sums round, so another order of
    /// the same terms shows in the last bits
    fn blocks(r: &mut XorShift, n: usize) -> Vec<BlockQ8_0> {
        (0..n)
            .map(|_| {
                let mut b = BlockQ8_0 { d: f16::from_f32(r.f32_in(0.001, 0.05)), qs: [0; 32] };
                b.qs.iter_mut().for_each(|q| *q = r.i32_in(-127, 127) as i8);
                b
            })
            .collect()
    }

    /// every SIMD level gives upstream's Q8_0 · Q8_0 bit for bit (before: two accumulators, even
    /// and odd blocks, differed in the last bits on most rows)
    #[test]
    fn simd_q8_0_is_upstreams_sum_bit_for_bit() {
        let mut r = XorShift::new(14);
        let levels: Vec<Level> = Level::available().into_iter().filter(|&l| l != Level::Scalar).collect();
        for nb in [1, 2, 3, 8, 16, 17, 64, 96] {
            for _ in 0..20 {
                let (x, y) = (blocks(&mut r, nb), blocks(&mut r, nb));
                let want = q8_0_q8_0_upstream_order(&x, &y);
                for &level in &levels {
                    assert_eq!(select_q8_0(level)(&x, &y).to_bits(), want.to_bits(), "q8_0 {} nb={nb}", level.name());
                }
            }
        }
    }
}
