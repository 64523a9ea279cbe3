//! TQ1_0 and TQ2_0: ternary weights (`x = d · t`, t in {-1, 0, 1}, `d` the block's largest
//! magnitude as f16), 256 to a block.
//!
//! - TQ2_0 stores `t + 1` in 2 bits: byte `m` of each 32-byte group `g` holds elements
//!   `128·g + 32·l + m` in bits `2l..2l+2`.
//! - TQ1_0 packs five trits into a byte as a base-3 number scaled to 0..=255: a byte
//!   `b = ceil(256 · Σ (t_n + 1) · 3^(4-n) / 243)` is read back digit by digit, the `n`-th as
//!   `(u8(b · 3^n) · 3) >> 8` (the wrapping product drops the digits before it). Its 48 bytes of
//!   `qs` hold elements 0..160 (byte `m` of the first 32: elements `m + 32·n`) and 160..240 (byte
//!   `32 + m` of the last 16: elements `160 + m + 16·n`); the 4 bytes of `qh` hold the last 16 as
//!   four trits each (element `240 + j + 4·n` in byte `j`, the fifth digit zero).

use half::f16;

use super::check_blocks;
use crate::block::{BlockTq1_0, BlockTq2_0, QK_K};

const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// the `n`-th base-3 digit (most significant first) of a TQ1_0 byte, as a weight in -1..=1
#[inline]
pub(crate) fn tq1_trit(b: u8, n: usize) -> i32 {
    ((b.wrapping_mul(POW3[n]) as u16 * 3) >> 8) as i32 - 1
}

/// a TQ1_0 block's 256 ternary weights in element order
pub(crate) fn tq1_0_trits(b: &BlockTq1_0) -> [i8; QK_K] {
    let mut t = [0i8; QK_K];
    for n in 0..5 {
        for m in 0..32 {
            t[32 * n + m] = tq1_trit(b.qs[m], n) as i8;
        }
        for m in 0..16 {
            t[160 + 16 * n + m] = tq1_trit(b.qs[32 + m], n) as i8;
        }
    }
    for n in 0..4 {
        for j in 0..4 {
            t[240 + 4 * n + j] = tq1_trit(b.qh[j], n) as i8;
        }
    }
    t
}

/// a TQ2_0 block's 256 ternary weights in element order
pub(crate) fn tq2_0_trits(b: &BlockTq2_0) -> [i8; QK_K] {
    let mut t = [0i8; QK_K];
    for g in 0..2 {
        for l in 0..4 {
            for m in 0..32 {
                t[128 * g + 32 * l + m] = ((b.qs[32 * g + m] >> (2 * l)) & 3) as i8 - 1;
            }
        }
    }
    t
}

/// the block's scale: its largest magnitude (upstream's `MAX(amax, fabsf(v))`, so a NaN is
/// kept only when it comes first)
fn amax(xb: &[f32]) -> f32 {
    xb.iter().fold(0.0f32, |m, v| if m > v.abs() { m } else { v.abs() })
}

/// `x / amax` rounded half away from zero, plus one: 0, 1 or 2
#[inline]
fn digit(v: f32, id: f32) -> u8 {
    ((v * id).round() as i32 + 1) as u8
}

/// five (or four, then a zero) base-3 digits, most significant first, scaled to a byte
fn pack_trits(digits: impl Iterator<Item = u8>, count: usize) -> u8 {
    let mut q = digits.fold(0u8, |q, d| q.wrapping_mul(3).wrapping_add(d));
    for _ in count..5 {
        q = q.wrapping_mul(3);
    }
    (q as u16 * 256).div_ceil(243) as u8
}

pub fn quantize_row_tq1_0(x: &[f32], y: &mut [BlockTq1_0]) {
    check_blocks("quantize_row_tq1_0", x.len(), QK_K, y.len());
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        let d = amax(xb);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        yb.d = f16::from_f32(d);
        for m in 0..32 {
            yb.qs[m] = pack_trits((0..5).map(|n| digit(xb[m + 32 * n], id)), 5);
        }
        for m in 0..16 {
            yb.qs[32 + m] = pack_trits((0..5).map(|n| digit(xb[160 + m + 16 * n], id)), 5);
        }
        for j in 0..4 {
            yb.qh[j] = pack_trits((0..4).map(|n| digit(xb[240 + j + 4 * n], id)), 4);
        }
    }
}

pub fn dequantize_row_tq1_0(x: &[BlockTq1_0], y: &mut [f32]) {
    check_blocks("dequantize_row_tq1_0", y.len(), QK_K, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = xb.d.to_f32();
        for (o, t) in yb.iter_mut().zip(tq1_0_trits(xb)) {
            *o = t as f32 * d;
        }
    }
}

pub fn quantize_row_tq2_0(x: &[f32], y: &mut [BlockTq2_0]) {
    check_blocks("quantize_row_tq2_0", x.len(), QK_K, y.len());
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        let d = amax(xb);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        yb.d = f16::from_f32(d);
        for g in 0..2 {
            for m in 0..32 {
                // upstream keeps the low 2 bits of each digit
                yb.qs[32 * g + m] = (0..4).fold(0u8, |q, l| q | ((digit(xb[128 * g + 32 * l + m], id) & 3) << (2 * l)));
            }
        }
    }
}

pub fn dequantize_row_tq2_0(x: &[BlockTq2_0], y: &mut [f32]) {
    check_blocks("dequantize_row_tq2_0", y.len(), QK_K, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = xb.d.to_f32();
        for (o, t) in yb.iter_mut().zip(tq2_0_trits(xb)) {
            *o = t as f32 * d;
        }
    }
}
