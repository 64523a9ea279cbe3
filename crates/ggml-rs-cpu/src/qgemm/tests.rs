use super::*;
use crate::block::{AlignedBytes, as_blocks_mut};
use crate::quants::{dequantize_row, quantize_row};
use crate::rng::XorShift;
use crate::simd::Level;

const TYPES: [GgmlType; 4] = [GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4K, GgmlType::Q6K];

/// the levels this CPU runs the tiles at (AVX2's kernels and AVX-512 VNNI's)
fn levels() -> Vec<Level> {
    let l: Vec<Level> =
        Level::available().into_iter().filter(|l| crate::kernels::at(*l).gemm.qgemm.is_some() && matches!(l, Level::Avx2 | Level::Avx512Vnni)).collect();
    if l.is_empty() {
        eprintln!("no AVX2: qgemm not tested");
    }
    l
}

/// random rows of `ty` (model-like values); with `pow2` (Q8_0 / Q4_0) every scale a power
/// of two, so that every float operation of a product is exact
fn rows(r: &mut XorShift, ty: GgmlType, n: usize, k: usize, pow2: bool) -> Vec<AlignedBytes> {
    (0..n)
        .map(|i| {
            let mut w = AlignedBytes::zeroed(ty.row_size(k));
            quantize_row(ty, &r.model_like(k), &mut w);
            if pow2 {
                let d = half::f16::from_f32(2f32.powi(-((i % 5) as i32) - 3));
                match ty {
                    GgmlType::Q8_0 => as_blocks_mut::<BlockQ8_0>(&mut w, "t").iter_mut().for_each(|b| b.d = d),
                    GgmlType::Q4_0 => as_blocks_mut::<BlockQ4_0>(&mut w, "t").iter_mut().for_each(|b| b.d = d),
                    _ => unreachable!(),
                }
            }
            w
        })
        .collect()
}

/// weight rows `w` repacked, activation rows `x` prepared, one tile: its 16 outputs per
/// column (NaN past the rows of `w`)
fn run_tile<X: std::ops::Deref<Target = [u8]>>(kd: Kind, level: Level, ty: GgmlType, w: &[&[u8]], x: &[X], k: usize) -> Vec<Vec<f32>> {
    let nb = k / kd.block_len();
    let mut packed = vec![0u8; nb * kd.block_bytes()];
    repack_as(kd, ty, w, k, &mut packed);
    let mut qs = vec![vec![0i8; kd.col_len(k)]; x.len()];
    let mut aux = vec![vec![Aux::default(); nb]; x.len()];
    for j in 0..x.len() {
        prepare_column_as(kd, ty, &x[j], &mut qs[j], &mut aux[j]);
    }
    let qsr: Vec<&[i8]> = qs.iter().map(|a| &a[..]).collect();
    let auxr: Vec<&[Aux]> = aux.iter().map(|a| &a[..]).collect();
    let mut out = vec![vec![f32::NAN; ROWS]; x.len()];
    let mut outr: Vec<&mut [f32]> = out.iter_mut().map(|o| &mut o[..]).collect();
    tile(kd, level, &packed, &qsr, &auxr, &mut outr, w.len());
    out
}

/// the tile against the scalar row kernel (upstream's generic vec_dot) on the same bytes:
/// bit for bit where every float operation is exact (`pow2`), else within the rounding of
/// the two summation orders (bounded by Σ|w·y| of the dequantized operands)
#[allow(clippy::too_many_arguments)]
fn check(kd: Kind, level: Level, ty: GgmlType, n_rows: usize, n_cols: usize, k: usize, pow2: bool, seed: u64) {
    let vdt = ty.vec_dot_type().unwrap();
    let mut r = XorShift::new(seed);
    let nb = k / kd.block_len();
    let w = rows(&mut r, ty, n_rows, k, pow2);
    let x = rows(&mut r, vdt, n_cols, k, pow2);
    let wr: Vec<&[u8]> = w.iter().map(|v| &v[..]).collect();
    let out = run_tile(kd, level, ty, &wr, &x, k);
    let dot = crate::kernels::at(Level::Scalar).row_dot(ty);
    let q8 = |w: &[u8], x: &[u8]| crate::dot::q8_0::q8_0_q8_0_x86(as_blocks(w, "w"), as_blocks(x, "x"));
    for j in 0..n_cols {
        let mut xd = vec![0f32; k];
        dequantize_row(vdt, &x[j], &mut xd);
        for i in 0..n_rows {
            let got = out[j][i];
            if kd.tiled {
                // the tiled form is upstream's tiled K-quant path's order, bit for bit
                let want = crate::dot::q6_k::q6_k_q8_k_tiled(as_blocks(wr[i], "w"), as_blocks(&x[j], "x"));
                assert_eq!(got.to_bits(), want.to_bits(), "q6_K tiled {n_rows}×{n_cols} k={k}: col {j} row {i}: {got} vs {want}");
                continue;
            }
            if kd.k_pairs {
                // the k_pairs form is upstream's repacked Q4_K GEMM order, bit for bit
                let want = crate::dot::q4_k::q4_k_q8_k_gemm(as_blocks(wr[i], "w"), as_blocks(&x[j], "x"));
                assert_eq!(got.to_bits(), want.to_bits(), "q4_K k_pairs {n_rows}×{n_cols} k={k}: col {j} row {i}: {got} vs {want}");
                continue;
            }
            if kd.pairs && ty == GgmlType::Q4_0 {
                // Q4_0 in the pairs form: upstream's x86 order (not repacked), bit for bit
                let want = crate::dot::q8_0::q4_0_q8_0_x86(as_blocks(wr[i], "w"), as_blocks(&x[j], "x"));
                assert_eq!(got.to_bits(), want.to_bits(), "q4_0 pairs {n_rows}×{n_cols} k={k}: col {j} row {i}: {got} vs {want}");
                continue;
            }
            if kd.pairs {
                // the pairs form is upstream's x86 order, bit for bit on any values
                let want = q8(wr[i], &x[j]);
                assert_eq!(got.to_bits(), want.to_bits(), "q8_0 {n_rows}×{n_cols} k={k}: col {j} row {i}: {got} vs {want}");
                continue;
            }
            let want = dot.dot(wr[i], &x[j]);
            if pow2 {
                assert_eq!(got.to_bits(), want.to_bits(), "{} {n_rows}×{n_cols} k={k}: col {j} row {i}: {got} vs {want}", ty.name());
            } else {
                let mut wd = vec![0f32; k];
                dequantize_row(ty, wr[i], &mut wd);
                let mag: f64 = wd.iter().zip(&xd).map(|(p, q)| (*p as f64 * *q as f64).abs()).sum();
                let tol = mag * 1e-6 * (nb as f64 + 8.0);
                assert!(((got - want) as f64).abs() <= tol, "{} {n_rows}×{n_cols} k={k}: col {j} row {i}: {got} vs {want} (tol {tol})", ty.name());
            }
        }
        // rows past n_rows are not written
        assert!(out[j][n_rows..].iter().all(|v| v.is_nan()), "{}: a row past {n_rows} was written", ty.name());
    }
}

/// every type and column count, full and partial row blocks, at every level of the tiles
/// (the AVX2 kernels: the same bits as the AVX-512 ones, checked here against the same
/// definitions)
#[test]
fn tile_equals_the_scalar_row_kernel() {
    for level in levels() {
        // Q8_0 in both forms: the pairs (upstream's order, bit for bit) and the fast one
        // and Q4_K in both: vec_dot-like per sub-block and the k_pairs form (upstream's GEMM order)
        let k_pairs = Kind { k_pairs: true, ..kind_of(GgmlType::Q4K, true).unwrap() };
        let forms = TYPES.iter().map(|&ty| (ty, kind_of(ty, true).unwrap())).chain([
            (GgmlType::Q8_0, kind_of(GgmlType::Q8_0, false).unwrap()),
            (GgmlType::Q4_0, Kind { pairs: true, ..kind_of(GgmlType::Q4_0, true).unwrap() }),
            (GgmlType::Q4K, k_pairs),
            (GgmlType::Q6K, Kind { tiled: true, ..kind_of(GgmlType::Q6K, true).unwrap() }),
        ]);
        for (ty, kd) in forms {
            if kd.tiled && level < Level::Avx512Vnni {
                continue;
            }
            for n_cols in 1..=MAX_COLS {
                for (n_rows, k) in [(16, 256), (16, 1024), (5, 256), (9, 512), (1, 512)] {
                    if matches!(ty, GgmlType::Q8_0 | GgmlType::Q4_0) {
                        check(kd, level, ty, n_rows, n_cols, k, true, 31 + n_cols as u64);
                    }
                    check(kd, level, ty, n_rows, n_cols, k, false, 97 + n_cols as u64);
                }
            }
        }
    }
}

/// the AVX2 kernels give the AVX-512 VNNI kernels' bits on every form they share
#[test]
fn avx2_tiles_equal_the_avx512_tiles_bit_for_bit() {
    let l = levels();
    if !l.contains(&Level::Avx512Vnni) || !l.contains(&Level::Avx2) {
        eprintln!("no AVX-512 VNNI: nothing to compare the AVX2 tiles with");
        return;
    }
    let mut r = XorShift::new(4242);
    let forms = [
        (GgmlType::Q8_0, kind_of(GgmlType::Q8_0, true).unwrap()),
        (GgmlType::Q8_0, kind_of(GgmlType::Q8_0, false).unwrap()),
        (GgmlType::Q4_0, kind_of(GgmlType::Q4_0, true).unwrap()),
        (GgmlType::Q4_0, Kind { pairs: true, ..kind_of(GgmlType::Q4_0, true).unwrap() }),
        (GgmlType::Q4K, kind_of(GgmlType::Q4K, true).unwrap()),
        (GgmlType::Q4K, Kind { k_pairs: true, ..kind_of(GgmlType::Q4K, true).unwrap() }),
        (GgmlType::Q6K, kind_of(GgmlType::Q6K, true).unwrap()),
    ];
    for (ty, kd) in forms {
        let vdt = ty.vec_dot_type().unwrap();
        for (n_rows, n_cols, k) in [(16, 8, 2048), (13, 5, 512), (7, 3, 256)] {
            let w = rows(&mut r, ty, n_rows, k, false);
            let x = rows(&mut r, vdt, n_cols, k, false);
            let wr: Vec<&[u8]> = w.iter().map(|v| &v[..]).collect();
            let a = run_tile(kd, Level::Avx2, ty, &wr, &x, k);
            let b = run_tile(kd, Level::Avx512Vnni, ty, &wr, &x, k);
            for j in 0..n_cols {
                for i in 0..n_rows {
                    assert_eq!(
                        a[j][i].to_bits(),
                        b[j][i].to_bits(),
                        "{} {kd:?} {n_rows}×{n_cols} k={k}: col {j} row {i}: {} vs {}",
                        ty.name(),
                        a[j][i],
                        b[j][i]
                    );
                }
            }
        }
    }
}

/// the unpacked form is the weights: scale · (q - offset) - min is the dequantized value
#[test]
fn unpacked_rows_are_the_weights() {
    let mut r = XorShift::new(5);
    let k = 512;
    for ty in TYPES {
        let kd = kind(ty).unwrap();
        let w = rows(&mut r, ty, 1, k, false).remove(0);
        let mut want = vec![0f32; k];
        dequantize_row(ty, &w, &mut want);
        let mut q = vec![0u8; k];
        let (mut sc, mut mn) = (vec![0f32; k / kd.block_len()], vec![0f32; k / kd.block_len()]);
        unpack_row(ty, &w, &mut q, &mut sc, &mut mn);
        for e in 0..k {
            let b = e / kd.block_len();
            let got = sc[b] * (q[e] as i32 - offset(ty)) as f32 - mn[b];
            assert!((got - want[e]).abs() <= want[e].abs() * 1e-6 + 1e-7, "{} element {e}: {got} vs {}", ty.name(), want[e]);
        }
    }
}

/// extreme quants: Q8_0 weights of 127 and -128 (the offset makes them 255 / 0) against
/// activations of ±127, every block: the integer sums must not saturate
#[test]
fn extreme_quants_do_not_saturate() {
    for level in levels() {
        let (nb, k) = (64, 64 * 32);
        let mut w = vec![0u8; nb * 34];
        let mut x = vec![0u8; nb * 34];
        for (i, (wb, xb)) in w.chunks_exact_mut(34).zip(x.chunks_exact_mut(34)).enumerate() {
            wb[..2].copy_from_slice(&half::f16::from_f32(1.0).to_le_bytes());
            xb[..2].copy_from_slice(&half::f16::from_f32(1.0).to_le_bytes());
            for q in 0..32 {
                wb[2 + q] = if (i + q) % 3 == 0 { 0x80 } else { 127 };
                xb[2 + q] = if q % 2 == 0 { 127 } else { (-127i8) as u8 };
            }
        }
        for pairs in [true, false] {
            let out = run_tile(kind_of(GgmlType::Q8_0, pairs).unwrap(), level, GgmlType::Q8_0, &[&w], &[&x[..]], k);
            assert_eq!(out[0][0], crate::kernels::at(Level::Scalar).row_dot(GgmlType::Q8_0).dot(&w, &x), "{} pairs: {pairs}", level.name());
        }
    }
}

/// Q8_0 tiles equal upstream's x86 order bit for bit on rows as MUL_MAT sees them (weights
/// by the reference quantizer, activations by the x86 one, a zero and an extreme block):
/// one block, odd block counts, every column count, partial row blocks
#[test]
fn q8_0_tiles_equal_upstreams_x86_order_bit_for_bit() {
    for level in levels() {
        let ty = GgmlType::Q8_0;
        let mut r = XorShift::new(1414);
        for nb in [1usize, 3, 5, 33, 128] {
            let k = 32 * nb;
            for (n_rows, n_cols) in [(16, 8), (16, 7), (11, 3), (1, 1), (2, 2), (15, 5)] {
                let mut w = Vec::new();
                let mut x = Vec::new();
                for _ in 0..n_rows.max(n_cols) {
                    let (a, b) = crate::dot::tests::q8_0_model_rows(&mut r, nb);
                    w.push(crate::block::as_bytes(&a).to_vec());
                    x.push(crate::block::as_bytes(&b).to_vec());
                }
                let wr: Vec<&[u8]> = w[..n_rows].iter().map(|v| &v[..]).collect();
                let out = run_tile(kind_of(ty, true).unwrap(), level, ty, &wr, &x[..n_cols], k);
                for j in 0..n_cols {
                    for i in 0..n_rows {
                        let want = crate::dot::q8_0::q8_0_q8_0_x86(as_blocks(wr[i], "w"), as_blocks(&x[j], "x"));
                        assert_eq!(out[j][i].to_bits(), want.to_bits(), "{} nb={nb} {n_rows}×{n_cols}: col {j} row {i}: {} vs {want}", level.name(), out[j][i]);
                    }
                }
            }
        }
    }
}
