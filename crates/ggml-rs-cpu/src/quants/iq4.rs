//! IQ4_NL and IQ4_XS: 4-bit indices into one fixed table of 16 non-uniform levels
//! ([`IQ4_NL_LEVELS`], denser near zero, the shape of trained weights), packed as in Q4_0
//! (element j of a 32-element group in the low nibble of byte j, element j + 16 in its high
//! nibble).
//!
//! - IQ4_NL: blocks of 32 with one f16 scale, `x = d · level[q]`;
//! - IQ4_XS: super-blocks of 256 with one f16 scale `d` and a 6-bit scale `ls` per 32 elements,
//!   `x = d · (ls − 32) · level[q]`; the low 4 bits of `ls` are nibbles of `scales_l` (sub-block
//!   2i in the low nibble of byte i, 2i + 1 in the high one), its top 2 bits the bit pair 2i of
//!   `scales_h` for sub-block i.
//!
//! The scale search (upstream's `quantize_row_iq4_nl_impl` with no importance matrix, the one
//! `ggml_quantize_chunk` runs, 7 tries each side; IQ4_NL's `from_float`, which SET_ROWS and CPY
//! use, runs none: [`quantize_row_iq4_nl`]), per 32 elements: weights `w = x²`; a first
//! scale `max / 127` (`max` the element of largest magnitude, sign kept) rounds every element to
//! its nearest level, and the least-squares scale of those levels `Σ w·q·x / Σ w·q²` is kept;
//! then 15 more inverse scales `(t − 127) / max`, t in −7..=7, each giving levels and a
//! least-squares scale that replaces the kept one when it explains more (`(Σ w·q·x)² / Σ w·q²`
//! larger); the levels of the first pass stay. IQ4_NL stores that scale and re-picks every
//! element's level with it. IQ4_XS quantizes the 8 sub-block scales to `d · l`, l in −32..=31
//! (d = −(scale of largest magnitude) / 32) and re-picks the levels with `d · l`. All in f32, no
//! fused multiply-add, operations in upstream's order (its bytes depend on every rounding).

use half::f16;

use super::check_blocks;
use super::search::{GROUP_MAX_EPS, nearest_int, signed_max};
use crate::block::{BlockIq4Nl, BlockIq4Xs, QK_K, QK4_NL};

/// the 16 levels of IQ4_NL and IQ4_XS, in increasing order
pub(crate) const IQ4_NL_LEVELS: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/// tries each side of the first inverse scale (`ggml_quantize_chunk`'s value)
const NTRY: i32 = 7;

#[inline(always)]
fn level(i: usize) -> f32 {
    IQ4_NL_LEVELS[i] as f32
}

/// the index of the level nearest to `x` (upstream's `best_index_int8`): clamped at both ends,
/// a bisection, then the upper of the two neighbours unless the lower is strictly nearer
#[inline]
fn nearest_level(x: f32) -> u8 {
    if x <= level(0) {
        return 0;
    }
    if x >= level(15) {
        return 15;
    }
    let (mut lo, mut hi) = (0usize, 15usize);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if x < level(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    if x - level(hi - 1) < level(hi) - x { (hi - 1) as u8 } else { hi as u8 }
}

/// the scale of one group of 32 (module's text) with `ntry` tries each side (none and a first
/// scale of the other sign for upstream's `_ref` form, `ntry` -1), its levels of the first pass
/// in `l`; 0 (and `l` untouched) when every magnitude is below `GROUP_MAX_EPS`
fn group_scale(xb: &[f32], l: &mut [u8], ntry: i32) -> f32 {
    let mut w = [0.0f32; 32];
    for (wj, &v) in w.iter_mut().zip(xb) {
        *wj = v * v;
    }
    let (amax, max) = signed_max(xb);
    if amax < GROUP_MAX_EPS {
        return 0.0;
    }
    let mut d = if ntry > 0 { -max / level(0) } else { max / level(0) };
    let mut id = 1.0 / d;
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for j in 0..xb.len() {
        let k = nearest_level(id * xb[j]);
        l[j] = k;
        let q = level(k as usize);
        sumqx += w[j] * q * xb[j];
        sumq2 += w[j] * q * q;
    }
    d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for t in -ntry..=ntry {
        id = (t + IQ4_NL_LEVELS[0] as i32) as f32 / max;
        sumqx = 0.0;
        sumq2 = 0.0;
        for j in 0..xb.len() {
            let q = level(nearest_level(id * xb[j]) as usize);
            sumqx += w[j] * q * xb[j];
            sumq2 += w[j] * q * q;
        }
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

/// packs 32 level indices: element j low nibble of byte j, element j + 16 its high nibble
#[inline]
fn pack(l: &[u8], qs: &mut [u8]) {
    for j in 0..16 {
        qs[j] = l[j] | (l[j + 16] << 4);
    }
}

/// IQ4_NL as `ggml_quantize_chunk` quantizes it (no importance matrix): 7 tries each side, then
/// every level re-picked with the scale found
pub fn quantize_iq4_nl_chunk(x: &[f32], y: &mut [BlockIq4Nl]) {
    check_blocks("quantize_iq4_nl_chunk", x.len(), QK4_NL, y.len());
    let mut l = [0u8; QK4_NL];
    for (xb, yb) in x.chunks_exact(QK4_NL).zip(y.iter_mut()) {
        let d = group_scale(xb, &mut l, NTRY);
        yb.d = f16::from_f32(d);
        // the levels again, with the stored scale before its f16 rounding
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        for (lj, &v) in l.iter_mut().zip(xb) {
            *lj = nearest_level(id * v);
        }
        pack(&l, &mut yb.qs);
    }
}

/// IQ4_NL as upstream's `quantize_row_iq4_nl_ref` quantizes it (its `from_float`: SET_ROWS and
/// CPY into IQ4_NL, a quantized KV cache): the first scale `max / -127` and its least-squares
/// refinement only, the levels of that first pass kept. A block below `GROUP_MAX_EPS` stores
/// scale 0 with the levels of zero (upstream leaves whatever its level buffer held: the values
/// are zeros either way)
pub fn quantize_row_iq4_nl(x: &[f32], y: &mut [BlockIq4Nl]) {
    check_blocks("quantize_row_iq4_nl", x.len(), QK4_NL, y.len());
    let mut l = [0u8; QK4_NL];
    for (xb, yb) in x.chunks_exact(QK4_NL).zip(y.iter_mut()) {
        l.fill(nearest_level(0.0));
        let d = group_scale(xb, &mut l, -1);
        yb.d = f16::from_f32(d);
        pack(&l, &mut yb.qs);
    }
}

pub fn dequantize_row_iq4_nl(x: &[BlockIq4Nl], y: &mut [f32]) {
    check_blocks("dequantize_row_iq4_nl", y.len(), QK4_NL, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK4_NL)) {
        let d = xb.d.to_f32();
        for j in 0..QK4_NL / 2 {
            yb[j] = d * level((xb.qs[j] & 0xf) as usize);
            yb[j + QK4_NL / 2] = d * level((xb.qs[j] >> 4) as usize);
        }
    }
}

/// the 6-bit scale of sub-block `ib` of an IQ4_XS block (0..64, stored offset by 32)
#[inline(always)]
pub(crate) fn iq4_xs_scale(b: &BlockIq4Xs, ib: usize) -> i32 {
    let lo = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
    let hi = (b.scales_h >> (2 * ib)) & 3;
    (lo as u16 | (hi << 4)) as i32
}

pub fn quantize_row_iq4_xs(x: &[f32], y: &mut [BlockIq4Xs]) {
    check_blocks("quantize_row_iq4_xs", x.len(), QK_K, y.len());
    let mut l = [0u8; QK_K];
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        let mut scales = [0.0f32; QK_K / 32];
        let (mut amax_scale, mut max_scale) = (0.0f32, 0.0f32);
        for (ib, s) in scales.iter_mut().enumerate() {
            *s = group_scale(&xb[32 * ib..32 * ib + 32], &mut l[32 * ib..32 * ib + 32], NTRY);
            if s.abs() > amax_scale {
                amax_scale = s.abs();
                max_scale = *s;
            }
        }
        // -0.0 when every scale is 0 (upstream stores that f16 too)
        let d = -max_scale / 32.0;
        yb.d = f16::from_f32(d);
        yb.scales_h = 0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        for (ib, &s) in scales.iter().enumerate() {
            let ls = nearest_int(id * s).clamp(-32, 31);
            let dl = d * ls as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            for j in 32 * ib..32 * ib + 32 {
                l[j] = nearest_level(idl * xb[j]);
            }
            let ls = (ls + 32) as u8;
            if ib % 2 == 0 {
                yb.scales_l[ib / 2] = ls & 0xf;
            } else {
                yb.scales_l[ib / 2] |= (ls & 0xf) << 4;
            }
            yb.scales_h |= ((ls >> 4) as u16) << (2 * ib);
        }
        for g in 0..QK_K / 32 {
            pack(&l[32 * g..32 * g + 32], &mut yb.qs[16 * g..16 * g + 16]);
        }
    }
}

pub fn dequantize_row_iq4_xs(x: &[BlockIq4Xs], y: &mut [f32]) {
    check_blocks("dequantize_row_iq4_xs", y.len(), QK_K, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = xb.d.to_f32();
        for ib in 0..QK_K / 32 {
            let dl = d * (iq4_xs_scale(xb, ib) - 32) as f32;
            let (qs, out) = (&xb.qs[16 * ib..16 * ib + 16], &mut yb[32 * ib..32 * ib + 32]);
            for j in 0..16 {
                out[j] = dl * level((qs[j] & 0xf) as usize);
                out[j + 16] = dl * level((qs[j] >> 4) as usize);
            }
        }
    }
}
