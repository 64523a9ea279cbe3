//! GET_ROWS, SET_ROWS, GET_ROWS_BACK: rows picked by an index tensor (upstream's semantics:
//! `get_rows(a, b)[:, i10, i11, i12] = a[:, b[i10, i11, i12], i11, i12]`,
//! `set_rows(a, b, c)`: row i of c goes to row `b[i, i02 % ne11, i03 % ne12]` of a's slab
//! (i02, i03)). An index out of range is an error naming the node before anything is written.

use super::elem::{Scalar, chunk_range, is_contiguous, offset, rows_dense, split, type_size, unravel};
use crate::GgmlType;
use crate::ops::unary::kit::MIN_CHUNK_ELEMS;
use crate::ops::{Exec, Node, OpError, View, raw_type};

/// index `(i0, i1, i2)` of an I32 or I64 index tensor
///
/// # Safety
/// the index lies inside `v`.
unsafe fn index(v: &View, i0: usize, i1: usize, i2: usize) -> i64 {
    // SAFETY: inside the tensor (caller); unaligned reads
    unsafe {
        let p = v.data.add(offset(v, i0, i1, i2, 0));
        if v.ty == raw_type::I64 { p.cast::<i64>().read_unaligned() } else { p.cast::<i32>().read_unaligned() as i64 }
    }
}

/// every index of `ids` (its first three dimensions) lies in `0..bound`
fn check_indices(node: &Node, ids: &View, bound: i64) -> Result<(), OpError> {
    for i2 in 0..ids.ne[2] as usize {
        for i1 in 0..ids.ne[1] as usize {
            for i0 in 0..ids.ne[0] as usize {
                // SAFETY: inside the index tensor
                let v = unsafe { index(ids, i0, i1, i2) };
                if !(0..bound).contains(&v) {
                    return Err(OpError::new(node, format!("row index {v} at ({i0}, {i1}, {i2}) is outside 0..{bound}")));
                }
            }
        }
    }
    Ok(())
}

pub(super) fn get_rows_supported(node: &Node) -> bool {
    let (Ok(a), Ok(b), d) = (node.src(0), node.src(1), &node.dst) else { return false };
    let Some((blck, size)) = type_size(a.ty) else { return false };
    let out = if a.ty == raw_type::I32 { raw_type::I32 } else { raw_type::F32 };
    let a_ok = matches!(a.ty, raw_type::F32 | raw_type::I32 | raw_type::F16 | raw_type::BF16) || GgmlType::from_raw(a.ty).is_some();
    a_ok && b.ty == raw_type::I32
        && d.ty == out
        && a.nb[0] == size
        && d.nb[0] == 4
        && a.ne[0] % blck as i64 == 0
        && b.ne[3] == 1
        && d.ne == [a.ne[0], b.ne[0], b.ne[1], b.ne[2]]
        && a.ne[2] == b.ne[1]
        && a.ne[3] == b.ne[2]
}

pub(super) fn get_rows(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    let (a, b, d) = (*node.src(0)?, *node.src(1)?, node.dst);
    check_indices(node, &b, a.ne[1])?;
    let nc = a.ne[0] as usize;
    let nr = b.nelements() as usize;
    let (n_chunks, per) = split(nr, exec.n_threads(), 4);
    let qt = GgmlType::from_raw(a.ty).filter(|t| !matches!(t, GgmlType::F32));
    exec.parallel(n_chunks, |c| {
        for i in chunk_range(c, per, nr) {
            let (i10, i11, i12) = unravel(i, b.ne[0] as usize, b.ne[1] as usize);
            // SAFETY: inside the index tensor; checked in range above
            let i01 = unsafe { index(&b, i10, i11, i12) } as usize;
            let src = offset(&a, 0, i01, i11, i12);
            let dst = offset(&d, 0, i10, i11, i12);
            // SAFETY: a row of a (dense, nc elements) and a row of d (dense, nc f32 or i32);
            // destination rows are disjoint across i and so across chunks
            unsafe {
                match qt {
                    Some(t) => super::elem::dequantize_to(t, a.data.add(src), nc, d.data.add(dst)),
                    // F32 and I32: the bits, as upstream's memcpy of the row
                    None => std::ptr::copy_nonoverlapping(a.data.add(src), d.data.add(dst), nc * 4),
                }
            }
        }
    });
    Ok(())
}

pub(super) fn set_rows_supported(node: &Node) -> bool {
    let (Ok(a), Ok(b), d) = (node.src(0), node.src(1), &node.dst) else { return false };
    let Some((blck, size)) = type_size(d.ty) else { return false };
    let d_ok = GgmlType::from_raw(d.ty).is_some_and(|t| t.quantizes_as_upstream());
    let a_ok = matches!(a.ty, raw_type::F32 | raw_type::F16) && rows_dense(a);
    a_ok && d_ok
        && matches!(b.ty, raw_type::I32 | raw_type::I64)
        && d.nb[0] == size
        && d.ne[0] == a.ne[0]
        && a.ne[0] % blck as i64 == 0
        && d.ne[2] == a.ne[2]
        && d.ne[3] == a.ne[3]
        && b.ne[0] == a.ne[1]
        && b.ne[1] > 0
        && b.ne[2] > 0
        && b.ne[3] == 1
        && a.ne[2] % b.ne[1] == 0
        && a.ne[3] % b.ne[2] == 0
}

/// SET_ROWS: rows of src0 (F32 or F16) converted to the destination's type (upstream's
/// `from_float`; F16 to F16 copied as is)
pub(super) fn set_rows(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    let (a, b, d) = (*node.src(0)?, *node.src(1)?, node.dst);
    check_indices(node, &b, d.ne[1])?;
    let dt = GgmlType::from_raw(d.ty).expect("set_rows: a destination type with a block format");
    let nc = a.ne[0] as usize;
    let (nr, ne02) = (a.ne[1] as usize, a.ne[2] as usize);
    let rows = a.nrows() as usize;
    let at = Scalar::float(a.ty).expect("set_rows: F32 or F16 rows");
    let (bne1, bne2) = (b.ne[1] as usize, b.ne[2] as usize);
    // chunks of MIN_CHUNK_ELEMS elements at least: token generation's V cache (flash attention
    // off) is 512 rows of one element, a job split over the pool cost more than the conversion
    let (n_chunks, per) = split(rows, exec.n_threads(), (MIN_CHUNK_ELEMS as usize).div_ceil(nc.max(1)).max(4));
    exec.parallel(n_chunks, |c| {
        let range = chunk_range(c, per, rows);
        if range.is_empty() {
            return;
        }
        if nc == 1 && a.ty == raw_type::F32 && dt == GgmlType::F16 {
            // SAFETY: the chunk's rows of a, their indices (checked in range above) and the
            // destination elements they name
            unsafe { elems_f32_to_f16(&a, &b, &d, range) };
            return;
        }
        // (i, i02, i03) stepped along the rows instead of divided out of each row's number
        let (mut i, mut i02, mut i03) = unravel(range.start, nr, ne02);
        // the index tensor's slab for (i02, i03), broadcast
        let (mut j02, mut j03) = (i02 % bne1, i03 % bne2);
        // filled only for the rows converted through f32 (not on the token-generation path)
        let mut x = Vec::new();
        for _ in range {
            // SAFETY: inside the index tensor, checked in range above
            let i1 = unsafe { index(&b, i, j02, j03) } as usize;
            let src = offset(&a, 0, i, i02, i03);
            let dst = offset(&d, 0, i1, i02, i03);
            let (ps, pd) = (a.data.wrapping_add(src), d.data.wrapping_add(dst));
            if a.ty == d.ty {
                // SAFETY: a source row and a destination row of the same type and length;
                // rows of the destination written by two chunks only for repeated indices, as upstream
                unsafe { std::ptr::copy_nonoverlapping(ps, pd, nc * at.size()) };
            } else if a.ty == raw_type::F32 && dt == GgmlType::F16 && (ps as usize).is_multiple_of(4) && (pd as usize).is_multiple_of(2) {
                // F32 to F16 straight from row to row: the transposed V cache (flash attention
                // off) stores rows of one element, for which the staged conversion below cost
                // more than the KV products (13% of a medium F16 model's pp512)
                // SAFETY: dense, aligned rows of nc elements (checked above); the destination
                // row written by this chunk only (repeated indices aside, as above)
                let (xs, ys) = unsafe { (std::slice::from_raw_parts(ps.cast::<f32>(), nc), std::slice::from_raw_parts_mut(pd.cast::<half::f16>(), nc)) };
                if nc < 8 {
                    ys.iter_mut().zip(xs).for_each(|(y, x)| *y = half::f16::from_f32(*x));
                } else {
                    crate::fp::f32_to_f16_row(xs, ys);
                }
            } else {
                x.resize(nc, 0f32);
                for (k, v) in x.iter_mut().enumerate() {
                    // SAFETY: element k of the dense source row
                    *v = unsafe { at.load(ps.add(k * at.size())) };
                }
                // SAFETY: a dense destination row of nc elements
                unsafe { super::elem::quantize_from(dt, &x, pd) };
            }
            i += 1;
            if i == nr {
                i = 0;
                i02 += 1;
                if i02 == ne02 {
                    i02 = 0;
                    i03 += 1;
                    j03 = i03 % bne2;
                }
                j02 = i02 % bne1;
            }
        }
    });
    Ok(())
}

/// SET_ROWS of one-element F32 rows into F16 (token generation's transposed V cache with flash
/// attention off: 512 rows a layer): per slab run, up to 64 elements gathered, converted at once
/// (F16C where the CPU has it, as the row conversion) and scattered to their indexed rows, where
/// the per-row path's offsets, type checks and single conversions took 5.8 µs a node
///
/// # Safety
/// `range` lies in `a`'s rows; every index of those rows lies in `0..d.ne[1]`; the destination
/// elements are written by this chunk only (repeated indices aside, as upstream)
unsafe fn elems_f32_to_f16(a: &View, b: &View, d: &View, range: std::ops::Range<usize>) {
    const RUN: usize = 64;
    let (nr, ne02) = (a.ne[1] as usize, a.ne[2] as usize);
    let (bne1, bne2) = (b.ne[1] as usize, b.ne[2] as usize);
    let (mut xs, mut ys) = ([0f32; RUN], [half::f16::ZERO; RUN]);
    let mut r = range.start;
    while r < range.end {
        let (i, i02, i03) = unravel(r, nr, ne02);
        // this run: up to RUN rows, none past the slab's last row or the chunk's end
        let n = (nr - i).min(range.end - r).min(RUN);
        let (src, dst) = (offset(a, 0, 0, i02, i03), offset(d, 0, 0, i02, i03));
        let ids = offset(b, 0, i02 % bne1, i03 % bne2, 0);
        for (k, x) in xs[..n].iter_mut().enumerate() {
            // SAFETY: element (0, i + k, i02, i03) of a, aligned or not (caller)
            *x = unsafe { a.data.add(src + (i + k) * a.nb[1]).cast::<f32>().read_unaligned() };
        }
        crate::fp::f32_to_f16_row(&xs[..n], &mut ys[..n]);
        for (k, y) in ys[..n].iter().enumerate() {
            // SAFETY: index (i + k, i02 % bne1, i03 % bne2), in 0..d.ne[1] (caller), names
            // element (0, i1, i02, i03) of d
            unsafe {
                let p = b.data.add(ids + (i + k) * b.nb[0]);
                let i1 = if b.ty == raw_type::I64 { p.cast::<i64>().read_unaligned() } else { p.cast::<i32>().read_unaligned() as i64 };
                d.data.add(dst + i1 as usize * d.nb[1]).cast::<half::f16>().write_unaligned(*y);
            }
        }
        r += n;
    }
}

pub(super) fn get_rows_back_supported(node: &Node) -> bool {
    let (Ok(a), Ok(b), d) = (node.src(0), node.src(1), &node.dst) else { return false };
    matches!(a.ty, raw_type::F32 | raw_type::F16)
        && rows_dense(a)
        // src0's rows are taken as one flat list (upstream steps nb1 only)
        && ((a.ne[2] == 1 && a.ne[3] == 1) || is_contiguous(a))
        && b.ty == raw_type::I32
        && is_contiguous(b)
        // the first nelements(src1) rows of src0 are used (src1 may be a shorter view)
        && b.nelements() <= a.nrows()
        && d.ty == raw_type::F32
        && is_contiguous(d)
        && d.ne[0] == a.ne[0]
}

/// GET_ROWS_BACK: the destination (zeroed) accumulates row i of src0 into row `b[i]`, for i
/// below nelements(src1) in order
pub(super) fn get_rows_back(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    let (a, b, d) = (*node.src(0)?, *node.src(1)?, node.dst);
    let flat = View { ne: [b.nelements(), 1, 1, 1], ..b };
    check_indices(node, &flat, d.ne[1])?;
    let nc = a.ne[0] as usize;
    let at = Scalar::float(a.ty).expect("get_rows_back: F32 or F16");
    // by columns, so that every destination element sums its rows in upstream's order
    let (n_chunks, per) = split(nc, exec.n_threads(), 256);
    exec.parallel(n_chunks, |c| {
        // whole views into the closure (a field of one alone is a bare pointer, not Sync)
        let (a, d) = (&a, &d);
        let cols = chunk_range(c, per, nc);
        for r in 0..d.nrows() as usize {
            let (i1, i2, i3) = unravel(r, d.ne[1] as usize, d.ne[2] as usize);
            for k in cols.clone() {
                // SAFETY: inside the contiguous destination; columns are disjoint across chunks
                unsafe { d.data.add(offset(d, k, i1, i2, i3)).cast::<f32>().write_unaligned(0.0) };
            }
        }
        for i in 0..flat.ne[0] as usize {
            // SAFETY: checked in range above
            let r = unsafe { index(&flat, i, 0, 0) } as usize;
            for k in cols.clone() {
                // SAFETY: element k of source row i and of destination row r
                unsafe {
                    let p = d.data.add(offset(d, k, r, 0, 0)).cast::<f32>();
                    p.write_unaligned(p.read_unaligned() + at.load(a.data.add(i * a.nb[1] + k * a.nb[0])));
                }
            }
        }
    });
    Ok(())
}
