//! Family `train`: CROSS_ENTROPY_LOSS, CROSS_ENTROPY_LOSS_BACK, OPT_STEP_ADAMW, OPT_STEP_SGD (F32).
//!
//! As upstream's CPU: the loss is `-1/nrows · Σ_rows Σ_i labels_i · log_softmax(logits)_i`, each
//! row's log-softmax taken after subtracting its maximum with the sum of exponentials in f64; the
//! backward pass is `(softmax(logits) - labels) · grad / nrows`. The optimizer steps update the
//! parameters (src0) and, for AdamW, the moments (src2, src3) in place; their hyper-parameters are
//! a tensor (src4: alpha, beta1, beta2, eps, wd, beta1h, beta2h; SGD's src2: alpha, wd), so a graph
//! can change them between steps without being rebuilt.

use super::unary::kit::{get, max_chunks, par_ranges, par_ranges_c, scratch_f32, set, unflatten};
use super::{Exec, Family, Node, Op, OpError, View, raw_type};

pub const FAMILY: Family =
    Family { name: "train", ops: &[Op::CrossEntropyLoss, Op::CrossEntropyLossBack, Op::OptStepAdamw, Op::OptStepSgd], supports, compute };

const F32: i32 = raw_type::F32;

fn all_f32(node: &Node, n: usize) -> bool {
    (0..n).all(|i| node.src[i].as_ref().is_some_and(|v| v.ty == F32 && v.nb[0] == 4))
}

fn supports(node: &Node) -> bool {
    let d = &node.dst;
    if d.ty != F32 {
        return false;
    }
    match node.op {
        Op::CrossEntropyLoss => all_f32(node, 2) && node.src[0].unwrap().ne == node.src[1].unwrap().ne && d.nelements() == 1,
        Op::CrossEntropyLossBack => {
            all_f32(node, 3) && node.src[0].unwrap().nelements() == 1 && node.src[1].unwrap().ne == d.ne && node.src[2].unwrap().ne == d.ne && d.nb[0] == 4
        }
        Op::OptStepAdamw => {
            all_f32(node, 5)
                && (1..4).all(|i| node.src[i].unwrap().ne == node.src[0].unwrap().ne)
                && node.src[4].unwrap().nelements() == 7
                && d.ne == node.src[0].unwrap().ne
        }
        Op::OptStepSgd => {
            all_f32(node, 3) && node.src[1].unwrap().ne == node.src[0].unwrap().ne && node.src[2].unwrap().nelements() == 2 && d.ne == node.src[0].unwrap().ne
        }
        _ => false,
    }
}

/// element `i` of a packed F32 vector
fn flat(v: &View, i: i64) -> f32 {
    get(v, i, 0, 0, 0)
}

/// (max, log Σ exp(x - max)) of row (i1, i2, i3)
fn log_sum_exp(x: &View, i1: i64, i2: i64, i3: i64) -> (f32, f64) {
    let n = x.ne[0];
    let max = (0..n).map(|i0| get(x, i0, i1, i2, i3)).fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = (0..n).map(|i0| ((get(x, i0, i1, i2, i3) - max).exp()) as f64).sum();
    (max, sum.ln())
}

fn compute(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    if !supports(node) {
        return Err(OpError::new(node, "types or shapes the train kernels do not handle (F32, same shapes)"));
    }
    let d = node.dst;
    match node.op {
        Op::CrossEntropyLoss => {
            let (x, t) = (*node.src(0)?, *node.src(1)?);
            let ne = x.ne;
            let nr = x.nrows();
            let chunks = max_chunks(exec);
            let scratch = exec.scratch(chunks * 4);
            scratch_f32(&scratch, 0, chunks).fill(0.0);
            par_ranges_c(exec, nr, |c, r0, r1| {
                let mut part = 0f32;
                for r in r0..r1 {
                    let (i1, i2, i3) = unflatten(r, &ne);
                    let (max, lse) = log_sum_exp(&x, i1, i2, i3);
                    let mut row = 0f64;
                    for i0 in 0..ne[0] {
                        let ls = ((get(&x, i0, i1, i2, i3) - max) as f64 - lse) as f32;
                        row += (ls * get(&t, i0, i1, i2, i3)) as f64;
                    }
                    part += row as f32;
                }
                scratch_f32(&scratch, c, 1)[0] = part;
            });
            let total: f32 = scratch_f32(&scratch, 0, chunks).iter().sum();
            set(&d, 0, 0, 0, 0, total * (-1.0 / nr as f32));
        }
        Op::CrossEntropyLossBack => {
            let (g, x, t) = (*node.src(0)?, *node.src(1)?, *node.src(2)?);
            let ne = x.ne;
            let d_by_nr = flat(&g, 0) / x.nrows() as f32;
            par_ranges(exec, x.nrows(), |r0, r1| {
                for r in r0..r1 {
                    let (i1, i2, i3) = unflatten(r, &ne);
                    let max = (0..ne[0]).map(|i0| get(&x, i0, i1, i2, i3)).fold(f32::NEG_INFINITY, f32::max);
                    let mut sum = 0f64;
                    for i0 in 0..ne[0] {
                        let e = (get(&x, i0, i1, i2, i3) - max).exp();
                        sum += e as f64;
                        set(&d, i0, i1, i2, i3, e);
                    }
                    let inv = (1.0 / sum) as f32;
                    for i0 in 0..ne[0] {
                        set(&d, i0, i1, i2, i3, (get(&d, i0, i1, i2, i3) * inv - get(&t, i0, i1, i2, i3)) * d_by_nr);
                    }
                }
            });
        }
        Op::OptStepAdamw => {
            let (w, g, m, v, p) = (*node.src(0)?, *node.src(1)?, *node.src(2)?, *node.src(3)?, *node.src(4)?);
            let hp: Vec<f32> = (0..7).map(|i| flat(&p, i)).collect();
            let (alpha, beta1, beta2, eps, wd, beta1h, beta2h) = (hp[0], hp[1], hp[2], hp[3], hp[4], hp[5], hp[6]);
            let keep = 1.0 - alpha * wd;
            let ne = w.ne;
            par_ranges(exec, w.nrows(), |r0, r1| {
                for r in r0..r1 {
                    let (i1, i2, i3) = unflatten(r, &ne);
                    for i0 in 0..ne[0] {
                        let gi = get(&g, i0, i1, i2, i3);
                        let mi = get(&m, i0, i1, i2, i3) * beta1 + gi * (1.0 - beta1);
                        let vi = get(&v, i0, i1, i2, i3) * beta2 + gi * gi * (1.0 - beta2);
                        set(&m, i0, i1, i2, i3, mi);
                        set(&v, i0, i1, i2, i3, vi);
                        let mh = mi * beta1h;
                        let vh = (vi * beta2h).sqrt() + eps;
                        // decoupled weight decay (AdamW), not an L2 term in the loss
                        set(&w, i0, i1, i2, i3, get(&w, i0, i1, i2, i3) * keep - alpha * mh / vh);
                    }
                }
            });
        }
        Op::OptStepSgd => {
            let (w, g, p) = (*node.src(0)?, *node.src(1)?, *node.src(2)?);
            let alpha = flat(&p, 0);
            let keep = 1.0 - alpha * flat(&p, 1);
            let ne = w.ne;
            par_ranges(exec, w.nrows(), |r0, r1| {
                for r in r0..r1 {
                    let (i1, i2, i3) = unflatten(r, &ne);
                    for i0 in 0..ne[0] {
                        set(&w, i0, i1, i2, i3, get(&w, i0, i1, i2, i3) * keep - alpha * get(&g, i0, i1, i2, i3));
                    }
                }
            });
        }
        _ => return Err(OpError::new(node, "not a train-family op")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::unary::kit::testkit::*;
    use super::*;
    use crate::rng::XorShift;

    fn softmax(row: &[f32]) -> Vec<f64> {
        let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
        let e: Vec<f64> = row.iter().map(|&x| (x as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| v / s).collect()
    }

    #[test]
    fn cross_entropy_and_its_gradient_match_reference() {
        let mut rng = XorShift::new(61);
        for layout in LAYOUTS {
            let ne = [rng.i32_in(2, 40) as i64, rng.i32_in(1, 9) as i64, 2, 1];
            let x = Tensor::random(F32, ne, layout, &mut rng, -3.0, 3.0);
            let t = Tensor::random(F32, ne, Layout::Contig, &mut rng, 0.0, 1.0);
            let loss = Tensor::new(F32, [1, 1, 1, 1], Layout::Contig);
            run(&node(Op::CrossEntropyLoss, &loss, &[Some(&x), Some(&t)], &[]), 3).unwrap();
            let (xs, ts) = (x.to_f32(), t.to_f32());
            let nr = (ne[1] * ne[2]) as f64;
            let n0 = ne[0] as usize;
            let want: f64 =
                -xs.chunks(n0).zip(ts.chunks(n0)).map(|(r, l)| softmax(r).iter().zip(l).map(|(p, &y)| p.ln() * y as f64).sum::<f64>()).sum::<f64>() / nr;
            assert_close(&format!("loss {layout:?}"), &loss.to_f32(), &[want as f32], 1e-5);

            let g = Tensor::from_f32(F32, [1, 1, 1, 1], Layout::Contig, &[0.75]);
            let dx = Tensor::new(F32, ne, layout);
            run(&node(Op::CrossEntropyLossBack, &dx, &[Some(&g), Some(&x), Some(&t)], &[]), 3).unwrap();
            let want: Vec<f32> = xs
                .chunks(n0)
                .zip(ts.chunks(n0))
                .flat_map(|(r, l)| softmax(r).into_iter().zip(l.to_vec()).map(|(p, y)| ((p - y as f64) * 0.75 / nr) as f32).collect::<Vec<_>>())
                .collect();
            assert_close(&format!("loss back {layout:?}"), &dx.to_f32(), &want, 1e-5);
        }
    }

    #[test]
    fn optimizer_steps_update_in_place() {
        let mut rng = XorShift::new(62);
        let ne = [7, 3, 2, 1];
        let w = Tensor::random(F32, ne, Layout::Padded, &mut rng, -1.0, 1.0);
        let g = Tensor::random(F32, ne, Layout::Padded, &mut rng, -1.0, 1.0);
        let m = Tensor::random(F32, ne, Layout::Padded, &mut rng, -0.1, 0.1);
        let v = Tensor::random(F32, ne, Layout::Padded, &mut rng, 0.0, 0.1);
        let hp = [1e-2f32, 0.9, 0.999, 1e-8, 0.1, 1.0 / (1.0 - 0.9), 1.0 / (1.0 - 0.999)];
        let p = Tensor::from_f32(F32, [7, 1, 1, 1], Layout::Contig, &hp);
        let (w0, g0, m0, v0) = (w.to_f32(), g.to_f32(), m.to_f32(), v.to_f32());
        run(&node(Op::OptStepAdamw, &w, &[Some(&w), Some(&g), Some(&m), Some(&v), Some(&p)], &[]), 2).unwrap();
        let (mut wm, mut mm, mut vm) = (vec![], vec![], vec![]);
        for i in 0..w0.len() {
            let (gi, mi, vi) = (g0[i] as f64, m0[i] as f64 * 0.9 + g0[i] as f64 * 0.1, v0[i] as f64 * 0.999 + (g0[i] as f64).powi(2) * 0.001);
            let _ = gi;
            mm.push(mi as f32);
            vm.push(vi as f32);
            let step = 1e-2 * (mi * hp[5] as f64) / ((vi * hp[6] as f64).sqrt() + 1e-8);
            wm.push((w0[i] as f64 * (1.0 - 1e-2 * 0.1) - step) as f32);
        }
        assert_close("adamw m", &m.to_f32(), &mm, 1e-5);
        assert_close("adamw v", &v.to_f32(), &vm, 1e-5);
        assert_close("adamw w", &w.to_f32(), &wm, 1e-4);

        let sp = Tensor::from_f32(F32, [2, 1, 1, 1], Layout::Contig, &[0.5, 0.2]);
        let w1 = w.to_f32();
        run(&node(Op::OptStepSgd, &w, &[Some(&w), Some(&g), Some(&sp)], &[]), 2).unwrap();
        let want: Vec<f32> = w1.iter().zip(&g0).map(|(&x, &gi)| x * (1.0 - 0.5 * 0.2) - 0.5 * gi).collect();
        assert_close("sgd", &w.to_f32(), &want, 1e-6);
    }
}
