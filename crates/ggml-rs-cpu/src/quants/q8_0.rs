//! Q8_0: 32 values, one f16 scale `amax / 127`, quants rounded half away from zero.

use half::f16;

use super::check_blocks;
use crate::block::{BlockQ8_0, QK8_0};

pub fn quantize_row_q8_0(x: &[f32], y: &mut [BlockQ8_0]) {
    check_blocks("quantize_row_q8_0", x.len(), QK8_0, y.len());
    for (xb, yb) in x.chunks_exact(QK8_0).zip(y.iter_mut()) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        yb.d = f16::from_f32(d);
        for (q, v) in yb.qs.iter_mut().zip(xb) {
            // roundf: half away from zero, as f32::round
            *q = (v * id).round() as i8;
        }
    }
}

pub fn dequantize_row_q8_0(x: &[BlockQ8_0], y: &mut [f32]) {
    check_blocks("dequantize_row_q8_0", y.len(), QK8_0, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK8_0)) {
        let d = xb.d.to_f32();
        for (o, q) in yb.iter_mut().zip(xb.qs) {
            *o = q as f32 * d;
        }
    }
}

/// Q8_0 as upstream's CPU backend quantizes activations (its `from_float`) on this architecture:
/// [`quantize_row_q8_0_x86`] on x86-64, [`quantize_row_q8_0_arm`] on aarch64, elsewhere the
/// reference; by the active kernel set's blocks ([`crate::kernels::Quant::q8_0`], the same bytes)
pub fn quantize_row_q8_0_cpu(x: &[f32], y: &mut [BlockQ8_0]) {
    check_blocks("quantize_row_q8_0_cpu", x.len(), QK8_0, y.len());
    // SAFETY: the table's set runs on this CPU; x holds 32 floats per block of y (checked)
    unsafe { (crate::kernels::active().quant.q8_0)(x, y) }
}

/// the definition [`quantize_row_q8_0_cpu`] takes on this architecture (the scalar set's)
pub(crate) const Q8_0_CPU_DEF: fn(&[f32], &mut [BlockQ8_0]) = if cfg!(target_arch = "x86_64") {
    quantize_row_q8_0_x86
} else if cfg!(target_arch = "aarch64") {
    quantize_row_q8_0_arm
} else {
    quantize_row_q8_0
};

/// Q8_0 as upstream's aarch64 build quantizes activations (`quantize_row_q8_0`'s NEON branch):
/// `d = amax / 127`, `id = 1 / d` (0 when d is), quants `v · id` rounded to the nearest, ties to
/// even, by `vcvtnq_s32_f32` (saturating to i32, NaN to 0), then kept in their low byte (the
/// C conversion to `int8_t`). Rust's `as i32` of a float saturates and sends NaN to 0 too. A
/// block of denormals whose `1 / d` overflows gives -1 for positive and 0 for negative values,
/// as upstream's aarch64 build does.
pub fn quantize_row_q8_0_arm(x: &[f32], y: &mut [BlockQ8_0]) {
    check_blocks("quantize_row_q8_0_arm", x.len(), QK8_0, y.len());
    for (xb, yb) in x.chunks_exact(QK8_0).zip(y.iter_mut()) {
        // vmaxq_f32 propagates a NaN; f32::max would drop it
        let amax = xb.iter().fold(0.0f32, |m, v| if m.is_nan() || v.is_nan() { f32::NAN } else { m.max(v.abs()) });
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        yb.d = f16::from_f32(d);
        for (q, v) in yb.qs.iter_mut().zip(xb) {
            *q = (v * id).round_ties_even() as i32 as i8;
        }
    }
}

/// Q8_0 as upstream's CPU backend quantizes activations on x86 (`quantize_row_q8_0` of
/// ggml-cpu, the `from_float` MUL_MAT uses; the AVX/AVX2/AVX-512 builds): `id = 127 / amax`
/// rather than `1 / d`, and ties rounded to even. It differs from the reference in the last
/// quant now and then; a backend whose logits must match upstream's CPU bit for bit quantizes
/// its activations this way. The definition, block by block (the x86 sets' blocks:
/// `quantize_row_q8_0_x86_512`, `quantize_row_q8_0_x86_avx2`).
pub fn quantize_row_q8_0_x86(x: &[f32], y: &mut [BlockQ8_0]) {
    check_blocks("quantize_row_q8_0_x86", x.len(), QK8_0, y.len());
    for (xb, yb) in x.chunks_exact(QK8_0).zip(y.iter_mut()) {
        quantize_block_x86(xb, yb);
    }
}

/// [`quantize_row_q8_0_x86`] by AVX-512 blocks, the same bytes
///
/// # Safety
/// AVX-512 F/BW available; `x` holds 32 floats per block of `y`.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn quantize_row_q8_0_x86_512(x: &[f32], y: &mut [BlockQ8_0]) {
    for (xb, yb) in x.chunks_exact(QK8_0).zip(y.iter_mut()) {
        // SAFETY: AVX-512 F/BW (caller); a block of 32 floats and one output block
        if !unsafe { x86::block(xb, yb) } {
            quantize_block_x86(xb, yb);
        }
    }
}

/// [`quantize_row_q8_0_x86`] by AVX2 blocks, the same bytes
///
/// # Safety
/// AVX2 available; `x` holds 32 floats per block of `y`.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn quantize_row_q8_0_x86_avx2(x: &[f32], y: &mut [BlockQ8_0]) {
    for (xb, yb) in x.chunks_exact(QK8_0).zip(y.iter_mut()) {
        // SAFETY: AVX2 (caller); a block of 32 floats and one output block
        if !unsafe { x86::block_avx2(xb, yb) } {
            quantize_block_x86(xb, yb);
        }
    }
}

/// one block of [`quantize_row_q8_0_x86`], the scalar definition
fn quantize_block_x86(xb: &[f32], yb: &mut BlockQ8_0) {
    let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    yb.d = f16::from_f32(amax / 127.0);
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    for (q, v) in yb.qs.iter_mut().zip(xb) {
        *q = cvt_i8(v * id);
    }
}

/// `v` to i8 as upstream's x86 SIMD quantizers convert: rounded to the nearest, ties to even
/// (`cvtps_epi32`), out of i32's range or NaN the "integer indefinite" i32::MIN, then saturated
/// to i8 by the packs (so +inf gives -128, as upstream's x86 builds do for a block of denormals
/// whose `127 / amax` overflows)
fn cvt_i8(v: f32) -> i8 {
    let r = v.round_ties_even();
    let i = if (-2_147_483_648.0..2_147_483_648.0).contains(&r) { r as i32 } else { i32::MIN };
    i.clamp(-128, 127) as i8
}

/// The AVX-512 form of [`quantize_block_x86`], bit for bit: the same amax (max is exact in any
/// order), scale and products; `cvtps_epi32` rounds ties to even (the default rounding mode) and
/// `cvtsepi32_epi8` saturates as `as i8` does. The scalar `round_ties_even` is a libm call per
/// element on baseline x86-64 (4 ns a value, as long as the prompt GEMM's share of a 512-row
/// product). Blocks with a NaN or an infinity (where `as i8` of NaN gives 0 and the conversion
/// 0x80000000) are left to the scalar code.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use half::f16;

    use crate::block::BlockQ8_0;

    /// false (nothing written) when the block holds a NaN or an infinity
    ///
    /// # Safety
    /// AVX-512 F/BW are available; `xb` has 32 floats.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn block(xb: &[f32], yb: &mut BlockQ8_0) -> bool {
        assert_eq!(xb.len(), 32, "q8_0 block of {} floats", xb.len());
        // SAFETY: 32 floats at xb (asserted), 32 bytes of quants at yb.qs
        unsafe {
            let x0 = _mm512_loadu_ps(xb.as_ptr());
            let x1 = _mm512_loadu_ps(xb.as_ptr().add(16));
            let a0 = _mm512_abs_ps(x0);
            let a1 = _mm512_abs_ps(x1);
            // NaN (unordered) or infinity: not finite in either half
            let inf = _mm512_set1_ps(f32::INFINITY);
            if _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(a0, inf) | _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(a1, inf) != 0 {
                return false;
            }
            let amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
            yb.d = f16::from_f32(amax / 127.0);
            let id = _mm512_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
            let q0 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x0, id)));
            let q1 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x1, id)));
            _mm_storeu_si128(yb.qs.as_mut_ptr().cast(), q0);
            _mm_storeu_si128(yb.qs.as_mut_ptr().add(16).cast(), q1);
        }
        true
    }

    /// [`block`] with 256-bit vectors (the AVX2 kernel set): the same amax, scale and products;
    /// `cvtps_epi32` rounds ties to even, the two signed-saturating packs saturate as `as i8`
    /// does, and a lane permutation puts the packs' interleaved 128-bit halves back in order.
    /// false (nothing written) when the block holds a NaN or an infinity.
    ///
    /// # Safety
    /// AVX2 is available; `xb` has 32 floats.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn block_avx2(xb: &[f32], yb: &mut BlockQ8_0) -> bool {
        assert_eq!(xb.len(), 32, "q8_0 block of {} floats", xb.len());
        // SAFETY: 32 floats at xb (asserted), 32 bytes of quants at yb.qs
        unsafe {
            let x: [__m256; 4] = std::array::from_fn(|i| _mm256_loadu_ps(xb.as_ptr().add(8 * i)));
            let sign = _mm256_set1_ps(-0.0);
            let a = x.map(|v| _mm256_andnot_ps(sign, v));
            let inf = _mm256_set1_ps(f32::INFINITY);
            let bad = a.iter().fold(0, |m, v| m | _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_NLT_UQ>(*v, inf)));
            if bad != 0 {
                return false;
            }
            let m = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
            let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
            let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
            yb.d = f16::from_f32(amax / 127.0);
            let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
            let q = x.map(|v| _mm256_cvtps_epi32(_mm256_mul_ps(v, id)));
            let p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            let p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256(yb.qs.as_mut_ptr().cast(), p);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::XorShift;

    /// upstream's aarch64 quantizer: ties to even (the reference rounds them away from zero), `1/d`
    /// rather than `127/amax`, a NaN or an infinity in the block zeroes it, and a block of
    /// denormals whose `1/d` overflows keeps the low byte of the saturated conversion
    #[test]
    fn the_arm_quantizer_is_upstreams_neon_branch() {
        let one = |x: [f32; 32]| {
            let mut b = [BlockQ8_0 { d: f16::ZERO, qs: [0; 32] }];
            quantize_row_q8_0_arm(&x, &mut b);
            b[0]
        };
        // amax 127: d = 1, id = 1, the values are their own quants
        let mut x = [0f32; 32];
        x[..5].copy_from_slice(&[127.0, 2.5, -2.5, 3.5, -0.5]);
        let b = one(x);
        assert_eq!(b.d.to_f32(), 1.0);
        assert_eq!(&b.qs[..5], &[127, 2, -2, 4, 0]);
        let mut r = [BlockQ8_0 { d: f16::ZERO, qs: [0; 32] }];
        quantize_row_q8_0(&x, &mut r);
        assert_eq!(&r[0].qs[..5], &[127, 3, -3, 4, -1], "the reference rounds ties away from zero");
        // a NaN or an infinity: every quant 0
        let mut x = [1f32; 32];
        x[3] = f32::NAN;
        assert_eq!(one(x).qs, [0; 32]);
        x[3] = f32::INFINITY;
        let b = one(x);
        assert_eq!((b.qs, b.d.to_f32()), ([0; 32], f32::INFINITY));
        // denormals: d = amax / 127 is denormal, 1/d is +inf; +inf saturates to i32::MAX (low
        // byte 0xff), -inf to i32::MIN (low byte 0), 0 · inf is NaN (0)
        let mut x = [0f32; 32];
        x[0] = 1e-40;
        x[1] = -1e-40;
        let b = one(x);
        assert_eq!(&b.qs[..3], &[-1, 0, 0]);
        // model-like rows: within one step of the reference's quants, the same scales
        let mut rng = XorShift::new(5);
        let x = rng.model_like(32 * 16);
        let (mut a, mut r) = (vec![BlockQ8_0 { d: f16::ZERO, qs: [0; 32] }; 16], vec![BlockQ8_0 { d: f16::ZERO, qs: [0; 32] }; 16]);
        quantize_row_q8_0_arm(&x, &mut a);
        quantize_row_q8_0(&x, &mut r);
        for (a, r) in a.iter().zip(&r) {
            assert_eq!(a.d, r.d);
            assert!(a.qs.iter().zip(&r.qs).all(|(p, q)| (*p as i32 - *q as i32).abs() <= 1));
        }
    }

    /// the AVX-512 blocks of quantize_row_q8_0_x86 against its scalar definition, bit for bit:
    /// model-like rows, ties (values at exactly k + 0.5 of the step), zero blocks, and blocks with
    /// a NaN, an infinity, a -0.0 and a huge value
    #[test]
    fn avx512_and_avx2_blocks_equal_the_scalar_definition() {
        for k in crate::kernels::available() {
            let mut r = XorShift::new(77);
            let n = 32 * 64;
            let mut x = r.model_like(n);
            // block 1: ties (amax 127 makes id 1: v * id = k + 0.5 exactly)
            for (i, v) in x[32..64].iter_mut().enumerate() {
                *v = i as f32 - 15.5;
            }
            x[63] = 127.0;
            x[64..96].fill(0.0);
            x[100] = f32::NAN;
            x[130] = f32::INFINITY;
            x[170] = -0.0;
            x[200] = 3.0e38;
            x[233] = f32::NEG_INFINITY;
            // a block whose largest value is negative, and one of tiny values (denormal steps)
            for (i, v) in x[256..288].iter_mut().enumerate() {
                *v = -(i as f32) * 0.25;
            }
            for (i, v) in x[288..320].iter_mut().enumerate() {
                *v = (i as f32 - 16.0) * 1e-40;
            }
            let mut got = vec![BlockQ8_0 { d: f16::ZERO, qs: [0; 32] }; n / 32];
            // SAFETY: the table of a set of this CPU; 32 floats per block
            unsafe { (k.quant.q8_0)(&x, &mut got) };
            // this architecture's definition (x86: quantize_block_x86's blocks)
            let mut want = vec![BlockQ8_0 { d: f16::ZERO, qs: [0; 32] }; n / 32];
            Q8_0_CPU_DEF(&x, &mut want);
            for (b, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!((g.d.to_bits(), g.qs), (w.d.to_bits(), w.qs), "{} block {b}", k.set.name());
            }
        }
    }
}
