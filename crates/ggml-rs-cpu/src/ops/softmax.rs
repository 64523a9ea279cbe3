//! Family `softmax`: SOFT_MAX (scale, optional mask F16/F32 broadcast over dims 2 and 3, ALiBi
//! `max_bias`, optional per-head sinks) and SOFT_MAX_BACK.
//!
//! As upstream's CPU: a row is `x·scale + slope·mask`, its maximum (raised to the head's sink if
//! there is one) subtracted before `exp`, the sum of the exponentials accumulated in f64 (plus the
//! sink's `exp(sink - max)`), and the row scaled by the f32 of `1/sum`. The mask's row is the
//! node's row (`i1`), its dims 2 and 3 broadcast (`i2 % ne12`, `i3 % ne13`). The destination row
//! is the work area, so nothing is allocated.

use super::unary::kit::{at, f32_row, f32_row_mut, get, par_ranges, par_rows, set, unflatten};
use super::{Exec, Family, Node, Op, OpError, View, raw_type};
use crate::vecf::VecF;

pub const FAMILY: Family = Family { name: "softmax", ops: &[Op::SoftMax, Op::SoftMaxBack], supports, compute };

fn supports(node: &Node) -> bool {
    let d = &node.dst;
    let Some(s0) = node.src[0].as_ref() else { return false };
    if s0.ty != raw_type::F32 || d.ty != raw_type::F32 || s0.ne != d.ne || d.nb[0] != 4 {
        return false;
    }
    match node.op {
        Op::SoftMax => {
            let mask_ok = node.src[1].as_ref().is_none_or(|m| {
                (m.ty == raw_type::F32 || m.ty == raw_type::F16)
                    && m.ne[0] == d.ne[0]
                    && m.ne[1] >= d.ne[1]
                    && m.ne[2] > 0
                    && m.ne[3] > 0
                    && d.ne[2] % m.ne[2] == 0
                    && d.ne[3] % m.ne[3] == 0
            });
            let sinks_ok = node.src[2].as_ref().is_none_or(|s| s.ty == raw_type::F32 && s.ne[0] >= d.ne[2]);
            mask_ok && sinks_ok
        }
        // upstream's CPU computes it only without ALiBi
        Op::SoftMaxBack => node.src[1].as_ref().is_some_and(|y| y.ty == raw_type::F32 && y.ne == d.ne) && node.param_f32(1) == 0.0,
        _ => false,
    }
}

fn compute(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    match node.op {
        Op::SoftMax => soft_max(node, exec),
        Op::SoftMaxBack => soft_max_back(node, exec),
        _ => Err(OpError::new(node, "not a softmax-family op")),
    }
}

/// ALiBi slope of head `h` (1 without `max_bias`), as upstream computes it
pub(crate) fn alibi_slope(max_bias: f32, n_head: u32, h: u32) -> f32 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let n_head_log2 = 1u32 << (n_head as f64).log2().floor() as u32;
    let m0 = 2f32.powf(-max_bias / n_head_log2 as f32);
    let m1 = 2f32.powf(-(max_bias / 2.0) / n_head_log2 as f32);
    if h < n_head_log2 { m0.powf((h + 1) as f32) } else { m1.powf((2 * (h - n_head_log2) + 1) as f32) }
}

fn soft_max(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    let x = *node.src(0)?;
    let mask = node.src[1];
    let sinks = node.src[2];
    let d = node.dst;
    let (scale, max_bias) = (node.param_f32(0), node.param_f32(1));
    let ne = d.ne;
    let n_head = ne[2] as u32;
    let vf = exec.kernels().vec;
    // token generation's few short rows run whole on the calling thread (8 rows split in 8 pool
    // chunks took 8.6 µs at 2 threads, 3.6 µs on one)
    par_rows(exec, d.nrows(), ne[0], |r0, r1| {
        for r in r0..r1 {
            let (i1, i2, i3) = unflatten(r, &ne);
            let slope = alibi_slope(max_bias, n_head, i2 as u32);
            row(&x, mask.as_ref(), sinks.as_ref(), &d, scale, slope, i1, i2, i3, &vf);
        }
    });
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn row(x: &View, mask: Option<&View>, sinks: Option<&View>, d: &View, scale: f32, slope: f32, i1: i64, i2: i64, i3: i64, vf: &VecF) {
    if fast_row(x, mask, sinks, d, scale, slope, i1, i2, i3, vf) {
        return;
    }
    row_reference(x, mask, sinks, d, scale, slope, i1, i2, i3)
}

/// the mask row of (i1, i2, i3) when its elements are packed
enum MaskRow<'a> {
    None,
    F32(&'a [f32]),
    F16(&'a [half::f16]),
}

/// the row through the vector kernels when every row involved is packed (and the source row is
/// the destination's or apart from it); `false` leaves it to the element-wise form
#[allow(clippy::too_many_arguments)]
fn fast_row(x: &View, mask: Option<&View>, sinks: Option<&View>, d: &View, scale: f32, slope: f32, i1: i64, i2: i64, i3: i64, vf: &VecF) -> bool {
    let n = d.ne[0];
    let (px, pd) = (at(x, 0, i1, i2, i3) as usize, at(d, 0, i1, i2, i3) as usize);
    let bytes = n as usize * 4;
    let in_place = px == pd;
    if !in_place && px < pd + bytes && pd < px + bytes {
        return false;
    }
    let m = match mask {
        None => MaskRow::None,
        Some(m) => {
            let (mi2, mi3) = (i2 % m.ne[2], i3 % m.ne[3]);
            if m.ty == raw_type::F32 {
                match f32_row(m, n, i1, mi2, mi3) {
                    Some(r) => MaskRow::F32(r),
                    None => return false,
                }
            } else {
                let p = at(m, 0, i1, mi2, mi3);
                if m.nb[0] != 2 || !(p as usize).is_multiple_of(2) {
                    return false;
                }
                // SAFETY: n packed, aligned F16 elements of the mask's row (supports checks ne0 == n)
                MaskRow::F16(unsafe { std::slice::from_raw_parts(p as *const half::f16, n as usize) })
            }
        }
    };
    if x.ty != raw_type::F32 || x.nb[0] != 4 || !px.is_multiple_of(4) {
        return false;
    }
    if !in_place {
        let Some(xs) = f32_row(x, n, i1, i2, i3) else { return false };
        let Some(y) = f32_row_mut(d, n, i1, i2, i3) else { return false };
        y.copy_from_slice(xs);
    }
    let Some(y) = f32_row_mut(d, n, i1, i2, i3) else { return false };
    vf.scale(y, scale);
    match m {
        MaskRow::None => {}
        MaskRow::F32(r) => vf.mad_f32(y, r, slope),
        MaskRow::F16(r) => vf.mad_f16(y, r, slope),
    }
    let sink = sinks.map(|s| get(s, i2, 0, 0, 0));
    let max = sink.map_or(vf.max(y), |s| vf.max(y).max(s));
    // in the SIMD sets upstream's own exponential and summation order (the bits of its build of
    // the set)
    let mut sum = vf.softmax_exp(y, max);
    if let Some(s) = sink {
        sum += (s - max).exp() as f64;
    }
    vf.scale(y, (1.0 / sum) as f32);
    true
}

/// the element-wise form: any layout, and the reference the vector form is tested against
#[allow(clippy::too_many_arguments)]
fn row_reference(x: &View, mask: Option<&View>, sinks: Option<&View>, d: &View, scale: f32, slope: f32, i1: i64, i2: i64, i3: i64) {
    let n = d.ne[0];
    // the destination row holds the scaled, masked inputs, then the exponentials
    let mut max = f32::NEG_INFINITY;
    for i0 in 0..n {
        let mut w = get(x, i0, i1, i2, i3) * scale;
        if let Some(m) = mask {
            w += slope * get(m, i0, i1, i2 % m.ne[2], i3 % m.ne[3]);
        }
        set(d, i0, i1, i2, i3, w);
        max = max.max(w);
    }
    let sink = sinks.map(|s| get(s, i2, 0, 0, 0));
    if let Some(s) = sink {
        max = max.max(s);
    }
    let mut sum = 0f64;
    if let Some(y) = f32_row_mut(d, n, i1, i2, i3) {
        for v in y.iter_mut() {
            *v = (*v - max).exp();
            sum += *v as f64;
        }
    } else {
        for i0 in 0..n {
            let e = (get(d, i0, i1, i2, i3) - max).exp();
            sum += e as f64;
            set(d, i0, i1, i2, i3, e);
        }
    }
    if let Some(s) = sink {
        sum += (s - max).exp() as f64;
    }
    let inv = (1.0 / sum) as f32;
    for i0 in 0..n {
        set(d, i0, i1, i2, i3, get(d, i0, i1, i2, i3) * inv);
    }
}

fn soft_max_back(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    let dy = *node.src(0)?;
    let y = *node.src(1)?;
    let d = node.dst;
    let scale = node.param_f32(0);
    let ne = d.ne;
    par_ranges(exec, d.nrows(), |r0, r1| {
        for r in r0..r1 {
            let (i1, i2, i3) = unflatten(r, &ne);
            // dx_k = scale · y_k · (dy_k - Σ_i y_i·dy_i)
            let mut dot = 0f32;
            for i0 in 0..ne[0] {
                dot += get(&y, i0, i1, i2, i3) * get(&dy, i0, i1, i2, i3);
            }
            for i0 in 0..ne[0] {
                set(&d, i0, i1, i2, i3, (get(&dy, i0, i1, i2, i3) - dot) * get(&y, i0, i1, i2, i3) * scale);
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::unary::kit::testkit::*;
    use super::*;
    use crate::rng::XorShift;

    fn reference(x: &Tensor, mask: Option<&Tensor>, sinks: Option<&[f32]>, scale: f32, max_bias: f32) -> Vec<f32> {
        let ne = x.view.ne;
        let xs = x.to_f32();
        let ms = mask.map(|m| (m.to_f32(), m.view.ne));
        let mut out = vec![0f32; xs.len()];
        for i3 in 0..ne[3] {
            for i2 in 0..ne[2] {
                // ALiBi slope from its definition: heads below the power of two get m0^(h+1)
                let slope = if max_bias > 0.0 {
                    let nl = 2f64.powi((ne[2] as f64).log2().floor() as i32);
                    let h = i2 as f64;
                    if h < nl { 2f64.powf(-(max_bias as f64) / nl * (h + 1.0)) } else { 2f64.powf(-(max_bias as f64) / 2.0 / nl * (2.0 * (h - nl) + 1.0)) }
                } else {
                    1.0
                };
                for i1 in 0..ne[1] {
                    let base = (((i3 * ne[2] + i2) * ne[1] + i1) * ne[0]) as usize;
                    let w: Vec<f64> = (0..ne[0] as usize)
                        .map(|i0| {
                            let mut v = xs[base + i0] as f64 * scale as f64;
                            if let Some((m, mne)) = &ms {
                                let mi = (((i3 % mne[3]) * mne[2] + (i2 % mne[2])) * mne[1] + i1) * mne[0] + i0 as i64;
                                v += slope * m[mi as usize] as f64;
                            }
                            v
                        })
                        .collect();
                    let sink = sinks.map(|s| s[i2 as usize] as f64);
                    let max = w.iter().cloned().chain(sink).fold(f64::NEG_INFINITY, f64::max);
                    let sum: f64 = w.iter().map(|v| (v - max).exp()).sum::<f64>() + sink.map_or(0.0, |s| (s - max).exp());
                    for i0 in 0..ne[0] as usize {
                        out[base + i0] = ((w[i0] - max).exp() / sum) as f32;
                    }
                }
            }
        }
        out
    }

    #[test]
    fn soft_max_matches_reference() {
        let mut rng = XorShift::new(21);
        for layout in LAYOUTS {
            for mask_ty in [None, Some(raw_type::F32), Some(raw_type::F16)] {
                for (max_bias, with_sinks) in [(0.0f32, false), (8.0, false), (0.0, true), (4.0, true)] {
                    let ne = [rng.i32_in(1, 70) as i64, rng.i32_in(1, 6) as i64, rng.i32_in(1, 6) as i64, rng.i32_in(1, 2) as i64];
                    let x = Tensor::random(raw_type::F32, ne, layout, &mut rng, -5.0, 5.0);
                    let dst = Tensor::new(raw_type::F32, ne, Layout::Contig);
                    // the mask has more rows than the input and broadcasts over dims 2, 3
                    let mne = [ne[0], ne[1] + 2, if ne[2] % 2 == 0 { 2 } else { 1 }, 1];
                    let mask = mask_ty.map(|t| Tensor::random(t, mne, Layout::Contig, &mut rng, -2.0, 0.0));
                    let sinks: Vec<f32> = (0..ne[2]).map(|_| rng.f32_in(-2.0, 2.0)).collect();
                    let sk = Tensor::from_f32(raw_type::F32, [ne[2], 1, 1, 1], Layout::Contig, &sinks);
                    let scale = 0.7f32;
                    let n = node(Op::SoftMax, &dst, &[Some(&x), mask.as_ref(), with_sinks.then_some(&sk)], &[f(scale), f(max_bias)]);
                    assert!(supports(&n));
                    run(&n, 3).unwrap();
                    let want = reference(&x, mask.as_ref(), with_sinks.then_some(&sinks[..]), scale, max_bias);
                    assert_close(&format!("{layout:?} mask {mask_ty:?} bias {max_bias} sinks {with_sinks}"), &dst.to_f32(), &want, 1e-5);
                }
            }
        }
    }

    /// the vector form at every level against the element-wise form, row by row (contiguous
    /// rows, masks F32 and F16 with -inf, sinks, ALiBi, in place)
    #[test]
    fn the_vector_rows_match_the_element_wise_form() {
        let mut rng = XorShift::new(23);
        for level in crate::simd::Level::available() {
            let vf = crate::kernels::at(level).vec;
            for (case, n) in [1i64, 5, 16, 33, 100, 257].into_iter().enumerate() {
                let ne = [n, 3, 4, 1];
                let x = Tensor::random(raw_type::F32, ne, Layout::Contig, &mut rng, -8.0, 8.0);
                let mt = if case % 2 == 0 { raw_type::F16 } else { raw_type::F32 };
                let mvals: Vec<f32> = (0..n * 3 * 2).map(|i| if i % 7 == 3 { f32::NEG_INFINITY } else { rng.f32_in(-2.0, 0.0) }).collect();
                let mask = Tensor::from_f32(mt, [n, 3, 2, 1], Layout::Contig, &mvals);
                let sinks = Tensor::from_f32(raw_type::F32, [4, 1, 1, 1], Layout::Contig, &[0.5, -1.0, 2.0, 0.0]);
                let (a, b) = (Tensor::new(raw_type::F32, ne, Layout::Contig), Tensor::new(raw_type::F32, ne, Layout::Contig));
                let with_sinks = case % 3 != 0;
                let sk = with_sinks.then_some(&sinks.view);
                for r in 0..12 {
                    let (i1, i2, i3) = unflatten(r, &ne);
                    let slope = alibi_slope(if case % 2 == 1 { 8.0 } else { 0.0 }, 4, i2 as u32);
                    assert!(fast_row(&x.view, Some(&mask.view), sk, &a.view, 0.6, slope, i1, i2, i3, &vf));
                    row_reference(&x.view, Some(&mask.view), sk, &b.view, 0.6, slope, i1, i2, i3);
                }
                assert_close(&format!("{level:?} n {n}"), &a.to_f32(), &b.to_f32(), 1e-6);
                // in place: the source row is the destination row
                let y = Tensor::from_f32(raw_type::F32, ne, Layout::Contig, &x.to_f32());
                for r in 0..12 {
                    let (i1, i2, i3) = unflatten(r, &ne);
                    let slope = alibi_slope(if case % 2 == 1 { 8.0 } else { 0.0 }, 4, i2 as u32);
                    assert!(fast_row(&y.view, Some(&mask.view), sk, &y.view, 0.6, slope, i1, i2, i3, &vf));
                }
                assert_close(&format!("{level:?} n {n} in place"), &y.to_f32(), &b.to_f32(), 1e-6);
            }
        }
    }

    #[test]
    fn soft_max_back_matches_jacobian() {
        let mut rng = XorShift::new(22);
        let ne = [13, 4, 3, 1];
        let dy = Tensor::random(raw_type::F32, ne, Layout::Contig, &mut rng, -1.0, 1.0);
        let y = Tensor::random(raw_type::F32, ne, Layout::Contig, &mut rng, 0.0, 1.0);
        let dst = Tensor::new(raw_type::F32, ne, Layout::Contig);
        let scale = 0.5f32;
        run(&node(Op::SoftMaxBack, &dst, &[Some(&dy), Some(&y)], &[f(scale), f(0.0)]), 2).unwrap();
        let (dys, ys) = (dy.to_f32(), y.to_f32());
        let mut want = vec![];
        for r in 0..12 {
            let (g, p) = (&dys[r * 13..r * 13 + 13], &ys[r * 13..r * 13 + 13]);
            // (J · dy)_k with J = diag(y) - y yᵀ
            for k in 0..13 {
                let jdy: f64 = (0..13).map(|i| ((if i == k { p[k] as f64 } else { 0.0 }) - p[k] as f64 * p[i] as f64) * g[i] as f64).sum();
                want.push((jdy * scale as f64) as f32);
            }
        }
        assert_close("soft_max_back", &dst.to_f32(), &want, 1e-5);
        let n = node(Op::SoftMaxBack, &dst, &[Some(&dy), Some(&y)], &[f(scale), f(1.0)]);
        assert!(!supports(&n), "ALiBi in the backward pass is not upstream's");
    }
}
