//! Q8_K: 256 activations, an f32 scale `max / -127` (max = the value of largest magnitude, sign
//! kept), quants rounded to nearest even, and the sums of each 16 quants (`bsums`) that the
//! K-quant dot products use for their mins.

use super::check_blocks;
use super::search::nearest_int;
use crate::block::{BlockQ8K, QK_K};

/// Q8_K as upstream quantizes activations, by the active kernel set's blocks
/// ([`crate::kernels::Quant::q8_k`]; every set gives the definition's bytes)
pub fn quantize_row_q8_k(x: &[f32], y: &mut [BlockQ8K]) {
    check_blocks("quantize_row_q8_k", x.len(), QK_K, y.len());
    // SAFETY: the table's set runs on this CPU; x holds 256 floats per block of y (checked)
    unsafe { (crate::kernels::active().quant.q8_k)(x, y) }
}

/// [`quantize_row_q8_k`]'s definition, block by block (the scalar set's)
pub(crate) fn quantize_row_q8_k_def(x: &[f32], y: &mut [BlockQ8K]) {
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        quantize_block(xb, yb);
    }
}

/// [`quantize_row_q8_k_def`] by AVX-512 blocks, the same bytes
///
/// # Safety
/// AVX-512 F/BW available; `x` holds 256 floats per block of `y`.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn quantize_row_q8_k_512(x: &[f32], y: &mut [BlockQ8K]) {
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        // SAFETY: AVX-512 F/BW (caller); a block of 256 floats and one output block
        if !unsafe { avx512::block(xb, yb) } {
            quantize_block(xb, yb);
        }
    }
}

/// Q8_K as upstream's 4-row quantizer (`ggml_quantize_mat_q8_K_4x8`, x86) writes each row: the
/// activation rows of a MUL_MAT whose weights upstream repacks (Q4_K, `crate::dot::Order`) that
/// go through its GEMM, the first `ne11 - ne11 % 4` rows of a plane. The same as
/// [`quantize_row_q8_k`] but for the sign of the scale on a tie: the reference takes the sign of
/// the FIRST value of the largest magnitude, this one `-127 / amax` (d < 0) if ANY value equals
/// `+amax`, else `+127 / amax`. Everything else (the rounding to nearest even, `d = 1 / iscale`,
/// the exact bsums) is the reference's.
pub fn quantize_row_q8_k_4x8(x: &[f32], y: &mut [BlockQ8K]) {
    quantize_row_q8_k(x, y);
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        // the reference took a negative max (d > 0): the 4-row form differs if +amax occurs
        if yb.d > 0.0 {
            let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            if xb.contains(&amax) {
                quantize_block_with_max(xb, yb, amax);
            }
        }
    }
}

/// one block of [`quantize_row_q8_k_4x8`], the scalar definition (the tests' reference)
#[cfg(test)]
fn quantize_block_4x8(xb: &[f32], yb: &mut BlockQ8K) {
    let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let max = if xb.contains(&amax) { amax } else { -amax };
    quantize_block_with_max(xb, yb, max);
}

/// one block of [`quantize_row_q8_k`], the scalar definition
fn quantize_block(xb: &[f32], yb: &mut BlockQ8K) {
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in xb {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    quantize_block_with_max(xb, yb, max);
}

/// a block quantized with the scale `-127 / max` (`max` the value whose magnitude is largest,
/// with the sign chosen); a zero block for `max == 0`
fn quantize_block_with_max(xb: &[f32], yb: &mut BlockQ8K, max: f32) {
    if max == 0.0 {
        yb.d = 0.0;
        yb.qs = [0; QK_K];
        // upstream leaves bsums as they were; a fresh block has them zero
        yb.bsums = [0; QK_K / 16];
        return;
    }
    let iscale = -127.0 / max;
    for (q, &v) in yb.qs.iter_mut().zip(xb) {
        *q = nearest_int(iscale * v).min(127) as i8;
    }
    for (j, s) in yb.bsums.iter_mut().enumerate() {
        *s = yb.qs[j * 16..j * 16 + 16].iter().map(|&q| q as i16).sum();
    }
    yb.d = 1.0 / iscale;
}

/// The AVX-512 form of [`quantize_block`], bit for bit: amax is exact in any order and `max` the
/// first value of that magnitude (as the strict `>` of the scalar scan); `cvtps_epi32` rounds to
/// nearest even as `nearest_int` does for these magnitudes (|iscale · v| ≤ 127); the 16-quant
/// sums are exact in i32. Blocks with a NaN or an infinity are left to the scalar code.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use crate::block::{BlockQ8K, QK_K};

    /// false (nothing written) when the block holds a NaN or an infinity
    ///
    /// # Safety
    /// AVX-512 F/BW are available; `xb` has 256 floats.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn block(xb: &[f32], yb: &mut BlockQ8K) -> bool {
        assert_eq!(xb.len(), QK_K, "q8_K block of {} floats", xb.len());
        // SAFETY: 256 floats at xb (asserted), 256 quants at yb.qs
        unsafe {
            let p = xb.as_ptr();
            let inf = _mm512_set1_ps(f32::INFINITY);
            let mut vmax = _mm512_setzero_ps();
            for i in 0..16 {
                let a = _mm512_abs_ps(_mm512_loadu_ps(p.add(16 * i)));
                if _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(a, inf) != 0 {
                    return false;
                }
                vmax = _mm512_max_ps(vmax, a);
            }
            let amax = _mm512_reduce_max_ps(vmax);
            if amax == 0.0 {
                yb.d = 0.0;
                yb.qs = [0; QK_K];
                yb.bsums = [0; QK_K / 16];
                return true;
            }
            // the first value of magnitude amax, its sign kept
            let va = _mm512_set1_ps(amax);
            let mut max = 0.0f32;
            for i in 0..16 {
                let m = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(_mm512_abs_ps(_mm512_loadu_ps(p.add(16 * i))), va);
                if m != 0 {
                    max = *p.add(16 * i + m.trailing_zeros() as usize);
                    break;
                }
            }
            let iscale = -127.0 / max;
            let vs = _mm512_set1_ps(iscale);
            let top = _mm512_set1_epi32(127);
            for i in 0..16 {
                let q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(p.add(16 * i)))), top);
                yb.bsums[i] = _mm512_reduce_add_epi32(q) as i16;
                _mm_storeu_si128(yb.qs.as_mut_ptr().add(16 * i).cast(), _mm512_cvtsepi32_epi8(q));
            }
            yb.d = 1.0 / iscale;
        }
        true
    }
}

pub fn dequantize_row_q8_k(x: &[BlockQ8K], y: &mut [f32]) {
    check_blocks("dequantize_row_q8_k", y.len(), QK_K, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        for (o, &q) in yb.iter_mut().zip(&xb.qs) {
            *o = xb.d * q as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::XorShift;

    /// the AVX-512 blocks of quantize_row_q8_k against the scalar definition, bit for bit:
    /// model-like blocks, a block whose largest magnitude comes twice with both signs (the first
    /// wins), a zero block, blocks with a NaN, an infinity, a -0.0
    #[test]
    fn avx512_blocks_equal_the_scalar_definition() {
        let mut r = XorShift::new(78);
        let n = QK_K * 24;
        let mut x = r.model_like(n);
        let b = &mut x[QK_K..2 * QK_K];
        b[40] = -9.0;
        b[200] = 9.0;
        x[2 * QK_K..3 * QK_K].fill(0.0);
        x[3 * QK_K + 5] = f32::NAN;
        x[4 * QK_K + 17] = f32::INFINITY;
        x[5 * QK_K + 100] = -0.0;
        let blank = BlockQ8K { d: 0.0, qs: [0; QK_K], bsums: [0; QK_K / 16] };
        let mut got = vec![blank; n / QK_K];
        for k in crate::kernels::available() {
            // SAFETY: the table of a set of this CPU; 256 floats per block
            unsafe { (k.quant.q8_k)(&x, &mut got) };
            for (i, (xb, g)) in x.chunks_exact(QK_K).zip(&got).enumerate() {
                let mut want = blank;
                quantize_block(xb, &mut want);
                assert_eq!((g.d.to_bits(), g.qs, g.bsums), (want.d.to_bits(), want.qs, want.bsums), "{} block {i}", k.set.name());
            }
        }
        assert!(got[1].d > 0.0, "the first of -9 and 9 sets the sign (d = max / -127 = 9 / 127)");
    }

    /// the 4-row quantizer's tie rule: blocks where -amax comes first and +amax later flip the
    /// sign of the scale (and of every quant); all other blocks are the reference's, bit for bit
    #[test]
    fn four_row_quantizer_takes_the_positive_max_on_a_tie() {
        let mut r = XorShift::new(79);
        let n = QK_K * 16;
        let mut x = r.model_like(n);
        // block 1: -9 first, then 9 (the tie); block 2: only -9; block 3: 9 first, then -9;
        // block 4: zero; block 5: a -0.0 and a tie of small values
        x[QK_K + 40] = -9.0;
        x[QK_K + 200] = 9.0;
        x[2 * QK_K + 7] = -9.0;
        x[3 * QK_K + 3] = 9.0;
        x[3 * QK_K + 250] = -9.0;
        x[4 * QK_K..5 * QK_K].fill(0.0);
        x[5 * QK_K..6 * QK_K].fill(0.0);
        x[5 * QK_K] = -0.0;
        x[5 * QK_K + 1] = -0.25;
        x[5 * QK_K + 255] = 0.25;
        let blank = BlockQ8K { d: 0.0, qs: [0; QK_K], bsums: [0; QK_K / 16] };
        let mut got = vec![blank; n / QK_K];
        let mut reference = vec![blank; n / QK_K];
        quantize_row_q8_k_4x8(&x, &mut got);
        quantize_row_q8_k(&x, &mut reference);
        for (i, xb) in x.chunks_exact(QK_K).enumerate() {
            let mut want = blank;
            quantize_block_4x8(xb, &mut want);
            let g = &got[i];
            assert_eq!((g.d.to_bits(), g.qs, g.bsums), (want.d.to_bits(), want.qs, want.bsums), "block {i}");
            let flipped = matches!(i, 1 | 5);
            assert_eq!(g.d.to_bits() != reference[i].d.to_bits(), flipped, "block {i}: differs from the reference only on a tie");
        }
        assert!(got[1].d < 0.0 && reference[1].d > 0.0, "the tie: +9 sets the sign in the 4-row form");
        for (g, w) in got[1].qs.iter().zip(&reference[1].qs) {
            assert!(*g == -*w || (*g, *w) == (-127, 127), "tie block quants are negated");
        }
    }
}
