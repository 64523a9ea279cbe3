//! Family `copy`: DUP, CPY, CONT, SET, GET_ROWS, GET_ROWS_BACK, SET_ROWS, DIAG_MASK_INF/ZERO; conversions between F32, F16, BF16, I32 and the quantized types.
//!
//! DUP / CPY / CONT copy element `k` of the source, in ggml's logical order (dimension 0
//! fastest), to element `k` of the destination, whatever the two shapes and strides: as
//! upstream's `ggml_compute_forward_dup`. Same types copy bytes (blocks for the quantized types);
//! F32 / F16 / BF16 / I32 convert through f32; a float source quantizes whole rows into a
//! contiguous quantized destination (upstream's `from_float`, Q8_0 the x86 way); a quantized
//! source dequantizes block by block into F32.

pub mod elem;
mod rows;

use elem::{Scalar, chunk_range, is_contiguous, offset, rows_dense, same_shape, split, type_size, unravel};

use super::{Exec, Family, Node, Op, OpError, View, raw_type};
use crate::GgmlType;

pub const FAMILY: Family = Family {
    name: "copy",
    ops: &[Op::Dup, Op::Cpy, Op::Cont, Op::Set, Op::GetRows, Op::GetRowsBack, Op::SetRows, Op::DiagMaskInf, Op::DiagMaskZero],
    supports,
    compute,
};

fn supports(node: &Node) -> bool {
    let Ok(s) = node.src(0) else { return false };
    if !elem::sane(s) || !elem::sane(&node.dst) {
        return false;
    }
    match node.op {
        // upstream's CPU refuses a CPY into a type without from_float (the grid types), even
        // from its own type; DUP and CONT of them it computes
        Op::Cpy if GgmlType::from_raw(node.dst.ty).is_some_and(|t| !t.has_from_float()) => false,
        Op::Dup | Op::Cpy | Op::Cont => dup_supported(s, &node.dst),
        Op::Set => set_supported(node).is_some(),
        Op::GetRows => rows::get_rows_supported(node),
        Op::SetRows => rows::set_rows_supported(node),
        Op::GetRowsBack => rows::get_rows_back_supported(node),
        Op::DiagMaskInf | Op::DiagMaskZero => diag_mask_supported(node),
        _ => false,
    }
}

fn compute(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    match node.op {
        Op::Dup | Op::Cpy | Op::Cont => {
            dup(node.src(0)?, &node.dst, exec);
            Ok(())
        }
        Op::Set => set(node, exec),
        Op::GetRows => rows::get_rows(node, exec),
        Op::SetRows => rows::set_rows(node, exec),
        Op::GetRowsBack => rows::get_rows_back(node, exec),
        Op::DiagMaskInf => diag_mask(node, exec, f32::NEG_INFINITY),
        Op::DiagMaskZero => diag_mask(node, exec, 0.0),
        _ => Err(OpError::new(node, "not an op of the copy family")),
    }
}

/// the pairs upstream's dup computes (anything else aborts there)
fn dup_supported(s: &View, d: &View) -> bool {
    let (Some((sb, _)), Some((db, _))) = (type_size(s.ty), type_size(d.ty)) else { return false };
    if s.nelements() != d.nelements() || s.ne[0] % sb as i64 != 0 || d.ne[0] % db as i64 != 0 {
        return false;
    }
    if s.ty == d.ty {
        return true;
    }
    match (Scalar::of(s.ty), Scalar::of(d.ty)) {
        (Some(Scalar::I32), Some(b)) => b == Scalar::F32,
        (Some(a), Some(Scalar::I32)) => a == Scalar::F32,
        (Some(_), Some(_)) => true,
        // float rows quantized into a contiguous destination
        (Some(a), None) => a != Scalar::I32 && GgmlType::from_raw(d.ty).is_some_and(|t| t.quantizes_as_upstream()) && is_contiguous(d) && rows_dense(s),
        // blocks dequantized into F32 rows
        (None, Some(Scalar::F32)) => GgmlType::from_raw(s.ty).is_some() && rows_dense(s) && d.nb[0] == 4 && (d.ne[0] % sb as i64 == 0 || is_contiguous(d)),
        _ => false,
    }
}

/// a position in a tensor's logical order, stepped one unit (element or block) at a time
#[derive(Clone, Copy)]
struct Cursor {
    i: [usize; 4],
    ne: [usize; 4],
}

impl Cursor {
    /// unit `k` of a tensor of `ne` units per dimension
    fn at(k: usize, ne: [usize; 4]) -> Cursor {
        let i0 = k % ne[0];
        let r = k / ne[0];
        let i1 = r % ne[1];
        let r = r / ne[1];
        Cursor { i: [i0, i1, r % ne[2], r / ne[2]], ne }
    }

    #[inline]
    fn step(&mut self) {
        for d in 0..4 {
            self.i[d] += 1;
            if self.i[d] < self.ne[d] || d == 3 {
                return;
            }
            self.i[d] = 0;
        }
    }

    #[inline]
    fn offset(&self, v: &View) -> usize {
        offset(v, self.i[0], self.i[1], self.i[2], self.i[3])
    }
}

/// units per dimension: blocks in dimension 0, elements elsewhere
fn units(v: &View) -> [usize; 4] {
    let (blck, _) = type_size(v.ty).unwrap_or((1, 1));
    [v.ne[0] as usize / blck, v.ne[1] as usize, v.ne[2] as usize, v.ne[3] as usize]
}

/// DUP for a supported pair (see [`dup_supported`])
pub(super) fn dup(s: &View, d: &View, exec: &mut Exec) {
    if s.nelements() == 0 {
        return;
    }
    let (s, d) = (*s, *d);
    match (Scalar::of(s.ty), Scalar::of(d.ty)) {
        _ if s.ty == d.ty => dup_bytes(&s, &d, exec),
        (Some(a), Some(b)) => dup_convert(a, b, &s, &d, exec),
        (Some(a), None) => dup_quantize(a, &s, &d, exec),
        (None, _) => dup_dequantize(&s, &d, exec),
    }
}

fn dup_bytes(s: &View, d: &View, exec: &mut Exec) {
    let (_, size) = type_size(s.ty).expect("dup_bytes: a known type");
    let (su, du) = (units(s), units(d));
    let n_units: usize = su.iter().product();
    if is_contiguous(s) && is_contiguous(d) {
        // one memcpy per chunk of units
        let (n_chunks, per) = split(n_units, exec.n_threads(), 1 << 14);
        exec.parallel(n_chunks, |c| {
            let r = chunk_range(c, per, n_units);
            // SAFETY: both tensors hold n_units dense units; chunks are disjoint ranges of the
            // destination; ptr::copy allows the source to be the destination itself
            unsafe { std::ptr::copy(s.data.add(r.start * size), d.data.add(r.start * size), r.len() * size) };
        });
        return;
    }
    let rows = su[1] * su[2] * su[3];
    let (n_chunks, per) = split(rows, exec.n_threads(), 16);
    let dense = s.nb[0] == size && d.nb[0] == size;
    exec.parallel(n_chunks, |c| {
        for r in chunk_range(c, per, rows) {
            let (i1, i2, i3) = unravel(r, su[1], su[2]);
            let src_row = offset(s, 0, i1, i2, i3);
            let mut cur = Cursor::at(r * su[0], du);
            let mut k = 0;
            while k < su[0] {
                // a run: as many units as are left in both the source row and the destination row
                let run = if dense { (su[0] - k).min(du[0] - cur.i[0]) } else { 1 };
                // SAFETY: `run` units inside the source row and inside the destination row
                // (both dense when run > 1); each destination unit belongs to exactly one source
                // row's range, and rows are split among chunks, so writes are disjoint
                unsafe { std::ptr::copy(s.data.add(src_row + k * s.nb[0]), d.data.add(cur.offset(d)), run * size) };
                k += run;
                for _ in 0..run {
                    cur.step();
                }
            }
        }
    });
}

fn dup_convert(a: Scalar, b: Scalar, s: &View, d: &View, exec: &mut Exec) {
    let (su, du) = (units(s), units(d));
    let rows = su[1] * su[2] * su[3];
    let (n_chunks, per) = split(rows, exec.n_threads(), 16);
    let (s, d) = (*s, *d);
    exec.parallel(n_chunks, |c| {
        for r in chunk_range(c, per, rows) {
            let (i1, i2, i3) = unravel(r, su[1], su[2]);
            let src_row = offset(&s, 0, i1, i2, i3);
            let mut cur = Cursor::at(r * su[0], du);
            for k in 0..su[0] {
                // SAFETY: element k of the source row and the destination element the logical
                // order maps it to, both inside their tensors; destination elements are disjoint
                // across rows and so across chunks
                unsafe { b.store(d.data.add(cur.offset(&d)), a.load(s.data.add(src_row + k * s.nb[0]))) };
                cur.step();
            }
        }
    });
}

fn dup_quantize(a: Scalar, s: &View, d: &View, exec: &mut Exec) {
    let qt = GgmlType::from_raw(d.ty).expect("dup_quantize: a block type");
    let n = s.ne[0] as usize;
    let rs = qt.row_size(n);
    let rows = s.nrows() as usize;
    let (n_chunks, per) = split(rows, exec.n_threads(), 4);
    let (s, d) = (*s, *d);
    exec.parallel(n_chunks, |c| {
        // whole views into the closure (a field of one alone is a bare pointer, not Sync)
        let (s, d) = (&s, &d);
        let mut x = vec![0f32; n];
        for r in chunk_range(c, per, rows) {
            let (i1, i2, i3) = unravel(r, s.ne[1] as usize, s.ne[2] as usize);
            let row = offset(s, 0, i1, i2, i3);
            for (k, v) in x.iter_mut().enumerate() {
                // SAFETY: element k of a source row (dense rows, supports)
                *v = unsafe { a.load(s.data.add(row + k * a.size())) };
            }
            // SAFETY: the destination is contiguous (supports), so source row r is its bytes
            // r·rs .. (r+1)·rs; rows are disjoint across chunks
            unsafe { elem::quantize_from(qt, &x, d.data.add(r * rs)) };
        }
    });
}

fn dup_dequantize(s: &View, d: &View, exec: &mut Exec) {
    let qt = GgmlType::from_raw(s.ty).expect("dup_dequantize: a block type");
    let qk = qt.block_size();
    let n_blocks = s.nelements() as usize / qk;
    let (n_chunks, per) = split(n_blocks, exec.n_threads(), 64);
    let (s, d) = (*s, *d);
    let su = units(&s);
    let dn = [d.ne[0] as usize, d.ne[1] as usize, d.ne[2] as usize, d.ne[3] as usize];
    exec.parallel(n_chunks, |c| {
        for b in chunk_range(c, per, n_blocks) {
            let src = Cursor::at(b, su);
            let dst = Cursor::at(b * qk, dn);
            // SAFETY: block b of the source; its qk values land in one destination row (ne0 a
            // multiple of qk) or the contiguous destination's next qk floats (supports);
            // blocks are disjoint across chunks
            unsafe { elem::dequantize_to(qt, s.data.add(src.offset(&s)), qk, d.data.add(dst.offset(&d))) };
        }
    });
}

/// SET's parameters: (nb1, nb2, nb3, offset, inplace), checked against the destination's size
fn set_supported(node: &Node) -> Option<(usize, usize, usize, usize, bool)> {
    let (s0, d) = (node.src(0).ok()?, &node.dst);
    let s1 = node.src(1).ok()?;
    let t = Scalar::of(s0.ty).filter(|t| matches!(t, Scalar::F32 | Scalar::I32))?;
    if s1.ty != s0.ty || d.ty != s0.ty || !same_shape(s0, d) || !is_contiguous(s0) || !is_contiguous(d) || s1.nb[0] != t.size() || !elem::sane(s1) {
        return None;
    }
    let p: Vec<usize> = (0..4).map(|i| usize::try_from(node.param_i32(i)).ok()).collect::<Option<_>>()?;
    let (nb, off) = ([t.size(), p[0], p[1], p[2]], p[3]);
    if s1.nelements() > 0 {
        let last: usize = (0..4).map(|i| (s1.ne[i] as usize - 1) * nb[i]).sum();
        if off + last + t.size() > d.nelements() as usize * t.size() {
            return None;
        }
    }
    Some((p[0], p[1], p[2], off, node.param_i32(4) != 0))
}

/// SET: the destination is src0 with the region (offset, strides nb1..nb3 of the parameters)
/// overwritten by src1
fn set(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    let (nb1, nb2, nb3, off, inplace) = set_supported(node).ok_or_else(|| OpError::new(node, "parameters outside the destination"))?;
    let (s0, s1, d) = (*node.src(0)?, *node.src(1)?, node.dst);
    if !inplace && s0.data != d.data {
        dup(&s0, &d, exec);
    }
    let size = 4;
    let rows = s1.nrows() as usize;
    let (n_chunks, per) = split(rows, exec.n_threads(), 16);
    exec.parallel(n_chunks, |c| {
        // whole views into the closure (a field of one alone is a bare pointer, not Sync)
        let (s1, d) = (&s1, &d);
        for r in chunk_range(c, per, rows) {
            let (i1, i2, i3) = unravel(r, s1.ne[1] as usize, s1.ne[2] as usize);
            let dst = off + i1 * nb1 + i2 * nb2 + i3 * nb3;
            for i0 in 0..s1.ne[0] as usize {
                // SAFETY: inside the destination (bounds checked in set_supported); row r of
                // src1 is read by its strides; rows of the region are disjoint when the
                // parameters describe a view, as ggml_set builds them
                unsafe { std::ptr::copy(s1.data.add(offset(s1, i0, i1, i2, i3)), d.data.add(dst + i0 * size), size) };
            }
        }
    });
    Ok(())
}

fn diag_mask_supported(node: &Node) -> bool {
    let (Ok(s), d) = (node.src(0), &node.dst) else { return false };
    s.ty == raw_type::F32
        && d.ty == raw_type::F32
        && same_shape(s, d)
        && s.nb[0] == 4
        && d.nb[0] == 4
        && node.param_i32(0) >= 0
        && (s.data == d.data || (is_contiguous(s) && is_contiguous(d)))
}

/// DIAG_MASK_INF / _ZERO: in every matrix, column i of row j becomes `value` where i > n_past + j
fn diag_mask(node: &Node, exec: &mut Exec, value: f32) -> Result<(), OpError> {
    let (s, d) = (*node.src(0)?, node.dst);
    let n_past = node.param_i32(0) as usize;
    if s.data != d.data {
        dup(&s, &d, exec);
    }
    let rows = d.nrows() as usize;
    let (ne0, ne1, ne2) = (d.ne[0] as usize, d.ne[1] as usize, d.ne[2] as usize);
    let (n_chunks, per) = split(rows, exec.n_threads(), 64);
    exec.parallel(n_chunks, |c| {
        for r in chunk_range(c, per, rows) {
            let (j, i2, i3) = unravel(r, ne1, ne2);
            for i in (n_past + j + 1)..ne0 {
                // SAFETY: element (i, j, i2, i3) of the destination; rows are disjoint across chunks
                unsafe { d.data.add(offset(&d, i, j, i2, i3)).cast::<f32>().write_unaligned(value) };
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests;
