//! The norms against f64 references of their definitions, on strided and permuted views.

use super::*;
use crate::ops::copy::elem::testing::*;
use crate::rng::XorShift;
use raw_type::F32;

fn rows_of(t: &T) -> Vec<Vec<f64>> {
    let v = t.values();
    v.chunks(t.ne[0] as usize).map(|r| r.iter().map(|x| *x as f64).collect()).collect()
}

fn check(op: Op, src: &T, eps: f32, want_row: impl Fn(&[f64]) -> Vec<f64>) {
    let d = T::padded(F32, src.ne, 12);
    run(&node(op, &d, &[src], &[f(eps)]), 3);
    let want: Vec<f32> = rows_of(src).iter().flat_map(|r| want_row(r)).map(|x| x as f32).collect();
    assert_close(&d.values(), &want, 2e-5, &format!("{op:?} nb {:?}", src.nb));
}

#[test]
fn norm_rms_norm_l2_norm_match_their_definitions() {
    let mut r = XorShift::new(21);
    for ne in [[64, 3, 2, 2], [7, 5, 1, 3], [1000, 2, 1, 1]] {
        for layout in 0..3 {
            let mut src = match layout {
                0 => T::new(F32, ne),
                1 => T::padded(F32, ne, 20),
                _ => T::permuted(F32, ne, [0, 2, 1, 3]),
            };
            src.fill(&mut r, -3.0, 2.0);
            let eps = 1e-5f32 as f64;
            check(Op::Norm, &src, 1e-5, |x| {
                let n = x.len() as f64;
                let mean = x.iter().sum::<f64>() / n;
                let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
                x.iter().map(|v| (v - mean) / (var + eps).sqrt()).collect()
            });
            check(Op::RmsNorm, &src, 1e-5, |x| {
                let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
                x.iter().map(|v| v / (ms + eps).sqrt()).collect()
            });
            check(Op::L2Norm, &src, 1e-5, |x| {
                let l = x.iter().map(|v| v * v).sum::<f64>().sqrt().max(eps);
                x.iter().map(|v| v / l).collect()
            });
        }
    }
    // a row of zeros: L2 divides by eps, RMS by sqrt(eps)
    let zeros = T::new(F32, [8, 1, 1, 1]);
    check(Op::L2Norm, &zeros, 1e-3, |x| x.to_vec());
}

#[test]
fn rms_norm_in_place() {
    let mut r = XorShift::new(22);
    let a = T::new(F32, [50, 4, 1, 1]).random(&mut r);
    let want: Vec<f32> = rows_of(&a)
        .iter()
        .flat_map(|x| {
            let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
            x.iter().map(move |v| (v / (ms + 1e-6).sqrt()) as f32).collect::<Vec<_>>()
        })
        .collect();
    run(&node(Op::RmsNorm, &a, &[&a], &[f(1e-6)]), 2);
    assert_close(&a.values(), &want, 2e-5, "in place");
}

#[test]
fn rms_norm_back_is_the_gradient_of_rms_norm() {
    let mut r = XorShift::new(23);
    let eps = 1e-4f32;
    let dz = T::new(F32, [40, 3, 2, 1]).random(&mut r);
    let x = T::padded(F32, [40, 3, 2, 1], 4).random(&mut r);
    let d = T::new(F32, [40, 3, 2, 1]);
    run(&node(Op::RmsNormBack, &d, &[&dz, &x], &[f(eps)]), 3);
    // d/dx_i Σ_j dz_j · x_j / rms(x), with rms = sqrt(Σx²/n + eps)
    let (g, xs) = (rows_of(&dz), rows_of(&x));
    let mut want = vec![];
    for (g, x) in g.iter().zip(&xs) {
        let n = x.len() as f64;
        let ms = x.iter().map(|v| v * v).sum::<f64>() / n + eps as f64;
        let rms = ms.sqrt();
        let gx: f64 = g.iter().zip(x).map(|(a, b)| a * b).sum();
        for i in 0..x.len() {
            want.push((g[i] / rms - x[i] * gx / (n * ms * rms)) as f32);
        }
    }
    assert_close(&d.values(), &want, 2e-5, "rms_norm_back");
}

#[test]
fn group_norm_normalises_groups_of_channels() {
    let mut r = XorShift::new(24);
    // 7 channels in 3 groups: 3, 3, 1
    let (ne, groups, eps) = ([6, 4, 7, 2], 3usize, 1e-6f32);
    let a = T::padded(F32, ne, 8).random(&mut r);
    let d = T::new(F32, ne);
    run(&node(Op::GroupNorm, &d, &[&a], &[groups as i32, f(eps)]), 2);
    let per = 7usize.div_ceil(groups);
    let mut want = vec![0f32; a.nelements()];
    for i3 in 0..2 {
        for g in 0..groups {
            let chans = (g * per)..((g + 1) * per).min(7);
            let idx: Vec<[usize; 4]> = a.indices().into_iter().filter(|i| i[3] == i3 && chans.contains(&i[2])).collect();
            let n = idx.len() as f64;
            let mean = idx.iter().map(|i| a.get(*i) as f64).sum::<f64>() / n;
            let var = idx.iter().map(|i| (a.get(*i) as f64 - mean).powi(2)).sum::<f64>() / n;
            for i in idx {
                want[i[0] + 6 * (i[1] + 4 * (i[2] + 7 * i[3]))] = ((a.get(i) as f64 - mean) / (var + eps as f64).sqrt()) as f32;
            }
        }
    }
    assert_close(&d.values(), &want, 2e-5, "group_norm");
}

#[test]
fn norms_claim_f32_only() {
    let h = T::new(raw_type::F16, [8, 2, 1, 1]);
    assert!(!supports(&node(Op::RmsNorm, &h, &[&h], &[f(1e-5)])));
    let a = T::new(F32, [8, 2, 1, 1]);
    assert!(!supports(&node(Op::RmsNorm, &a, &[&a], &[f(-1.0)])), "a negative eps aborts upstream");
}

/// the fused pass on `norm` and `mul` (the weight at source `w`), on a pool of 3
fn run_fused(norm: &Node, mul: &Node, w: usize, level: crate::simd::Level) {
    let mut pool = crate::pool::ThreadPool::new(3);
    let mut scratch = crate::block::AlignedBytes::default();
    let mut exec = Exec::with_level(&mut pool, &mut scratch, level.min(crate::simd::detected()));
    rms_norm_mul(norm, mul, w, &mut exec).unwrap();
}

#[test]
fn fused_rms_norm_mul_gives_the_bits_of_the_two_ops() {
    let mut r = XorShift::new(25);
    for ne in [[512, 3, 2, 1], [64, 4, 1, 2], [7, 5, 1, 1], [1000, 2, 1, 1]] {
        for wne in [[ne[0], 1, 1, 1], [ne[0], ne[1], 1, 1], ne] {
            for pad in [0, 12] {
                let x = if pad == 0 { T::new(F32, ne) } else { T::padded(F32, ne, pad) }.random(&mut r);
                let w = T::new(F32, wne).random(&mut r);
                let eps = 1e-5f32;
                // the two ops
                let normed = T::new(F32, ne);
                run(&node(Op::RmsNorm, &normed, &[&x], &[f(eps)]), 2);
                let want = T::new(F32, ne);
                run(&node(Op::Mul, &want, &[&normed, &w], &[]), 2);
                // fused, the weight second and (same shape only: MUL broadcasts its second source) first
                let mut sides = vec![1usize];
                if wne == ne {
                    sides.push(0);
                }
                for side in sides {
                    for level in crate::simd::Level::available() {
                        let (unwritten, got) = (T::new(F32, ne), T::padded(F32, ne, 4));
                        let n = node(Op::RmsNorm, &unwritten, &[&x], &[f(eps)]);
                        let srcs = if side == 1 { [&unwritten, &w] } else { [&w, &unwritten] };
                        let m = node(Op::Mul, &got, &srcs, &[]);
                        assert!(rms_norm_mul_fusable(&n, &m, side));
                        run_fused(&n, &m, side, level);
                        let what = format!("ne {ne:?} w {wne:?} pad {pad} side {side} {level:?}");
                        assert_eq!(got.values(), want.values(), "{what}");
                        assert!(unwritten.values().iter().all(|v| *v == 0.0), "{what}: the norm's output was written");
                    }
                }
                // in place: the MUL's output is the norm's input
                let mut xi = T::new(F32, ne);
                for i in x.indices() {
                    xi.set(i, x.get(i));
                }
                let unwritten = T::new(F32, ne);
                let n = node(Op::RmsNorm, &unwritten, &[&xi], &[f(eps)]);
                let m = node(Op::Mul, &xi, &[&unwritten, &w], &[]);
                run_fused(&n, &m, 1, crate::simd::active());
                assert_eq!(xi.values(), want.values(), "in place ne {ne:?} w {wne:?}");
            }
        }
    }
}

#[test]
fn fusion_is_refused_for_other_types_and_shapes() {
    let x = T::new(F32, [8, 2, 1, 1]);
    let n = node(Op::RmsNorm, &x, &[&x], &[f(1e-5)]);
    let (out, w) = (T::new(F32, [8, 2, 1, 1]), T::new(F32, [8, 1, 1, 1]));
    assert!(rms_norm_mul_fusable(&n, &node(Op::Mul, &out, &[&x, &w], &[]), 1));
    let wh = T::new(raw_type::F16, [8, 1, 1, 1]);
    assert!(!rms_norm_mul_fusable(&n, &node(Op::Mul, &out, &[&x, &wh], &[]), 1), "F16 weight");
    let w4 = T::new(F32, [4, 1, 1, 1]);
    assert!(!rms_norm_mul_fusable(&n, &node(Op::Mul, &out, &[&x, &w4], &[]), 1), "weight row shorter");
    // every other float of a 16-float row
    let w16 = T::new(F32, [16, 1, 1, 1]);
    let mut m = node(Op::Mul, &out, &[&x, &w16], &[]);
    let v = m.src[1].as_mut().unwrap();
    (v.ne[0], v.nb[0]) = (8, 8);
    assert!(!rms_norm_mul_fusable(&n, &m, 1), "weight not packed");
    assert!(!rms_norm_mul_fusable(&n, &node(Op::Add, &out, &[&x, &w], &[]), 1), "not a MUL");
    let mut pool = crate::pool::ThreadPool::new(1);
    let mut scratch = crate::block::AlignedBytes::default();
    let mut exec = Exec::new(&mut pool, &mut scratch);
    assert!(rms_norm_mul(&n, &node(Op::Mul, &out, &[&x, &wh], &[]), 1, &mut exec).unwrap_err().0.contains("fused"));
}
