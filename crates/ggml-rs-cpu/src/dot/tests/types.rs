//! The dot products of the types added after the first five (Q2_K, Q3_K, Q5_K, TQ1_0 / TQ2_0,
//! IQ4_NL / IQ4_XS / MXFP4, their repacked and tiled orders, the grid types) against their
//! references, at every level this CPU runs.

use super::*;

/// random blocks of a K-quant type: random bytes with `d` (and `dmin`) set by `scales`; every 4th
/// block (from the second) with all its scale bits set (Q3_K: +31), every 4th from the third all
/// zeros (d included), every 4th from the fourth with scale bytes of zero (Q3_K: −32, the others 0)
fn k_blocks<T: Block>(r: &mut XorShift, nb: usize, scale_bytes: fn(&mut T) -> &mut [u8], mut set: impl FnMut(&mut T, &mut XorShift)) -> Vec<T> {
    // SAFETY: T: Block, every bit pattern (zeros included) is a value
    let mut x: Vec<T> = (0..nb).map(|_| unsafe { std::mem::zeroed() }).collect();
    r.fill_bytes(as_bytes_mut(&mut x));
    for (i, b) in x.iter_mut().enumerate() {
        set(b, r);
        match i % 4 {
            1 => scale_bytes(b).fill(0xff),
            2 => as_bytes_mut(std::slice::from_mut(b)).fill(0),
            3 => scale_bytes(b).fill(0),
            _ => {}
        }
    }
    x
}

/// Q8_K activations of random quants in `-qmax..=qmax` (−128 included at 127), `bsums` theirs
fn q8_k_random(r: &mut XorShift, nb: usize, qmax: i32, d: impl Fn(&mut XorShift) -> f32) -> Vec<BlockQ8K> {
    (0..nb)
        .map(|_| {
            let qs: [i8; QK_K] = std::array::from_fn(|_| if qmax >= 127 { r.next_u64() as i8 } else { r.i32_in(-qmax, qmax) as i8 });
            let bsums = std::array::from_fn(|j| qs[16 * j..16 * j + 16].iter().map(|&q| q as i16).sum());
            BlockQ8K { d: d(r), qs, bsums }
        })
        .collect()
}

/// `Σ w·a` in f64 over the dequantized rows, and `Σ |w_scale_part · a| + |w_min_part · a|` (from
/// `bound`, per element: an upper bound of the terms' magnitudes before cancelling)
fn dequantized_dot(w: &[f32], y: &[BlockQ8K], bound: impl Fn(usize) -> f64) -> (f64, f64) {
    let mut a = vec![0f32; y.len() * QK_K];
    crate::quants::dequantize_row_q8_k(y, &mut a);
    let dot = w.iter().zip(&a).map(|(&p, &q)| p as f64 * q as f64).sum();
    let mag = a.iter().enumerate().map(|(e, &q)| bound(e) * (q as f64).abs()).sum();
    (dot, mag)
}

/// Q2_K, Q3_K and Q5_K · Q8_K: the references are the dot product of the dequantized rows, to the
/// bit where every float operation is exact (power-of-two scales, small activations), within
/// float rounding otherwise (random scales, activations over the whole byte range); blocks with
/// the largest scale codes and zero blocks among them; upstream's x86 order (the definitions)
/// likewise; and every level's kernel equals its order's definition bit for bit
#[test]
fn q2_k_q3_k_q5_k_references_are_the_dequantized_dot() {
    use super::kquants::*;
    use crate::quants::{dequantize_row_q2_k, dequantize_row_q3_k, dequantize_row_q5_k};
    let mut r = XorShift::new(41);
    for nb in [0usize, 1, 2, 5, 8, 17] {
        for exact in [true, false] {
            if exact && nb > 5 {
                continue;
            }
            // exact: multiples of 2⁻⁴ below 2²⁰ all along
            let ds = |r: &mut XorShift| f16::from_f32(if exact { 0.0625 } else { r.f32_in(-0.01, 0.01) });
            let y = if exact { q8_k_random(&mut r, nb, 3, |_| 1.0) } else { q8_k_random(&mut r, nb, 127, |r| r.f32_in(0.0, 0.02)) };
            let check = |name: &str, got: f32, (want, mag): (f64, f64)| {
                if exact {
                    assert_eq!(got as f64, want, "{name} nb={nb}: reference {got}, dequantized {want}");
                } else {
                    let tol = (nb as f64 + 8.0) * 2f64.powi(-22) * mag;
                    assert!((got as f64 - want).abs() <= tol, "{name} nb={nb}: reference {got}, dequantized {want} (tolerance {tol:e})");
                }
            };
            let dy = |e: usize| y[e / QK_K].d.abs() as f64;

            let x2: Vec<BlockQ2K> = k_blocks(&mut r, nb, |b: &mut BlockQ2K| &mut b.scales[..], |b, r| (b.d, b.dmin) = (ds(r), ds(r)));
            let mut w = vec![0f32; nb * QK_K];
            dequantize_row_q2_k(&x2, &mut w);
            let bound = |e: usize| {
                let b = &x2[e / QK_K];
                (b.d.to_f32().abs() as f64 * 45.0 + b.dmin.to_f32().abs() as f64 * 15.0) * dy(e)
            };
            let want = q2_k_q8_k_reference(&x2, &y);
            let dq2 = dequantized_dot(&w, &y, bound);
            check("q2_K", want, dq2);

            let x3: Vec<BlockQ3K> = k_blocks(&mut r, nb, |b: &mut BlockQ3K| &mut b.scales[..], |b, r| b.d = ds(r));
            dequantize_row_q3_k(&x3, &mut w);
            let want3 = q3_k_q8_k_reference(&x3, &y);
            let dq3 = dequantized_dot(&w, &y, |e| x3[e / QK_K].d.to_f32().abs() as f64 * 128.0 * dy(e));
            check("q3_K", want3, dq3);

            let x5: Vec<BlockQ5K> = k_blocks(&mut r, nb, |b: &mut BlockQ5K| &mut b.scales[..], |b, r| (b.d, b.dmin) = (ds(r), ds(r)));
            dequantize_row_q5_k(&x5, &mut w);
            let bound = |e: usize| {
                let b = &x5[e / QK_K];
                (b.d.to_f32().abs() as f64 * 63.0 * 31.0 + b.dmin.to_f32().abs() as f64 * 63.0) * dy(e)
            };
            let want5 = q5_k_q8_k_reference(&x5, &y);
            let dq5 = dequantized_dot(&w, &y, bound);
            check("q5_K", want5, dq5);

            // upstream's x86 order (the definitions): the dequantized dot within rounding, the
            // references' bits where every operation is exact
            let x86 = [q2_k_q8_k_x86(&x2, &y), q3_k_q8_k_x86(&x3, &y), q5_k_q8_k_x86(&x5, &y)];
            for ((name, got), (want, dq)) in ["q2_K", "q3_K", "q5_K"].into_iter().zip(x86).zip([(want, dq2), (want3, dq3), (want5, dq5)]) {
                check(name, got, dq);
                assert!(!exact || got.to_bits() == want.to_bits(), "{name} x86 order nb={nb}: {got} vs the reference's {want}");
            }

            // every level's kernel: the x86 sets from avx2 up in upstream's x86 order bit for bit,
            // the others the references' bits
            for level in Level::available() {
                let dots = &crate::kernels::at(level).dot;
                let got = [(dots.q2_k)(&x2, &y), (dots.q3_k)(&x3, &y), (dots.q5_k)(&x5, &y)];
                let want = if cfg!(target_arch = "x86_64") && level >= Level::Avx2 { x86 } else { [want, want3, want5] };
                for ((name, got), want) in ["q2_K", "q3_K", "q5_K"].into_iter().zip(got).zip(want) {
                    assert_eq!(got.to_bits(), want.to_bits(), "{name} {} nb={nb}: {got} vs {want}", level.name());
                }
            }
        }
    }
}

/// TQ1_0 and TQ2_0 · Q8_K on random bytes (every digit pattern, TQ2_0's unused code 3 too):
/// upstream's x86 order (the definitions) within float rounding of the references, and every
/// level's kernel bit for bit its order's definition (avx2 and up: the x86 order; the others the
/// references)
#[test]
fn tq_kernels_match_their_orders() {
    use super::tq::*;
    let mut r = XorShift::new(43);
    for nb in [0usize, 1, 2, 5, 17] {
        let y = q8_k_random(&mut r, nb, 127, |r| r.f32_in(0.0, 0.02));
        // SAFETY: every bit pattern is a block
        let mut x1: Vec<BlockTq1_0> = (0..nb).map(|_| unsafe { std::mem::zeroed() }).collect();
        r.fill_bytes(as_bytes_mut(&mut x1));
        x1.iter_mut().for_each(|b| b.d = f16::from_f32(r.f32_in(-0.01, 0.01)));
        // SAFETY: as above
        let mut x2: Vec<BlockTq2_0> = (0..nb).map(|_| unsafe { std::mem::zeroed() }).collect();
        r.fill_bytes(as_bytes_mut(&mut x2));
        x2.iter_mut().for_each(|b| b.d = f16::from_f32(r.f32_in(-0.01, 0.01)));
        // |Σ| ≤ Σ_blocks |d · dy| · 256 · 3 · 128, rounding well below 2⁻²⁰ of that
        let mag: f64 = x1.iter().zip(&y).map(|(a, b)| (a.d.to_f32() * b.d).abs() as f64 * 98304.0).sum::<f64>()
            + x2.iter().zip(&y).map(|(a, b)| (a.d.to_f32() * b.d).abs() as f64 * 98304.0).sum::<f64>();
        let refs = [tq1_0_q8_k_reference(&x1, &y), tq2_0_q8_k_reference(&x2, &y)];
        let x86 = [tq1_0_q8_k_x86(&x1, &y), tq2_0_q8_k_x86(&x2, &y)];
        for (name, (a, b)) in ["tq1_0", "tq2_0"].into_iter().zip(refs.into_iter().zip(x86)) {
            assert!((a as f64 - b as f64).abs() <= mag * 2f64.powi(-20), "{name} nb={nb}: reference {a}, x86 order {b}");
        }
        for level in Level::available() {
            let dots = &crate::kernels::at(level).dot;
            let got = [(dots.tq1_0)(&x1, &y), (dots.tq2_0)(&x2, &y)];
            let want = if cfg!(target_arch = "x86_64") && level >= Level::Avx2 { x86 } else { refs };
            for ((name, got), want) in ["tq1_0", "tq2_0"].into_iter().zip(got).zip(want) {
                assert_eq!(got.to_bits(), want.to_bits(), "{name} {} nb={nb}: {got} vs {want}", level.name());
            }
        }
    }
}

/// IQ4_NL · Q8_0, IQ4_XS · Q8_K and MXFP4 · Q8_0 on random weight bytes: every level equals the
/// scalar reference bit for bit where all float operations are exact (power-of-two scales,
/// small activations), within float rounding on random scales; and the reference is the dot
/// of the dequantized rows (f64) within float rounding
#[test]
fn iq4_and_mxfp4_kernels_match_the_reference() {
    use crate::quants::{dequantize_row_iq4_nl, dequantize_row_iq4_xs, dequantize_row_mxfp4, dequantize_row_q8_0, dequantize_row_q8_k};
    let mut r = XorShift::new(41);
    let f64_dot = |x: &[f32], y: &[f32]| -> (f64, f64) {
        let p = x.iter().zip(y).map(|(&a, &b)| a as f64 * b as f64);
        (p.clone().sum(), p.map(f64::abs).sum())
    };
    for level in Level::available() {
        for nb in [0usize, 1, 2, 3, 7, 8, 9, 33, 64, 129] {
            for exact in [true, false] {
                let qmax = if exact { 3 } else { 127 };
                let y = q8_0_blocks(&mut r, nb, qmax, |r| if exact { 0.25 } else { r.f32_in(-0.1, 0.1) });
                let mut nl = vec![BlockIq4Nl { d: f16::ZERO, qs: [0; 16] }; nb];
                let mut mx = vec![BlockMxfp4 { e: 0, qs: [0; 16] }; nb];
                for (a, m) in nl.iter_mut().zip(mx.iter_mut()) {
                    r.fill_bytes(&mut a.qs);
                    r.fill_bytes(&mut m.qs);
                    a.d = f16::from_f32(if exact { 0.125 } else { r.f32_in(-0.1, 0.1) });
                    // exact: 2^-2..2^1; else every byte, the ends included
                    m.e = if exact { 126 + (r.next_u64() % 4) as u8 } else { r.next_u64() as u8 };
                }
                let (mut wn, mut wm, mut a) = (vec![0f32; 32 * nb], vec![0f32; 32 * nb], vec![0f32; 32 * nb]);
                dequantize_row_iq4_nl(&nl, &mut wn);
                dequantize_row_mxfp4(&mx, &mut wm);
                dequantize_row_q8_0(&y, &mut a);
                for (name, got, want, w) in [
                    ("iq4_nl", (crate::kernels::at(level).dot.iq4_nl)(&nl, &y), iq4_nl_q8_0_reference(&nl, &y), &wn),
                    ("mxfp4", (crate::kernels::at(level).dot.mxfp4)(&mx, &y), mxfp4_q8_0_reference(&mx, &y), &wm),
                ] {
                    let (exact_sum, mag) = f64_dot(w, &a);
                    // relative rounding, plus the scale product's where it is subnormal (MXFP4's
                    // smallest scale bytes): at most 2^-150 times |sumi| <= 32 · 127 · 127 per block
                    let tol = (nb as f64 + 8.0) * 2f64.powi(-23) * mag + nb as f64 * 516128.0 * 2f64.powi(-150);
                    if exact {
                        assert_eq!(got.to_bits(), want.to_bits(), "{name} {} nb={nb}: {got} vs {want}", level.name());
                        assert_eq!(want as f64, exact_sum, "{name} nb={nb}: reference vs dequantized");
                    } else if mag.is_finite() && mag < f32::MAX as f64 / 4.0 {
                        assert!(((got - want) as f64).abs() <= tol, "{name} {} nb={nb}: {got} vs {want}", level.name());
                        assert!((want as f64 - exact_sum).abs() <= tol, "{name} nb={nb}: reference {want} vs dequantized {exact_sum}");
                    }
                }
            }
        }
        for nb in [0usize, 1, 2, 5, 17] {
            for exact in [true, false] {
                let mut y = q8_k_row(&mut r, nb);
                let mut x = vec![BlockIq4Xs { d: f16::ZERO, scales_h: 0, scales_l: [0; 4], qs: [0; 128] }; nb];
                r.fill_bytes(as_bytes_mut(&mut x));
                for b in &mut x {
                    b.d = f16::from_f32(if exact { 0.5 } else { r.f32_in(-0.01, 0.01) });
                }
                if exact {
                    for b in &mut y {
                        b.d = 0.25;
                        for q in b.qs.iter_mut() {
                            *q = r.i32_in(-2, 2) as i8;
                        }
                        for j in 0..16 {
                            b.bsums[j] = b.qs[16 * j..16 * j + 16].iter().map(|&q| q as i16).sum();
                        }
                    }
                }
                let got = (crate::kernels::at(level).dot.iq4_xs)(&x, &y);
                let want = iq4_xs_q8_k_reference(&x, &y);
                let (mut w, mut a) = (vec![0f32; QK_K * nb], vec![0f32; QK_K * nb]);
                dequantize_row_iq4_xs(&x, &mut w);
                dequantize_row_q8_k(&y, &mut a);
                let (exact_sum, mag) = f64_dot(&w, &a);
                if exact {
                    assert_eq!(got.to_bits(), want.to_bits(), "iq4_xs {} nb={nb}: {got} vs {want}", level.name());
                    assert_eq!(want as f64, exact_sum, "iq4_xs nb={nb}: reference vs dequantized");
                } else {
                    let tol = (8.0 * nb as f64 + 8.0) * 2f64.powi(-23) * mag + 1e-30;
                    assert!(((got - want) as f64).abs() <= tol, "iq4_xs {} nb={nb}: {got} vs {want}", level.name());
                    assert!((want as f64 - exact_sum).abs() <= tol, "iq4_xs nb={nb}: reference {want} vs dequantized {exact_sum}");
                }
            }
        }
    }
}

/// the repacked and tiled orders of the types added for issue 31 (IQ4_NL / MXFP4 repacked, Q2_K
/// repacked GEMV and GEMM, Q2_K / Q3_K / Q5_K / IQ4_XS tiled): every level's table entry equals
/// the order's definition bit for bit, on random bytes with random scales (the integers exact,
/// so any difference is the float order); and each order sums the same integers as the
/// reference (within float rounding of it)
#[test]
fn the_added_repacked_and_tiled_orders_equal_their_definitions() {
    use super::kquants::*;
    let mut r = XorShift::new(43);
    for nb in [1usize, 2, 3, 8, 17] {
        let y0 = q8_0_blocks(&mut r, nb, 127, |r| r.f32_in(-0.1, 0.1));
        let mut nl = vec![BlockIq4Nl { d: f16::ZERO, qs: [0; 16] }; nb];
        let mut mx = vec![BlockMxfp4 { e: 0, qs: [0; 16] }; nb];
        for (a, m) in nl.iter_mut().zip(mx.iter_mut()) {
            r.fill_bytes(&mut a.qs);
            r.fill_bytes(&mut m.qs);
            a.d = f16::from_f32(r.f32_in(-0.05, 0.05));
            m.e = 110 + (r.next_u64() % 30) as u8;
        }
        // activations as quantizers make them (no −128: the SIMD kernels' sign trick, as
        // upstream's, takes |−128| as −128)
        let yk = q8_k_random(&mut r, nb, 126, |r| r.f32_in(0.0, 0.02));
        let ds = |r: &mut XorShift| f16::from_f32(r.f32_in(-0.01, 0.01));
        let x2: Vec<BlockQ2K> = k_blocks(&mut r, nb, |b: &mut BlockQ2K| &mut b.scales[..], |b, r| (b.d, b.dmin) = (ds(r), ds(r)));
        let x3: Vec<BlockQ3K> = k_blocks(&mut r, nb, |b: &mut BlockQ3K| &mut b.scales[..], |b, r| b.d = ds(r));
        let x5: Vec<BlockQ5K> = k_blocks(&mut r, nb, |b: &mut BlockQ5K| &mut b.scales[..], |b, r| (b.d, b.dmin) = (ds(r), ds(r)));
        let mut xs = vec![BlockIq4Xs { d: f16::ZERO, scales_h: 0, scales_l: [0; 4], qs: [0; 128] }; nb];
        for b in &mut xs {
            r.fill_bytes(&mut b.qs);
            r.fill_bytes(&mut b.scales_l);
            b.scales_h = r.next_u64() as u16;
            b.d = ds(&mut r);
        }
        let want = [
            iq4_nl_q8_0_repack(&nl, &y0),
            mxfp4_q8_0_repack(&mx, &y0),
            q2_k_q8_k_gemv(&x2, &yk),
            q2_k_q8_k_gemm(&x2, &yk),
            q2_k_q8_k_tiled(&x2, &yk),
            q3_k_q8_k_tiled(&x3, &yk),
            q5_k_q8_k_tiled(&x5, &yk),
            iq4_xs_q8_k_tiled(&xs, &yk),
        ];
        let reference = [
            iq4_nl_q8_0_reference(&nl, &y0),
            mxfp4_q8_0_reference(&mx, &y0),
            q2_k_q8_k_reference(&x2, &yk),
            q2_k_q8_k_reference(&x2, &yk),
            q2_k_q8_k_reference(&x2, &yk),
            q3_k_q8_k_reference(&x3, &yk),
            q5_k_q8_k_reference(&x5, &yk),
            iq4_xs_q8_k_reference(&xs, &yk),
        ];
        let names = ["iq4_nl repack", "mxfp4 repack", "q2_K gemv", "q2_K gemm", "q2_K tiled", "q3_K tiled", "q5_K tiled", "iq4_xs tiled"];
        for ((name, w), rf) in names.iter().zip(want).zip(reference) {
            let tol = 1e-4 * rf.abs().max(1e-3);
            assert!((w - rf).abs() <= tol, "{name} nb={nb}: the order gives {w}, the reference {rf}");
        }
        for level in Level::available() {
            let d = &crate::kernels::at(level).dot;
            let got = [
                (d.iq4_nl_repack)(&nl, &y0),
                (d.mxfp4_repack)(&mx, &y0),
                (d.q2_k_gemv)(&x2, &yk),
                (d.q2_k_gemm)(&x2, &yk),
                (d.q2_k_tiled)(&x2, &yk),
                (d.q3_k_tiled)(&x3, &yk),
                (d.q5_k_tiled)(&x5, &yk),
                (d.iq4_xs_tiled)(&xs, &yk),
            ];
            for ((name, g), w) in names.iter().zip(got).zip(want) {
                assert_eq!(g.to_bits(), w.to_bits(), "{name} {} nb={nb}: {g} vs the definition's {w}", level.name());
            }
        }
    }
}

/// the grid types' dot products (every level's, vec_dot's and the tiled path's order) against the f64 product of the dequantized
/// rows: within 2⁻¹⁸ · Σ|w·a| on random blocks (random bytes, a small f16 scale)
#[test]
fn grid_dots_match_the_dequantized_product() {
    let mut r = XorShift::new(71);
    for level in Level::available() {
        let dots = crate::kernels::at(level);
        for ty in GgmlType::GRID {
            for n in [256usize, 512, 2048] {
                let mut x = AlignedBytes::zeroed(ty.row_size(n));
                r.fill_bytes(&mut x);
                // the f16 scale (IQ1_M: the top nibble of its last scale word) kept small
                let at = if ty == GgmlType::Iq1M { ty.type_size() - 1 } else { 1 };
                for blk in x.chunks_exact_mut(ty.type_size()) {
                    blk[at] &= 0x2f;
                }
                let a = r.model_like(n);
                let mut y = AlignedBytes::zeroed(GgmlType::Q8K.row_size(n));
                crate::quants::quantize_row(GgmlType::Q8K, &a, &mut y);
                let (mut wd, mut ad) = (vec![0f32; n], vec![0f32; n]);
                crate::quants::dequantize_row(ty, &x, &mut wd);
                crate::quants::dequantize_row(GgmlType::Q8K, &y, &mut ad);
                let (wd, ad): (Vec<f64>, Vec<f64>) = (wd.iter().map(|&v| v as f64).collect(), ad.iter().map(|&v| v as f64).collect());
                let want: f64 = wd.iter().zip(&ad).map(|(a, b)| a * b).sum();
                let tol = abs_sum(&wd, &ad) * 2f64.powi(-18) + 1e-30;
                for order in [Order::VecDot, Order::Tiled] {
                    let got = dots.dot.row(ty, order).dot(&x, &y) as f64;
                    assert!((got - want).abs() <= tol, "{} {} {order:?} n={n}: {got} vs {want}", ty.name(), level.name());
                }
            }
        }
    }
}
