//! Family `binary`: ADD, SUB, MUL, DIV (broadcast of src1 over dst), ADD1, ADD_ID, ACC, SCALE, CLAMP, SQR, SQRT, LOG, SIN, COS, LEAKY_RELU, FILL.
//!
//! Element-wise as upstream's `binary-ops.cpp` / `unary-ops.cpp`: each element read into f32,
//! the operation in f32, the result rounded to the destination's type. Work is split by rows
//! (every dimension but the first). The destination may be a source (ggml's in-place forms):
//! every element is read before it is written, by the same thread.

use super::copy::elem::{Scalar, can_repeat, chunk_range, is_contiguous, offset, rows_dense, same_shape, sane, split, unravel};
use super::{Exec, Family, Node, Op, OpError, View, raw_type};

pub const FAMILY: Family = Family {
    name: "binary",
    ops: &[
        Op::Add,
        Op::Sub,
        Op::Mul,
        Op::Div,
        Op::Add1,
        Op::AddId,
        Op::Acc,
        Op::Scale,
        Op::Clamp,
        Op::Sqr,
        Op::Sqrt,
        Op::Log,
        Op::Sin,
        Op::Cos,
        Op::LeakyRelu,
        Op::Fill,
    ],
    supports,
    compute,
};

/// the (src0, src1, dst) type triples upstream's binary_op has
fn binary_types(a: i32, b: i32, d: i32) -> bool {
    use raw_type::{BF16, F16, F32};
    matches!((a, b, d), (F32, F32, F32) | (F16, F16, F16) | (BF16, BF16, BF16) | (BF16, F32, BF16) | (BF16, F32, F32) | (F16, F32, F16) | (F16, F32, F32))
}

/// the (src0, dst) pairs upstream's unary_op has
fn unary_types(a: i32, d: i32) -> bool {
    use raw_type::{BF16, F16, F32};
    matches!((a, d), (F32, F32) | (F16, F16) | (BF16, BF16) | (BF16, F32) | (F16, F32))
}

fn supports(node: &Node) -> bool {
    let (Ok(a), d) = (node.src(0), &node.dst) else { return false };
    if !sane(a) || !sane(d) {
        return false;
    }
    let unary_layout = same_shape(a, d) && rows_dense(a) && rows_dense(d);
    match node.op {
        Op::Add | Op::Sub | Op::Mul | Op::Div => {
            let Ok(b) = node.src(1) else { return false };
            binary_types(a.ty, b.ty, d.ty) && sane(b) && can_repeat(b, a) && unary_layout
        }
        Op::Add1 => {
            let Ok(b) = node.src(1) else { return false };
            matches!(a.ty, raw_type::F32 | raw_type::F16 | raw_type::BF16)
                && d.ty == a.ty
                && (b.ty == raw_type::F32 || b.ty == a.ty)
                && b.nelements() == 1
                && b.ne.iter().all(|n| *n == 1)
                && unary_layout
        }
        Op::AddId => {
            let (Ok(b), Ok(ids)) = (node.src(1), node.src(2)) else { return false };
            a.ty == raw_type::F32
                && b.ty == raw_type::F32
                && d.ty == raw_type::F32
                && ids.ty == raw_type::I32
                && unary_layout
                && b.nb[0] == 4
                && b.ne[0] == a.ne[0]
                && ids.ne[0] >= a.ne[1]
                && ids.ne[1] >= a.ne[2]
        }
        Op::Acc => acc_params(node).is_some(),
        Op::Scale => matches!(a.ty, raw_type::F32 | raw_type::BF16) && d.ty == a.ty && same_shape(a, d) && is_contiguous(a) && is_contiguous(d),
        Op::Clamp | Op::LeakyRelu => matches!(a.ty, raw_type::F32 | raw_type::F16) && d.ty == a.ty && unary_layout,
        Op::Sqr | Op::Sqrt | Op::Log | Op::Sin | Op::Cos => unary_types(a.ty, d.ty) && unary_layout,
        Op::Fill => matches!(d.ty, raw_type::F32 | raw_type::F16) && rows_dense(d),
        _ => false,
    }
}

fn compute(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    let a = *node.src(0)?;
    let d = node.dst;
    match node.op {
        Op::Add => binary(&a, node.src(1)?, &d, exec, |x, y| x + y),
        Op::Sub => binary(&a, node.src(1)?, &d, exec, |x, y| x - y),
        Op::Mul => binary(&a, node.src(1)?, &d, exec, |x, y| x * y),
        Op::Div => binary(&a, node.src(1)?, &d, exec, |x, y| x / y),
        Op::Add1 => {
            let b = node.src(1)?;
            let bt = Scalar::float(b.ty).ok_or_else(|| OpError::new(node, "src1 is not a float"))?;
            // SAFETY: src1 holds one element (supports)
            let v = unsafe { bt.load(b.data) };
            unary(&a, &d, exec, move |x| x + v)
        }
        Op::AddId => add_id(node, exec)?,
        Op::Acc => acc(node, exec)?,
        Op::Scale => {
            let (s, b) = (node.param_f32(0), node.param_f32(1));
            // upstream: x·s when the bias is 0, x·s + b otherwise (its SIMD form may fuse)
            if b == 0.0 { unary(&a, &d, exec, move |x| x * s) } else { unary(&a, &d, exec, move |x| x * s + b) }
        }
        Op::Clamp => {
            let (lo, hi) = (node.param_f32(0), node.param_f32(1));
            // MAX(MIN(x, hi), lo) with C's comparisons (a NaN input comes out as hi)
            unary(&a, &d, exec, move |x| {
                let m = if x < hi { x } else { hi };
                if m > lo { m } else { lo }
            })
        }
        Op::LeakyRelu => {
            let ns = node.param_f32(0);
            unary(&a, &d, exec, move |x| (if x > 0.0 { x } else { 0.0 }) + ns * (if x < 0.0 { x } else { 0.0 }))
        }
        Op::Sqr => unary(&a, &d, exec, |x| x * x),
        Op::Sqrt => unary(&a, &d, exec, f32::sqrt),
        Op::Log => unary(&a, &d, exec, f32::ln),
        Op::Sin => unary(&a, &d, exec, f32::sin),
        Op::Cos => unary(&a, &d, exec, f32::cos),
        Op::Fill => {
            let c = node.param_f32(0);
            unary(&d, &d, exec, move |_| c)
        }
        _ => return Err(OpError::new(node, "not an op of the binary family")),
    }
    Ok(())
}

/// `dst = op(a, b)`, b repeated over a's shape; rows of a and dst dense, b by its strides
fn binary(a: &View, b: &View, d: &View, exec: &mut Exec, op: impl Fn(f32, f32) -> f32 + Sync) {
    let (at, bt, dt) = (Scalar::of(a.ty).expect("float"), Scalar::of(b.ty).expect("float"), Scalar::of(d.ty).expect("float"));
    let (a, b, d) = (*a, *b, *d);
    let rows = a.nrows() as usize;
    let ne0 = a.ne[0] as usize;
    let ne10 = b.ne[0] as usize;
    let (n_chunks, per) = split(rows, exec.n_threads(), (16384 / ne0.max(1)).max(1));
    let all_f32 = at == Scalar::F32 && bt == Scalar::F32 && dt == Scalar::F32 && b.nb[0] == 4;
    exec.parallel(n_chunks, |c| {
        for r in chunk_range(c, per, rows) {
            let (i1, i2, i3) = unravel(r, a.ne[1] as usize, a.ne[2] as usize);
            let (i11, i12, i13) = (i1 % b.ne[1] as usize, i2 % b.ne[2] as usize, i3 % b.ne[3] as usize);
            // SAFETY: rows of a and d (dense, ne0 elements) and a row of b (ne10 elements by its
            // stride); element i of the destination row is written after element i of a is read
            unsafe {
                let pa = a.data.add(offset(&a, 0, i1, i2, i3));
                let pd = d.data.add(offset(&d, 0, i1, i2, i3));
                let pb = b.data.add(offset(&b, 0, i11, i12, i13));
                if all_f32 {
                    let (pa, pb, pd) = (pa.cast::<f32>(), pb.cast::<f32>(), pd.cast::<f32>());
                    for i in 0..ne0 {
                        pd.add(i).write_unaligned(op(pa.add(i).read_unaligned(), pb.add(i % ne10).read_unaligned()));
                    }
                } else {
                    for i in 0..ne0 {
                        dt.store(pd.add(i * dt.size()), op(at.load(pa.add(i * at.size())), bt.load(pb.add((i % ne10) * b.nb[0]))));
                    }
                }
            }
        }
    });
}

/// `dst = op(a)` element by element; rows of both dense
fn unary(a: &View, d: &View, exec: &mut Exec, op: impl Fn(f32) -> f32 + Sync) {
    let (at, dt) = (Scalar::of(a.ty).expect("float"), Scalar::of(d.ty).expect("float"));
    let (a, d) = (*a, *d);
    let rows = d.nrows() as usize;
    let ne0 = d.ne[0] as usize;
    let (n_chunks, per) = split(rows, exec.n_threads(), (16384 / ne0.max(1)).max(1));
    exec.parallel(n_chunks, |c| {
        for r in chunk_range(c, per, rows) {
            let (i1, i2, i3) = unravel(r, d.ne[1] as usize, d.ne[2] as usize);
            // SAFETY: rows of a and d, dense, ne0 elements; element i is read before it is written
            unsafe {
                let pa = a.data.add(offset(&a, 0, i1, i2, i3));
                let pd = d.data.add(offset(&d, 0, i1, i2, i3));
                if at == Scalar::F32 && dt == Scalar::F32 {
                    let (pa, pd) = (pa.cast::<f32>(), pd.cast::<f32>());
                    for i in 0..ne0 {
                        pd.add(i).write_unaligned(op(pa.add(i).read_unaligned()));
                    }
                } else {
                    for i in 0..ne0 {
                        dt.store(pd.add(i * dt.size()), op(at.load(pa.add(i * at.size()))));
                    }
                }
            }
        }
    });
}

/// ADD_ID: row (i1, i2) of src0 plus row `ids[i1, i2]` of src1
fn add_id(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    let (a, b, ids, d) = (*node.src(0)?, *node.src(1)?, *node.src(2)?, node.dst);
    for i2 in 0..a.ne[2] as usize {
        for i1 in 0..a.ne[1] as usize {
            // SAFETY: inside ids (supports: ids covers a's rows)
            let v = unsafe { ids.data.add(offset(&ids, i1, i2, 0, 0)).cast::<i32>().read_unaligned() };
            if v < 0 || v as i64 >= b.ne[1] {
                return Err(OpError::new(node, format!("id {v} at ({i1}, {i2}) is outside 0..{}", b.ne[1])));
            }
        }
    }
    let rows = a.nrows() as usize;
    let ne0 = a.ne[0] as usize;
    let (n_chunks, per) = split(rows, exec.n_threads(), 4);
    exec.parallel(n_chunks, |c| {
        // whole views into the closure (a field of one alone is a bare pointer, not Sync)
        let (a, b, ids, d) = (&a, &b, &ids, &d);
        for r in chunk_range(c, per, rows) {
            let (i1, i2, i3) = unravel(r, a.ne[1] as usize, a.ne[2] as usize);
            // SAFETY: ids checked above; dense rows of a, b, d of ne0 floats
            unsafe {
                let i11 = ids.data.add(offset(&ids, i1, i2, 0, 0)).cast::<i32>().read_unaligned() as usize;
                let pa = a.data.add(offset(&a, 0, i1, i2, i3)).cast::<f32>();
                let pb = b.data.add(i11 * b.nb[1]).cast::<f32>();
                let pd = d.data.add(offset(&d, 0, i1, i2, i3)).cast::<f32>();
                for i in 0..ne0 {
                    pd.add(i).write_unaligned(pa.add(i).read_unaligned() + pb.add(i).read_unaligned());
                }
            }
        }
    });
    Ok(())
}

/// ACC's parameters (nb1, nb2, nb3, offset, inplace), checked against both tensors' sizes
fn acc_params(node: &Node) -> Option<(usize, usize, usize, usize, bool)> {
    let (a, b, d) = (node.src(0).ok()?, node.src(1).ok()?, &node.dst);
    if a.ty != raw_type::F32 || b.ty != raw_type::F32 || d.ty != raw_type::F32 || !same_shape(a, d) || !is_contiguous(a) || !is_contiguous(d) || b.nb[0] != 4 || !sane(b) {
        return None;
    }
    let p: Vec<usize> = (0..4).map(|i| usize::try_from(node.param_i32(i)).ok()).collect::<Option<_>>()?;
    if b.nelements() > 0 {
        let nb = [4, p[0], p[1], p[2]];
        let last: usize = (0..4).map(|i| (b.ne[i] as usize - 1) * nb[i]).sum();
        if p[3] + last + 4 > a.nelements() as usize * 4 {
            return None;
        }
    }
    Some((p[0], p[1], p[2], p[3], node.param_i32(4) != 0))
}

/// ACC: dst = src0, with src1 added onto the region (offset, strides nb1..nb3)
fn acc(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    let (nb1, nb2, nb3, off, inplace) = acc_params(node).ok_or_else(|| OpError::new(node, "parameters outside the tensors"))?;
    let (a, b, d) = (*node.src(0)?, *node.src(1)?, node.dst);
    if !inplace && a.data != d.data {
        super::copy::dup(&a, &d, exec);
    }
    let rows = b.nrows() as usize;
    let (n_chunks, per) = split(rows, exec.n_threads(), 16);
    exec.parallel(n_chunks, |c| {
        // whole views into the closure (a field of one alone is a bare pointer, not Sync)
        let (a, b, d) = (&a, &b, &d);
        for r in chunk_range(c, per, rows) {
            let (i1, i2, i3) = unravel(r, b.ne[1] as usize, b.ne[2] as usize);
            let at = off + i1 * nb1 + i2 * nb2 + i3 * nb3;
            for i0 in 0..b.ne[0] as usize {
                // SAFETY: inside src0 and dst (acc_params checked the region's last element);
                // src0 read at the same place (it is dst's copy, or dst itself)
                unsafe {
                    let x = a.data.add(at + i0 * 4).cast::<f32>().read_unaligned();
                    let y = b.data.add(offset(&b, i0, i1, i2, i3)).cast::<f32>().read_unaligned();
                    d.data.add(at + i0 * 4).cast::<f32>().write_unaligned(x + y);
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests;
