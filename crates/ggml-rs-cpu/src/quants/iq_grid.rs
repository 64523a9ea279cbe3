//! The grid ("lattice") types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M: each group
//! of 8 (IQ2, IQ1) or 4 (IQ3) weights is one entry of a fixed table of short vectors (its grid),
//! with signs (IQ2 / IQ3) or a ±1/8 shift (IQ1) and a small per-group scale on top of one f16 per
//! 256 weights. Block layouts in [`crate::block`].
//!
//! The grids are in `iq_grids.rs`, generated from upstream's library by
//! `scripts/gen_iq_grids.py` (packed level indices) and expanded here at compile time.
//!
//! Dequantization is upstream's `to_float` (no `from_float`: upstream's CPU cannot quantize
//! into these types): per element `(d · a) · b · grid` in f32 in that order (multiplying by a
//! sign is exact), so the values are upstream's bit for bit (`tests/upstream_iq.rs`).

use half::f16;

use super::check_blocks;
use super::iq_grids::*;
use crate::block::{BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, QK_K};

/// expands packed level indices (`bits` per element, element 0 lowest) into the entries
const fn unpack<T: Copy, const N: usize, const W: usize>(packed: &[u16; N], levels: &[T], bits: u32, zero: T) -> [[T; W]; N] {
    let mut out = [[zero; W]; N];
    let mask = (1u16 << bits) - 1;
    let mut i = 0;
    while i < N {
        let mut j = 0;
        while j < W {
            out[i][j] = levels[((packed[i] >> (bits * j as u32)) & mask) as usize];
            j += 1;
        }
        i += 1;
    }
    out
}

pub const IQ2XXS_GRID: [[u8; 8]; 256] = unpack(&IQ2XXS_PACKED, &IQ2XXS_LEVELS, IQ2XXS_BITS, 0);
pub const IQ2XS_GRID: [[u8; 8]; 512] = unpack(&IQ2XS_PACKED, &IQ2XS_LEVELS, IQ2XS_BITS, 0);
pub const IQ2S_GRID: [[u8; 8]; 1024] = unpack(&IQ2S_PACKED, &IQ2S_LEVELS, IQ2S_BITS, 0);
pub const IQ3XXS_GRID: [[u8; 4]; 256] = unpack(&IQ3XXS_PACKED, &IQ3XXS_LEVELS, IQ3XXS_BITS, 0);
pub const IQ3S_GRID: [[u8; 4]; 512] = unpack(&IQ3S_PACKED, &IQ3S_LEVELS, IQ3S_BITS, 0);
pub const IQ1S_GRID: [[i8; 8]; 2048] = unpack(&IQ1S_PACKED, &IQ1S_LEVELS, IQ1S_BITS, 0);

/// the shift of IQ1_S / IQ1_M's values (`±1/8`)
pub(crate) const IQ1_DELTA: f32 = 0.125;

/// the 8 signs of a 7-bit sign code: its 7 bits, and an eighth that makes the count of minus
/// signs even (bit j set: element j negative)
#[inline(always)]
pub(crate) const fn sign_bits(code: u32) -> u8 {
    let c = (code & 127) as u8;
    c | (((c.count_ones() & 1) as u8) << 7)
}

/// `v` negated where bit `j` of `signs` is set
#[inline(always)]
pub(crate) fn signed(v: f32, signs: u8, j: usize) -> f32 {
    if signs >> j & 1 != 0 { -v } else { v }
}

/// the little-endian u32 at `b[4i..]`
#[inline(always)]
pub(crate) fn le32(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

/// the grid bytes (4 indices, then the sign-and-scale word) of group `g` of an IQ2_XXS block
#[inline(always)]
pub(crate) fn iq2_xxs_group(b: &BlockIq2Xxs, g: usize) -> ([u8; 4], u32) {
    let q = &b.qs[4 * g..4 * g + 4];
    let lo = (q[0] as u32 | (q[1] as u32) << 16).to_le_bytes();
    (lo, q[2] as u32 | (q[3] as u32) << 16)
}

/// the 10-bit grid index of vector `k` of an IQ2_S block
#[inline(always)]
pub(crate) fn iq2_s_index(b: &BlockIq2S, k: usize) -> usize {
    b.qs[k] as usize | ((b.qh[k / 4] as usize >> (2 * (k % 4))) & 3) << 8
}

/// the 9-bit grid index of vector `k` (of 4) of an IQ3_S block
#[inline(always)]
pub(crate) fn iq3_s_index(b: &BlockIq3S, k: usize) -> usize {
    b.qs[k] as usize | ((b.qh[k / 8] as usize >> (k % 8)) & 1) << 8
}

/// the 11-bit grid index of vector `k` (of 8) of an IQ1_S block
#[inline(always)]
pub(crate) fn iq1_s_index(b: &BlockIq1S, k: usize) -> usize {
    b.qs[k] as usize | ((b.qh[k / 4] as usize >> (3 * (k % 4))) & 7) << 8
}

/// the 11-bit grid index of vector `k` (of 8) of an IQ1_M block and whether its delta is −1/8
#[inline(always)]
pub(crate) fn iq1_m_index(b: &BlockIq1M, k: usize) -> (usize, bool) {
    let nib = (b.qh[k / 2] >> (4 * (k % 2))) & 15;
    (b.qs[k] as usize | ((nib & 7) as usize) << 8, nib & 8 != 0)
}

/// the four u16 scale words of an IQ1_M block
#[inline(always)]
pub(crate) fn iq1_m_words(b: &BlockIq1M) -> [u16; 4] {
    std::array::from_fn(|i| u16::from_le_bytes([b.scales[2 * i], b.scales[2 * i + 1]]))
}

/// the f16 super-scale of an IQ1_M block (the top nibbles of its scale words)
#[inline(always)]
pub(crate) fn iq1_m_d(sc: &[u16; 4]) -> f32 {
    let bits = (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000);
    f16::from_bits(bits).to_f32()
}

/// the 3-bit scales `(2s + 1)` of the two halves (16 weights each) of group `g` of an IQ1_M block
#[inline(always)]
pub(crate) fn iq1_m_scales(sc: &[u16; 4], g: usize) -> [i32; 2] {
    let w = sc[g / 2] >> (6 * (g % 2));
    [2 * (w & 7) as i32 + 1, 2 * ((w >> 3) & 7) as i32 + 1]
}

/// upstream's `dequantize_row_iq2_xxs`
pub fn dequantize_row_iq2_xxs(x: &[BlockIq2Xxs], y: &mut [f32]) {
    check_blocks("dequantize_row_iq2_xxs", y.len(), QK_K, x.len());
    for (b, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        for (g, yg) in yb.chunks_exact_mut(32).enumerate() {
            let (idx, aux) = iq2_xxs_group(b, g);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.25;
            for (l, y8) in yg.chunks_exact_mut(8).enumerate() {
                let signs = sign_bits(aux >> (7 * l));
                for (j, v) in y8.iter_mut().enumerate() {
                    *v = signed(db * IQ2XXS_GRID[idx[l] as usize][j] as f32, signs, j);
                }
            }
        }
    }
}

/// the 4-bit scale nibble of 8-vector `k` of an IQ2_XS / IQ2_S block (one per 16 weights)
#[inline(always)]
pub(crate) fn iq2_nibble(scales: &[u8; QK_K / 32], k: usize) -> u32 {
    ((scales[k / 4] >> (4 * (k % 4 / 2))) & 15) as u32
}

/// IQ2_XS / IQ2_S: per 8-vector `k` its grid entry and sign byte from `vector`, its scale from
/// the nibbles of `scales`, `x = d · (0.5 + s) · 0.25 · grid[j] · sign[j]`
#[inline(always)]
fn dequantize_iq2_nibbles<B>(x: &[B], y: &mut [f32], parts: impl Fn(&B) -> (f16, &[u8; QK_K / 32]), vector: impl Fn(&B, usize) -> (&'static [u8; 8], u8)) {
    for (b, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let (d, scales) = parts(b);
        let d = d.to_f32();
        for (k, y8) in yb.chunks_exact_mut(8).enumerate() {
            let db = d * (0.5 + iq2_nibble(scales, k) as f32) * 0.25;
            let (grid, signs) = vector(b, k);
            for (j, v) in y8.iter_mut().enumerate() {
                *v = signed(db * grid[j] as f32, signs, j);
            }
        }
    }
}

/// upstream's `dequantize_row_iq2_xs`
pub fn dequantize_row_iq2_xs(x: &[BlockIq2Xs], y: &mut [f32]) {
    check_blocks("dequantize_row_iq2_xs", y.len(), QK_K, x.len());
    dequantize_iq2_nibbles(x, y, |b| (b.d, &b.scales), |b, k| (&IQ2XS_GRID[(b.qs[k] & 511) as usize], sign_bits((b.qs[k] >> 9) as u32)));
}

/// upstream's `dequantize_row_iq2_s`
pub fn dequantize_row_iq2_s(x: &[BlockIq2S], y: &mut [f32]) {
    check_blocks("dequantize_row_iq2_s", y.len(), QK_K, x.len());
    dequantize_iq2_nibbles(x, y, |b| (b.d, &b.scales), |b, k| (&IQ2S_GRID[iq2_s_index(b, k)], b.signs[k]));
}

/// upstream's `dequantize_row_iq3_xxs`
pub fn dequantize_row_iq3_xxs(x: &[BlockIq3Xxs], y: &mut [f32]) {
    check_blocks("dequantize_row_iq3_xxs", y.len(), QK_K, x.len());
    for (b, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        for (g, yg) in yb.chunks_exact_mut(32).enumerate() {
            let aux = le32(&b.scales_signs, g);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
            for (l, y8) in yg.chunks_exact_mut(8).enumerate() {
                let signs = sign_bits(aux >> (7 * l));
                let k = 8 * g + 2 * l;
                let (g1, g2) = (&IQ3XXS_GRID[b.qs[k] as usize], &IQ3XXS_GRID[b.qs[k + 1] as usize]);
                for j in 0..4 {
                    y8[j] = signed(db * g1[j] as f32, signs, j);
                    y8[j + 4] = signed(db * g2[j] as f32, signs, j + 4);
                }
            }
        }
    }
}

/// upstream's `dequantize_row_iq3_s`
pub fn dequantize_row_iq3_s(x: &[BlockIq3S], y: &mut [f32]) {
    check_blocks("dequantize_row_iq3_s", y.len(), QK_K, x.len());
    for (b, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        for (m, y8) in yb.chunks_exact_mut(8).enumerate() {
            let s = (b.scales[m / 8] >> (4 * (m % 8 / 4))) & 15;
            let db = d * (1 + 2 * s as i32) as f32;
            let (g1, g2) = (&IQ3S_GRID[iq3_s_index(b, 2 * m)], &IQ3S_GRID[iq3_s_index(b, 2 * m + 1)]);
            for j in 0..4 {
                y8[j] = signed(db * g1[j] as f32, b.signs[m], j);
                y8[j + 4] = signed(db * g2[j] as f32, b.signs[m], j + 4);
            }
        }
    }
}

/// upstream's `dequantize_row_iq1_s`
pub fn dequantize_row_iq1_s(x: &[BlockIq1S], y: &mut [f32]) {
    check_blocks("dequantize_row_iq1_s", y.len(), QK_K, x.len());
    for (b, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        for (k, y8) in yb.chunks_exact_mut(8).enumerate() {
            let qh = b.qh[k / 4];
            let dl = d * (2 * ((qh >> 12) & 7) as i32 + 1) as f32;
            let delta = if qh & 0x8000 != 0 { -IQ1_DELTA } else { IQ1_DELTA };
            let grid = &IQ1S_GRID[iq1_s_index(b, k)];
            for (v, &g) in y8.iter_mut().zip(grid) {
                *v = dl * (g as f32 + delta);
            }
        }
    }
}

/// upstream's `dequantize_row_iq1_m`
pub fn dequantize_row_iq1_m(x: &[BlockIq1M], y: &mut [f32]) {
    check_blocks("dequantize_row_iq1_m", y.len(), QK_K, x.len());
    for (b, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let sc = iq1_m_words(b);
        let d = iq1_m_d(&sc);
        for (k, y8) in yb.chunks_exact_mut(8).enumerate() {
            let ls = iq1_m_scales(&sc, k / 4)[k % 4 / 2];
            let dl = d * ls as f32;
            let (idx, neg) = iq1_m_index(b, k);
            let delta = if neg { -IQ1_DELTA } else { IQ1_DELTA };
            for (v, &g) in y8.iter_mut().zip(&IQ1S_GRID[idx]) {
                *v = dl * (g as f32 + delta);
            }
        }
    }
}
