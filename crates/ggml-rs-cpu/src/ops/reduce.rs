//! Family `reduce`: SUM, SUM_ROWS, MEAN, ARGMAX, COUNT_EQUAL, CUMSUM, ARGSORT, TOP_K (reductions
//! and orderings), REPEAT, REPEAT_BACK, CONCAT, PAD, ARANGE (shape ops).
//!
//! As upstream's CPU: SUM over F32 adds each row in f64 and the rows in f64 (F16 / BF16 in f32),
//! rounded once to the destination's type; SUM_ROWS, MEAN, CUMSUM run in f32 (MEAN divides the
//! row's sum by its length); ARGMAX takes the last index of the maximum (upstream's `max == x[i]`
//! test); TOP_K writes the k largest in descending order with the first two swapped (upstream
//! does so to show the order is unspecified); PAD fills zeros or, circular (`op_params[8]`), wraps
//! around. REPEAT and CONCAT copy elements of any non-block type as bytes.

use super::unary::kit::{at, elem_size, get, get_i32, is_float, par_ranges, set, set_i32, unflatten};
use super::{Exec, Family, Node, Op, OpError, View, raw_type};

pub const FAMILY: Family = Family {
    name: "reduce",
    ops: &[
        Op::Sum,
        Op::SumRows,
        Op::Mean,
        Op::Argmax,
        Op::CountEqual,
        Op::Cumsum,
        Op::Argsort,
        Op::TopK,
        Op::Repeat,
        Op::RepeatBack,
        Op::Concat,
        Op::Pad,
        Op::Arange,
    ],
    supports,
    compute,
};

const F32: i32 = raw_type::F32;

fn supports(node: &Node) -> bool {
    let d = &node.dst;
    if node.op == Op::Arange {
        let (start, stop, step) = (node.param_f32(0), node.param_f32(1), node.param_f32(2));
        return d.ty == F32 && step != 0.0 && d.nelements() == ((stop - start) / step).ceil() as i64;
    }
    let Some(s) = node.src[0].as_ref() else { return false };
    let rows_match = |a: &View, b: &View| a.ne[1..] == b.ne[1..];
    match node.op {
        // upstream reads the rows as packed whatever nb[0] says (an assert compiled out): a
        // transposed source is refused rather than summed differently
        Op::Sum => is_float(s.ty) && d.ty == s.ty && d.nelements() == 1 && Some(s.nb[0]) == elem_size(s.ty),
        Op::SumRows | Op::Mean => s.ty == F32 && d.ty == F32 && d.ne[0] == 1 && rows_match(s, d) && s.nb[0] == 4,
        Op::Cumsum => s.ty == F32 && d.ty == F32 && s.ne == d.ne,
        Op::Argmax => s.ty == F32 && d.ty == raw_type::I32 && s.ne[2] == 1 && s.ne[3] == 1 && d.ne[0] == s.ne[1] && d.nelements() == s.ne[1],
        Op::CountEqual => {
            node.src[1].as_ref().is_some_and(|t| t.ty == raw_type::I32 && t.ne == s.ne) && s.ty == raw_type::I32 && d.ty == raw_type::I64 && d.nelements() == 1
        }
        Op::Argsort => s.ty == F32 && d.ty == raw_type::I32 && s.ne == d.ne && matches!(node.params[0], 0 | 1),
        Op::TopK => s.ty == F32 && d.ty == raw_type::I32 && d.ne[0] <= s.ne[0] && rows_match(s, d),
        Op::Repeat => elem_size(s.ty).is_some() && d.ty == s.ty && (0..4).all(|k| s.ne[k] > 0 && d.ne[k] % s.ne[k] == 0),
        Op::RepeatBack => s.ty == F32 && d.ty == F32 && (0..4).all(|k| d.ne[k] > 0 && s.ne[k] % d.ne[k] == 0),
        Op::Concat => {
            let dim = node.params[0];
            node.src[1].as_ref().is_some_and(|t| {
                (0..4).contains(&dim)
                    && t.ty == s.ty
                    && d.ty == s.ty
                    && (elem_size(s.ty).is_some() || block_rows(s.ty, [s, t, d]).is_some())
                    && (0..4).all(|k| if k as i32 == dim { s.ne[k] + t.ne[k] == d.ne[k] } else { s.ne[k] == d.ne[k] && t.ne[k] == d.ne[k] })
            })
        }
        Op::Pad => {
            let p = &node.params;
            s.ty == F32 && d.ty == F32 && (0..4).all(|k| p[2 * k] >= 0 && p[2 * k + 1] >= 0 && s.ne[k] + (p[2 * k] + p[2 * k + 1]) as i64 == d.ne[k])
        }
        _ => false,
    }
}

/// the block type of views whose rows are packed whole blocks, for CONCAT of quantized rows
fn block_rows(ty: i32, views: [&View; 3]) -> Option<crate::GgmlType> {
    let bt = crate::GgmlType::from_raw(ty)?;
    views.iter().all(|v| v.nb[0] == bt.type_size() && (v.ne[0] as usize).is_multiple_of(bt.block_size())).then_some(bt)
}

fn compute(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    if !supports(node) {
        return Err(OpError::new(node, "types or shapes the reduce kernels do not handle"));
    }
    let d = node.dst;
    let ne = d.ne;
    if node.op == Op::Arange {
        let (start, step) = (node.param_f32(0), node.param_f32(2));
        par_ranges(exec, d.nelements(), |i0, i1| {
            for i in i0..i1 {
                let (a, b, c) = unflatten(i / ne[0], &ne);
                set(&d, i % ne[0], a, b, c, start + step * i as f32);
            }
        });
        return Ok(());
    }
    let s = *node.src(0)?;
    let sne = s.ne;
    match node.op {
        Op::Sum => {
            let total = if s.ty == F32 {
                let mut total = 0f64;
                for r in 0..s.nrows() {
                    let (i1, i2, i3) = unflatten(r, &sne);
                    total += (0..sne[0]).map(|i0| get(&s, i0, i1, i2, i3) as f64).sum::<f64>();
                }
                total as f32
            } else {
                let mut total = 0f32;
                for r in 0..s.nrows() {
                    let (i1, i2, i3) = unflatten(r, &sne);
                    total += (0..sne[0]).map(|i0| get(&s, i0, i1, i2, i3)).sum::<f32>();
                }
                total
            };
            set(&d, 0, 0, 0, 0, total);
        }
        Op::SumRows | Op::Mean => {
            let mean = node.op == Op::Mean;
            par_ranges(exec, s.nrows(), |r0, r1| {
                for r in r0..r1 {
                    let (i1, i2, i3) = unflatten(r, &sne);
                    let sum = (0..sne[0]).map(|i0| get(&s, i0, i1, i2, i3) as f64).sum::<f64>() as f32;
                    set(&d, 0, i1, i2, i3, if mean { sum / sne[0] as f32 } else { sum });
                }
            });
        }
        Op::Cumsum => par_ranges(exec, s.nrows(), |r0, r1| {
            for r in r0..r1 {
                let (i1, i2, i3) = unflatten(r, &sne);
                let mut acc = 0f32;
                for i0 in 0..sne[0] {
                    acc = if i0 == 0 { get(&s, 0, i1, i2, i3) } else { acc + get(&s, i0, i1, i2, i3) };
                    set(&d, i0, i1, i2, i3, acc);
                }
            }
        }),
        Op::Argmax => par_ranges(exec, sne[1], |r0, r1| {
            for i1 in r0..r1 {
                let mut max = f32::NEG_INFINITY;
                let mut idx = 0;
                for i0 in 0..sne[0] {
                    let x = get(&s, i0, i1, 0, 0);
                    max = max.max(x);
                    if max == x {
                        idx = i0;
                    }
                }
                let (a, b, c) = unflatten(i1 / ne[0], &ne);
                set_i32(&d, i1 % ne[0], a, b, c, idx as i32);
            }
        }),
        Op::CountEqual => {
            let t = *node.src(1)?;
            let mut n = 0i64;
            for r in 0..s.nrows() {
                let (i1, i2, i3) = unflatten(r, &sne);
                n += (0..sne[0]).filter(|&i0| get_i32(&s, i0, i1, i2, i3) == get_i32(&t, i0, i1, i2, i3)).count() as i64;
            }
            // SAFETY: the destination is one I64 element (supports checks)
            unsafe { (d.data as *mut i64).write_unaligned(n) };
        }
        Op::Argsort | Op::TopK => {
            let k = ne[0];
            let desc = node.op == Op::TopK || node.params[0] == 1;
            let top_k = node.op == Op::TopK;
            par_ranges(exec, s.nrows(), |r0, r1| {
                let mut idx: Vec<i32> = Vec::with_capacity(sne[0] as usize);
                for r in r0..r1 {
                    let (i1, i2, i3) = unflatten(r, &sne);
                    let row: Vec<f32> = (0..sne[0]).map(|i0| get(&s, i0, i1, i2, i3)).collect();
                    idx.clear();
                    idx.extend(0..sne[0] as i32);
                    let cmp = |a: &i32, b: &i32| row[*a as usize].total_cmp(&row[*b as usize]);
                    if desc {
                        idx.sort_by(|a, b| cmp(b, a))
                    } else {
                        idx.sort_by(cmp)
                    }
                    if top_k && k > 1 {
                        idx.swap(0, 1);
                    }
                    for i0 in 0..k {
                        set_i32(&d, i0, i1, i2, i3, idx[i0 as usize]);
                    }
                }
            });
        }
        Op::Repeat => {
            let es = elem_size(s.ty).expect("checked");
            par_ranges(exec, d.nrows(), |r0, r1| {
                for r in r0..r1 {
                    let (i1, i2, i3) = unflatten(r, &ne);
                    for i0 in 0..ne[0] {
                        let from = at(&s, i0 % sne[0], i1 % sne[1], i2 % sne[2], i3 % sne[3]);
                        // SAFETY: one element of each view, in range (views' contract)
                        unsafe { std::ptr::copy_nonoverlapping(from, at(&d, i0, i1, i2, i3), es) };
                    }
                }
            });
        }
        Op::RepeatBack => par_ranges(exec, d.nrows(), |r0, r1| {
            let reps = [sne[0] / ne[0], sne[1] / ne[1], sne[2] / ne[2], sne[3] / ne[3]];
            for r in r0..r1 {
                let (k1, k2, k3) = unflatten(r, &ne);
                for k0 in 0..ne[0] {
                    let mut acc = 0f32;
                    for j3 in 0..reps[3] {
                        for j2 in 0..reps[2] {
                            for j1 in 0..reps[1] {
                                for j0 in 0..reps[0] {
                                    acc += get(&s, j0 * ne[0] + k0, j1 * ne[1] + k1, j2 * ne[2] + k2, j3 * ne[3] + k3);
                                }
                            }
                        }
                    }
                    set(&d, k0, k1, k2, k3, acc);
                }
            }
        }),
        Op::Concat if elem_size(s.ty).is_none() => {
            // a block type: whole packed rows (or, along dim 0, the two halves of a row) as bytes
            let t = *node.src(1)?;
            let dim = node.params[0] as usize;
            let bt = block_rows(s.ty, [&s, &t, &d]).expect("checked");
            let (ra, rb) = (bt.row_size(sne[0] as usize), bt.row_size(t.ne[0] as usize));
            par_ranges(exec, d.nrows(), |r0, r1| {
                for r in r0..r1 {
                    let (i1, i2, i3) = unflatten(r, &ne);
                    let to = d.row(i1, i2, i3);
                    // SAFETY: packed rows of the views (block_rows checks nb[0]), in range (views' contract)
                    unsafe {
                        if dim == 0 {
                            std::ptr::copy_nonoverlapping(s.row(i1, i2, i3), to, ra);
                            std::ptr::copy_nonoverlapping(t.row(i1, i2, i3), to.add(ra), rb);
                        } else {
                            let mut i = [0, i1, i2, i3];
                            if i[dim] < sne[dim] {
                                std::ptr::copy_nonoverlapping(s.row(i1, i2, i3), to, ra);
                            } else {
                                i[dim] -= sne[dim];
                                std::ptr::copy_nonoverlapping(t.row(i[1], i[2], i[3]), to, ra);
                            }
                        }
                    }
                }
            });
        }
        Op::Concat => {
            let t = *node.src(1)?;
            let dim = node.params[0] as usize;
            let es = elem_size(s.ty).expect("checked");
            par_ranges(exec, d.nrows(), |r0, r1| {
                for r in r0..r1 {
                    let (i1, i2, i3) = unflatten(r, &ne);
                    for i0 in 0..ne[0] {
                        let mut i = [i0, i1, i2, i3];
                        let from = if i[dim] < sne[dim] {
                            at(&s, i[0], i[1], i[2], i[3])
                        } else {
                            i[dim] -= sne[dim];
                            at(&t, i[0], i[1], i[2], i[3])
                        };
                        // SAFETY: one element of each view, in range (views' contract)
                        unsafe { std::ptr::copy_nonoverlapping(from, at(&d, i0, i1, i2, i3), es) };
                    }
                }
            });
        }
        Op::Pad => {
            let p = node.params;
            let circular = p[8] != 0;
            par_ranges(exec, d.nrows(), |r0, r1| {
                for r in r0..r1 {
                    let (i1, i2, i3) = unflatten(r, &ne);
                    for i0 in 0..ne[0] {
                        let i = [i0, i1, i2, i3];
                        let src = |k: usize| i[k] - p[2 * k] as i64;
                        let v = if circular {
                            let w = |k: usize| src(k).rem_euclid(sne[k]);
                            get(&s, w(0), w(1), w(2), w(3))
                        } else if (0..4).all(|k| src(k) >= 0 && src(k) < sne[k]) {
                            get(&s, src(0), src(1), src(2), src(3))
                        } else {
                            0.0
                        };
                        set(&d, i0, i1, i2, i3, v);
                    }
                }
            });
        }
        _ => return Err(OpError::new(node, "not a reduce-family op")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::unary::kit::testkit::*;
    use super::*;
    use crate::rng::XorShift;

    fn idx(ne: [i64; 4], i: [i64; 4]) -> usize {
        (((i[3] * ne[2] + i[2]) * ne[1] + i[1]) * ne[0] + i[0]) as usize
    }

    fn each(ne: [i64; 4]) -> impl Iterator<Item = [i64; 4]> {
        (0..ne[3]).flat_map(move |i3| (0..ne[2]).flat_map(move |i2| (0..ne[1]).flat_map(move |i1| (0..ne[0]).map(move |i0| [i0, i1, i2, i3]))))
    }

    #[test]
    fn sums_means_cumsum_match_reference() {
        let mut rng = XorShift::new(51);
        for layout in LAYOUTS {
            let ne = [rng.i32_in(1, 50) as i64, rng.i32_in(1, 5) as i64, rng.i32_in(1, 4) as i64, 2];
            let x = Tensor::random(F32, ne, layout, &mut rng, -1.0, 1.0);
            let xs = x.to_f32();
            for ty in [F32, raw_type::F16, raw_type::BF16] {
                let xt = Tensor::from_f32(ty, ne, layout, &xs);
                let d = Tensor::new(ty, [1, 1, 1, 1], Layout::Contig);
                run(&node(Op::Sum, &d, &[Some(&xt)], &[]), 2).unwrap();
                let want: f64 = xt.to_f32().iter().map(|&v| v as f64).sum();
                assert_close(&format!("sum {ty} {layout:?}"), &d.to_f32(), &[want as f32], if ty == F32 { 1e-6 } else { 1e-2 });
            }
            let rows = [1, ne[1], ne[2], ne[3]];
            let (sr, mean, cs) = (Tensor::new(F32, rows, layout), Tensor::new(F32, rows, Layout::Contig), Tensor::new(F32, ne, layout));
            run(&node(Op::SumRows, &sr, &[Some(&x)], &[]), 3).unwrap();
            run(&node(Op::Mean, &mean, &[Some(&x)], &[]), 3).unwrap();
            run(&node(Op::Cumsum, &cs, &[Some(&x)], &[]), 3).unwrap();
            let mut want_sr = vec![];
            let mut want_cs = vec![];
            for row in xs.chunks(ne[0] as usize) {
                want_sr.push(row.iter().map(|&v| v as f64).sum::<f64>() as f32);
                let mut acc = 0f64;
                want_cs.extend(row.iter().map(|&v| {
                    acc += v as f64;
                    acc as f32
                }));
            }
            assert_close("sum_rows", &sr.to_f32(), &want_sr, 1e-5);
            assert_close("mean", &mean.to_f32(), &want_sr.iter().map(|s| s / ne[0] as f32).collect::<Vec<_>>(), 1e-5);
            assert_close("cumsum", &cs.to_f32(), &want_cs, 1e-5);
        }
    }

    #[test]
    fn argmax_takes_the_last_maximum_and_count_equal_counts() {
        let x = Tensor::from_f32(F32, [4, 3, 1, 1], Layout::Padded, &[1.0, 5.0, 5.0, 2.0, -1.0, -3.0, -2.0, -1.5, 0.0, 0.0, 0.0, 0.0]);
        let d = Tensor::new(raw_type::I32, [3, 1, 1, 1], Layout::Contig);
        run(&node(Op::Argmax, &d, &[Some(&x)], &[]), 2).unwrap();
        assert_eq!(d.to_f32(), vec![2.0, 0.0, 3.0]);
        let mut rng = XorShift::new(52);
        let a: Vec<f32> = (0..200).map(|_| rng.i32_in(0, 3) as f32).collect();
        let b: Vec<f32> = (0..200).map(|_| rng.i32_in(0, 3) as f32).collect();
        let (ta, tb) =
            (Tensor::from_f32(raw_type::I32, [20, 10, 1, 1], Layout::Permuted, &a), Tensor::from_f32(raw_type::I32, [20, 10, 1, 1], Layout::Contig, &b));
        let c = Tensor::new(raw_type::I64, [1, 1, 1, 1], Layout::Contig);
        run(&node(Op::CountEqual, &c, &[Some(&ta), Some(&tb)], &[]), 2).unwrap();
        // SAFETY: an I64 scalar test tensor
        let got = unsafe { (c.view.data as *const i64).read() };
        assert_eq!(got, a.iter().zip(&b).filter(|(x, y)| x == y).count() as i64);
    }

    #[test]
    fn argsort_and_top_k_order_rows() {
        let mut rng = XorShift::new(53);
        for layout in LAYOUTS {
            let ne = [rng.i32_in(2, 40) as i64, 3, 2, 1];
            let x = Tensor::random(F32, ne, layout, &mut rng, -10.0, 10.0);
            let xs = x.to_f32();
            for order in [0, 1] {
                let d = Tensor::new(raw_type::I32, ne, layout);
                run(&node(Op::Argsort, &d, &[Some(&x)], &[order]), 2).unwrap();
                for (row, ids) in xs.chunks(ne[0] as usize).zip(d.to_f32().chunks(ne[0] as usize)) {
                    let vals: Vec<f32> = ids.iter().map(|&i| row[i as usize]).collect();
                    let mut sorted = row.to_vec();
                    sorted.sort_by(|a, b| a.total_cmp(b));
                    if order == 1 {
                        sorted.reverse();
                    }
                    assert_eq!(vals, sorted, "argsort order {order}");
                }
            }
            let k = (ne[0] / 2).max(1);
            let d = Tensor::new(raw_type::I32, [k, 3, 2, 1], Layout::Contig);
            run(&node(Op::TopK, &d, &[Some(&x)], &[]), 2).unwrap();
            for (row, ids) in xs.chunks(ne[0] as usize).zip(d.to_f32().chunks(k as usize)) {
                let mut got: Vec<f32> = ids.iter().map(|&i| row[i as usize]).collect();
                got.sort_by(|a, b| b.total_cmp(a));
                let mut sorted = row.to_vec();
                sorted.sort_by(|a, b| b.total_cmp(a));
                assert_eq!(got, sorted[..k as usize], "top_k");
            }
        }
    }

    #[test]
    fn repeat_back_inverts_repeat_shapes_concat_pad_arange() {
        let mut rng = XorShift::new(54);
        let sne = [3, 2, 1, 2];
        let dne = [6, 4, 3, 2];
        for ty in [F32, raw_type::F16, raw_type::I32] {
            let s = Tensor::random(ty, sne, Layout::Padded, &mut rng, -5.0, 5.0);
            let s = if ty == raw_type::I32 { Tensor::from_f32(ty, sne, Layout::Padded, &s.to_f32().iter().map(|v| v.round()).collect::<Vec<_>>()) } else { s };
            let d = Tensor::new(ty, dne, Layout::Permuted);
            run(&node(Op::Repeat, &d, &[Some(&s)], &[]), 2).unwrap();
            let (sv, dv) = (s.to_f32(), d.to_f32());
            for i in each(dne) {
                assert_eq!(dv[idx(dne, i)], sv[idx(sne, [i[0] % 3, i[1] % 2, 0, i[3] % 2])], "repeat {ty} at {i:?}");
            }
        }
        let big = Tensor::random(F32, dne, Layout::Padded, &mut rng, -1.0, 1.0);
        let small = Tensor::new(F32, sne, Layout::Contig);
        run(&node(Op::RepeatBack, &small, &[Some(&big)], &[]), 2).unwrap();
        let mut want = vec![0f32; 12];
        let bv = big.to_f32();
        for i in each(dne) {
            want[idx(sne, [i[0] % 3, i[1] % 2, 0, i[3] % 2])] += bv[idx(dne, i)];
        }
        assert_close("repeat_back", &small.to_f32(), &want, 1e-5);

        for dim in 0..4usize {
            let mut bne = [3i64, 2, 2, 1];
            bne[dim] = 4;
            let a = Tensor::random(F32, [3, 2, 2, 1], Layout::Padded, &mut rng, -1.0, 1.0);
            let b = Tensor::random(F32, bne, Layout::Contig, &mut rng, -1.0, 1.0);
            let mut cne = [3i64, 2, 2, 1];
            cne[dim] += 4;
            let c = Tensor::new(F32, cne, Layout::Contig);
            run(&node(Op::Concat, &c, &[Some(&a), Some(&b)], &[dim as i32]), 2).unwrap();
            let (av, bv, cv) = (a.to_f32(), b.to_f32(), c.to_f32());
            for i in each(cne) {
                let want = if i[dim] < [3, 2, 2, 1][dim] {
                    av[idx([3, 2, 2, 1], i)]
                } else {
                    let mut j = i;
                    j[dim] -= [3, 2, 2, 1][dim];
                    bv[idx(bne, j)]
                };
                assert_eq!(cv[idx(cne, i)], want, "concat dim {dim} at {i:?}");
            }
        }

        let s = Tensor::random(F32, [3, 2, 1, 1], Layout::Padded, &mut rng, 1.0, 2.0);
        let sv = s.to_f32();
        for circular in [0, 1] {
            let d = Tensor::new(F32, [6, 3, 1, 1], Layout::Contig);
            run(&node(Op::Pad, &d, &[Some(&s)], &[1, 2, 0, 1, 0, 0, 0, 0, circular]), 2).unwrap();
            let dv = d.to_f32();
            for i in each([6, 3, 1, 1]) {
                let (x, y) = (i[0] - 1, i[1]);
                let want = if circular == 1 {
                    sv[idx([3, 2, 1, 1], [x.rem_euclid(3), y.rem_euclid(2), 0, 0])]
                } else if (0..3).contains(&x) && (0..2).contains(&y) {
                    sv[idx([3, 2, 1, 1], [x, y, 0, 0])]
                } else {
                    0.0
                };
                assert_eq!(dv[idx([6, 3, 1, 1], i)], want, "pad circular {circular} at {i:?}");
            }
        }

        let d = Tensor::new(F32, [5, 1, 1, 1], Layout::Contig);
        run(&node(Op::Arange, &d, &[], &[f(1.0), f(3.5), f(0.5)]), 2).unwrap();
        assert_eq!(d.to_f32(), vec![1.0, 1.5, 2.0, 2.5, 3.0]);
        let wrong = Tensor::new(F32, [4, 1, 1, 1], Layout::Contig);
        assert!(run(&node(Op::Arange, &wrong, &[], &[f(1.0), f(3.5), f(0.5)]), 1).is_err());
    }

    /// a packed tensor of block type `t` from values (the values it holds after rounding returned)
    fn blocks(t: crate::GgmlType, ne: [i64; 4], rng: &mut XorShift) -> (Tensor, Vec<f32>) {
        let n = ne.iter().product::<i64>() as usize;
        let vals: Vec<f32> = (0..n).map(|_| rng.f32_in(-1.0, 1.0)).collect();
        let mut buf = crate::block::AlignedBytes::zeroed(t.row_size(n));
        crate::quants::quantize_row(t, &vals, &mut buf);
        let mut back = vec![0f32; n];
        crate::quants::dequantize_row(t, &buf, &mut back);
        let nb1 = t.row_size(ne[0] as usize);
        let nb = [t.type_size(), nb1, nb1 * ne[1] as usize, nb1 * (ne[1] * ne[2]) as usize];
        let data = buf.as_mut_ptr();
        (Tensor { buf, view: View { ty: t as i32, ne, nb, data } }, back)
    }

    #[test]
    fn concat_of_quantized_rows_and_sum_of_a_transposed_view() {
        let mut rng = XorShift::new(55);
        let t = crate::GgmlType::Q8_0;
        for dim in 0..4usize {
            let ane = [64i64, 2, 3, 1];
            let mut bne = ane;
            bne[dim] = if dim == 0 { 32 } else { 2 };
            let mut cne = ane;
            cne[dim] += bne[dim];
            let (a, av) = blocks(t, ane, &mut rng);
            let (b, bv) = blocks(t, bne, &mut rng);
            let (c, _) = blocks(t, cne, &mut rng);
            let n = node(Op::Concat, &c, &[Some(&a), Some(&b)], &[dim as i32]);
            assert!(supports(&n), "dim {dim}");
            run(&n, 2).unwrap();
            let mut cv = vec![0f32; cne.iter().product::<i64>() as usize];
            crate::quants::dequantize_row(t, &c.buf[..t.row_size(cv.len())], &mut cv);
            for i in each(cne) {
                let want = if i[dim] < ane[dim] {
                    av[idx(ane, i)]
                } else {
                    let mut j = i;
                    j[dim] -= ane[dim];
                    bv[idx(bne, j)]
                };
                assert_eq!(cv[idx(cne, i)], want, "q8_0 concat dim {dim} at {i:?}");
            }
        }
        // upstream sums a transposed view's memory as if its rows were packed: not claimed
        let x = Tensor::new(F32, [4, 3, 1, 1], Layout::Contig);
        let mut tv = x.view;
        tv.ne = [3, 4, 1, 1];
        tv.nb = [16, 4, 48, 48];
        let xt = Tensor { buf: crate::block::AlignedBytes::zeroed(0), view: tv };
        let d = Tensor::new(F32, [1, 1, 1, 1], Layout::Contig);
        assert!(!supports(&node(Op::Sum, &d, &[Some(&xt)], &[])));
    }
}
