//! Q4_1: 32 values as 4-bit quants over the block's range, `x = d · q + m` with `m` the block's
//! minimum and `d = (max - min) / 15`; quants `trunc((x - min) / d + 0.5)` capped at 15, packed as
//! Q4_0's (element j in the low nibble of `qs[j]`, element j + 16 in its high nibble).

use half::f16;

use super::check_blocks;
use crate::block::{BlockQ4_1, QK4_1};

pub fn quantize_row_q4_1(x: &[f32], y: &mut [BlockQ4_1]) {
    check_blocks("quantize_row_q4_1", x.len(), QK4_1, y.len());
    for (xb, yb) in x.chunks_exact(QK4_1).zip(y.iter_mut()) {
        let (min, max) = super::min_max(xb);
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        yb.d = f16::from_f32(d);
        yb.m = f16::from_f32(min);
        // the (int8_t) cast truncates toward zero; the values lie in [0.5, 15.5]
        let q = |v: f32| (super::mul_add_as_built(v - min, id, 0.5) as i8).min(15) as u8;
        for j in 0..QK4_1 / 2 {
            yb.qs[j] = q(xb[j]) | (q(xb[j + QK4_1 / 2]) << 4);
        }
    }
}

pub fn dequantize_row_q4_1(x: &[BlockQ4_1], y: &mut [f32]) {
    check_blocks("dequantize_row_q4_1", y.len(), QK4_1, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK4_1)) {
        let (d, m) = (xb.d.to_f32(), xb.m.to_f32());
        let (lo, hi) = yb.split_at_mut(QK4_1 / 2);
        for ((&q, l), h) in xb.qs.iter().zip(lo).zip(hi) {
            // one rounding for the product, one for the sum (ggml-base has no fused multiply-add)
            *l = (q & 0x0f) as f32 * d + m;
            *h = (q >> 4) as f32 * d + m;
        }
    }
}
