//! MUL_MAT, MUL_MAT_ID, OUT_PROD against f64 products of the dequantized operands (the
//! activations quantized to the vec-dot type first, as the kernel must), on broadcast shapes
//! and permuted / padded / unaligned views; and the chunking does not change a bit.

use super::*;
use crate::ops::copy::elem::dequantize_to;
use crate::ops::copy::elem::testing::*;
use crate::rng::XorShift;
use crate::simd::Level;
use raw_type::{BF16, F16, F32, I32};

const WEIGHTS: [GgmlType; 9] =
    [GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4K, GgmlType::Q6K];

/// row (i1, i2, i3) of `t` as f32 (dequantized)
fn row(t: &T, i1: usize, i2: usize, i3: usize) -> Vec<f32> {
    let n = t.ne[0] as usize;
    let at = t.off + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
    match GgmlType::from_raw(t.ty) {
        Some(ty) => {
            let mut v = vec![0f32; n];
            let bytes = &t.buf[at..at + ty.row_size(n)];
            // SAFETY: a whole row of the buffer into n floats (any alignment)
            unsafe { dequantize_to(ty, bytes.as_ptr(), n, v.as_mut_ptr().cast()) };
            v
        }
        None => (0..n).map(|k| t.get([k, i1, i2, i3])).collect(),
    }
}

/// what the kernel's activations hold: the row converted to `vdt` (upstream's from_float) and back
fn as_vec_dot(vdt: GgmlType, x: &[f32]) -> Vec<f32> {
    let mut q = crate::block::AlignedBytes::zeroed(vdt.row_size(x.len()));
    let mut back = vec![0f32; x.len()];
    // SAFETY: buffers of the row's sizes
    unsafe {
        crate::ops::copy::elem::quantize_from(vdt, x, q.as_mut_ptr());
        dequantize_to(vdt, q.as_ptr(), x.len(), back.as_mut_ptr().cast());
    }
    back
}

fn weights(r: &mut XorShift, ty: GgmlType, ne: [i64; 4]) -> T {
    let x = r.model_like((ne[0] * ne[1] * ne[2] * ne[3]) as usize);
    T::quantized(ty, ne, &x, 0)
}

/// Q5_1 · Q8_1 adds `m · s` per block with `s = f16(d · Σ q)`: the f16 rounding of `s` (2⁻¹¹
/// relative; `m` is the block's smallest weight, which quantizes to 0 exactly) is upstream's
/// format, not float summation, so it widens the bound (0 for every other type)
fn q8_1_sum_slack(wt: GgmlType, w: &[f32], x: &[f32]) -> f64 {
    if wt != GgmlType::Q5_1 {
        return 0.0;
    }
    let blocks = w.chunks(32).zip(x.chunks(32));
    blocks.map(|(wb, xb)| wb.iter().fold(f64::MAX, |m, &v| m.min(v as f64)).abs() * xb.iter().map(|&v| v as f64).sum::<f64>().abs() * 2f64.powi(-10)).sum()
}

/// checks dst against Σ w·x in f64 within f32 rounding of Σ|w·x|
fn check_mul_mat(a: &T, b: &T, d: &T, what: &str) {
    let wt = GgmlType::from_raw(a.ty).unwrap();
    let vdt = wt.vec_dot_type().unwrap();
    let (r2, r3) = ((b.ne[2] / a.ne[2]) as usize, (b.ne[3] / a.ne[3]) as usize);
    for i13 in 0..b.ne[3] as usize {
        for i12 in 0..b.ne[2] as usize {
            for i11 in 0..b.ne[1] as usize {
                let x = row(b, i11, i12, i13);
                let x = if b.ty == vdt as i32 || (vdt == GgmlType::F32) { x } else { as_vec_dot(vdt, &x) };
                for i01 in 0..a.ne[1] as usize {
                    let w = row(a, i01, i12 / r2, i13 / r3);
                    let exact: f64 = w.iter().zip(&x).map(|(p, q)| *p as f64 * *q as f64).sum();
                    let mag: f64 = w.iter().zip(&x).map(|(p, q)| (*p as f64 * *q as f64).abs()).sum();
                    let got = d.get([i01, i11, i12, i13]) as f64;
                    let slack = q8_1_sum_slack(wt, &w, &x);
                    assert!((got - exact).abs() <= mag * 2e-5 + 1e-6 + slack, "{what}: ({i01}, {i11}, {i12}, {i13}) = {got}, want {exact}");
                }
            }
        }
    }
}

#[test]
fn mul_mat_every_weight_type_broadcast_and_permuted_activations() {
    let mut r = XorShift::new(31);
    for wt in WEIGHTS {
        let k = 256;
        let a = weights(&mut r, wt, [k, 33, 2, 1]);
        let bne = [k, 5, 4, 2];
        for (name, mut b) in [("contiguous", T::new(F32, bne)), ("padded", T::padded(F32, bne, 16)), ("permuted", T::permuted(F32, bne, [0, 2, 1, 3]))] {
            b.fill(&mut r, -1.0, 1.0);
            let d = T::new(F32, [33, 5, 4, 2]);
            let n = node(Op::MulMat, &d, &[&a, &b], &[]);
            run(&n, 3);
            check_mul_mat(&a, &b, &d, &format!("{} × f32 {name}", wt.name()));
            // the chunks computed on one thread give the same bits
            let one = T::new(F32, [33, 5, 4, 2]);
            run(&node(Op::MulMat, &one, &[&a, &b], &[]), 1);
            assert_eq!(one.buf[..], d.buf[..], "{} {name}: 1 thread vs 3", wt.name());
        }
    }
}

#[test]
fn mul_mat_vector_and_many_rows() {
    let mut r = XorShift::new(32);
    for wt in [GgmlType::Q8_0, GgmlType::Q4K, GgmlType::F16] {
        let a = weights(&mut r, wt, [512, 130, 1, 1]);
        let b = T::new(F32, [512, 1, 1, 1]).random(&mut r);
        let d = T::new(F32, [130, 1, 1, 1]);
        run(&node(Op::MulMat, &d, &[&a, &b], &[]), 2);
        check_mul_mat(&a, &b, &d, &format!("{} vector", wt.name()));
    }
}

#[test]
fn mul_mat_activations_of_other_types_and_unaligned_views() {
    let mut r = XorShift::new(33);
    // F16 / BF16 activations for F32 weights (widened), F16 for F16 weights (used as they are)
    for (wt, bt) in [(GgmlType::F32, F16), (GgmlType::F32, BF16), (GgmlType::F16, F16), (GgmlType::BF16, BF16)] {
        let a = weights(&mut r, wt, [64, 20, 1, 1]);
        let mut b = T::permuted(bt, [64, 3, 2, 1], [0, 2, 1, 3]);
        b.fill(&mut r, -1.0, 1.0);
        let d = T::new(F32, [20, 3, 2, 1]);
        run(&node(Op::MulMat, &d, &[&a, &b], &[]), 2);
        check_mul_mat(&a, &b, &d, &format!("{} × {bt}", wt.name()));
    }
    // weights and activations at odd addresses: copied to aligned rows, same result
    let x = r.model_like(64 * 8);
    let a = T::quantized(GgmlType::F32, [64, 8, 1, 1], &x, 0).shifted(2);
    let mut a2 = T::new(F32, [64, 8, 1, 1]).shifted(2);
    for i in a2.indices() {
        a2.set(i, x[i[0] + 64 * i[1]]);
    }
    let b = T::new(F32, [64, 3, 1, 1]).shifted(2).random(&mut r);
    let d = T::new(F32, [8, 3, 1, 1]).shifted(2);
    run(&node(Op::MulMat, &d, &[&a2, &b], &[]), 2);
    check_mul_mat(&a2, &b, &d, "unaligned f32");
    drop(a);
    let q = T::quantized(GgmlType::Q6K, [256, 4, 1, 1], &r.model_like(1024), 0);
    let mut q_odd = T::new(GgmlType::Q6K as i32, [256, 4, 1, 1]).shifted(1);
    let len = q.buf.len() - 16;
    q_odd.buf[1..1 + len].copy_from_slice(&q.buf[..len]);
    let b = T::new(F32, [256, 2, 1, 1]).random(&mut r);
    let (d1, d2) = (T::new(F32, [4, 2, 1, 1]), T::new(F32, [4, 2, 1, 1]));
    run(&node(Op::MulMat, &d1, &[&q, &b], &[]), 1);
    run(&node(Op::MulMat, &d2, &[&q_odd, &b], &[]), 1);
    assert_eq!(d1.values(), d2.values(), "q6_K at an odd address");
}

#[test]
fn mul_mat_of_empty_rows_is_zero() {
    let a = T::new(F32, [0, 3, 1, 1]);
    let b = T::new(F32, [0, 2, 1, 1]);
    let mut d = T::new(F32, [3, 2, 1, 1]);
    d.fill(&mut XorShift::new(1), 1.0, 2.0);
    // empty tensors may have no memory at all
    let mut n = node(Op::MulMat, &d, &[&a, &b], &[]);
    for s in n.src.iter_mut().take(2).flatten() {
        s.data = std::ptr::null_mut();
    }
    run(&n, 2);
    assert!(d.values().iter().all(|v| *v == 0.0), "{:?}", d.values());
}

#[test]
fn mul_mat_claims() {
    let a = T::new(GgmlType::Q4_0 as i32, [64, 4, 1, 1]);
    let b16 = T::new(F16, [64, 2, 1, 1]);
    let d = T::new(F32, [4, 2, 1, 1]);
    assert!(!supports(&node(Op::MulMat, &d, &[&a, &b16], &[])), "f16 activations for q4_0 weights are not upstream's");
    let b = T::new(F32, [64, 2, 3, 1]);
    let a3 = T::new(F32, [64, 4, 2, 1]);
    let d3 = T::new(F32, [4, 2, 3, 1]);
    assert!(!supports(&node(Op::MulMat, &d3, &[&a3, &b], &[])), "3 is no multiple of 2");
    let bt = T::permuted(F32, [64, 2, 1, 1], [0, 1, 2, 3]);
    assert!(supports(&node(Op::MulMat, &d, &[&T::new(F32, [64, 4, 1, 1]), &bt], &[])));
}

#[test]
fn mul_mat_id_routes_each_token_slot_to_its_expert() {
    let mut r = XorShift::new(34);
    for wt in [GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4K] {
        let (k, rows, n_exp, n_ids, n_tok) = (256, 10, 4, 2, 3);
        let a = weights(&mut r, wt, [k, rows, n_exp, 1]);
        for ne11 in [1, n_ids] {
            let b = T::padded(F32, [k, ne11, n_tok, 1], 8).random(&mut r);
            let mut ids = T::new(I32, [n_ids, n_tok, 1, 1]);
            for i in ids.indices() {
                ids.set(i, r.i32_in(0, n_exp as i32 - 1) as f32);
            }
            let d = T::new(F32, [rows, n_ids, n_tok, 1]);
            run(&node(Op::MulMatId, &d, &[&a, &b, &ids], &[]), 3);
            let vdt = wt.vec_dot_type().unwrap();
            for t in 0..n_tok as usize {
                for s in 0..n_ids as usize {
                    let e = ids.get([s, t, 0, 0]) as usize;
                    let x = as_vec_dot(vdt, &row(&b, s % ne11 as usize, t, 0));
                    for i in 0..rows as usize {
                        let w = row(&a, i, e, 0);
                        let exact: f64 = w.iter().zip(&x).map(|(p, q)| *p as f64 * *q as f64).sum();
                        let mag: f64 = w.iter().zip(&x).map(|(p, q)| (*p as f64 * *q as f64).abs()).sum();
                        let got = d.get([i, s, t, 0]) as f64;
                        assert!((got - exact).abs() <= mag * 2e-5 + 1e-6, "{} ne11 {ne11} ({i}, {s}, {t}): {got} vs {exact}", wt.name());
                    }
                }
            }
        }
    }
}

#[test]
fn out_prod_sums_outer_products_over_the_shared_dimension() {
    let mut r = XorShift::new(35);
    for wt in [GgmlType::F32, GgmlType::F16, GgmlType::Q8_0] {
        // F32 broadcasts src0 over dims 2, 3; the others take equal dims
        let (ane, bne) = if wt == GgmlType::F32 { ([32, 6, 1, 2], [5, 6, 3, 2]) } else { ([32, 6, 3, 2], [5, 6, 3, 2]) };
        let a = weights(&mut r, wt, ane);
        let b = T::permuted(F32, bne, [0, 2, 1, 3]).random(&mut r);
        let d = T::padded(F32, [32, 5, 3, 2], 8);
        run(&node(Op::OutProd, &d, &[&a, &b], &[]), 3);
        let (r2, r3) = ((bne[2] / ane[2]) as usize, (bne[3] / ane[3]) as usize);
        for i in d.indices() {
            let mut exact = 0f64;
            for j in 0..6 {
                exact += row(&a, j, i[2] / r2, i[3] / r3)[i[0]] as f64 * b.get([i[1], j, i[2], i[3]]) as f64;
            }
            let got = d.get(i) as f64;
            assert!((got - exact).abs() <= 1e-5 * (1.0 + exact.abs()), "{} {i:?}: {got} vs {exact}", wt.name());
        }
    }
}

/// attention's products: F16 / BF16 / F32 weights of one slab per KV head (KQ: K permuted out
/// of the cache, rows of the head dim; KQV: V transposed, rows of n_kv) against activations of
/// more heads (GQA broadcast over dim 2) and of dim 3: the tiled GEMM takes them, once there are
/// 16 activation rows per weight slab (before, any weight slab past the first sent the whole
/// product to the row kernels), and they agree with the f64 reference and with the row kernels
/// (the scalar level)
#[test]
fn mul_mat_attention_shapes_take_the_tiles_and_agree() {
    let mut r = XorShift::new(35);
    let avx512 = crate::simd::detected() >= Level::Avx512;
    for wt in [GgmlType::F16, GgmlType::BF16, GgmlType::F32] {
        // (k, weight rows, KV heads, tokens, heads per KV head, dim 3): KQ-like, KQV-like, a
        // token count under a tile's width, rows not a multiple of 32
        for (k, rows, kv_heads, tokens, g, n3) in [(64, 40, 2, 19, 2, 1), (40, 64, 2, 17, 1, 2), (64, 33, 4, 16, 1, 1)] {
            // the weights as a KV cache view: [k, rows, kv_heads] with heads inside a row
            let a = {
                let x = r.model_like(k * rows * kv_heads * n3);
                let base = T::quantized(wt, [k as i64, (kv_heads * n3) as i64, rows as i64, 1], &x, 0);
                // swap dims 1 and 2: element (e, row, head) at head · nb1 + row · nb2 of the base
                T { ne: [k as i64, rows as i64, kv_heads as i64, n3 as i64], nb: [base.nb[0], base.nb[2], base.nb[1], base.nb[1] * kv_heads], ..base }
            };
            let bne = [k as i64, tokens as i64, (kv_heads * g) as i64, n3 as i64];
            let b = T::permuted(F32, bne, [0, 2, 1, 3]).random(&mut r);
            let dne = [rows as i64, tokens as i64, (kv_heads * g) as i64, n3 as i64];
            let what = format!("{} k={k} rows={rows} kv_heads={kv_heads} tokens={tokens} g={g} n3={n3}", wt.name());
            assert_eq!(use_fgemm(&a.view(), &b.view(), wt), tokens * g >= 16, "{what}: the shape the tiles take");
            let d = T::new(F32, dne);
            run(&node(Op::MulMat, &d, &[&a, &b], &[]), 3);
            check_mul_mat(&a, &b, &d, &what);
            if avx512 {
                // the row kernels (scalar level) agree within f32 rounding of the sums
                let s = T::new(F32, dne);
                let n = node(Op::MulMat, &s, &[&a, &b], &[]);
                let mut pool = crate::pool::ThreadPool::new(2);
                let mut scratch = crate::block::AlignedBytes::default();
                let mut exec = Exec::with_level(&mut pool, &mut scratch, Level::Scalar);
                crate::ops::compute(&n, &mut exec).unwrap();
                assert_close(&d.values(), &s.values(), 1e-5, &what);
            }
        }
    }
    // token generation (one row per head) stays on the row kernels
    let a = T::new(F16, [64, 512, 8, 1]);
    let b = T::new(F32, [64, 1, 8, 1]);
    assert!(!use_fgemm(&a.view(), &b.view(), GgmlType::F16));
}

/// F32 and F16 weights at the AVX-512 levels give upstream native's bits: every output is
/// tinyBLAS's order (`sgemm::sgemm_order`) where upstream hands the slices to it (src1
/// contiguous in the weights' type or converted to their vec-dot type, ≥ 2 activation rows per
/// slice, k % 16 == 0, rows % 4 == 0), else ggml_vec_dot_f32's / _f16's (`f32_avx512_order`,
/// `f16_avx512_order`): on plain and KV-cache-like weights, contiguous, permuted, F16 and BF16
/// activations, 1 and 3 threads
#[test]
fn mul_mat_f32_and_f16_are_upstream_natives_order_bit_for_bit() {
    use half::f16;
    // the level the nodes run at (GGML_RS_CPU_SIMD caps it): below AVX-512 the tiles are
    // tinyBLAS's AVX2 order (sgemm_order8) and the row kernels are not checked here
    let level = crate::simd::active();
    if level < Level::Avx2 {
        eprintln!("no AVX2: not tested");
        return;
    }
    let tiles = crate::kernels::at(level).gemm.sgemm.expect("x86 sets from AVX2 have the tinyBLAS tiles");
    let mut r = XorShift::new(36);
    let h = |v: Vec<f32>| v.into_iter().map(f16::from_f32).collect::<Vec<_>>();
    // (k, weight rows, heads, tokens, cache view, activations)
    let cases = [
        (64, 40, 2, 19, true, "permuted"),
        (128, 64, 1, 17, false, "contiguous"),
        (128, 64, 1, 17, false, "f16"),
        (128, 64, 1, 17, false, "bf16"),
        (96, 8, 2, 2, false, "contiguous"),
        (40, 64, 2, 17, true, "permuted"),
        (64, 33, 2, 16, false, "contiguous"),
        (100, 12, 1, 5, false, "contiguous"),
        (256, 16, 2, 1, true, "permuted"),
        (200, 16, 1, 7, false, "contiguous"),
        (64, 16, 2, 6, false, "permuted"),
    ];
    for wt in [GgmlType::F32, GgmlType::F16] {
        if crate::sgemm::fast(wt) {
            eprintln!("GGML_RS_CPU_{}_TILES=fast: {} not tested", wt.name().to_uppercase(), wt.name());
            continue;
        }
        for (k, rows, heads, tokens, cache, acts) in cases {
            if wt == GgmlType::F16 && acts == "bf16" {
                // not an activation type of F16 weights
                continue;
            }
            let a = if cache {
                let base = T::quantized(wt, [k as i64, heads as i64, rows as i64, 1], &r.model_like(k * rows * heads), 0);
                T { ne: [k as i64, rows as i64, heads as i64, 1], nb: [base.nb[0], base.nb[2], base.nb[1], base.nb[1] * heads], ..base }
            } else {
                weights(&mut r, wt, [k as i64, rows as i64, heads as i64, 1])
            };
            let bne = [k as i64, tokens as i64, heads as i64, 1];
            let b = match acts {
                "permuted" => T::permuted(F32, bne, [0, 2, 1, 3]).random(&mut r),
                "f16" => T::new(F16, bne).random(&mut r),
                "bf16" => T::new(BF16, bne).random(&mut r),
                _ => T::new(F32, bne).random(&mut r),
            };
            // upstream's two llamafile calls: src1 as it is (contiguous, the weights' type) or
            // converted (F16 weights: from F32; F32 weights: from F16 / BF16)
            let contiguous = acts != "permuted" || tokens == 1 || heads == 1;
            let converted = if wt == GgmlType::F16 { acts != "f16" } else { matches!(acts, "f16" | "bf16") };
            let sgemm = (contiguous || converted) && tiles.shape(rows, tokens, k);
            assert_eq!(use_sgemm(&a.view(), &b.view(), wt, &tiles), sgemm, "{} k={k} rows={rows} tokens={tokens} {acts}: takes tinyBLAS", wt.name());
            let what = format!("{} k={k} rows={rows} heads={heads} tokens={tokens} cache={cache} {acts} (tinyBLAS: {sgemm})", wt.name());
            let dne = [rows as i64, tokens as i64, heads as i64, 1];
            for threads in [1, 3] {
                let d = T::new(F32, dne);
                run(&node(Op::MulMat, &d, &[&a, &b], &[]), threads);
                for i12 in 0..heads {
                    for i11 in 0..tokens {
                        let x = as_vec_dot(wt, &row(&b, i11, i12, 0));
                        for i01 in 0..rows {
                            let w = row(&a, i01, i12, 0);
                            if !sgemm && level < Level::Avx512 {
                                continue;
                            }
                            let want = match (wt, sgemm) {
                                (GgmlType::F16, true) => tiles.order(&h(w), &h(x.clone())),
                                (GgmlType::F16, false) => crate::dot::float::f16_avx512_order(&h(w), &h(x.clone())),
                                (_, true) => tiles.order(&w, &x),
                                _ => crate::dot::float::f32_avx512_order(&w, &x),
                            };
                            let got = d.get([i01, i11, i12, 0]);
                            assert_eq!(got.to_bits(), want.to_bits(), "{what} threads={threads}: ({i01}, {i11}, {i12}) = {got}, want {want}");
                        }
                    }
                }
            }
        }
    }
}

/// Q4_0 / Q4_K weights that upstream repacks (2-D, rows % 8 == 0, F32 activations) give its
/// repacked kernels' bits at every SIMD level from AVX2: per plane, rows `0 .. ne11 - ne11 % 4`
/// in the GEMM order (Q4_K: activations by the 4-row quantizer), the rest in the GEMV order;
/// token generation, small batches (row kernels), prompts (tiles, with tails of 1..3 rows), 1
/// and 3 threads, 1 and 2 activation planes, activations with ties of ±max (the 4-row rule)
#[test]
fn mul_mat_q4_is_upstreams_repacked_order_bit_for_bit() {
    use crate::block::{BlockQ4_0, BlockQ4K, BlockQ8_0, BlockQ8K, as_blocks};
    use crate::dot::q4_k::{q4_k_q8_k_gemm, q4_k_q8_k_gemv};
    use crate::dot::q8_0::q4_0_q8_0_repack;
    if crate::dot::vec_dot_only() {
        eprintln!("SKIP: GGML_RS_CPU_ORDER=fast (not upstream's repacked order)");
        return;
    }
    let mut r = XorShift::new(37);
    for level in Level::available().into_iter().filter(|l| *l >= Level::Avx2) {
        for wt in [GgmlType::Q4K, GgmlType::Q4_0] {
            for (k, rows, tokens, planes) in
                [(512, 40, 1, 1), (256, 16, 3, 1), (512, 24, 5, 1), (256, 32, 16, 1), (512, 48, 19, 1), (256, 16, 22, 2), (768, 40, 35, 1)]
            {
                let a = weights(&mut r, wt, [k as i64, rows as i64, 1, 1]);
                let mut b = T::new(F32, [k as i64, tokens as i64, planes as i64, 1]).random(&mut r);
                // ties of the largest magnitude in some rows' super-blocks: -m first, then +m
                for i in 0..tokens * planes {
                    if i % 2 == 0 {
                        let (i11, i12) = (i % tokens, i / tokens);
                        let m = 1000.0 + i as f32;
                        b.set([3, i11, i12, 0], -m);
                        b.set([200, i11, i12, 0], m);
                    }
                }
                let what = format!("{} {} k={k} rows={rows} tokens={tokens} planes={planes}", wt.name(), level.name());
                let dne = [rows as i64, tokens as i64, planes as i64, 1];
                for threads in [1, 3] {
                    let d = T::new(F32, dne);
                    let n = node(Op::MulMat, &d, &[&a, &b], &[]);
                    let mut pool = crate::pool::ThreadPool::new(threads);
                    let mut scratch = crate::block::AlignedBytes::default();
                    let mut exec = Exec::with_level(&mut pool, &mut scratch, level);
                    crate::ops::compute(&n, &mut exec).unwrap();
                    for i12 in 0..planes {
                        for i11 in 0..tokens {
                            let gemm = i11 < tokens - tokens % 4;
                            let x = row(&b, i11, i12, 0);
                            let vdt = wt.vec_dot_type().unwrap();
                            let mut q = crate::block::AlignedBytes::zeroed(vdt.row_size(k));
                            match vdt {
                                GgmlType::Q8K if gemm => crate::quants::quantize_row_q8_k_4x8(&x, crate::block::as_blocks_mut(&mut q, "q")),
                                // SAFETY: a row of k values into its Q8 row
                                _ => unsafe { crate::ops::copy::elem::quantize_from(vdt, &x, q.as_mut_ptr()) },
                            }
                            for i01 in 0..rows {
                                let at = a.off + i01 * a.nb[1];
                                let mut w = crate::block::AlignedBytes::zeroed(wt.row_size(k));
                                w.copy_from_slice(&a.buf[at..at + wt.row_size(k)]);
                                let want = match (wt, gemm) {
                                    (GgmlType::Q4_0, _) => q4_0_q8_0_repack(as_blocks::<BlockQ4_0>(&w, "w"), as_blocks::<BlockQ8_0>(&q, "x")),
                                    (_, true) => q4_k_q8_k_gemm(as_blocks::<BlockQ4K>(&w, "w"), as_blocks::<BlockQ8K>(&q, "x")),
                                    (_, false) => q4_k_q8_k_gemv(as_blocks::<BlockQ4K>(&w, "w"), as_blocks::<BlockQ8K>(&q, "x")),
                                };
                                let got = d.get([i01, i11, i12, 0]);
                                assert_eq!(got.to_bits(), want.to_bits(), "{what} threads={threads}: ({i01}, {i11}, {i12}) = {got}, want {want}");
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Q6_K weights (never repacked on x86) give upstream native's bits: fewer than 8 activation
/// rows `ggml_vec_dot_q6_K_q8_K`'s x86 order, 8 or more its tiled K-quant path's order (row
/// kernels below 16 rows, the qgemm tiles from 16), 1 and 3 threads
#[test]
fn mul_mat_q6_k_is_upstream_natives_order_bit_for_bit() {
    use crate::block::{BlockQ6K, BlockQ8K, as_blocks};
    use crate::dot::q6_k::{q6_k_q8_k_tiled, q6_k_q8_k_x86};
    if crate::simd::detected() < Level::Avx512Vnni {
        eprintln!("SKIP: no AVX-512 VNNI");
        return;
    }
    let mut r = XorShift::new(38);
    let level = Level::Avx512Vnni;
    for (k, rows, tokens) in [(512, 40, 1), (256, 16, 7), (512, 24, 8), (256, 20, 12), (512, 48, 16), (768, 33, 22)] {
        let a = weights(&mut r, GgmlType::Q6K, [k as i64, rows as i64, 1, 1]);
        let b = T::new(F32, [k as i64, tokens as i64, 1, 1]).random(&mut r);
        for threads in [1, 3] {
            let d = T::new(F32, [rows as i64, tokens as i64, 1, 1]);
            let n = node(Op::MulMat, &d, &[&a, &b], &[]);
            let mut pool = crate::pool::ThreadPool::new(threads);
            let mut scratch = crate::block::AlignedBytes::default();
            let mut exec = Exec::with_level(&mut pool, &mut scratch, level);
            crate::ops::compute(&n, &mut exec).unwrap();
            for i11 in 0..tokens {
                let x = row(&b, i11, 0, 0);
                let mut q = crate::block::AlignedBytes::zeroed(GgmlType::Q8K.row_size(k));
                // SAFETY: a row of k values into its Q8_K row
                unsafe { crate::ops::copy::elem::quantize_from(GgmlType::Q8K, &x, q.as_mut_ptr()) };
                for i01 in 0..rows {
                    let at = a.off + i01 * a.nb[1];
                    let mut w = crate::block::AlignedBytes::zeroed(GgmlType::Q6K.row_size(k));
                    w.copy_from_slice(&a.buf[at..at + GgmlType::Q6K.row_size(k)]);
                    let (wb, xb) = (as_blocks::<BlockQ6K>(&w, "w"), as_blocks::<BlockQ8K>(&q, "x"));
                    let want = if tokens >= 8 { q6_k_q8_k_tiled(wb, xb) } else { q6_k_q8_k_x86(wb, xb) };
                    let got = d.get([i01, i11, 0, 0]);
                    assert_eq!(got.to_bits(), want.to_bits(), "k={k} rows={rows} tokens={tokens} threads={threads}: ({i01}, {i11}) = {got}, want {want}");
                }
            }
        }
    }
}

/// Q4_0 weights that upstream does not repack (rows % 8 != 0) give its x86 order (vec_dot's and
/// tinyBLAS's 8 lanes, `dot::q8_0::q4_0_q8_0_x86`) bit for bit: row kernels, the mat-vec, the
/// pairs tiles; 1 and 3 threads
#[test]
fn mul_mat_q4_0_not_repacked_is_upstreams_x86_order_bit_for_bit() {
    use crate::block::{BlockQ4_0, BlockQ8_0, as_blocks};
    if crate::dot::vec_dot_only() || crate::qgemm::q8_0_fast() {
        eprintln!("SKIP: GGML_RS_CPU_ORDER=fast (not upstream's x86 order)");
        return;
    }
    let mut r = XorShift::new(39);
    for level in Level::available().into_iter().filter(|l| *l >= Level::Avx2) {
        for (k, rows, tokens) in [(256, 20, 1), (512, 36, 5), (256, 12, 16), (512, 44, 19)] {
            let a = weights(&mut r, GgmlType::Q4_0, [k as i64, rows as i64, 1, 1]);
            let b = T::new(F32, [k as i64, tokens as i64, 1, 1]).random(&mut r);
            for threads in [1, 3] {
                let d = T::new(F32, [rows as i64, tokens as i64, 1, 1]);
                let n = node(Op::MulMat, &d, &[&a, &b], &[]);
                let mut pool = crate::pool::ThreadPool::new(threads);
                let mut scratch = crate::block::AlignedBytes::default();
                let mut exec = Exec::with_level(&mut pool, &mut scratch, level);
                crate::ops::compute(&n, &mut exec).unwrap();
                for i11 in 0..tokens {
                    let x = row(&b, i11, 0, 0);
                    let mut q = crate::block::AlignedBytes::zeroed(GgmlType::Q8_0.row_size(k));
                    // SAFETY: a row of k values into its Q8_0 row
                    unsafe { crate::ops::copy::elem::quantize_from(GgmlType::Q8_0, &x, q.as_mut_ptr()) };
                    for i01 in 0..rows {
                        let at = a.off + i01 * a.nb[1];
                        let mut w = crate::block::AlignedBytes::zeroed(GgmlType::Q4_0.row_size(k));
                        w.copy_from_slice(&a.buf[at..at + GgmlType::Q4_0.row_size(k)]);
                        let want = crate::dot::q8_0::q4_0_q8_0_x86(as_blocks::<BlockQ4_0>(&w, "w"), as_blocks::<BlockQ8_0>(&q, "x"));
                        let got = d.get([i01, i11, 0, 0]);
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "{} k={k} rows={rows} tokens={tokens} threads={threads}: ({i01}, {i11}) = {got}, want {want}",
                            level.name()
                        );
                    }
                }
            }
        }
    }
}

/// the plan is a value of (types, shapes, table): the reference set computes every product row
/// by row in vec_dot's order; a set with the x86 tiles (described here, not run: any CPU) takes
/// int8 tiles from 16 activation rows, tinyBLAS for F32 / F16 where upstream's build hands the
/// product to it, the float tiles for BF16, and the row kernels in upstream's repacked or tiled
/// orders where its build would use them
#[test]
fn the_plan_follows_types_shapes_and_the_table() {
    use crate::kernels::{self, Kernels};
    if crate::config::get().fast() {
        eprintln!("GGML_RS_CPU_ORDER=fast: the upstream-order plans are not the ones taken");
        return;
    }
    let q = |wt: GgmlType| wt as i32;
    let w = |wt: GgmlType, k: i64, rows: i64| T::new(q(wt), [k, rows, 1, 1]);
    let b = |k: i64, n: i64| T::new(F32, [k, n, 1, 1]);
    let shapes = [
        (GgmlType::Q8_0, 64, 32, 32),
        (GgmlType::Q4_0, 64, 64, 32),
        (GgmlType::Q4_0, 64, 64, 8),
        (GgmlType::Q4_0, 64, 60, 32),
        (GgmlType::Q4K, 256, 64, 3),
        (GgmlType::Q6K, 256, 16, 8),
        (GgmlType::Q6K, 256, 16, 32),
        (GgmlType::F16, 64, 8, 2),
        (GgmlType::F16, 64, 8, 1),
        (GgmlType::F32, 64, 6, 4),
        (GgmlType::BF16, 64, 8, 16),
        (GgmlType::BF16, 64, 8, 15),
    ];
    let plan_of = |k: &Kernels, (wt, kk, rows, n): (GgmlType, i64, i64, i64)| plan(&w(wt, kk, rows).view(), &b(kk, n).view(), wt, k);
    let reference = kernels::at(Level::Scalar);
    for s in shapes {
        assert_eq!(plan_of(reference, s), MatPlan::Rows { repacked: false, tiled: false }, "{s:?} in the reference set");
    }
    // a table with the x86 tiles and facts of upstream's AVX-512 VNNI build (the kernels are
    // never called)
    let mut x86 = reference.clone();
    x86.dot.repacks = true;
    x86.dot.q6_k_tiled_path = true;
    x86.gemm.qgemm = Some(|_, _, _, _, _, _, _| ());
    x86.gemm.sgemm = Some(crate::sgemm::Tiles { lanes: 8, tile: |_, _, _, _, _, _| (), f16_cols: None });
    x86.gemm.fgemm = Some(|_, _, _, _, _, _, _| ());
    let kind = |wt, repacked| crate::qgemm::kind_for(wt, repacked, &x86).unwrap();
    let want = [
        MatPlan::Qgemm { kind: kind(GgmlType::Q8_0, false), repacked: false },
        MatPlan::Qgemm { kind: kind(GgmlType::Q4_0, true), repacked: true },
        MatPlan::Rows { repacked: true, tiled: false },
        MatPlan::Qgemm { kind: kind(GgmlType::Q4_0, false), repacked: false },
        MatPlan::Rows { repacked: true, tiled: false },
        MatPlan::Rows { repacked: false, tiled: true },
        MatPlan::Qgemm { kind: kind(GgmlType::Q6K, false), repacked: false },
        MatPlan::Sgemm,
        MatPlan::Rows { repacked: false, tiled: false },
        MatPlan::Rows { repacked: false, tiled: false },
        MatPlan::Fgemm,
        MatPlan::Rows { repacked: false, tiled: false },
    ];
    for (s, want) in shapes.into_iter().zip(want) {
        assert_eq!(plan_of(&x86, s), want, "{s:?} with the x86 tiles");
    }
    // Q6_K's tiles sum in the tiled order, Q4_0's of a non-repacked product in the pairs form
    assert!(kind(GgmlType::Q6K, false).tiled && kind(GgmlType::Q4_0, false).pairs && !kind(GgmlType::Q4_0, true).pairs);
    // the sets of this CPU: the plan of each takes only tiles the set has
    for k in kernels::available() {
        for s in shapes {
            match plan_of(k, s) {
                MatPlan::Qgemm { .. } => assert!(k.gemm.qgemm.is_some(), "{s:?} {}", k.set.name()),
                MatPlan::Sgemm => assert!(k.gemm.sgemm.is_some(), "{s:?} {}", k.set.name()),
                MatPlan::Fgemm => assert!(k.gemm.fgemm.is_some(), "{s:?} {}", k.set.name()),
                MatPlan::Rows { repacked, tiled } => {
                    assert!((!repacked || k.dot.repacks) && (!tiled || k.dot.q6_k_tiled_path || k.dot.kquant_tiled_path), "{s:?} {}", k.set.name())
                }
            }
        }
    }
}

/// MUL_MAT_ID's order per expert ([`id_orders`]), with a table carrying the facts of upstream's
/// AVX-512 VNNI build: 3-D experts its repack buffer takes go through the repacked GEMV for
/// every row; otherwise an expert with 8 or more routed rows of a tiled type takes the tiled
/// order, one with fewer (or none) vec_dot's: decided per expert, not by the op's row count
#[test]
fn mul_mat_id_order_is_chosen_per_expert_as_upstream() {
    if crate::config::get().fast() {
        eprintln!("GGML_RS_CPU_ORDER=fast: the upstream-order plans are not the ones taken");
        return;
    }
    let reference = crate::kernels::at(Level::Scalar);
    let mut x86 = reference.dot;
    x86.repacks = true;
    x86.q6_k_tiled_path = true;
    x86.kquant_tiled_path = true;
    let w = |wt: GgmlType, rows: i64, n_exp: i64| T::new(wt as i32, [256, rows, n_exp, 1]);
    let b = T::new(F32, [256, 2, 12, 1]);
    // 12 tokens × 2 slots: expert 0 gets 9 rows, expert 1 gets 8, expert 2 gets 7, expert 3 none
    let experts: Vec<usize> = [[0; 9].as_slice(), &[1; 8], &[2; 7]].concat();
    let by_rows = |o: Order| [o, o, Order::VecDot, Order::VecDot];
    let (vd, tiled, gemv) = ([Order::VecDot; 4], by_rows(Order::Tiled), [Order::RepackGemv; 4]);
    for (wt, rows, want) in [
        (GgmlType::Q6K, 16, tiled),
        (GgmlType::Q2K, 16, tiled),
        (GgmlType::Q3K, 16, tiled),
        (GgmlType::Q5K, 16, tiled),
        (GgmlType::Iq4Xs, 16, tiled),
        // repacked types: every row of every expert through the GEMV, whatever its row count
        (GgmlType::Q4_0, 16, gemv),
        (GgmlType::Q4K, 16, gemv),
        (GgmlType::Iq4Nl, 16, gemv),
        (GgmlType::Mxfp4, 16, gemv),
        // rows not a multiple of 8: not repacked, and Q4_K has no tiled order here
        (GgmlType::Q4K, 12, vd),
        (GgmlType::Q8_0, 16, vd),
        (GgmlType::F16, 16, vd),
    ] {
        assert_eq!(id_orders(&w(wt, rows, 4).view(), &b.view(), wt, &experts, &x86), want, "{} rows {rows}", wt.name());
        assert_eq!(id_orders(&w(wt, rows, 4).view(), &b.view(), wt, &experts, &reference.dot), vd, "{} in the reference set", wt.name());
    }
    // Q2_K experts are repacked in AVX-512 builds only
    let mut q2 = x86;
    q2.repacks_q2_k = true;
    assert_eq!(id_orders(&w(GgmlType::Q2K, 16, 4).view(), &b.view(), GgmlType::Q2K, &experts, &q2), gemv);
    // one expert (2-D weights): upstream's repack buffer takes MUL_MAT_ID of 3-D weights only
    assert_eq!(id_orders(&w(GgmlType::Q4_0, 16, 1).view(), &b.view(), GgmlType::Q4_0, &[0; 9], &x86), [Order::VecDot]);
    // F16 activations: not the repacked kernels (F32 only), nor the tiled path (F32 or Q8_K)
    let b16 = T::new(F16, [256, 2, 12, 1]);
    assert_eq!(id_orders(&w(GgmlType::Q4_0, 16, 4).view(), &b16.view(), GgmlType::Q4_0, &experts, &x86), vd);
    assert_eq!(id_orders(&w(GgmlType::Q5K, 16, 4).view(), &b16.view(), GgmlType::Q5K, &experts, &x86), vd);
}
