//! Q5_K: 256 values in 8 sub-blocks of 32, each a 5-bit quant `q` (0..=31) with
//! `x = d · sc − dmin · m`: Q4_K's super-block (f16 `d` and `dmin`, 6-bit scales and mins packed
//! into 12 bytes as [`super::get_scale_min_k4`] reads them, low nibbles in `qs`: element
//! `64g + l` in the low nibble of `qs[32g + l]`, `64g + 32 + l` in its high nibble) with the
//! fifth bit of element `64g + l` in bit `2g` of `qh[l]` and that of `64g + 32 + l` in bit
//! `2g + 1`.
//!
//! The reference quantizer is Q4_K's (weights `rms + |x|`, squared error), with 31 levels and 16
//! candidate steps from `nmax − 0.5`.

use super::check_blocks;
use super::q4_k::get_scale_min_k4;
use crate::block::{BlockQ5K, QK_K};

/// the 5-bit quant of element `e` (0..256) of a block
#[inline]
pub(crate) fn q5_get(b: &BlockQ5K, e: usize) -> u8 {
    let (g, r) = (e / 64, e % 64);
    let (half, l) = (r / 32, r % 32);
    let low = (b.qs[32 * g + l] >> (4 * half)) & 0xf;
    let high = (b.qh[l] >> (2 * g + half)) & 1;
    low | (high << 4)
}

pub fn quantize_row_q5_k(x: &[f32], y: &mut [BlockQ5K]) {
    check_blocks("quantize_row_q5_k", x.len(), QK_K, y.len());
    let mut l = [0u8; QK_K];
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        // Q4_K's search over 5-bit levels, from -0.5 in 15 steps
        (yb.scales, yb.d, yb.dmin) = super::q4_k::scales_mins_k(xb, 31, -0.5, 15, &mut l);
        yb.qh = [0; QK_K / 8];
        for g in 0..QK_K / 64 {
            for i in 0..32 {
                let (l1, l2) = (l[64 * g + i], l[64 * g + 32 + i]);
                yb.qh[i] |= ((l1 >> 4) << (2 * g)) | ((l2 >> 4) << (2 * g + 1));
                yb.qs[32 * g + i] = (l1 & 0xf) | ((l2 & 0xf) << 4);
            }
        }
    }
}

pub fn dequantize_row_q5_k(x: &[BlockQ5K], y: &mut [f32]) {
    check_blocks("dequantize_row_q5_k", y.len(), QK_K, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = xb.d.to_f32();
        let min = xb.dmin.to_f32();
        for (j, out) in yb.chunks_exact_mut(32).enumerate() {
            let (sc, m) = get_scale_min_k4(j, &xb.scales);
            let (dj, mj) = (d * sc as f32, min * m as f32);
            for (i, o) in out.iter_mut().enumerate() {
                *o = dj * q5_get(xb, 32 * j + i) as f32 - mj;
            }
        }
    }
}
