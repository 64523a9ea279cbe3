//! MXFP4 (OCP microscaling FP4): 32 values sharing one power-of-two scale, each a 4-bit E2M1
//! code (sign, 2 exponent bits, 1 mantissa bit: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}), packed as in
//! Q4_0 (element j in the low nibble of byte j, element j + 16 in its high nibble).
//!
//! The scale byte `e` is E8M0: the value `2^(e − 127)` (e = 0: 2⁻¹²⁷, a denormal). Like upstream
//! we keep the E2M1 values doubled as integers ([`E2M1_DOUBLED`]) and multiply them by half the
//! scale, `2^(e − 128)` ([`e8m0_to_f32_half`]), so `x = E2M1_DOUBLED[q] · 2^(e − 128)`.
//!
//! Quantization (upstream's `quantize_row_mxfp4_ref`): `e = floor(log2(amax)) − 2 + 127` (amax
//! the largest magnitude; e = 0 for a zero block), so the largest magnitude lands in [4, 8)
//! times the scale (E2M1 reaches 6: magnitudes above clip to it), then each value takes the
//! code of least `|level · scale − x|`, the first
//! such code on ties (so +0, never −0). `log2` is libm's `log2f`, as upstream's: its result is
//! rounded to f32, so a magnitude just below a large power of two 2^k takes k, not k − 1 (the
//! next byte; f32::MAX takes 253, whose two largest codes overflow to infinity); the
//! conversion of the float exponent to the byte is the C cast `(uint8_t) float` as GCC compiles
//! it ([`float_to_u8_as_built`]): on x86 the truncating conversion to 32 bits (out of range: the
//! integer indefinite, whose low byte is 0) kept to its low byte, so an exponent below 0 (a block
//! under 2⁻¹²⁵) wraps; on aarch64 the saturating conversion to unsigned 32 bits (negatives: 0)
//! kept to its low byte.

use super::check_blocks;
use crate::block::{BlockMxfp4, QK_MXFP4};

/// the 16 E2M1 codes' values times two (codes 8..16 are the negatives of 0..8)
pub(crate) const E2M1_DOUBLED: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// half the value of the E8M0 scale `e`: `2^(e − 128)`, built from its bits (e < 2 denormal)
#[inline(always)]
pub(crate) fn e8m0_to_f32_half(e: u8) -> f32 {
    let bits = if e < 2 { 0x0020_0000u32 << e } else { ((e as u32) - 1) << 23 };
    f32::from_bits(bits)
}

/// `(uint8_t) v` as upstream's build computes it on this architecture: x86's `cvttss2si` into 32
/// bits (truncation, 0x8000_0000 when out of range or NaN) kept to its low byte; aarch64's
/// `fcvtzu` into 32 bits (saturating, NaN 0) kept to its low byte
#[inline]
fn float_to_u8_as_built(v: f32) -> u8 {
    if cfg!(target_arch = "aarch64") {
        (v as u32) as u8
    } else if (-2147483648.0..2147483648.0).contains(&v) {
        (v as i32) as u8
    } else {
        0
    }
}

/// the code whose value `E2M1_DOUBLED[i] · half` is nearest to `x`, the first on ties
#[inline]
pub(crate) fn nearest_code(x: f32, half: f32) -> u8 {
    let mut best = 0u8;
    let mut best_err = (E2M1_DOUBLED[0] as f32 * half - x).abs();
    for i in 1..16u8 {
        let err = (E2M1_DOUBLED[i as usize] as f32 * half - x).abs();
        if err < best_err {
            best = i;
            best_err = err;
        }
    }
    best
}

pub fn quantize_row_mxfp4(x: &[f32], y: &mut [BlockMxfp4]) {
    check_blocks("quantize_row_mxfp4", x.len(), QK_MXFP4, y.len());
    for (xb, yb) in x.chunks_exact(QK_MXFP4).zip(y.iter_mut()) {
        let mut amax = 0.0f32;
        for &v in xb {
            if amax < v.abs() {
                amax = v.abs();
            }
        }
        let e = if amax > 0.0 { float_to_u8_as_built(amax.log2().floor() - 2.0 + 127.0) } else { 0 };
        let half = e8m0_to_f32_half(e);
        yb.e = e;
        for j in 0..QK_MXFP4 / 2 {
            let lo = nearest_code(xb[j], half);
            let hi = nearest_code(xb[j + QK_MXFP4 / 2], half);
            yb.qs[j] = lo | (hi << 4);
        }
    }
}

pub fn dequantize_row_mxfp4(x: &[BlockMxfp4], y: &mut [f32]) {
    check_blocks("dequantize_row_mxfp4", y.len(), QK_MXFP4, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK_MXFP4)) {
        let half = e8m0_to_f32_half(xb.e);
        for j in 0..QK_MXFP4 / 2 {
            yb[j] = E2M1_DOUBLED[(xb.qs[j] & 0xf) as usize] as f32 * half;
            yb[j + QK_MXFP4 / 2] = E2M1_DOUBLED[(xb.qs[j] >> 4) as usize] as f32 * half;
        }
    }
}
