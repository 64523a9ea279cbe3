//! The prompt path of FLASH_ATTN_EXT: blocks of up to [`QB`] queries against tiles of [`KB`] KV
//! positions, both products through the float GEMM tiles MUL_MAT uses ([`crate::fgemm`]).
//!
//! Per block (the query rows of one head, or of the heads sharing a K/V head when the rows are
//! few) and KV tile:
//! - which positions each query sees (its mask row not `-inf`, as a 64-bit set), so a tile, a
//!   32-position half of it or a sub-tile of 8 queries with nothing to see costs nothing (causal
//!   masks: about half the tiles of a prompt);
//! - the tile's K rows repacked 32 at a time (F16 / BF16 kept in 16 bits) and `S = Q·Kᵀ` by
//!   the set's float tiles ([`crate::kernels::Gemms::fgemm`]), 8 queries per call;
//! - per query row: `s·scale` (through `softcap·tanh` when soft-capped) plus `slope·mask`, the
//!   running maximum, the accumulator rescaled when it grows, the row turned into weights
//!   `exp(s - max)` and summed;
//! - the V rows repacked as 32-wide strips of the head dimension (the GEMM's weight layout is
//!   V's own, a strip at a time) and `O += P·V` by the same tiles, over the positions the
//!   sub-tile sees.
//!
//! Q stays f32 (upstream's tiled CPU path does the same); every sum is f32 with fused
//! multiply-adds. The node's scale, ALiBi slope, soft-cap, sinks and masks are those of the
//! row-by-row path in `attn.rs`, whose `finish_group` writes the result.
//!
//! This module owns the block loop and its per-row kernels; the thread split, the refusals and
//! the row-by-row paths stay in `attn.rs`.

use super::{Ctx, Group, finish_group};
use crate::GgmlType;
use crate::fgemm;
use crate::ops::View;

/// queries per block (upstream's tiled CPU path takes 64 too)
pub(super) const QB: usize = 64;
/// KV positions per tile: two 32-row blocks of the GEMM, one bit each in a `u64`
pub(super) const KB: usize = crate::accum::KB;
/// queries per GEMM call
const SUB: usize = fgemm::MAX_COLS;
const R: usize = fgemm::ROWS;
const _: () = assert!(KB == 2 * R && KB <= 64 && QB.is_multiple_of(SUB));

/// fewest query rows for which the blocks compute the node whatever the thread count; with
/// fewer (token generation) only when there are at least as many blocks as threads (otherwise
/// the row-by-row path, which splits the KV positions over the threads)
pub(super) const MIN_ROWS: i64 = 8;

/// queries of a block below which the scores are dot products row by row rather than the GEMM
/// on repacked K (repacking a K row costs more than the one or two dots it would serve)
const DIRECT: usize = 4;

/// whether the blocks compute this node on `threads`: float K and V the GEMM tiles take, a set
/// with the float tiles (x86 from AVX2; not the reference set of use_ref), enough query rows or
/// blocks
pub(super) fn applies(kt: GgmlType, vt: GgmlType, q: &View, k: &View, v: &View, kern: &crate::kernels::Kernels, threads: usize) -> bool {
    fgemm::supports(kt) && fgemm::supports(vt) && kern.gemm.fgemm.is_some() && (q.ne[1] >= MIN_ROWS || Blocks::of(q, k, v).units(q) >= threads as i64)
}

/// how the queries are cut into blocks
#[derive(Clone, Copy)]
pub(super) struct Blocks {
    /// heads per block (they share a K and a V head)
    hg: i64,
    /// query rows per block
    rows: i64,
    row_blocks: i64,
    head_groups: i64,
}

impl Blocks {
    pub(super) fn of(q: &View, k: &View, v: &View) -> Blocks {
        let (rk, rv) = (q.ne[2] / k.ne[2], q.ne[2] / v.ne[2]);
        // heads grouped only as far as the rows leave room in a block
        let room = (QB as i64 / q.ne[1].clamp(1, QB as i64)).max(1);
        let hg = if rk == rv { (1..=rk.min(room)).rev().find(|h| rk % h == 0).unwrap_or(1) } else { 1 };
        let rows = QB as i64 / hg;
        Blocks { hg, rows, row_blocks: (q.ne[1] + rows - 1) / rows, head_groups: q.ne[2] / hg }
    }

    pub(super) fn units(&self, q: &View) -> i64 {
        self.row_blocks * self.head_groups * q.ne[3]
    }

    /// block `u`: row blocks innermost, so a contiguous range of blocks is whole heads (the
    /// blocks of a causal prompt differ in cost along the rows)
    pub(super) fn group(&self, q: &View, u: i64) -> Group {
        let (b, rest) = (u % self.row_blocks, u / self.row_blocks);
        let (hgi, iq3) = (rest % self.head_groups, rest / self.head_groups);
        let iq1 = b * self.rows;
        Group { iq1, nr: (q.ne[1] - iq1).min(self.rows), h0: hgi * self.hg, hg: self.hg, iq3 }
    }
}

/// a chunk's work areas, in f32 words: the block's Q rows, scores, accumulators, running maxima
/// and sums, then the repacked K tile and V strips (16- or 32-bit elements)
pub(super) struct Work {
    dk: usize,
    dv: usize,
    kb: usize,
    vb: usize,
}

impl Work {
    pub(super) fn new(kt: GgmlType, vt: GgmlType, dk: usize, dv: usize) -> Work {
        Work { dk, dv, kb: KB * dk * fgemm::elem_bytes(kt), vb: dv.div_ceil(R) * KB * R * fgemm::elem_bytes(vt) }
    }

    pub(super) fn words(&self) -> usize {
        QB * (self.dk + KB + self.dv + 2) + (self.kb + self.vb).div_ceil(4)
    }
}

struct Areas<'a> {
    q: &'a mut [f32],
    s: &'a mut [f32],
    o: &'a mut [f32],
    m: &'a mut [f32],
    l: &'a mut [f32],
    kpack: &'a mut [u8],
    vpack: &'a mut [u8],
}

fn areas<'a>(all: &'a mut [f32], w: &Work) -> Areas<'a> {
    let (q, rest) = all.split_at_mut(QB * w.dk);
    let (s, rest) = rest.split_at_mut(QB * KB);
    let (o, rest) = rest.split_at_mut(QB * w.dv);
    let (m, rest) = rest.split_at_mut(QB);
    let (l, rest) = rest.split_at_mut(QB);
    // SAFETY: the rest of this chunk's f32 words seen as bytes (any bit pattern is valid for both)
    let bytes = unsafe { std::slice::from_raw_parts_mut(rest.as_mut_ptr() as *mut u8, rest.len() * 4) };
    let (kpack, rest) = bytes.split_at_mut(w.kb);
    Areas { q, s, o, m, l, kpack, vpack: &mut rest[..w.vb] }
}

/// the block `g` over every KV position, normalised and written to the output
pub(super) fn block(c: &Ctx, g: &Group, all: &mut [f32], w: &Work) {
    let a = areas(all, w);
    let (q, k, v, p) = (c.q, c.k, c.v, c.p);
    let (kt, vt, _) = c.types;
    let (dk, dv) = (w.dk, w.dv);
    let (keb, veb) = (fgemm::elem_bytes(kt), fgemm::elem_bytes(vt));
    let tile = p.k.gemm.fgemm.expect("applies: the set has the float tiles");
    let nq = g.nq();
    let n_kv = k.ne[1];
    for i in 0..nq {
        let (iq1, iq2) = g.query(i);
        let row = super::row_bytes(q.row(iq1, iq2, g.iq3), GgmlType::F32, dk as i64);
        a.q[i * dk..(i + 1) * dk].copy_from_slice(crate::block::as_blocks(row, "flash_attn_ext q"));
    }
    let (ik2, ik3) = (g.h0 / (q.ne[2] / k.ne[2]), g.iq3 / (q.ne[3] / k.ne[3]));
    let (iv2, iv3) = (g.h0 / (q.ne[2] / v.ne[2]), g.iq3 / (q.ne[3] / v.ne[3]));
    let mut slopes = [1f32; QB];
    let mut mrows = [std::ptr::null::<u16>(); QB];
    for i in 0..nq {
        let (iq1, iq2) = g.query(i);
        slopes[i] = super::alibi_slope(p.max_bias, q.ne[2] as u32, iq2 as u32);
        if let Some(m) = c.mask {
            mrows[i] = m.row(iq1, iq2 % m.ne[2], g.iq3 % m.ne[3]) as *const u16;
        }
    }
    a.o[..nq * dv].fill(0.0);
    a.m[..nq].fill(f32::NEG_INFINITY);
    a.l[..nq].fill(0.0);
    let mut live = [0u64; QB];
    let mut ic0 = 0i64;
    while ic0 < n_kv {
        let n = (n_kv - ic0).min(KB as i64) as usize;
        let all_n = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let mut any = 0u64;
        for i in 0..nq {
            live[i] = if mrows[i].is_null() {
                all_n
            } else {
                // SAFETY: positions ic0 .. ic0 + n of a packed F16 mask row of >= n_kv positions
                // (refusal checks)
                unsafe { p.k.acc.live_bits(mrows[i].add(ic0 as usize), n) }
            };
            any |= live[i];
        }
        if any == 0 {
            ic0 += n as i64;
            continue;
        }
        // (upstream's order: every score is the GEMM's one FMA chain, whatever the row count)
        let direct = nq < DIRECT && super::rows::fast_order();
        if direct {
            // few queries: each query dotted with the K rows it sees
            let k0 = k.row(ic0, ik2, ik3);
            for i in 0..nq {
                // SAFETY: the tile's n <= KB packed K rows of dk elements of kt, nb[1] apart
                // (refusal checks), live positions below n
                unsafe { p.k.acc.dot_rows(kt, &a.q[i * dk..(i + 1) * dk], k0, k.nb[1], live[i], &mut a.s[i * KB..(i + 1) * KB]) };
            }
        }
        // the K rows of the halves someone sees, repacked
        for h in 0..2 {
            let lo = h * R;
            if direct || lo >= n || (any >> lo) as u32 == 0 {
                continue;
            }
            let cnt = (n - lo).min(R);
            let mut rows: [&[u8]; R] = [&[]; R];
            for (j, r) in rows.iter_mut().enumerate().take(cnt) {
                *r = super::row_bytes(k.row(ic0 + (lo + j) as i64, ik2, ik3), kt, dk as i64);
            }
            fgemm::repack(kt, &rows[..cnt], dk, &mut a.kpack[h * R * dk * keb..(h + 1) * R * dk * keb], p.k.gemm.fgemm_repack16);
        }
        // the V rows the block sees, as strips of 32 of the head dimension
        let (vlo, vhi) = (any.trailing_zeros() as usize, 64 - any.leading_zeros() as usize);
        for j in vlo..vhi {
            let vrow = super::row_bytes(v.row(ic0 + j as i64, iv2, iv3), vt, dv as i64);
            match veb {
                2 => pack_strips::<{ 2 * R }>(vrow, a.vpack, j),
                _ => pack_strips::<{ 4 * R }>(vrow, a.vpack, j),
            }
        }
        let mut i0 = 0;
        while i0 < nq {
            let m = (nq - i0).min(SUB);
            let sub = live[i0..i0 + m].iter().fold(0u64, |x, y| x | y);
            if sub == 0 {
                i0 += m;
                continue;
            }
            let mut xs = [std::ptr::null::<f32>(); SUB];
            let mut outs = [std::ptr::null_mut::<f32>(); SUB];
            for h in 0..2 {
                let lo = h * R;
                if direct || lo >= n || (sub >> lo) as u32 == 0 {
                    continue;
                }
                for t in 0..m {
                    xs[t] = a.q[(i0 + t) * dk..].as_ptr();
                    outs[t] = a.s[(i0 + t) * KB + lo..].as_mut_ptr();
                }
                // SAFETY: the node's set's tiles (applies; its table is built on a CPU with them);
                // the half's R·dk repacked elements; each query row dk floats; each score row
                // KB - lo >= R floats from lo
                unsafe { tile(kt, a.kpack[h * R * dk * keb..].as_ptr(), dk, &xs[..m], &outs[..m], (n - lo).min(R), false) };
            }
            for i in i0..i0 + m {
                softmax_step(c, &mut a.s[i * KB..(i + 1) * KB], live[i], mrows[i], slopes[i], &mut a.o[i * dv..(i + 1) * dv], &mut a.m[i], &mut a.l[i], ic0);
            }
            // O += P·V over the positions the sub-tile sees (the weights of the rest are 0)
            let (lo, hi) = (sub.trailing_zeros() as usize, 64 - sub.leading_zeros() as usize);
            for b in 0..dv.div_ceil(R) {
                for t in 0..m {
                    xs[t] = a.s[(i0 + t) * KB + lo..].as_ptr();
                    outs[t] = a.o[(i0 + t) * dv + b * R..].as_mut_ptr();
                }
                // SAFETY: the node's set's tiles (as above); strip b's positions lo..hi repacked above (hi - lo elements of
                // R each, vlo <= lo, hi <= vhi); each weight row hi - lo floats from lo; each
                // accumulator (dv - 32b).min(R) floats from 32b
                unsafe { tile(vt, a.vpack[(b * KB + lo) * R * veb..].as_ptr(), hi - lo, &xs[..m], &outs[..m], (dv - b * R).min(R), true) };
            }
            i0 += m;
        }
        ic0 += n as i64;
    }
    finish_group(c, g, a.o, a.m, a.l, !super::rows::fast_order());
}

/// position `j`'s V row (`vrow`) cut into the strips of the packed V tile: strip `b` holds R
/// elements of every position, `B` bytes each, the last strip zero-padded (fixed-size copies:
/// a call to memcpy per 64 bytes cost more than the copy)
fn pack_strips<const B: usize>(vrow: &[u8], vpack: &mut [u8], j: usize) {
    let mut strips = vrow.chunks_exact(B);
    for (b, src) in strips.by_ref().enumerate() {
        let at = (b * KB + j) * B;
        let dst: &mut [u8; B] = (&mut vpack[at..at + B]).try_into().expect("B bytes");
        *dst = src.try_into().expect("B bytes");
    }
    let tail = strips.remainder();
    if !tail.is_empty() {
        let at = ((vrow.len() / B) * KB + j) * B;
        let dst = &mut vpack[at..at + B];
        dst[..tail.len()].copy_from_slice(tail);
        dst[tail.len()..].fill(0);
    }
}

/// one query row's step of the online softmax over a tile: the scores scaled, soft-capped and
/// masked (positions it does not see to `-inf`), its maximum and accumulator updated, the row
/// turned into weights (0 where not seen, the whole row when it sees nothing)
#[allow(clippy::too_many_arguments)]
fn softmax_step(c: &Ctx, s: &mut [f32], live: u64, mrow: *const u16, slope: f32, o: &mut [f32], m: &mut f32, l: &mut f32, ic0: i64) {
    if live == 0 {
        s.fill(0.0);
        return;
    }
    let p = c.p;
    let mut scale = p.scale;
    if p.softcap != 0.0 {
        for (j, x) in s.iter_mut().enumerate() {
            if live >> j & 1 == 1 {
                *x = p.softcap * (*x * scale).tanh();
            }
        }
        scale = 1.0;
    }
    let mp = if mrow.is_null() { mrow } else { mrow.wrapping_add(ic0 as usize) };
    // SAFETY: s holds KB floats; the mask row KB positions from ic0 where live
    let tmax = unsafe { p.k.acc.prep_row(s, live, mp, slope, scale, !super::rows::fast_order()) };
    if tmax == f32::NEG_INFINITY {
        s.fill(0.0);
        return;
    }
    if tmax > *m {
        if *m != f32::NEG_INFINITY {
            let ms = (*m - tmax).exp();
            p.k.vec.scale(o, ms);
            *l *= ms;
        }
        *m = tmax;
    }
    if super::rows::fast_order() {
        *l += p.k.vec.exp_sub_sum(s, *m) as f32;
    } else {
        // upstream's tiled path: its softmax row (`ggml_vec_soft_max_f32`) over the 64 positions,
        // the sum joined in f64
        *l = (f64::from(*l) + p.k.vec.softmax_exp(s, *m)) as f32;
    }
}
