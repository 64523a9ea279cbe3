//! Q3_K: 256 values in 16 sub-blocks of 16, each a signed 3-bit quant `q` (−4..=3) with
//! `x = d · (sc − 32) · q`: one f16 `d` per super-block and a 6-bit scale `sc` per sub-block.
//!
//! - the low 2 bits of `q + 4` sit as in Q2_K: in half h (128 values), byte `qs[32h + l]` holds
//!   elements `128h + l + 32k` in bit pair k;
//! - its high bit (set for `q ≥ 0`) is bit `e / 32` of `hmask[e % 32]` for element e;
//! - scale j: its low 4 bits are the low nibble of `scales[j]` (j < 8) or the high nibble of
//!   `scales[j − 8]`, its top 2 bits are bits `2·(j / 4)..` of `scales[8 + j % 4]`.
//!
//! The reference quantizer finds each sub-block's scale by a weighted coordinate descent
//! ([`super::search::make_q3_quants`]), rounds the 16 scales to 6 bits against the one of
//! largest magnitude (`d = −max / 32`, so that scale maps to 0), then requantizes the values with
//! the rounded steps.

use half::f16;

use super::check_blocks;
use super::search::{make_q3_quants, nearest_int};
use crate::block::{BlockQ3K, QK_K};

/// the 6-bit scale of sub-block `j` (0..16), less its offset 32 (so −32..=31)
#[inline]
pub(crate) fn q3_scale(b: &BlockQ3K, j: usize) -> i32 {
    let lo = if j < 8 { b.scales[j] & 0xf } else { b.scales[j - 8] >> 4 };
    let hi = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    (lo | (hi << 4)) as i32 - 32
}

/// the signed quant (−4..=3) of element `e` (0..256) of a block
#[inline]
pub(crate) fn q3_get(b: &BlockQ3K, e: usize) -> i32 {
    let (h, r) = (e / 128, e % 128);
    let low = (b.qs[32 * h + r % 32] >> (2 * (r / 32))) & 3;
    let high = (b.hmask[e % 32] >> (e / 32)) & 1;
    low as i32 - if high != 0 { 0 } else { 4 }
}

pub fn quantize_row_q3_k(x: &[f32], y: &mut [BlockQ3K]) {
    check_blocks("quantize_row_q3_k", x.len(), QK_K, y.len());
    let mut l = [0i8; QK_K];
    let mut scales = [0f32; QK_K / 16];
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        let mut max_scale = 0.0f32;
        let mut amax = 0.0f32;
        for j in 0..QK_K / 16 {
            scales[j] = make_q3_quants(&xb[16 * j..16 * j + 16], 4, &mut l[16 * j..16 * j + 16], true);
            let scale = scales[j].abs();
            if scale > amax {
                amax = scale;
                max_scale = scales[j];
            }
        }
        yb.scales = [0; 12];
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for j in 0..QK_K / 16 {
                // upstream keeps the rounded value in a signed byte before clamping
                let ls = ((nearest_int(iscale * scales[j]) as i8).clamp(-32, 31) + 32) as u8;
                if j < 8 {
                    yb.scales[j] = ls & 0xf;
                } else {
                    yb.scales[j - 8] |= (ls & 0xf) << 4;
                }
                yb.scales[8 + j % 4] |= (ls >> 4) << (2 * (j / 4));
            }
            yb.d = f16::from_f32(1.0 / iscale);
        } else {
            yb.d = f16::ZERO;
        }
        for j in 0..QK_K / 16 {
            let d = yb.d.to_f32() * q3_scale(yb, j) as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                l[16 * j + ii] = (nearest_int(xb[16 * j + ii] / d).clamp(-4, 3) + 4) as i8;
            }
        }
        yb.hmask = [0; QK_K / 8];
        for (e, q) in l.iter_mut().enumerate() {
            if *q > 3 {
                yb.hmask[e % 32] |= 1 << (e / 32);
                *q -= 4;
            }
        }
        for (h, q) in yb.qs.chunks_exact_mut(32).enumerate() {
            let lh = &l[128 * h..128 * h + 128];
            for i in 0..32 {
                q[i] = (lh[i] | (lh[32 + i] << 2) | (lh[64 + i] << 4) | (lh[96 + i] << 6)) as u8;
            }
        }
    }
}

pub fn dequantize_row_q3_k(x: &[BlockQ3K], y: &mut [f32]) {
    check_blocks("dequantize_row_q3_k", y.len(), QK_K, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d_all = xb.d.to_f32();
        for (j, out) in yb.chunks_exact_mut(16).enumerate() {
            let dl = d_all * q3_scale(xb, j) as f32;
            for (i, o) in out.iter_mut().enumerate() {
                *o = dl * q3_get(xb, 16 * j + i) as f32;
            }
        }
    }
}
