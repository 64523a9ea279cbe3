//! Q5_0 and Q5_1 (5-bit quants: low nibbles as in Q4_0, the fifth bits in a u32), and Q8_1, the
//! activation type Q5_1 pairs with (Q8_0 plus `s = d · Σ qs` for the min term).
//!
//! Q5_0: `d = max / -16` (max = the value of largest magnitude, sign kept), quants
//! `trunc(x / d + 16.5)` capped at 31. Q5_1: `d = (max - min) / 31`, `m = min`, quants
//! `trunc((x - min) / d + 0.5)`.

use half::f16;

use super::check_blocks;
use crate::block::{BlockQ5_0, BlockQ5_1, BlockQ8_1, QK5_0, QK5_1, QK8_1};

/// packs 32 five-bit quants: low nibbles into `qs` (j low, j + 16 high), fifth bits into `qh`
fn pack5(q: &[u8; 32], qs: &mut [u8; 16], qh: &mut [u8; 4]) {
    let mut h = 0u32;
    for j in 0..16 {
        qs[j] = (q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4);
        h |= ((q[j] as u32 & 0x10) >> 4) << j;
        h |= ((q[j + 16] as u32 & 0x10) >> 4) << (j + 16);
    }
    *qh = h.to_le_bytes();
}

/// the 32 five-bit quants of a block (0..32)
#[inline]
pub(crate) fn unpack5(qs: &[u8; 16], qh: &[u8; 4]) -> [u8; 32] {
    let h = u32::from_le_bytes(*qh);
    let mut q = [0u8; 32];
    for j in 0..16 {
        q[j] = (qs[j] & 0x0f) | ((((h >> j) & 1) as u8) << 4);
        q[j + 16] = (qs[j] >> 4) | ((((h >> (j + 16)) & 1) as u8) << 4);
    }
    q
}

pub fn quantize_row_q5_0(x: &[f32], y: &mut [BlockQ5_0]) {
    check_blocks("quantize_row_q5_0", x.len(), QK5_0, y.len());
    for (xb, yb) in x.chunks_exact(QK5_0).zip(y.iter_mut()) {
        let mut amax = 0.0f32;
        let mut max = 0.0f32;
        for &v in xb {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        yb.d = f16::from_f32(d);
        // (int8_t) cast truncates toward zero; the values lie in [0.5, 32.5]
        let q: [u8; 32] = std::array::from_fn(|j| (super::mul_add_as_built(xb[j], id, 16.5) as i8).min(31) as u8);
        pack5(&q, &mut yb.qs, &mut yb.qh);
    }
}

pub fn dequantize_row_q5_0(x: &[BlockQ5_0], y: &mut [f32]) {
    check_blocks("dequantize_row_q5_0", y.len(), QK5_0, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK5_0)) {
        let d = xb.d.to_f32();
        for (o, q) in yb.iter_mut().zip(unpack5(&xb.qs, &xb.qh)) {
            *o = (q as i32 - 16) as f32 * d;
        }
    }
}

pub fn quantize_row_q5_1(x: &[f32], y: &mut [BlockQ5_1]) {
    check_blocks("quantize_row_q5_1", x.len(), QK5_1, y.len());
    for (xb, yb) in x.chunks_exact(QK5_1).zip(y.iter_mut()) {
        let (min, max) = super::min_max(xb);
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        yb.d = f16::from_f32(d);
        yb.m = f16::from_f32(min);
        // (uint8_t) cast truncates; the values lie in [0.5, 31.5]
        let q: [u8; 32] = std::array::from_fn(|j| super::mul_add_as_built(xb[j] - min, id, 0.5) as u8);
        pack5(&q, &mut yb.qs, &mut yb.qh);
    }
}

pub fn dequantize_row_q5_1(x: &[BlockQ5_1], y: &mut [f32]) {
    check_blocks("dequantize_row_q5_1", y.len(), QK5_1, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK5_1)) {
        let (d, m) = (xb.d.to_f32(), xb.m.to_f32());
        for (o, q) in yb.iter_mut().zip(unpack5(&xb.qs, &xb.qh)) {
            // x = q·d + m, one rounding each (ggml-base has no fused multiply-add)
            *o = q as f32 * d + m;
        }
    }
}

/// Q8_1 reference (upstream's `quantize_row_q8_1_ref`): Q8_0's quants, `s = f16(d · Σ qs)`
pub fn quantize_row_q8_1(x: &[f32], y: &mut [BlockQ8_1]) {
    check_blocks("quantize_row_q8_1", x.len(), QK8_1, y.len());
    for (xb, yb) in x.chunks_exact(QK8_1).zip(y.iter_mut()) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        yb.d = f16::from_f32(d);
        let mut sum = 0i32;
        for (q, v) in yb.qs.iter_mut().zip(xb) {
            *q = (v * id).round() as i8;
            sum += *q as i32;
        }
        yb.s = f16::from_f32(sum as f32 * d);
    }
}

/// Q8_1 as upstream's CPU backend quantizes activations on x86 (`quantize_row_q8_1` of ggml-cpu):
/// `id = 127 / amax`, ties to even, `s = f16(d · Σ qs)` (see `quantize_row_q8_0_x86`)
pub fn quantize_row_q8_1_x86(x: &[f32], y: &mut [BlockQ8_1]) {
    check_blocks("quantize_row_q8_1_x86", x.len(), QK8_1, y.len());
    for (xb, yb) in x.chunks_exact(QK8_1).zip(y.iter_mut()) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        yb.d = f16::from_f32(d);
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        let mut sum = 0i32;
        for (q, v) in yb.qs.iter_mut().zip(xb) {
            *q = (v * id).round_ties_even() as i8;
            sum += *q as i32;
        }
        yb.s = f16::from_f32(d * sum as f32);
    }
}

pub fn dequantize_row_q8_1(x: &[BlockQ8_1], y: &mut [f32]) {
    check_blocks("dequantize_row_q8_1", y.len(), QK8_1, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK8_1)) {
        let d = xb.d.to_f32();
        for (o, q) in yb.iter_mut().zip(xb.qs) {
            *o = q as f32 * d;
        }
    }
}
