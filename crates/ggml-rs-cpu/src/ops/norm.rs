//! Family `norm`: NORM, RMS_NORM, RMS_NORM_BACK, L2_NORM, GROUP_NORM.
//!
//! As upstream's (ops.cpp): F32 rows, the sums accumulated in f64 (upstream's `ggml_float`) over
//! products rounded to f32, the scale in f32. One row (one group for GROUP_NORM) per task.

use super::copy::elem::{chunk_range, offset, same_shape, sane, split, unravel};
use super::unary::kit::scratch_f32;
use super::{Exec, Family, Node, Op, OpError, View, raw_type};

pub const FAMILY: Family = Family { name: "norm", ops: &[Op::Norm, Op::RmsNorm, Op::RmsNormBack, Op::L2Norm, Op::GroupNorm], supports, compute };

fn supports(node: &Node) -> bool {
    let (Ok(a), d) = (node.src(0), &node.dst) else { return false };
    if a.ty != raw_type::F32 || d.ty != raw_type::F32 || !same_shape(a, d) || !sane(a) {
        return false;
    }
    let eps_ok = node.param_f32(0) >= 0.0;
    match node.op {
        Op::Norm | Op::L2Norm => eps_ok,
        Op::RmsNorm => eps_ok && a.nb[0] == 4 && d.nb[0] == 4,
        Op::RmsNormBack => {
            let Ok(x) = node.src(1) else { return false };
            x.ty == raw_type::F32 && same_shape(a, x) && a.nb[0] == 4 && x.nb[0] == 4 && d.nb[0] == 4
        }
        Op::GroupNorm => a.nb[0] == 4 && d.nb[0] == 4 && node.param_i32(0) > 0,
        _ => false,
    }
}

fn compute(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    let (a, d) = (*node.src(0)?, node.dst);
    let eps = node.param_f32(0);
    match node.op {
        Op::Norm => rows(&a, &d, exec, move |x, y, n| {
            // SAFETY: rows of n elements (rows() contract)
            unsafe { norm_row(x, y, n, eps) }
        }),
        Op::RmsNorm => rms_rows(&a, &d, None, eps, exec),
        Op::L2Norm => rows(&a, &d, exec, move |x, y, n| {
            // SAFETY: as above
            unsafe { l2_norm_row(x, y, n, eps) }
        }),
        Op::RmsNormBack => rms_norm_back(&a, node.src(1)?, &d, eps, exec),
        Op::GroupNorm => group_norm(&a, &d, node.param_i32(0) as usize, node.param_f32(1), exec),
        _ => return Err(OpError::new(node, "not an op of the norm family")),
    }
    Ok(())
}

/// Whether RMS_NORM (`norm`) and the MUL that follows it (`mul`, one of whose sources is the
/// norm's output) can run as one pass, as upstream's CPU backend fuses them: F32 norm input,
/// output and weight (the MUL's other source, `ne0` packed floats a row, broadcast over the
/// rows), the MUL's output of the norm's shape with packed rows. The graph-level conditions (the
/// norm's output used by the MUL alone, not a view, not a graph output) are the graph loop's.
pub(crate) fn rms_norm_mul_fusable(norm: &Node, mul: &Node, weight: usize) -> bool {
    let (Ok(w), m) = (mul.src(weight), &mul.dst) else { return false };
    norm.op == Op::RmsNorm
        && mul.op == Op::Mul
        && supports(norm)
        && m.ty == raw_type::F32
        && m.ne == norm.dst.ne
        && m.nb[0] == 4
        && w.ty == raw_type::F32
        && w.nb[0] == 4
        && w.ne[0] == norm.dst.ne[0]
        && (1..4).all(|k| w.ne[k] > 0 && m.ne[k] % w.ne[k] == 0)
}

/// RMS_NORM and the MUL by its weight in one pass: `mul.dst = rms_norm(norm.src0) · weight`,
/// the same bits as the two ops (see [`VecF::scale_mul_into`]); the norm's own output is not
/// written. `weight` is the index of the MUL's other source.
pub(crate) fn rms_norm_mul(norm: &Node, mul: &Node, weight: usize, exec: &mut Exec) -> Result<(), OpError> {
    if !rms_norm_mul_fusable(norm, mul, weight) {
        return Err(OpError::new(mul, "RMS_NORM + MUL cannot be fused for these types or shapes"));
    }
    rms_rows(norm.src(0)?, &mul.dst, Some(*mul.src(weight)?), norm.param_f32(0), exec);
    Ok(())
}

/// RMS_NORM over rows of packed f32 (`supports` checks `nb[0]`), times the broadcast weight `w`
/// when fused with its MUL: the vector kernels on aligned rows, the element-wise form otherwise
/// (or when the output row overlaps an input row other than exactly)
fn rms_rows(a: &View, d: &View, w: Option<View>, eps: f32, exec: &mut Exec) {
    let (a, d) = (*a, *d);
    let vf = exec.kernels().vec;
    let n = a.nrows() as usize;
    let ne0 = a.ne[0] as usize;
    let (n_chunks, per) = split(n, exec.n_threads(), (8192 / ne0.max(1)).max(1));
    let scratch = exec.scratch(n_chunks * ne0 * 4);
    exec.parallel(n_chunks, |c| {
        let tmp = scratch_f32(&scratch, c, ne0);
        for r in chunk_range(c, per, n) {
            let (i1, i2, i3) = unravel(r, a.ne[1] as usize, a.ne[2] as usize);
            let xp = a.data.wrapping_add(offset(&a, 0, i1, i2, i3));
            let yp = d.data.wrapping_add(offset(&d, 0, i1, i2, i3));
            let wp = w.map(|w| w.data.wrapping_add(offset(&w, 0, i1 % w.ne[1] as usize, i2 % w.ne[2] as usize, i3 % w.ne[3] as usize)));
            let bytes = ne0 * 4;
            let apart = |p: *mut u8, q: *mut u8| (p as usize) + bytes <= q as usize || (q as usize) + bytes <= p as usize;
            let aligned = [Some(xp), Some(yp), wp].iter().flatten().all(|p| (*p as usize).is_multiple_of(4));
            let fits = aligned && (xp == yp || apart(xp, yp)) && wp.is_none_or(|wp| apart(wp, yp));
            if !fits {
                let x = Row { p: xp, stride: 4 };
                let y = Row { p: yp, stride: 4 };
                // SAFETY: rows of ne0 f32 (supports); y[i] written after x[i] is read
                unsafe { rms_norm_row(x, y, ne0, eps) };
                if let Some(wp) = wp {
                    let wr = Row { p: wp, stride: 4 };
                    // SAFETY: the weight row has ne0 f32 (rms_norm_mul_fusable)
                    (0..ne0).for_each(|i| unsafe { y.set(i, y.get(i) * wr.get(i)) });
                }
                continue;
            }
            // SAFETY: ne0 packed aligned f32 (checked); the output row is this chunk's and either
            // is the input row (then read through a copy) or overlaps no input row (checked)
            unsafe {
                let x: &[f32] = if xp == yp {
                    tmp.copy_from_slice(std::slice::from_raw_parts(xp as *const f32, ne0));
                    tmp
                } else {
                    std::slice::from_raw_parts(xp as *const f32, ne0)
                };
                let wr = wp.map(|p| std::slice::from_raw_parts(p as *const f32, ne0));
                let mean = (vf.sum_sq(x) / ne0 as f64) as f32;
                let scale = 1.0 / (mean + eps).sqrt();
                vf.scale_mul_into(std::slice::from_raw_parts_mut(yp as *mut f32, ne0), x, scale, wr);
            }
        }
    });
}

/// A row as a kernel sees it: base pointer and element stride in bytes.
#[derive(Clone, Copy)]
struct Row {
    p: *mut u8,
    stride: usize,
}

impl Row {
    /// # Safety
    /// `i` is inside the row.
    #[inline(always)]
    unsafe fn get(self, i: usize) -> f32 {
        // SAFETY: inside the row (caller)
        unsafe { self.p.add(i * self.stride).cast::<f32>().read_unaligned() }
    }

    /// # Safety
    /// `i` is inside the row.
    #[inline(always)]
    unsafe fn set(self, i: usize, v: f32) {
        // SAFETY: inside the row (caller)
        unsafe { self.p.add(i * self.stride).cast::<f32>().write_unaligned(v) }
    }
}

/// `f(x_row, y_row, ne0)` for every row, in parallel; `f` may assume rows of `ne0` elements
fn rows(a: &View, d: &View, exec: &mut Exec, f: impl Fn(Row, Row, usize) + Sync) {
    let (a, d) = (*a, *d);
    let n = a.nrows() as usize;
    let ne0 = a.ne[0] as usize;
    let (n_chunks, per) = split(n, exec.n_threads(), (8192 / ne0.max(1)).max(1));
    exec.parallel(n_chunks, |c| {
        for r in chunk_range(c, per, n) {
            let (i1, i2, i3) = unravel(r, a.ne[1] as usize, a.ne[2] as usize);
            let x = Row { p: a.data.wrapping_add(offset(&a, 0, i1, i2, i3)), stride: a.nb[0] };
            let y = Row { p: d.data.wrapping_add(offset(&d, 0, i1, i2, i3)), stride: d.nb[0] };
            f(x, y, ne0);
        }
    });
}

/// (x - mean) / sqrt(var + eps)
///
/// # Safety
/// `x` and `y` are rows of `n` f32 (possibly the same row).
unsafe fn norm_row(x: Row, y: Row, n: usize, eps: f32) {
    // SAFETY: indices below n (caller); y[i] written after x[i] is read
    unsafe {
        let mut sum = 0f64;
        for i in 0..n {
            sum += x.get(i) as f64;
        }
        let mean = (sum as f32) / n as f32;
        let mut var = 0f64;
        for i in 0..n {
            let v = x.get(i) - mean;
            y.set(i, v);
            var += (v * v) as f64;
        }
        let var = (var / n as f64) as f32;
        let scale = 1.0 / (var + eps).sqrt();
        for i in 0..n {
            y.set(i, y.get(i) * scale);
        }
    }
}

/// x / sqrt(mean(x²) + eps)
///
/// # Safety
/// as [`norm_row`]
unsafe fn rms_norm_row(x: Row, y: Row, n: usize, eps: f32) {
    // SAFETY: indices below n (caller)
    unsafe {
        let mut sum = 0f64;
        for i in 0..n {
            let v = x.get(i);
            sum += (v * v) as f64;
        }
        let mean = (sum / n as f64) as f32;
        let scale = 1.0 / (mean + eps).sqrt();
        for i in 0..n {
            y.set(i, x.get(i) * scale);
        }
    }
}

/// x / max(|x|, eps)
///
/// # Safety
/// as [`norm_row`]
unsafe fn l2_norm_row(x: Row, y: Row, n: usize, eps: f32) {
    // SAFETY: indices below n (caller)
    unsafe {
        let mut sum = 0f64;
        for i in 0..n {
            let v = x.get(i);
            sum += (v * v) as f64;
        }
        let scale = 1.0 / (sum as f32).sqrt().max(eps);
        for i in 0..n {
            y.set(i, x.get(i) * scale);
        }
    }
}

/// RMS_NORM_BACK: src0 the gradient dz, src1 the forward input x:
/// `dx = (dz + x · (-Σx·dz / (Σx² + n·eps))) / sqrt(Σx²/n + eps)`
fn rms_norm_back(dz: &View, x: &View, d: &View, eps: f32, exec: &mut Exec) {
    let (dz, x, d) = (*dz, *x, *d);
    let n = dz.nrows() as usize;
    let ne0 = dz.ne[0] as usize;
    let (n_chunks, per) = split(n, exec.n_threads(), 1);
    exec.parallel(n_chunks, |c| {
        for r in chunk_range(c, per, n) {
            let (i1, i2, i3) = unravel(r, dz.ne[1] as usize, dz.ne[2] as usize);
            let g = Row { p: dz.data.wrapping_add(offset(&dz, 0, i1, i2, i3)), stride: 4 };
            let xr = Row { p: x.data.wrapping_add(offset(&x, 0, i1, i2, i3)), stride: 4 };
            let y = Row { p: d.data.wrapping_add(offset(&d, 0, i1, i2, i3)), stride: 4 };
            // SAFETY: rows of ne0 dense f32 (supports); y[i] written after x[i], dz[i] are read
            unsafe {
                let (mut sxx, mut sxdz) = (0f64, 0f64);
                for i in 0..ne0 {
                    let (xv, gv) = (xr.get(i), g.get(i));
                    sxx += (xv * xv) as f64;
                    sxdz += (xv * gv) as f64;
                }
                let mean_eps = (sxx as f32) / ne0 as f32 + eps;
                let sum_eps = (sxx as f32) + eps * ne0 as f32;
                let rrms = 1.0 / mean_eps.sqrt();
                let scale_x = (-sxdz as f32) / sum_eps;
                for i in 0..ne0 {
                    y.set(i, (g.get(i) + xr.get(i) * scale_x) * rrms);
                }
            }
        }
    });
}

/// GROUP_NORM: dimension 2 (channels) in `n_groups` groups of ceil(ne2 / n_groups) channels;
/// each group of each i3 normalised as one set
fn group_norm(a: &View, d: &View, n_groups: usize, eps: f32, exec: &mut Exec) {
    let (a, d) = (*a, *d);
    let (ne0, ne1, ne2, ne3) = (a.ne[0] as usize, a.ne[1] as usize, a.ne[2] as usize, a.ne[3] as usize);
    let per_group = ne2.div_ceil(n_groups);
    let tasks = n_groups * ne3;
    exec.parallel(tasks, |t| {
        let (g, i3) = (t % n_groups, t / n_groups);
        let start = (g * per_group).min(ne2);
        let end = (start + per_group).min(ne2);
        if start >= end {
            return;
        }
        let row = |v: &View, i1: usize, i2: usize| Row { p: v.data.wrapping_add(offset(v, 0, i1, i2, i3)), stride: 4 };
        let count = (ne0 * ne1 * (end - start)) as f64;
        // SAFETY: rows of ne0 dense f32 (supports); this task alone writes channels start..end of i3
        unsafe {
            let mut sum = 0f64;
            for i2 in start..end {
                for i1 in 0..ne1 {
                    let x = row(&a, i1, i2);
                    let mut s = 0f64;
                    for i in 0..ne0 {
                        s += x.get(i) as f64;
                    }
                    sum += s;
                }
            }
            let mean = (sum / count) as f32;
            let mut sum2 = 0f64;
            for i2 in start..end {
                for i1 in 0..ne1 {
                    let (x, y) = (row(&a, i1, i2), row(&d, i1, i2));
                    let mut s = 0f64;
                    for i in 0..ne0 {
                        let v = x.get(i) - mean;
                        y.set(i, v);
                        s += (v * v) as f64;
                    }
                    sum2 += s;
                }
            }
            let var = (sum2 / count) as f32;
            let scale = 1.0 / (var + eps).sqrt();
            for i2 in start..end {
                for i1 in 0..ne1 {
                    let y = row(&d, i1, i2);
                    for i in 0..ne0 {
                        y.set(i, y.get(i) * scale);
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests;
