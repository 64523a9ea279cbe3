//! IQ4_NL · Q8_0, IQ4_XS · Q8_K and MXFP4 · Q8_0: the weights are 4-bit indices into a table of
//! 16 small integers (IQ4_NL's levels, or MXFP4's doubled E2M1 values), so each group of 32 has
//! an exact integer sum `Σ table[q] · a`, computed as two halves (the low nibbles with
//! activations 0..16, the high ones with 16..32) that are added before the conversion to f32.
//!
//! - IQ4_NL / MXFP4 (upstream's `*_generic`): per block `sum += (dy · dx) · f32(sumi)` with
//!   `dy · dx` the product of the activation's f16 scale and the weight's scale (f16, or E8M0's
//!   half value), blocks in order;
//! - IQ4_XS: per super-block `d = f32(d) · dy`, then per sub-block of 32, in order,
//!   `sum += (d · f32(ls − 32)) · f32(sumi)`.
//!
//! The AVX2 versions look the 16 levels up with one byte shuffle and take the products with the
//! sign trick (`maddubs` of |w| and the activations with w's sign), in the order of upstream's
//! x86 build: IQ4_NL / MXFP4 keep 8 lanes of `fma(scale, f32(4-product lane sum), acc)` in two
//! accumulators (even and odd blocks), summed at the end, then an odd last block's
//! `fma(scale, f32(sumi), sum)` (upstream's scalar tail, fused by its FMA build);
//! IQ4_XS sums a whole super-block's `(ls − 32) · products` in 8 i32 lanes and does one fma per
//! super-block. Their integers are exact, so they differ from the reference by float rounding
//! only, and equal upstream's AVX2 build's `vec_dot` bit for bit (tests/upstream.rs).

use crate::block::{BlockIq4Nl, BlockIq4Xs, BlockMxfp4, BlockQ8_0, BlockQ8K};
use crate::quants::{E2M1_DOUBLED, IQ4_NL_LEVELS, e8m0_to_f32_half, iq4_xs_scale};

/// `Σ table[q] · a` over 32 elements packed in 16 bytes (low nibbles with `a[..16]`, high
/// nibbles with `a[16..]`), the two halves summed apart then added
#[inline(always)]
fn table_dot(table: &[i8; 16], qs: &[u8], a: &[i8]) -> i32 {
    let (mut lo, mut hi) = (0i32, 0i32);
    for j in 0..16 {
        lo += a[j] as i32 * table[(qs[j] & 0xf) as usize] as i32;
        hi += a[j + 16] as i32 * table[(qs[j] >> 4) as usize] as i32;
    }
    lo + hi
}

/// scalar reference of IQ4_NL · Q8_0 (upstream's `ggml_vec_dot_iq4_nl_q8_0_generic`)
pub fn iq4_nl_q8_0_reference(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let d = b.d.to_f32() * a.d.to_f32();
        sum += d * table_dot(&IQ4_NL_LEVELS, &a.qs, &b.qs) as f32;
    }
    sum
}

/// scalar reference of IQ4_XS · Q8_K (upstream's `ggml_vec_dot_iq4_xs_q8_K_generic`)
pub fn iq4_xs_q8_k_reference(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let d = a.d.to_f32() * b.d;
        for ib in 0..8 {
            let dl = d * (iq4_xs_scale(a, ib) - 32) as f32;
            sum += dl * table_dot(&IQ4_NL_LEVELS, &a.qs[16 * ib..16 * ib + 16], &b.qs[32 * ib..32 * ib + 32]) as f32;
        }
    }
    sum
}

/// IQ4_XS · Q8_K in the order of upstream's tiled K-quant path (which also takes IQ4_XS
/// weights with 8 or more activation rows, `dot::Order::Tiled`): per super-block the exact
/// `I = Σ (ls - 32) · Σ level·y`, `r = f32(d) · f32(I)` (rounded), `acc = fma(r, dy, acc)`
pub fn iq4_xs_q8_k_tiled(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let isum: i32 =
            (0..8).map(|ib| (iq4_xs_scale(a, ib) - 32) * table_dot(&IQ4_NL_LEVELS, &a.qs[16 * ib..16 * ib + 16], &b.qs[32 * ib..32 * ib + 32])).sum();
        let r = a.d.to_f32() * isum as f32;
        acc = r.mul_add(b.d, acc);
    }
    acc
}

/// IQ4_NL · Q8_0 in upstream's repacked order (its x86 builds from AVX2 repack IQ4_NL weights,
/// `iq4_nl_8x8`, and sum them as Q4_0's: [`super::q8_0::q4_0_q8_0_repack`]): per block the exact
/// integer sum, then `acc = fma(f32(isum), f32(dx) · f32(dy), acc)`, blocks in order
pub fn iq4_nl_q8_0_repack(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
    let mut acc = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        acc = (table_dot(&IQ4_NL_LEVELS, &a.qs, &b.qs) as f32).mul_add(a.d.to_f32() * b.d.to_f32(), acc);
    }
    acc
}

/// MXFP4 · Q8_0 in upstream's repacked order (`mxfp4_8x8`, [`iq4_nl_q8_0_repack`]'s, the weight
/// scale the E8M0 half-scale)
pub fn mxfp4_q8_0_repack(x: &[BlockMxfp4], y: &[BlockQ8_0]) -> f32 {
    let mut acc = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        acc = (table_dot(&E2M1_DOUBLED, &a.qs, &b.qs) as f32).mul_add(e8m0_to_f32_half(a.e) * b.d.to_f32(), acc);
    }
    acc
}

/// scalar reference of MXFP4 · Q8_0 (upstream's `ggml_vec_dot_mxfp4_q8_0_generic`)
pub fn mxfp4_q8_0_reference(x: &[BlockMxfp4], y: &[BlockQ8_0]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let d = b.d.to_f32() * e8m0_to_f32_half(a.e);
        sum += d * table_dot(&E2M1_DOUBLED, &a.qs, &b.qs) as f32;
    }
    sum
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::super::x86::{dot_i8x32, f16_product, hsum_epi32, hsum_ps, load_i8x32, nibbles_32};
    use super::table_dot;
    use crate::block::{BlockIq4Nl, BlockIq4Xs, BlockMxfp4, BlockQ8_0, BlockQ8K};
    use crate::quants::{E2M1_DOUBLED, IQ4_NL_LEVELS, e8m0_to_f32_half, iq4_xs_scale};

    /// the 16 table entries in both 128-bit halves, for `_mm256_shuffle_epi8`
    #[inline]
    #[target_feature(enable = "avx2")]
    fn table_256(table: &[i8; 16]) -> __m256i {
        // SAFETY: reads exactly the 16 bytes of `table` (unaligned load)
        _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(table.as_ptr().cast()) })
    }

    /// the table values of 32 packed 4-bit indices, in element order (low nibbles first)
    #[inline]
    #[target_feature(enable = "avx2")]
    fn lookup(table: __m256i, qs: &[u8; 16]) -> __m256i {
        _mm256_shuffle_epi8(table, nibbles_32(qs))
    }

    /// the 16-byte group `g` of a super-block's quants
    #[inline(always)]
    fn group16(qs: &[u8], g: usize) -> &[u8; 16] {
        qs[16 * g..16 * g + 16].try_into().expect("16 bytes")
    }

    /// the 32-element group `g` of a super-block's activations
    #[inline(always)]
    fn group32(qs: &[i8], g: usize) -> &[i8; 32] {
        qs[32 * g..32 * g + 32].try_into().expect("32 bytes")
    }

    /// the body shared by IQ4_NL and MXFP4 (upstream's x86 order, module's text): blocks in
    /// pairs into two accumulators, an odd last block in scalar after the lanes are summed;
    /// `$scale(a, b)` is a weight block's scale times its activation block's
    macro_rules! pairs_q8_0 {
        ($x:expr, $y:expr, $table:expr, $scale:expr, $fused_tail:expr) => {{
            let (x, y, table) = ($x, $y, $table);
            let t = table_256(table);
            let (mut acc1, mut acc2) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            let n = x.len().min(y.len());
            let mut ib = 0;
            while ib + 1 < n {
                let (s1, s2) = ($scale(&x[ib], &y[ib]), $scale(&x[ib + 1], &y[ib + 1]));
                let p1 = dot_i8x32(lookup(t, &x[ib].qs), load_i8x32(&y[ib].qs));
                let p2 = dot_i8x32(lookup(t, &x[ib + 1].qs), load_i8x32(&y[ib + 1].qs));
                acc1 = _mm256_fmadd_ps(_mm256_set1_ps(s1), _mm256_cvtepi32_ps(p1), acc1);
                acc2 = _mm256_fmadd_ps(_mm256_set1_ps(s2), _mm256_cvtepi32_ps(p2), acc2);
                ib += 2;
            }
            let mut sum = hsum_ps(_mm256_add_ps(acc1, acc2));
            if ib < n {
                // upstream's scalar tail, which its AVX2 build contracts into one fma and its
                // native AVX-512 build (GCC, -march=native) does not: a product, then a sum
                let (d, sumi) = ($scale(&x[ib], &y[ib]), table_dot(table, &x[ib].qs, &y[ib].qs) as f32);
                sum = if $fused_tail { d.mul_add(sumi, sum) } else { sum + d * sumi };
            }
            sum
        }};
    }

    /// IQ4_NL · Q8_0 in upstream's x86 order (module's text), its AVX2 build's fused tail
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn iq4_nl_q8_0_avx2(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
        let scale = |a: &BlockIq4Nl, b: &BlockQ8_0| f16_product(b.d, a.d);
        pairs_q8_0!(x, y, &IQ4_NL_LEVELS, scale, true)
    }

    /// [`iq4_nl_q8_0_avx2`] with the tail of upstream's native AVX-512 build (rounded twice)
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn iq4_nl_q8_0_native(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
        let scale = |a: &BlockIq4Nl, b: &BlockQ8_0| f16_product(b.d, a.d);
        pairs_q8_0!(x, y, &IQ4_NL_LEVELS, scale, false)
    }

    /// MXFP4 · Q8_0 in upstream's x86 order (module's text), its AVX2 build's fused tail
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn mxfp4_q8_0_avx2(x: &[BlockMxfp4], y: &[BlockQ8_0]) -> f32 {
        let scale = |a: &BlockMxfp4, b: &BlockQ8_0| b.d.to_f32() * e8m0_to_f32_half(a.e);
        pairs_q8_0!(x, y, &E2M1_DOUBLED, scale, true)
    }

    /// [`mxfp4_q8_0_avx2`] with the tail of upstream's native AVX-512 build (rounded twice)
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn mxfp4_q8_0_native(x: &[BlockMxfp4], y: &[BlockQ8_0]) -> f32 {
        let scale = |a: &BlockMxfp4, b: &BlockQ8_0| b.d.to_f32() * e8m0_to_f32_half(a.e);
        pairs_q8_0!(x, y, &E2M1_DOUBLED, scale, false)
    }

    /// IQ4_XS · Q8_K in upstream's x86 order (module's text): a super-block's scaled products
    /// summed exactly in 8 i32 lanes, one fma per super-block
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn iq4_xs_q8_k_avx2(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
        let t = table_256(&IQ4_NL_LEVELS);
        let mut acc = _mm256_setzero_ps();
        for (a, b) in x.iter().zip(y) {
            let d = _mm256_set1_ps(a.d.to_f32() * b.d);
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(iq4_xs_lanes(t, a, b)), acc);
        }
        hsum_ps(acc)
    }

    /// a super-block's scaled products in 8 exact i32 lanes
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn iq4_xs_lanes(t: __m256i, a: &BlockIq4Xs, b: &BlockQ8K) -> __m256i {
        let mut sumi = _mm256_setzero_si256();
        for ib in 0..8 {
            let q = lookup(t, group16(&a.qs, ib));
            let v = load_i8x32(group32(&b.qs, ib));
            // |level| · (a with the level's sign), pairs summed to i16 (|.| <= 2 · 127 · 128)
            let p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(v, q));
            let ls = _mm256_set1_epi16((iq4_xs_scale(a, ib) - 32) as i16);
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, ls));
        }
        sumi
    }

    /// [`super::iq4_xs_q8_k_tiled`] bit for bit: each super-block's exact integer, then one
    /// rounded product and one fma
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn iq4_xs_q8_k_tiled_avx2(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
        let t = table_256(&IQ4_NL_LEVELS);
        let mut acc = 0.0f32;
        for (a, b) in x.iter().zip(y) {
            let r = a.d.to_f32() * hsum_epi32(iq4_xs_lanes(t, a, b)) as f32;
            acc = r.mul_add(b.d, acc);
        }
        acc
    }

    /// [`super::iq4_nl_q8_0_repack`] bit for bit: each block's integer sum, then one fma
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn iq4_nl_q8_0_repack_avx2(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
        let t = table_256(&IQ4_NL_LEVELS);
        let mut acc = 0.0f32;
        for (a, b) in x.iter().zip(y) {
            let isum = hsum_epi32(dot_i8x32(lookup(t, &a.qs), load_i8x32(&b.qs)));
            acc = (isum as f32).mul_add(f16_product(a.d, b.d), acc);
        }
        acc
    }

    /// [`super::mxfp4_q8_0_repack`] bit for bit
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn mxfp4_q8_0_repack_avx2(x: &[BlockMxfp4], y: &[BlockQ8_0]) -> f32 {
        let t = table_256(&E2M1_DOUBLED);
        let mut acc = 0.0f32;
        for (a, b) in x.iter().zip(y) {
            let isum = hsum_epi32(dot_i8x32(lookup(t, &a.qs), load_i8x32(&b.qs)));
            acc = (isum as f32).mul_add(e8m0_to_f32_half(a.e) * b.d.to_f32(), acc);
        }
        acc
    }
}
