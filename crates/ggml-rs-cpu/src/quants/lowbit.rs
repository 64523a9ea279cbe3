//! The low-bit types Q1_0, Q2_0 and NVFP4 (upstream's `quantize_row_{q1_0,q2_0,nvfp4}_ref` and
//! their `dequantize_row_*` at the pin; `ggml_quantize_chunk` ignores an importance matrix for
//! them).
//!
//! - Q1_0: 128 signs and one f16 scale, the mean magnitude (`Σ|x| / 128`, summed in order in
//!   f32); bit j set where `x[j] >= 0` (so −0 sets it, NaN clears it).
//! - Q2_0: 64 two-bit codes and one f16 scale `d = amax` (a NaN never becomes the max); code
//!   `round(x / d) + 1` clamped to [0, 3], the C conversion `(int) roundf(..)` as GCC builds it
//!   ([`int_as_built`]: where `x · (1 / d)` is not finite, an infinite `x` or a subnormal `d`).
//! - NVFP4: 4 sub-blocks of 16, each with a UE4M3 scale byte (unsigned, 4 exponent bits of bias
//!   7, 3 mantissa bits; 0 and 0x7F read as zero) of `amax / 6` ([`f32_to_ue4m3`]), and MXFP4's
//!   E2M1 codes, each the nearest to the value by MXFP4's search against half the scale (the
//!   doubled E2M1 values, [`super::E2M1_DOUBLED`]).

use half::f16;

use super::mxfp4::nearest_code;
use super::{E2M1_DOUBLED, check_blocks};
use crate::block::{BlockNvfp4, BlockQ1_0, BlockQ2_0, QK_NVFP4, QK_NVFP4_SUB, QK1_0, QK2_0};

pub fn quantize_row_q1_0(x: &[f32], y: &mut [BlockQ1_0]) {
    check_blocks("quantize_row_q1_0", x.len(), QK1_0, y.len());
    for (xb, yb) in x.chunks_exact(QK1_0).zip(y.iter_mut()) {
        let mut sum_abs = 0.0f32;
        for &v in xb {
            sum_abs += v.abs();
        }
        yb.d = f16::from_f32(sum_abs / QK1_0 as f32);
        yb.qs = [0; QK1_0 / 8];
        for (j, &v) in xb.iter().enumerate() {
            if v >= 0.0 {
                yb.qs[j / 8] |= 1 << (j % 8);
            }
        }
    }
}

pub fn dequantize_row_q1_0(x: &[BlockQ1_0], y: &mut [f32]) {
    check_blocks("dequantize_row_q1_0", y.len(), QK1_0, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK1_0)) {
        let d = xb.d.to_f32();
        for (j, v) in yb.iter_mut().enumerate() {
            *v = if xb.qs[j / 8] >> (j % 8) & 1 != 0 { d } else { -d };
        }
    }
}

/// `(int) v` as upstream's build converts on this architecture: x86's `cvttss2si` (truncation,
/// `INT_MIN` when out of range or NaN), aarch64's `fcvtzs` (saturating, NaN 0)
#[inline]
fn int_as_built(v: f32) -> i32 {
    if cfg!(target_arch = "aarch64") || (-2147483648.0..2147483648.0).contains(&v) { v as i32 } else { i32::MIN }
}

pub fn quantize_row_q2_0(x: &[f32], y: &mut [BlockQ2_0]) {
    check_blocks("quantize_row_q2_0", x.len(), QK2_0, y.len());
    for (xb, yb) in x.chunks_exact(QK2_0).zip(y.iter_mut()) {
        let mut amax = 0.0f32;
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
            }
        }
        let id = if amax > 0.0 { 1.0 / amax } else { 0.0 };
        yb.d = f16::from_f32(amax);
        yb.qs = [0; QK2_0 / 4];
        for (j, &v) in xb.iter().enumerate() {
            // C's roundf: halves away from zero, as Rust's f32::round
            let q = int_as_built((v * id).round()).wrapping_add(1).clamp(0, 3) as u8;
            yb.qs[j / 4] |= q << (2 * (j % 4));
        }
    }
}

pub fn dequantize_row_q2_0(x: &[BlockQ2_0], y: &mut [f32]) {
    check_blocks("dequantize_row_q2_0", y.len(), QK2_0, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK2_0)) {
        let d = xb.d.to_f32();
        for (j, v) in yb.iter_mut().enumerate() {
            let q = (xb.qs[j / 4] >> (2 * (j % 4))) & 3;
            *v = (q as i32 - 1) as f32 * d;
        }
    }
}

/// half the value of the UE4M3 scale byte `x` (upstream's `ggml_ue4m3_to_fp32`, which halves to
/// pair with the doubled E2M1 values): the sign bit is ignored, 0 and 0x7F are zero, exponent 0
/// is subnormal (`m · 2⁻⁹`)
#[inline]
pub(crate) fn ue4m3_to_f32_half(x: u8) -> f32 {
    if x == 0 || x == 0x7f {
        return 0.0;
    }
    let (e, m) = ((x >> 3) & 0xf, x & 7);
    // powers of two from their bits: exact, as upstream's ldexpf
    let pow2 = |k: i32| f32::from_bits(((k + 127) as u32) << 23);
    let raw = if e == 0 { m as f32 * pow2(-9) } else { (1.0 + m as f32 / 8.0) * pow2(e as i32 - 7) };
    raw * 0.5
}

/// the UE4M3 byte of `x` (upstream's `ggml_fp32_to_ue4m3`): 0 for `x <= 0` or NaN, clamped to 448
/// (0x7E, also for anything that rounds past it), the mantissa rounded by its next bit (ties
/// away), below 2⁻⁶ the subnormal `round(x · 512)` in [1, 7] (0 below half a step)
fn f32_to_ue4m3(x: f32) -> u8 {
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    let x = x.min(448.0);
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 7;
    if exp <= 0 {
        // the C `(int) (x * 512.0f + 0.5f)`, x in (0, 2^-6): contracted where FMA is the baseline
        let m = (super::mul_add_as_built(x, 512.0, 0.5) as i32).min(7);
        return if m < 1 { 0 } else { m as u8 };
    }
    if exp >= 15 {
        return 0x7e;
    }
    let (mut e, mut m) = (exp, ((bits >> 20) & 7) as i32 + ((bits >> 19) & 1) as i32);
    if m > 7 {
        m = 0;
        e += 1;
        if e >= 15 {
            return 0x7e;
        }
    }
    ((e << 3) | m) as u8
}

pub fn quantize_row_nvfp4(x: &[f32], y: &mut [BlockNvfp4]) {
    check_blocks("quantize_row_nvfp4", x.len(), QK_NVFP4, y.len());
    const HALF: usize = QK_NVFP4_SUB / 2;
    for (xb, yb) in x.chunks_exact(QK_NVFP4).zip(y.iter_mut()) {
        for (s, xs) in xb.chunks_exact(QK_NVFP4_SUB).enumerate() {
            let mut amax = 0.0f32;
            for &v in xs {
                if amax < v.abs() {
                    amax = v.abs();
                }
            }
            let ue = f32_to_ue4m3(amax / 6.0);
            yb.d[s] = ue;
            let half = ue4m3_to_f32_half(ue);
            for j in 0..HALF {
                yb.qs[s * HALF + j] = nearest_code(xs[j], half) | nearest_code(xs[j + HALF], half) << 4;
            }
        }
    }
}

pub fn dequantize_row_nvfp4(x: &[BlockNvfp4], y: &mut [f32]) {
    check_blocks("dequantize_row_nvfp4", y.len(), QK_NVFP4, x.len());
    const HALF: usize = QK_NVFP4_SUB / 2;
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK_NVFP4)) {
        for (s, ys) in yb.chunks_exact_mut(QK_NVFP4_SUB).enumerate() {
            let half = ue4m3_to_f32_half(xb.d[s]);
            for j in 0..HALF {
                let q = xb.qs[s * HALF + j];
                ys[j] = E2M1_DOUBLED[(q & 0xf) as usize] as f32 * half;
                ys[j + HALF] = E2M1_DOUBLED[(q >> 4) as usize] as f32 * half;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// UE4M3 round trip: every byte below the top binade reads back as itself (the doubled value
    /// quantized again); the top binade's bytes 0x78..0x7E all come back as 0x7E (upstream's
    /// converter caps any exponent reaching 15 there), 0 and 0x7F read as zero, the sign bit is
    /// ignored when reading
    #[test]
    fn ue4m3_bytes_round_trip_below_the_top_binade() {
        for b in 1u8..0x78 {
            let v = 2.0 * ue4m3_to_f32_half(b);
            assert_eq!(f32_to_ue4m3(v), b, "byte {b:#04x} = {v}");
        }
        for b in 0x78u8..0x7f {
            assert_eq!(f32_to_ue4m3(2.0 * ue4m3_to_f32_half(b)), 0x7e, "byte {b:#04x}");
        }
        assert_eq!((ue4m3_to_f32_half(0), ue4m3_to_f32_half(0x7f)), (0.0, 0.0));
        assert_eq!(ue4m3_to_f32_half(0x80 | 0x3a), ue4m3_to_f32_half(0x3a));
        assert_eq!(2.0 * ue4m3_to_f32_half(1), 2f32.powi(-9));
        assert_eq!(2.0 * ue4m3_to_f32_half(0x7e), 448.0);
        // non-positive, NaN, beyond 448, and below half the smallest step
        for (x, b) in [(0.0, 0u8), (-1.0, 0), (f32::NAN, 0), (f32::INFINITY, 0x7e), (1e9, 0x7e), (2f32.powi(-11), 0), (2f32.powi(-10), 1)] {
            assert_eq!(f32_to_ue4m3(x), b, "{x}");
        }
    }

    /// Q1_0 keeps the signs (−0 as +, NaN as −) and the mean magnitude; Q2_0's codes are
    /// `round(x / amax) + 1` clamped, an infinite element (scale ∞, x · 0 = NaN) code 0 on x86
    #[test]
    fn q1_0_and_q2_0_codes() {
        let mut x = [1.0f32; QK1_0];
        x[0] = -0.0;
        x[1] = f32::NAN;
        x[2] = -3.0;
        let mut q = [BlockQ1_0 { d: f16::ZERO, qs: [0; 16] }];
        quantize_row_q1_0(&x, &mut q);
        assert_eq!(q[0].qs[0], 0b1111_1001);
        assert!(q[0].d.to_f32().is_nan());
        let mut y = [0f32; QK1_0];
        x[1] = 1.0;
        quantize_row_q1_0(&x, &mut q);
        dequantize_row_q1_0(&q, &mut y);
        let d = (126.0f32 + 3.0) / 128.0;
        assert_eq!((y[0], y[2], y[3]), (d, -d, d));

        let mut x = [0f32; QK2_0];
        x[..8].copy_from_slice(&[2.0, 1.0, -1.0, -2.0, 0.5, -0.5, 1.5, 0.9]);
        let mut q = [BlockQ2_0 { d: f16::ZERO, qs: [0; 16] }];
        quantize_row_q2_0(&x, &mut q);
        let codes: Vec<u8> = (0..8).map(|j| (q[0].qs[j / 4] >> (2 * (j % 4))) & 3).collect();
        // x / 2: 1, .5, -.5, -1, .25, -.25, .75, .45 → round (halves away) + 1
        assert_eq!(codes, [2, 2, 0, 0, 1, 1, 2, 1]);
        x[9] = f32::INFINITY;
        quantize_row_q2_0(&x, &mut q);
        let code9 = (q[0].qs[2] >> 2) & 3;
        assert_eq!(code9, if cfg!(target_arch = "aarch64") { 1 } else { 0 });
        assert!(q[0].d.to_f32().is_infinite());
    }
}
