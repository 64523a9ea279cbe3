//! Q4_0: 32 values, one f16 scale `max / -8` (max = the value of largest magnitude, sign kept),
//! quants `trunc(x / d + 8.5)` capped at 15; element j in the low nibble of byte j, element j + 16
//! in its high nibble.

use half::f16;

use super::check_blocks;
use crate::block::{BlockQ4_0, QK4_0};

pub fn quantize_row_q4_0(x: &[f32], y: &mut [BlockQ4_0]) {
    check_blocks("quantize_row_q4_0", x.len(), QK4_0, y.len());
    for (xb, yb) in x.chunks_exact(QK4_0).zip(y.iter_mut()) {
        let mut amax = 0.0f32;
        let mut max = 0.0f32;
        for &v in xb {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        yb.d = f16::from_f32(d);
        for j in 0..QK4_0 / 2 {
            // (int8_t) cast truncates toward zero; the values lie in [0.5, 16.5]
            let q0 = (super::mul_add_as_built(xb[j], id, 8.5) as i8).min(15) as u8;
            let q1 = (super::mul_add_as_built(xb[j + QK4_0 / 2], id, 8.5) as i8).min(15) as u8;
            yb.qs[j] = q0 | (q1 << 4);
        }
    }
}

pub fn dequantize_row_q4_0(x: &[BlockQ4_0], y: &mut [f32]) {
    check_blocks("dequantize_row_q4_0", y.len(), QK4_0, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK4_0)) {
        let d = xb.d.to_f32();
        for j in 0..QK4_0 / 2 {
            yb[j] = ((xb.qs[j] & 0x0f) as i32 - 8) as f32 * d;
            yb[j + QK4_0 / 2] = ((xb.qs[j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}
