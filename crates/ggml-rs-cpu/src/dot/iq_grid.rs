//! The grid types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) · Q8_K: scalar references
//! in the order of upstream's `ggml_vec_dot_*_q8_K_generic`. Per super-block the integer sum
//! `Σ_groups (2s + 1) · Σ grid · sign · a` is exact (any order); the floats:
//!
//! - IQ2_*: `sum += (f32(d) · dy) · f32(isum)` per block, then `0.125 · sum`;
//! - IQ3_XXS: the same with `0.25 · sum`; IQ3_S: the same with no final factor;
//! - IQ1_S / IQ1_M: with `I = Σ ls · Σ grid · a` and `J = Σ ls · delta · Σ a` (the ±1 deltas,
//!   from the activations' 16-element sums for IQ1_S), `sum += (f32(d) · dy) · (f32(I) + 0.125 · f32(J))`.

use crate::block::{BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockQ8K};
use crate::quants::iq_grid::{
    IQ1_DELTA, IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, iq1_m_d, iq1_m_index, iq1_m_scales, iq1_m_words, iq1_s_index, iq2_nibble,
    iq2_s_index, iq2_xxs_group, iq3_s_index, le32, sign_bits,
};

/// `Σ grid[j] · a[j]` with element j negated where bit j of `signs` is set
#[inline(always)]
fn signed_dot(grid: &[u8], signs: u8, a: &[i8]) -> i32 {
    let mut s = 0i32;
    for (j, (&g, &q)) in grid.iter().zip(a).enumerate() {
        let p = g as i32 * q as i32;
        s += if signs >> j & 1 != 0 { -p } else { p };
    }
    s
}

/// the scale `2s + 1` of 8-vector `k` of an IQ2_XS / IQ2_S block
#[inline(always)]
fn iq2_scale(scales: &[u8; 8], k: usize) -> i32 {
    2 * iq2_nibble(scales, k) as i32 + 1
}

/// the per-super-block float step of the IQ2 / IQ3 references
#[inline(always)]
fn sum_blocks<W>(x: &[W], y: &[BlockQ8K], d: impl Fn(&W) -> f32, isum: impl Fn(&W, &[i8]) -> i32) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let dd = d(a) * b.d;
        sum += dd * isum(a, &b.qs) as f32;
    }
    sum
}

/// `Σ_groups (2s + 1) · Σ grid · sign · a` of an IQ2_XXS super-block
fn iq2_xxs_isum(a: &BlockIq2Xxs, q: &[i8]) -> i32 {
    (0..8)
        .map(|g| {
            let (idx, aux) = iq2_xxs_group(a, g);
            let ls = 2 * (aux >> 28) as i32 + 1;
            let s: i32 = (0..4).map(|l| signed_dot(&IQ2XXS_GRID[idx[l] as usize], sign_bits(aux >> (7 * l)), &q[32 * g + 8 * l..])).sum();
            s * ls
        })
        .sum()
}

/// the same of an IQ2_XS super-block
fn iq2_xs_isum(a: &BlockIq2Xs, q: &[i8]) -> i32 {
    (0..32)
        .map(|k| {
            let v = a.qs[k];
            iq2_scale(&a.scales, k) * signed_dot(&IQ2XS_GRID[(v & 511) as usize], sign_bits((v >> 9) as u32), &q[8 * k..])
        })
        .sum()
}

/// the same of an IQ2_S super-block
fn iq2_s_isum(a: &BlockIq2S, q: &[i8]) -> i32 {
    (0..32).map(|k| iq2_scale(&a.scales, k) * signed_dot(&IQ2S_GRID[iq2_s_index(a, k)], a.signs[k], &q[8 * k..])).sum()
}

/// `Σ` over 8 weights of two IQ3 grid entries (4 each) with their sign byte
#[inline(always)]
fn iq3_pair(g1: &[u8; 4], g2: &[u8; 4], signs: u8, a: &[i8]) -> i32 {
    signed_dot(g1, signs, &a[..4]) + signed_dot(g2, signs >> 4, &a[4..8])
}

/// the same of an IQ3_XXS super-block
fn iq3_xxs_isum(a: &BlockIq3Xxs, q: &[i8]) -> i32 {
    (0..8)
        .map(|g| {
            let aux = le32(&a.scales_signs, g);
            let ls = 2 * (aux >> 28) as i32 + 1;
            let s: i32 = (0..4)
                .map(|l| {
                    let k = 8 * g + 2 * l;
                    iq3_pair(&IQ3XXS_GRID[a.qs[k] as usize], &IQ3XXS_GRID[a.qs[k + 1] as usize], sign_bits(aux >> (7 * l)), &q[32 * g + 8 * l..])
                })
                .sum();
            s * ls
        })
        .sum()
}

/// the same of an IQ3_S super-block
fn iq3_s_isum(a: &BlockIq3S, q: &[i8]) -> i32 {
    (0..32)
        .map(|m| {
            let ls = 2 * ((a.scales[m / 8] >> (4 * (m % 8 / 4))) & 15) as i32 + 1;
            ls * iq3_pair(&IQ3S_GRID[iq3_s_index(a, 2 * m)], &IQ3S_GRID[iq3_s_index(a, 2 * m + 1)], a.signs[m], &q[8 * m..])
        })
        .sum()
}

/// scalar reference of IQ2_XXS · Q8_K (upstream's `ggml_vec_dot_iq2_xxs_q8_K_generic`)
pub fn iq2_xxs_q8_k_reference(x: &[BlockIq2Xxs], y: &[BlockQ8K]) -> f32 {
    0.125 * sum_blocks(x, y, |a| a.d.to_f32(), iq2_xxs_isum)
}

/// scalar reference of IQ2_XS · Q8_K (upstream's `ggml_vec_dot_iq2_xs_q8_K_generic`)
pub fn iq2_xs_q8_k_reference(x: &[BlockIq2Xs], y: &[BlockQ8K]) -> f32 {
    0.125 * sum_blocks(x, y, |a| a.d.to_f32(), iq2_xs_isum)
}

/// scalar reference of IQ2_S · Q8_K (upstream's `ggml_vec_dot_iq2_s_q8_K_generic`)
pub fn iq2_s_q8_k_reference(x: &[BlockIq2S], y: &[BlockQ8K]) -> f32 {
    0.125 * sum_blocks(x, y, |a| a.d.to_f32(), iq2_s_isum)
}

/// scalar reference of IQ3_XXS · Q8_K (upstream's `ggml_vec_dot_iq3_xxs_q8_K_generic`)
pub fn iq3_xxs_q8_k_reference(x: &[BlockIq3Xxs], y: &[BlockQ8K]) -> f32 {
    0.25 * sum_blocks(x, y, |a| a.d.to_f32(), iq3_xxs_isum)
}

/// scalar reference of IQ3_S · Q8_K (upstream's `ggml_vec_dot_iq3_s_q8_K_generic`)
pub fn iq3_s_q8_k_reference(x: &[BlockIq3S], y: &[BlockQ8K]) -> f32 {
    sum_blocks(x, y, |a| a.d.to_f32(), iq3_s_isum)
}

/// `Σ grid[j] · a[j]` for an IQ1 grid entry
#[inline(always)]
fn iq1_dot(grid: &[i8; 8], a: &[i8]) -> i32 {
    grid.iter().zip(a).map(|(&g, &q)| g as i32 * q as i32).sum()
}

/// the IQ1 per-super-block float step
#[inline(always)]
fn iq1_step(sum: f32, d: f32, dy: f32, i: i32, j: i32) -> f32 {
    sum + d * dy * (i as f32 + IQ1_DELTA * j as f32)
}

/// `(I, J)` of an IQ1_S super-block: `I = Σ ls · Σ grid · a`, `J = Σ ls · delta · Σ a` (the
/// activations' 16-element sums)
fn iq1_s_isums(a: &BlockIq1S, b: &BlockQ8K) -> (i32, i32) {
    let (mut i, mut j) = (0i32, 0i32);
    for g in 0..8 {
        let qh = a.qh[g];
        let ls = 2 * ((qh >> 12) & 7) as i32 + 1;
        let delta = if qh & 0x8000 != 0 { -1 } else { 1 };
        let l: i32 = (0..4).map(|l| iq1_dot(&IQ1S_GRID[iq1_s_index(a, 4 * g + l)], &b.qs[32 * g + 8 * l..])).sum();
        i += ls * l;
        j += ls * delta * (b.bsums[2 * g] as i32 + b.bsums[2 * g + 1] as i32);
    }
    (i, j)
}

/// `(I, J)` of an IQ1_M super-block (the deltas per 8 weights)
fn iq1_m_isums(a: &BlockIq1M, b: &BlockQ8K) -> (i32, i32) {
    let sc = iq1_m_words(a);
    let (mut i, mut j) = (0i32, 0i32);
    for g in 0..8 {
        let ls = iq1_m_scales(&sc, g);
        for l in 0..4 {
            let k = 4 * g + l;
            let (idx, neg) = iq1_m_index(a, k);
            let q = &b.qs[8 * k..8 * k + 8];
            let qsum: i32 = q.iter().map(|&v| v as i32).sum();
            i += ls[l / 2] * iq1_dot(&IQ1S_GRID[idx], q);
            j += ls[l / 2] * if neg { -qsum } else { qsum };
        }
    }
    (i, j)
}

/// scalar reference of IQ1_S · Q8_K (upstream's `ggml_vec_dot_iq1_s_q8_K_generic`)
pub fn iq1_s_q8_k_reference(x: &[BlockIq1S], y: &[BlockQ8K]) -> f32 {
    x.iter().zip(y).fold(0.0, |sum, (a, b)| {
        let (i, j) = iq1_s_isums(a, b);
        iq1_step(sum, a.d.to_f32(), b.d, i, j)
    })
}

/// scalar reference of IQ1_M · Q8_K (upstream's `ggml_vec_dot_iq1_m_q8_K_generic`)
pub fn iq1_m_q8_k_reference(x: &[BlockIq1M], y: &[BlockQ8K]) -> f32 {
    x.iter().zip(y).fold(0.0, |sum, (a, b)| {
        let (i, j) = iq1_m_isums(a, b);
        iq1_step(sum, iq1_m_d(&iq1_m_words(a)), b.d, i, j)
    })
}

// ---------------------------------------------------------------------------------------------
// upstream's tiled K-quant path (x86 builds from AVX2, 8 or more activation rows: `Order::Tiled`)
// ---------------------------------------------------------------------------------------------
//
// Per super-block the exact integer `I` of the signed weights (IQ1: `8 · grid + delta`, so
// `8 I + J`), `r = (f32(d) · c) · f32(I)` with the type's factor c folded into the weight's scale
// (1/8 for IQ2 and IQ1, 1/4 for IQ3_XXS, 1 for IQ3_S), `acc = fma(r, dy, acc)`.

#[inline(always)]
fn tiled_sum<W>(x: &[W], y: &[BlockQ8K], c: f32, d: impl Fn(&W) -> f32, isum: impl Fn(&W, &BlockQ8K) -> i32) -> f32 {
    x.iter().zip(y).fold(0.0, |acc, (a, b)| ((d(a) * c) * isum(a, b) as f32).mul_add(b.d, acc))
}

/// IQ2_XXS · Q8_K in the tiled path's order
pub fn iq2_xxs_q8_k_tiled(x: &[BlockIq2Xxs], y: &[BlockQ8K]) -> f32 {
    tiled_sum(x, y, 0.125, |a| a.d.to_f32(), |a, b| iq2_xxs_isum(a, &b.qs))
}

/// IQ2_XS · Q8_K in the tiled path's order
pub fn iq2_xs_q8_k_tiled(x: &[BlockIq2Xs], y: &[BlockQ8K]) -> f32 {
    tiled_sum(x, y, 0.125, |a| a.d.to_f32(), |a, b| iq2_xs_isum(a, &b.qs))
}

/// IQ2_S · Q8_K in the tiled path's order
pub fn iq2_s_q8_k_tiled(x: &[BlockIq2S], y: &[BlockQ8K]) -> f32 {
    tiled_sum(x, y, 0.125, |a| a.d.to_f32(), |a, b| iq2_s_isum(a, &b.qs))
}

/// IQ3_XXS · Q8_K in the tiled path's order
pub fn iq3_xxs_q8_k_tiled(x: &[BlockIq3Xxs], y: &[BlockQ8K]) -> f32 {
    tiled_sum(x, y, 0.25, |a| a.d.to_f32(), |a, b| iq3_xxs_isum(a, &b.qs))
}

/// IQ3_S · Q8_K in the tiled path's order
pub fn iq3_s_q8_k_tiled(x: &[BlockIq3S], y: &[BlockQ8K]) -> f32 {
    tiled_sum(x, y, 1.0, |a| a.d.to_f32(), |a, b| iq3_s_isum(a, &b.qs))
}

/// IQ1_S · Q8_K in the tiled path's order
pub fn iq1_s_q8_k_tiled(x: &[BlockIq1S], y: &[BlockQ8K]) -> f32 {
    tiled_sum(
        x,
        y,
        0.125,
        |a| a.d.to_f32(),
        |a, b| {
            let (i, j) = iq1_s_isums(a, b);
            8 * i + j
        },
    )
}

/// IQ1_M · Q8_K in the tiled path's order
pub fn iq1_m_q8_k_tiled(x: &[BlockIq1M], y: &[BlockQ8K]) -> f32 {
    tiled_sum(
        x,
        y,
        0.125,
        |a| iq1_m_d(&iq1_m_words(a)),
        |a, b| {
            let (i, j) = iq1_m_isums(a, b);
            8 * i + j
        },
    )
}

// ---------------------------------------------------------------------------------------------
// upstream's x86 order (its AVX2 branches, which its AVX2 and native AVX-512 builds both take)
// ---------------------------------------------------------------------------------------------
//
// Per super-block, 8 i32 lanes: lane `2v + h` sums, over the 8 groups of 32, the scaled products
// of half `h` (elements 4h..4h + 4) of vector `v` (of 4) of the group; the sign goes on the
// activation as a byte (`sign_epi8`: −(−128) stays −128). Then per lane `acc = fma(d · dy, f32(lane),
// acc)` and upstream's horizontal sum ([`super::q8_0::hsum8`]) times the type's factor.

/// one 8-vector of a grid super-block as the x86 kernels see it: the magnitudes of its weights,
/// which of them are negative, its scale
type Vector = ([u8; 8], u8, i32);

/// the 8 lanes of a super-block (module's text above); `vector(k)` describes 8-vector `k` (of 32)
#[inline(always)]
fn x86_lanes(q8: &[i8], vector: impl Fn(usize) -> Vector) -> [i32; 8] {
    let mut lanes = [0i32; 8];
    for k in 0..32 {
        let (w, neg, ls) = vector(k);
        let q = &q8[8 * k..8 * k + 8];
        for h in 0..2 {
            let s: i32 = (4 * h..4 * h + 4)
                .map(|j| {
                    let a = if neg >> j & 1 != 0 { q[j].wrapping_neg() } else { q[j] };
                    w[j] as i32 * a as i32
                })
                .sum();
            lanes[2 * (k % 4) + h] += ls * s;
        }
    }
    lanes
}

/// `acc = fma(d, f32(lane), acc)` per lane
#[inline(always)]
fn fma_lanes(acc: &mut [f32; 8], d: f32, lanes: &[i32; 8]) {
    for (a, &l) in acc.iter_mut().zip(lanes) {
        *a = d.mul_add(l as f32, *a);
    }
}

/// the IQ2 / IQ3 x86 order: `factor · hsum8(acc)` over the super-blocks
#[inline(always)]
fn x86_sum<W>(x: &[W], y: &[BlockQ8K], factor: f32, d: impl Fn(&W) -> f32, vector: impl Fn(&W, usize) -> Vector) -> f32 {
    let mut acc = [0f32; 8];
    for (a, b) in x.iter().zip(y) {
        fma_lanes(&mut acc, d(a) * b.d, &x86_lanes(&b.qs, |k| vector(a, k)));
    }
    factor * super::q8_0::hsum8(acc)
}

/// an 8-byte grid entry from two 4-byte ones
#[inline(always)]
fn pair(g1: &[u8; 4], g2: &[u8; 4]) -> [u8; 8] {
    [g1[0], g1[1], g1[2], g1[3], g2[0], g2[1], g2[2], g2[3]]
}

/// IQ2_XXS · Q8_K in upstream's x86 order (`ggml_vec_dot_iq2_xxs_q8_K`'s AVX2 branch)
pub fn iq2_xxs_q8_k_x86(x: &[BlockIq2Xxs], y: &[BlockQ8K]) -> f32 {
    x86_sum(
        x,
        y,
        0.125,
        |a| a.d.to_f32(),
        |a, k| {
            let (idx, aux) = iq2_xxs_group(a, k / 4);
            (IQ2XXS_GRID[idx[k % 4] as usize], sign_bits(aux >> (7 * (k % 4))), 2 * (aux >> 28) as i32 + 1)
        },
    )
}

/// IQ2_XS · Q8_K in upstream's x86 order
pub fn iq2_xs_q8_k_x86(x: &[BlockIq2Xs], y: &[BlockQ8K]) -> f32 {
    x86_sum(x, y, 0.125, |a| a.d.to_f32(), |a, k| (IQ2XS_GRID[(a.qs[k] & 511) as usize], sign_bits((a.qs[k] >> 9) as u32), iq2_scale(&a.scales, k)))
}

/// IQ2_S · Q8_K in upstream's x86 order
pub fn iq2_s_q8_k_x86(x: &[BlockIq2S], y: &[BlockQ8K]) -> f32 {
    x86_sum(x, y, 0.125, |a| a.d.to_f32(), |a, k| (IQ2S_GRID[iq2_s_index(a, k)], a.signs[k], iq2_scale(&a.scales, k)))
}

/// IQ3_XXS · Q8_K in upstream's x86 order
pub fn iq3_xxs_q8_k_x86(x: &[BlockIq3Xxs], y: &[BlockQ8K]) -> f32 {
    x86_sum(
        x,
        y,
        0.25,
        |a| a.d.to_f32(),
        |a, k| {
            let aux = le32(&a.scales_signs, k / 4);
            let (g1, g2) = (&IQ3XXS_GRID[a.qs[2 * k] as usize], &IQ3XXS_GRID[a.qs[2 * k + 1] as usize]);
            (pair(g1, g2), sign_bits(aux >> (7 * (k % 4))), 2 * (aux >> 28) as i32 + 1)
        },
    )
}

/// IQ3_S · Q8_K in upstream's x86 order
pub fn iq3_s_q8_k_x86(x: &[BlockIq3S], y: &[BlockQ8K]) -> f32 {
    x86_sum(
        x,
        y,
        1.0,
        |a| a.d.to_f32(),
        |a, k| {
            let ls = 2 * ((a.scales[k / 8] >> (4 * (k % 8 / 4))) & 15) as i32 + 1;
            (pair(&IQ3S_GRID[iq3_s_index(a, 2 * k)], &IQ3S_GRID[iq3_s_index(a, 2 * k + 1)]), a.signs[k], ls)
        },
    )
}

/// an IQ1 grid entry as magnitudes and negative flags
#[inline(always)]
fn iq1_vector(grid: &[i8; 8], ls: i32) -> Vector {
    let mut neg = 0u8;
    for (j, &g) in grid.iter().enumerate() {
        neg |= ((g < 0) as u8) << j;
    }
    (grid.map(|g| g.unsigned_abs()), neg, ls)
}

/// IQ1_S · Q8_K in upstream's x86 order (`ggml_vec_dot_iq1_s_q8_K`'s AVX2 branch): the grid part
/// in the 8 lanes (`fma(d, f32(lane), acc)`, d = dy · f32(d)), the delta part
/// `J = Σ ls · ±Σ a` (the activations' 16-element sums) as `accj = fma(d, f32(J), accj)` (a
/// scalar its builds fuse), at the end `hsum8(acc) + accj / 8`
pub fn iq1_s_q8_k_x86(x: &[BlockIq1S], y: &[BlockQ8K]) -> f32 {
    let (mut acc, mut accj) = ([0f32; 8], 0f32);
    for (a, b) in x.iter().zip(y) {
        let ls = |g: usize| 2 * ((a.qh[g] >> 12) & 7) as i32 + 1;
        let lanes = x86_lanes(&b.qs, |k| iq1_vector(&IQ1S_GRID[iq1_s_index(a, k)], ls(k / 4)));
        let j: i32 = (0..8)
            .map(|g| {
                let delta = if a.qh[g] & 0x8000 != 0 { -1 } else { 1 };
                (b.bsums[2 * g] as i32 + b.bsums[2 * g + 1] as i32) * delta * ls(g)
            })
            .sum();
        let d = b.d * a.d.to_f32();
        fma_lanes(&mut acc, d, &lanes);
        accj = d.mul_add(j as f32, accj);
    }
    super::q8_0::hsum8(acc) + IQ1_DELTA * accj
}

/// IQ1_M · Q8_K in upstream's x86 order: the grid part and the delta part (`±a` per element,
/// signed as bytes) each in 8 lanes with their fmas, `hsum8(grid) + hsum8(delta) / 8`
pub fn iq1_m_q8_k_x86(x: &[BlockIq1M], y: &[BlockQ8K]) -> f32 {
    let (mut acc1, mut acc2) = ([0f32; 8], [0f32; 8]);
    for (a, b) in x.iter().zip(y) {
        let sc = iq1_m_words(a);
        let ls = |k: usize| iq1_m_scales(&sc, k / 4)[k % 4 / 2];
        let lanes1 = x86_lanes(&b.qs, |k| iq1_vector(&IQ1S_GRID[iq1_m_index(a, k).0], ls(k)));
        let lanes2 = x86_lanes(&b.qs, |k| ([1; 8], if iq1_m_index(a, k).1 { 255 } else { 0 }, ls(k)));
        let d = b.d * iq1_m_d(&sc);
        fma_lanes(&mut acc1, d, &lanes1);
        fma_lanes(&mut acc2, d, &lanes2);
    }
    super::q8_0::hsum8(acc1) + IQ1_DELTA * super::q8_0::hsum8(acc2)
}
