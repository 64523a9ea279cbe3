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

/// Q8_0 as upstream's CPU backend quantizes activations on x86 (`quantize_row_q8_0` of
/// ggml-cpu, the `from_float` MUL_MAT uses; the AVX/AVX2/AVX-512 builds): `id = 127 / amax`
/// rather than `1 / d`, and ties rounded to even. It differs from the reference in the last
/// quant now and then; a backend whose logits must match upstream's CPU bit for bit quantizes
/// its activations this way.
pub fn quantize_row_q8_0_x86(x: &[f32], y: &mut [BlockQ8_0]) {
    check_blocks("quantize_row_q8_0_x86", x.len(), QK8_0, y.len());
    for (xb, yb) in x.chunks_exact(QK8_0).zip(y.iter_mut()) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        yb.d = f16::from_f32(amax / 127.0);
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        for (q, v) in yb.qs.iter_mut().zip(xb) {
            *q = (v * id).round_ties_even() as i8;
        }
    }
}
