//! The element-wise kernels against naive references: each element through f32, the result
//! rounded to the destination type (exactly what upstream's loops do), so results are compared
//! bit for bit.

use super::*;
use crate::ops::copy::elem::testing::*;
use crate::rng::XorShift;
use raw_type::{BF16, F16, F32, I32};

fn round(ty: i32, v: f32) -> f32 {
    let s = Scalar::of(ty).unwrap();
    let mut b = [0u8; 4];
    // SAFETY: 4 bytes
    unsafe {
        s.store(b.as_mut_ptr(), v);
        s.load(b.as_ptr())
    }
}

type Bin = fn(f32, f32) -> f32;
type Un = fn(f32) -> f32;

fn same_bits(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()), "{what}[{i}]: {g}, want {w}");
    }
}

#[test]
fn add_sub_mul_div_broadcast_src1_for_every_type_triple() {
    let mut r = XorShift::new(11);
    let triples = [(F32, F32, F32), (F16, F16, F16), (BF16, BF16, BF16), (BF16, F32, BF16), (BF16, F32, F32), (F16, F32, F16), (F16, F32, F32)];
    let ops: [(Op, Bin); 4] = [(Op::Add, |x, y| x + y), (Op::Sub, |x, y| x - y), (Op::Mul, |x, y| x * y), (Op::Div, |x, y| x / y)];
    let ne = [12, 4, 3, 2];
    for (at, bt, dt) in triples {
        for bne in [[12, 4, 3, 2], [12, 1, 1, 1], [4, 2, 1, 2], [1, 4, 3, 1], [3, 1, 3, 1]] {
            for (op, f) in ops {
                let a = T::padded(at, ne, 4).random(&mut r);
                // src1 permuted and strided: elements reached by their strides
                let mut b = T::permuted(bt, bne, [0, 2, 1, 3]);
                b.fill(&mut r, 0.5, 2.0);
                let d = T::padded(dt, ne, 8);
                for threads in [1, 3] {
                    run(&node(op, &d, &[&a, &b], &[]), threads);
                    let want: Vec<f32> = a
                        .indices()
                        .into_iter()
                        .map(|i| {
                            let j = [0, 1, 2, 3].map(|k| i[k] % bne[k] as usize);
                            round(dt, f(a.get(i), b.get(j)))
                        })
                        .collect();
                    same_bits(&d.values(), &want, &format!("{op:?} {at}/{bt}/{dt} src1 {bne:?}"));
                }
            }
        }
    }
}

#[test]
fn binary_ops_run_in_place() {
    let mut r = XorShift::new(12);
    let a = T::new(F32, [33, 5, 2, 1]).random(&mut r);
    let b = T::new(F32, [33, 1, 1, 1]).random(&mut r);
    let want: Vec<f32> = a.indices().into_iter().map(|i| a.get(i) * b.get([i[0], 0, 0, 0])).collect();
    run(&node(Op::Mul, &a, &[&a, &b], &[]), 3);
    same_bits(&a.values(), &want, "in-place mul");
}

#[test]
fn unary_ops_map_every_element_through_f32() {
    let mut r = XorShift::new(13);
    let ops: [(Op, Un); 5] = [(Op::Sqr, |x| x * x), (Op::Sqrt, f32::sqrt), (Op::Log, f32::ln), (Op::Sin, f32::sin), (Op::Cos, f32::cos)];
    for (at, dt) in [(F32, F32), (F16, F16), (BF16, BF16), (BF16, F32), (F16, F32)] {
        for (op, f) in ops {
            let mut a = T::padded(at, [17, 3, 2, 2], 6);
            a.fill(&mut r, -3.0, 3.0);
            let d = T::padded(dt, [17, 3, 2, 2], 2);
            run(&node(op, &d, &[&a], &[]), 2);
            let want: Vec<f32> = a.values().into_iter().map(|x| round(dt, f(x))).collect();
            same_bits(&d.values(), &want, &format!("{op:?} {at} -> {dt}"));
        }
    }
}

#[test]
fn scale_clamp_leaky_relu_fill_use_their_parameters() {
    let mut r = XorShift::new(14);
    for ty in [F32, BF16] {
        for (s, b) in [(0.5f32, 0.0f32), (-2.0, 0.25)] {
            let a = T::new(ty, [9, 4, 1, 2]).random(&mut r);
            let d = T::new(ty, [9, 4, 1, 2]);
            run(&node(Op::Scale, &d, &[&a], &[f(s), f(b)]), 2);
            let want: Vec<f32> = a.values().into_iter().map(|x| round(ty, if b == 0.0 { x * s } else { x * s + b })).collect();
            same_bits(&d.values(), &want, &format!("scale {ty} {s} {b}"));
        }
    }
    for ty in [F32, F16] {
        let mut a = T::new(ty, [9, 4, 1, 1]);
        a.fill(&mut r, -2.0, 2.0);
        a.set([3, 1, 0, 0], f32::NAN);
        let d = T::new(ty, [9, 4, 1, 1]);
        run(&node(Op::Clamp, &d, &[&a], &[f(-0.5), f(0.75)]), 2);
        let want: Vec<f32> = a.values().into_iter().map(|x| if x.is_nan() { round(ty, 0.75) } else { round(ty, x.clamp(-0.5, 0.75)) }).collect();
        same_bits(&d.values(), &want, &format!("clamp {ty}"));
        run(&node(Op::LeakyRelu, &d, &[&a], &[f(0.1)]), 2);
        let want: Vec<f32> = a
            .values()
            .into_iter()
            .map(|x| {
                round(
                    ty,
                    if x > 0.0 {
                        x
                    } else if x < 0.0 {
                        0.1 * x
                    } else {
                        0.0
                    },
                )
            })
            .collect();
        same_bits(&d.values()[..12], &want[..12], &format!("leaky_relu {ty}"));
        let padded = T::padded(ty, [9, 4, 1, 1], 4);
        run(&node(Op::Fill, &padded, &[&a], &[f(1.5)]), 2);
        assert!(padded.values().iter().all(|v| *v == 1.5), "fill {ty}");
    }
}

#[test]
fn add1_adds_the_scalar_and_add_id_picks_rows() {
    let mut r = XorShift::new(15);
    for (at, bt) in [(F32, F32), (F16, F16), (F16, F32), (BF16, BF16), (BF16, F32)] {
        let a = T::new(at, [10, 3, 2, 1]).random(&mut r);
        let mut b = T::new(bt, [1, 1, 1, 1]);
        b.set([0; 4], 0.375);
        let d = T::new(at, [10, 3, 2, 1]);
        run(&node(Op::Add1, &d, &[&a, &b], &[]), 2);
        let want: Vec<f32> = a.values().into_iter().map(|x| round(at, x + 0.375)).collect();
        same_bits(&d.values(), &want, &format!("add1 {at} {bt}"));
    }
    // ADD_ID: 4 expert slots × 3 tokens, each row plus its expert's bias row
    let a = T::new(F32, [16, 4, 3, 1]).random(&mut r);
    let b = T::padded(F32, [16, 5, 1, 1], 8).random(&mut r);
    let mut ids = T::new(I32, [4, 3, 1, 1]);
    for i in ids.indices() {
        ids.set(i, r.i32_in(0, 4) as f32);
    }
    let d = T::new(F32, [16, 4, 3, 1]);
    run(&node(Op::AddId, &d, &[&a, &b, &ids], &[]), 3);
    let want: Vec<f32> = a.indices().into_iter().map(|i| a.get(i) + b.get([i[0], ids.get([i[1], i[2], 0, 0]) as usize, 0, 0])).collect();
    same_bits(&d.values(), &want, "add_id");
}

#[test]
fn acc_adds_src1_onto_a_strided_region() {
    let mut r = XorShift::new(16);
    let a = T::new(F32, [8, 5, 2, 1]).random(&mut r);
    let b = T::padded(F32, [3, 2, 2, 1], 4).random(&mut r);
    let d = T::new(F32, [8, 5, 2, 1]);
    // region starts at (2, 1, 0), steps a row (32 bytes) and a matrix (160 bytes)
    run(&node(Op::Acc, &d, &[&a, &b], &[32, 160, 320, 32 + 8, 0]), 2);
    for i in a.indices() {
        let inside = (2..5).contains(&i[0]) && (1..3).contains(&i[1]);
        let want = if inside { a.get(i) + b.get([i[0] - 2, i[1] - 1, i[2], 0]) } else { a.get(i) };
        assert_eq!(d.get(i).to_bits(), want.to_bits(), "acc at {i:?}");
    }
    // a region past the end is refused, not computed
    assert!(!supports(&node(Op::Acc, &d, &[&a, &b], &[32, 160, 320, 320, 0])));
}

#[test]
fn claims_follow_upstreams_type_table() {
    let f32t = T::new(F32, [4, 2, 1, 1]);
    let f16t = T::new(F16, [4, 2, 1, 1]);
    let i32t = T::new(I32, [4, 2, 1, 1]);
    assert!(!supports(&node(Op::Add, &f32t, &[&f32t, &f16t], &[])), "f32 + f16 is not upstream's");
    assert!(!supports(&node(Op::Add, &i32t, &[&i32t, &i32t], &[])));
    assert!(!supports(&node(Op::Scale, &f16t, &[&f16t], &[])), "upstream scales f32 and bf16");
    let odd = T::new(F32, [3, 2, 1, 1]);
    assert!(!supports(&node(Op::Add, &f32t, &[&f32t, &odd], &[])), "3 does not repeat into 4");
}
