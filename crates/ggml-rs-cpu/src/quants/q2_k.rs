//! Q2_K: 256 values in 16 sub-blocks of 16, each a 2-bit quant `q` (0..=3) with
//! `x = d · sc − dmin · m`, where the sub-block's 4-bit scale `sc` (low nibble of `scales[j]`)
//! and 4-bit min `m` (high nibble) count in steps of the super-block's f16 `d` and `dmin`.
//!
//! Quant layout: the 256 values form two halves of 128; in half h, byte `qs[32h + l]` holds the
//! quants of elements `128h + l`, `+32`, `+64`, `+96` in bit pairs 0-1, 2-3, 4-5, 6-7.
//!
//! The reference quantizer searches each sub-block's scale and min with weights `|x|` and a
//! mean-absolute-error criterion (15 candidate steps from `nmax − 0.5`), rounds the scales and the
//! mins to 4 bits against their maxima, then requantizes the values with the rounded steps.

use half::f16;

use super::check_blocks;
use super::search::{make_qkx2_quants, nearest_int};
use crate::block::{BlockQ2K, QK_K};

/// the 2-bit quant of element `e` (0..256) of a block
#[inline]
pub(crate) fn q2_get(b: &BlockQ2K, e: usize) -> u8 {
    let (h, r) = (e / 128, e % 128);
    (b.qs[32 * h + r % 32] >> (2 * (r / 32))) & 3
}

pub fn quantize_row_q2_k(x: &[f32], y: &mut [BlockQ2K]) {
    check_blocks("quantize_row_q2_k", x.len(), QK_K, y.len());
    const Q4SCALE: f32 = 15.0;
    let mut l = [0u8; QK_K];
    let mut laux = [0u8; 16];
    let mut weights = [0f32; 16];
    let mut mins = [0f32; QK_K / 16];
    let mut scales = [0f32; QK_K / 16];
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        let mut max_scale = 0.0f32;
        let mut max_min = 0.0f32;
        for j in 0..QK_K / 16 {
            let xs = &xb[16 * j..16 * j + 16];
            for (w, &v) in weights.iter_mut().zip(xs) {
                *w = v.abs();
            }
            scales[j] = make_qkx2_quants(xs, 3, &weights, &mut l[16 * j..16 * j + 16], &mut mins[j], &mut laux, -0.5, 0.1, 15, true);
            if scales[j] > max_scale {
                max_scale = scales[j];
            }
            if mins[j] > max_min {
                max_min = mins[j];
            }
        }
        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for j in 0..QK_K / 16 {
                // upstream stores the int into a byte (the value is at most 15)
                yb.scales[j] = nearest_int(iscale * scales[j]) as u8;
            }
            yb.d = f16::from_f32(max_scale / Q4SCALE);
        } else {
            yb.scales = [0; QK_K / 16];
            yb.d = f16::ZERO;
        }
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for j in 0..QK_K / 16 {
                yb.scales[j] |= (nearest_int(iscale * mins[j]) << 4) as u8;
            }
            yb.dmin = f16::from_f32(max_min / Q4SCALE);
        } else {
            yb.dmin = f16::ZERO;
        }
        for j in 0..QK_K / 16 {
            let d = yb.d.to_f32() * (yb.scales[j] & 0xf) as f32;
            if d == 0.0 {
                continue;
            }
            let dm = yb.dmin.to_f32() * (yb.scales[j] >> 4) as f32;
            for ii in 0..16 {
                l[16 * j + ii] = nearest_int((xb[16 * j + ii] + dm) / d).clamp(0, 3) as u8;
            }
        }
        for (h, q) in yb.qs.chunks_exact_mut(32).enumerate() {
            let lh = &l[128 * h..128 * h + 128];
            for i in 0..32 {
                q[i] = lh[i] | (lh[32 + i] << 2) | (lh[64 + i] << 4) | (lh[96 + i] << 6);
            }
        }
    }
}

pub fn dequantize_row_q2_k(x: &[BlockQ2K], y: &mut [f32]) {
    check_blocks("dequantize_row_q2_k", y.len(), QK_K, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = xb.d.to_f32();
        let min = xb.dmin.to_f32();
        // sub-block j: elements 16j..16j + 16, in half j / 8, bit pair (j / 2) % 4, bytes
        // 16 · (j % 2) onwards of the half's 32
        for (j, out) in yb.chunks_exact_mut(16).enumerate() {
            let sc = xb.scales[j];
            let (dl, ml) = (d * (sc & 0xf) as f32, min * (sc >> 4) as f32);
            let q = &xb.qs[32 * (j / 8) + 16 * (j % 2)..][..16];
            let shift = 2 * ((j / 2) % 4);
            for (o, &b) in out.iter_mut().zip(q) {
                *o = dl * ((b >> shift) & 3) as f32 - ml;
            }
        }
    }
}
