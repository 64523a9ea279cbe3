//! Every SIMD kernel against its scalar reference, at every level this CPU runs.

use half::{bf16, f16};

use super::float::*;
use super::iq4::*;
use super::q4_k::*;
use super::q5::*;
use super::q6_k::*;
use super::q8_0::*;
use super::*;
use crate::block::*;
use crate::quants::quantize_row_q8_k;
use crate::rng::XorShift;
use crate::simd::Level;

// the types added after the first five (K-quants, TQ, IQ4 / MXFP4, the repacked and tiled
// orders, the grid types)
mod types;

const SIZES: [usize; 9] = [0, 1, 7, 8, 31, 64, 100, 4096, 4099];

fn abs_sum(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| (a * b).abs()).sum()
}

/// float kernels: within 2⁻²⁰ · Σ|x·y| of the f64 reference
#[test]
fn float_kernels_match_the_reference() {
    let mut r = XorShift::new(1);
    for level in Level::available() {
        for n in SIZES {
            let x: Vec<f32> = (0..n).map(|_| r.f32_in(-2.0, 2.0)).collect();
            let y: Vec<f32> = (0..n).map(|_| r.f32_in(-2.0, 2.0)).collect();
            let tol = |xs: &[f64], ys: &[f64]| abs_sum(xs, ys) * 2f64.powi(-20) + 1e-30;

            let got = (crate::kernels::at(level).dot.f32)(&x, &y) as f64;
            let want = f32_reference(&x, &y) as f64;
            let (xd, yd): (Vec<f64>, Vec<f64>) = (x.iter().map(|&v| v as f64).collect(), y.iter().map(|&v| v as f64).collect());
            assert!((got - want).abs() <= tol(&xd, &yd), "f32 {} n={n}: {got} vs {want}", level.name());

            let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
            let yh: Vec<f16> = y.iter().map(|&v| f16::from_f32(v)).collect();
            let got = (crate::kernels::at(level).dot.f16)(&xh, &yh) as f64;
            let want = f16_reference(&xh, &yh) as f64;
            assert!((got - want).abs() <= tol(&xd, &yd) * 1.01, "f16 {} n={n}: {got} vs {want}", level.name());

            let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
            let yb: Vec<bf16> = y.iter().map(|&v| bf16::from_f32(v)).collect();
            let got = (crate::kernels::at(level).dot.bf16)(&xb, &yb) as f64;
            let want = bf16_reference(&xb, &yb) as f64;
            assert!((got - want).abs() <= tol(&xd, &yd) * 1.02, "bf16 {} n={n}: {got} vs {want}", level.name());
        }
    }
}

fn q8_0_blocks(r: &mut XorShift, nb: usize, qmax: i32, d: impl Fn(&mut XorShift) -> f32) -> Vec<BlockQ8_0> {
    (0..nb).map(|_| BlockQ8_0 { d: f16::from_f32(d(r)), qs: std::array::from_fn(|_| r.i32_in(-qmax, qmax) as i8) }).collect()
}

fn q4_0_blocks(r: &mut XorShift, nb: usize, d: impl Fn(&mut XorShift) -> f32) -> Vec<BlockQ4_0> {
    (0..nb).map(|_| BlockQ4_0 { d: f16::from_f32(d(r)), qs: std::array::from_fn(|_| r.next_u64() as u8) }).collect()
}

/// scales that are powers of two and activations small enough that every float operation is
/// exact: then the result depends on the integer sums alone, and those must equal bit for bit
#[test]
fn q8_0_and_q4_0_integer_sums_are_exact() {
    let mut r = XorShift::new(2);
    let pow2 = |r: &mut XorShift| if r.next_u64() & 1 == 0 { 0.25 } else { 0.125 };
    for level in Level::available() {
        for nb in [0, 1, 2, 3, 17, 64] {
            let x = q8_0_blocks(&mut r, nb, 127, |_| 0.125);
            let y = q8_0_blocks(&mut r, nb, 15, pow2);
            assert_eq!((crate::kernels::at(level).dot.q8_0)(&x, &y), q8_0_q8_0_reference(&x, &y), "q8_0 {} nb={nb}", level.name());
            let x4 = q4_0_blocks(&mut r, nb, |_| 0.125);
            assert_eq!((crate::kernels::at(level).dot.q4_0)(&x4, &y), q4_0_q8_0_reference(&x4, &y), "q4_0 {} nb={nb}", level.name());
        }
    }
}

/// any scales, full-range quants: within (n_blocks + 8) · 2⁻²³ · Σ|d·x·y| of the reference (the
/// SIMD versions scale each of 8 lane sums, then add lanes and blocks)
#[test]
fn q8_0_and_q4_0_match_the_reference_within_float_rounding() {
    let mut r = XorShift::new(3);
    let any = |r: &mut XorShift| r.f32_in(-0.05, 0.05);
    for level in Level::available() {
        for nb in [1, 5, 128, 130] {
            let x = q8_0_blocks(&mut r, nb, 127, any);
            let y = q8_0_blocks(&mut r, nb, 127, any);
            let x4 = q4_0_blocks(&mut r, nb, any);
            let terms = |sumi: &dyn Fn(usize) -> i32, dx: &dyn Fn(usize) -> f32| -> f64 {
                (0..nb).map(|i| (sumi(i) as f64 * dx(i) as f64 * y[i].d.to_f64()).abs()).sum()
            };
            let tol8 = terms(&|i| x[i].qs.iter().zip(&y[i].qs).map(|(&a, &b)| (a as i32 * b as i32).abs()).sum(), &|i| x[i].d.to_f32())
                * (nb + 8) as f64
                * 2f64.powi(-23);
            let (got, want) = ((crate::kernels::at(level).dot.q8_0)(&x, &y), q8_0_q8_0_reference(&x, &y));
            assert!(((got - want) as f64).abs() <= tol8 + 1e-30, "q8_0 {} nb={nb}: {got} vs {want}", level.name());
            // and upstream's x86 order, the SIMD levels' definition, is as close to the reference
            let x86 = q8_0_q8_0_x86(&x, &y);
            assert!(((x86 - want) as f64).abs() <= tol8 + 1e-30, "q8_0 x86 order nb={nb}: {x86} vs {want}");
            let sumi4 = |i: usize| -> i32 {
                (0..16)
                    .map(|j| ((x4[i].qs[j] & 15) as i32 - 8) * y[i].qs[j] as i32 + ((x4[i].qs[j] >> 4) as i32 - 8) * y[i].qs[j + 16] as i32)
                    .map(i32::abs)
                    .sum()
            };
            let tol4 = terms(&sumi4, &|i| x4[i].d.to_f32()) * (nb + 8) as f64 * 2f64.powi(-23);
            let (got, want) = ((crate::kernels::at(level).dot.q4_0)(&x4, &y), q4_0_q8_0_reference(&x4, &y));
            assert!(((got - want) as f64).abs() <= tol4 + 1e-30, "q4_0 {} nb={nb}: {got} vs {want}", level.name());
        }
    }
}

/// A Q8_0 weight row and an activation row as MUL_MAT sees them: weights quantized by the
/// reference quantizer from model-like values, activations by the x86 one; block 0 of the
/// weights zero (scale and quants), block 1 of the weights extreme (quants -128 and 127, the
/// activations ±127), the last activation block zero.
pub(crate) fn q8_0_model_rows(r: &mut XorShift, nb: usize) -> (Vec<BlockQ8_0>, Vec<BlockQ8_0>) {
    let zero = BlockQ8_0 { d: f16::ZERO, qs: [0; 32] };
    let (mut x, mut y) = (vec![zero; nb], vec![zero; nb]);
    crate::quants::quantize_row_q8_0(&r.model_like(32 * nb), &mut x);
    crate::quants::quantize_row_q8_0_cpu(&r.model_like(32 * nb), &mut y);
    if nb >= 3 {
        x[0] = zero;
        x[1].qs = std::array::from_fn(|i| if i % 3 == 0 { -128 } else { 127 });
        y[1].qs = std::array::from_fn(|i| if i % 2 == 0 { 127 } else { -127 });
        y[nb - 1] = zero;
    }
    (x, y)
}

/// Q8_0 · Q8_0 at every x86 SIMD level equals upstream's x86 order ([`q8_0_q8_0_x86`]) bit for
/// bit, on rows as MUL_MAT sees them: one block, odd block counts, zero and extreme blocks (the
/// aarch64 levels: `neon.rs`)
#[test]
fn q8_0_simd_kernels_equal_upstreams_x86_order_bit_for_bit() {
    let mut r = XorShift::new(14);
    for level in Level::available().into_iter().filter(|&l| l >= Level::Avx2) {
        for nb in [0, 1, 2, 3, 5, 17, 64, 127, 128, 130] {
            for _ in 0..4 {
                let (x, y) = q8_0_model_rows(&mut r, nb);
                let (got, want) = ((crate::kernels::at(level).dot.q8_0)(&x, &y), q8_0_q8_0_x86(&x, &y));
                assert_eq!(got.to_bits(), want.to_bits(), "q8_0 {} nb={nb}: {got} vs {want}", level.name());
            }
        }
    }
}

/// the x86 order is 8 lanes summed with one rounding each per block, then the horizontal sum's
/// shape: a case where the generic order (one running sum) gives other bits
#[test]
fn q8_0_x86_order_is_not_the_generic_order() {
    let mut r = XorShift::new(15);
    let differ = (0..20).any(|_| {
        let (x, y) = q8_0_model_rows(&mut r, 16);
        q8_0_q8_0_x86(&x, &y).to_bits() != q8_0_q8_0_reference(&x, &y).to_bits()
    });
    assert!(differ, "20 random row pairs summed to the same bits in both orders");
    // hsum8's shape: ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)); in lane order the two
    // halves of an ulp would each round away
    let v = [1.0, 2f32.powi(-24), 0.0, 0.0, 0.0, 2f32.powi(-24), 0.0, 0.0];
    assert_eq!(hsum8(v), 1.0 + 2f32.powi(-23));
}

pub(crate) fn q8_k_row(r: &mut XorShift, nb: usize) -> Vec<BlockQ8K> {
    let x = r.model_like(nb * QK_K);
    let mut y = vec![BlockQ8K { d: 0.0, qs: [0; QK_K], bsums: [0; 16] }; nb];
    quantize_row_q8_k(&x, &mut y);
    y
}

/// K-quant kernels keep the reference's integers and float order: bit for bit, on blocks of
/// random bytes (every scale, min and quant pattern)
#[test]
fn k_quant_kernels_equal_the_reference_bit_for_bit() {
    let mut r = XorShift::new(4);
    for level in Level::available() {
        for nb in [0, 1, 2, 16, 17] {
            let y = q8_k_row(&mut r, nb);
            let mut x4 = vec![BlockQ4K { d: f16::ZERO, dmin: f16::ZERO, scales: [0; 12], qs: [0; 128] }; nb];
            r.fill_bytes(as_bytes_mut(&mut x4));
            for b in &mut x4 {
                b.d = f16::from_f32(r.f32_in(0.0, 0.01));
                b.dmin = f16::from_f32(r.f32_in(0.0, 0.01));
            }
            // upstream's aarch64 order at the NEON levels (`neon.rs`), the reference's elsewhere
            let want = if level.is_neon() { super::neon::q4_k_q8_k_arm(&x4, &y) } else { q4_k_q8_k_reference(&x4, &y) };
            let got = (crate::kernels::at(level).dot.q4_k)(&x4, &y);
            assert_eq!(got.to_bits(), want.to_bits(), "q4_K {} nb={nb}: {got} vs {want}", level.name());

            let mut x6 = vec![BlockQ6K { ql: [0; 128], qh: [0; 64], scales: [0; 16], d: f16::ZERO }; nb];
            r.fill_bytes(as_bytes_mut(&mut x6));
            for b in &mut x6 {
                b.d = f16::from_f32(r.f32_in(-0.01, 0.01));
            }
            // the kernel MUL_MAT runs: upstream's x86 order from AVX2, its aarch64 order at the
            // NEON levels (the reference at scalar)
            let want = if level >= Level::Avx2 {
                q6_k_q8_k_x86(&x6, &y)
            } else if level.is_neon() {
                super::neon::q6_k_q8_k_arm(&x6, &y)
            } else {
                q6_k_q8_k_reference(&x6, &y)
            };
            let got = (crate::kernels::at(level).dot.q6_k)(&x6, &y);
            assert_eq!(got.to_bits(), want.to_bits(), "q6_K x86 {} nb={nb}: {got} vs {want}", level.name());
        }
    }
}

/// the byte-level entry checks that the two rows match
#[test]
#[should_panic(expected = "vec_dot q8_0: weight row has 2 blocks, activation row 1")]
fn row_dot_names_mismatched_rows() {
    let (x, y) = (AlignedBytes::zeroed(2 * 34), AlignedBytes::zeroed(34));
    crate::kernels::at(Level::Scalar).row_dot(GgmlType::Q8_0).dot(&x, &y);
}

/// the four-at-a-time unpacking of Q4_K's scales and mins is get_scale_min_k4's
#[test]
fn q4_k_scale_unpacking_matches_get_scale_min_k4() {
    let mut r = XorShift::new(6);
    for _ in 0..10_000 {
        let mut q = [0u8; 12];
        r.fill_bytes(&mut q);
        let u = super::q4_k::unpack_scales_mins(&q);
        for j in 0..8 {
            assert_eq!((u[j], u[8 + j]), crate::quants::get_scale_min_k4(j, &q), "{q:?} sub-block {j}");
        }
    }
}

/// Q5_0 · Q8_0 and Q5_1 · Q8_1: every level equals the scalar reference bit for bit where all
/// float operations are exact (power-of-two scales, small quants), and within float rounding on
/// random scales
#[test]
fn q5_kernels_match_the_reference() {
    let mut r = XorShift::new(31);
    for level in Level::available() {
        for nb in [0usize, 1, 2, 3, 7, 8, 31, 64, 100, 129] {
            for exact in [true, false] {
                let d = |r: &mut XorShift| f16::from_f32(if exact { 0.5 } else { r.f32_in(-0.1, 0.1) });
                let x0: Vec<BlockQ5_0> = (0..nb)
                    .map(|_| BlockQ5_0 { d: d(&mut r), qh: (r.next_u64() as u32).to_le_bytes(), qs: std::array::from_fn(|_| r.next_u64() as u8) })
                    .collect();
                let x1: Vec<BlockQ5_1> = (0..nb)
                    .map(|_| BlockQ5_1 { d: d(&mut r), m: d(&mut r), qh: (r.next_u64() as u32).to_le_bytes(), qs: std::array::from_fn(|_| r.next_u64() as u8) })
                    .collect();
                let qmax = if exact { 4 } else { 127 };
                let y0 = q8_0_blocks(&mut r, nb, qmax, |r| if exact { 0.25 } else { r.f32_in(-0.1, 0.1) });
                let y1: Vec<BlockQ8_1> = y0.iter().map(|b| BlockQ8_1 { d: b.d, s: d(&mut r), qs: b.qs }).collect();
                let (g0, w0) = ((crate::kernels::at(level).dot.q5_0)(&x0, &y0), q5_0_q8_0_reference(&x0, &y0));
                let (g1, w1) = ((crate::kernels::at(level).dot.q5_1)(&x1, &y1), q5_1_q8_1_reference(&x1, &y1));
                if exact {
                    assert_eq!(g0.to_bits(), w0.to_bits(), "q5_0 {} nb={nb}: {g0} vs {w0}", level.name());
                    assert_eq!(g1.to_bits(), w1.to_bits(), "q5_1 {} nb={nb}: {g1} vs {w1}", level.name());
                } else {
                    let mag0: f64 = x0.iter().zip(&y0).map(|(a, b)| (a.d.to_f32() * b.d.to_f32()).abs() as f64 * 16.0 * 127.0 * 32.0).sum();
                    let mag1: f64 = x1
                        .iter()
                        .zip(&y1)
                        .map(|(a, b)| ((a.d.to_f32() * b.d.to_f32()).abs() * 31.0 * 127.0 * 32.0 + (a.m.to_f32() * b.s.to_f32()).abs()) as f64)
                        .sum();
                    let tol = |mag: f64| (nb as f64 + 8.0) * 2f64.powi(-23) * mag + 1e-30;
                    assert!(((g0 - w0) as f64).abs() <= tol(mag0), "q5_0 {} nb={nb}: {g0} vs {w0}", level.name());
                    assert!(((g1 - w1) as f64).abs() <= tol(mag1), "q5_1 {} nb={nb}: {g1} vs {w1}", level.name());
                }
            }
        }
    }
}

/// the multi-row mat-vec gives each row's row-kernel result bit for bit, for every weight type
/// at every level, whatever the row count (the 4-row passes and the rows left), the block count
/// (odd: the tail block) and the rows' placement (a stride with padding, rows at odd addresses
/// for the multi-row forms, which read with unaligned loads)
#[test]
fn gemv_rows_equal_the_row_kernel_bit_for_bit() {
    use crate::quants::quantize_row;
    let mut r = XorShift::new(77);
    let types = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q4K,
        GgmlType::Q6K,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q5K,
        GgmlType::Iq4Nl,
        GgmlType::Iq4Xs,
        GgmlType::Mxfp4,
    ];
    for level in Level::available() {
        for ty in types {
            let vt = ty.vec_dot_type().unwrap();
            for k in [32usize, 32 * 7, 256, 512, 768, 64 * 5 + 256] {
                if k % ty.block_size() != 0 || k % vt.block_size() != 0 {
                    continue;
                }
                let g = crate::kernels::at(level).gemv(ty, Order::VecDot);
                let w_len = ty.row_size(k);
                // a row stride with padding; rows start 1 byte in, 7 bytes apart, when the kernel
                // takes any alignment
                let (stride, shift) = if g.row_align() == 1 { (w_len + 7, 1) } else { (w_len + 8, 0) };
                for rows in [0usize, 1, 3, 4, 5, 9] {
                    let mut buf = crate::block::AlignedBytes::zeroed(rows * stride + 16);
                    let mut row = crate::block::AlignedBytes::zeroed(w_len);
                    for i in 0..rows {
                        quantize_row(ty, &r.model_like(k), &mut row);
                        buf[shift + i * stride..shift + i * stride + w_len].copy_from_slice(&row);
                    }
                    let mut x = crate::block::AlignedBytes::zeroed(vt.row_size(k));
                    quantize_row(vt, &r.model_like(k), &mut x);
                    let mut out = vec![f32::NAN; rows];
                    // SAFETY: `rows` rows of w_len bytes `stride` apart inside buf; out has `rows` floats
                    unsafe { g.rows(buf.as_ptr().add(shift), stride, rows, &x, out.as_mut_ptr()) };
                    for i in 0..rows {
                        let mut wr = crate::block::AlignedBytes::zeroed(w_len);
                        wr.copy_from_slice(&buf[shift + i * stride..shift + i * stride + w_len]);
                        let want = crate::kernels::at(level).row_dot(ty).dot(&wr, &x);
                        assert_eq!(out[i].to_bits(), want.to_bits(), "{} {} k={k} rows={rows} row {i}: {} vs {want}", ty.name(), level.name(), out[i]);
                    }
                }
            }
        }
    }
}

/// an F16 row pair as MUL_MAT sees it: weights and activations of a model, rounded to f16
fn f16_model_rows(r: &mut XorShift, k: usize) -> (Vec<f16>, Vec<f16>) {
    let h = |v: Vec<f32>| v.into_iter().map(f16::from_f32).collect::<Vec<_>>();
    (h(r.model_like(k)), h(r.model_like(k).into_iter().map(|v| v * 40.0).collect()))
}

/// F16 · F16 at the AVX-512 levels, the row kernel and the 4-row and 1-row mat-vec forms, equals
/// upstream's AVX-512 order ([`f16_avx512_order`]) bit for bit: whole blocks of 64, leftovers
/// (96, 100), the sizes of models' rows
#[test]
fn f16_avx512_kernels_equal_upstreams_order_bit_for_bit() {
    let mut r = XorShift::new(16);
    for level in Level::available().into_iter().filter(|&l| l >= Level::Avx512) {
        let g = crate::kernels::at(level).gemv(GgmlType::F16, Order::VecDot);
        assert!(g.is_multi_row());
        for k in [0usize, 1, 15, 64, 96, 100, 256, 1536, 4096 + 7] {
            for rows in [1usize, 4, 5] {
                let pairs: Vec<_> = (0..rows).map(|_| f16_model_rows(&mut r, k)).collect();
                let y = &pairs[0].1;
                // rows 2 bytes apart more than their length, 2 bytes in: unaligned loads
                let stride = 2 * k + 2;
                let mut w = vec![0u8; 2 + rows * stride];
                for (i, (x, _)) in pairs.iter().enumerate() {
                    for (j, v) in x.iter().enumerate() {
                        w[2 + i * stride + 2 * j..][..2].copy_from_slice(&v.to_bits().to_le_bytes());
                    }
                }
                let mut yb = crate::block::AlignedBytes::zeroed(2 * k);
                yb.iter_mut().zip(y.iter().flat_map(|v| v.to_bits().to_le_bytes())).for_each(|(b, v)| *b = v);
                let mut out = vec![f32::NAN; rows];
                // SAFETY: `rows` rows of 2k bytes `stride` apart inside w; out has `rows` floats
                unsafe { g.rows(w.as_ptr().add(2), stride, rows, &yb, out.as_mut_ptr()) };
                for (i, (x, _)) in pairs.iter().enumerate() {
                    let want = f16_avx512_order(x, y);
                    let row = (crate::kernels::at(level).dot.f16)(x, y);
                    assert_eq!(row.to_bits(), want.to_bits(), "row kernel {} k={k}: {row} vs {want}", level.name());
                    assert_eq!(out[i].to_bits(), want.to_bits(), "gemv {} k={k} rows={rows} row {i}: {} vs {want}", level.name(), out[i]);
                }
            }
        }
    }
}

/// the AVX-512 order is not the f64 reference's, nor 4 accumulators reduced in lane order: cases
/// where each gives other bits (what the kernel's tests above tell apart)
#[test]
fn f16_avx512_order_is_its_own() {
    let mut r = XorShift::new(17);
    let (mut vs_reference, mut vs_pairs) = (false, false);
    for _ in 0..20 {
        let (x, y) = f16_model_rows(&mut r, 1536 + 36);
        let want = f16_avx512_order(&x, &y);
        vs_reference |= want.to_bits() != f16_reference(&x, &y).to_bits();
        // (acc0 + acc1) + (acc2 + acc3), the lanes in order, the tail in f32
        let mut acc = [[0f32; 16]; 4];
        for i in (0..1536).step_by(64) {
            for j in 0..4 {
                for l in 0..16 {
                    acc[j][l] = x[i + 16 * j + l].to_f32().mul_add(y[i + 16 * j + l].to_f32(), acc[j][l]);
                }
            }
        }
        let mut other: f32 = (0..16).map(|l| (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l])).sum();
        for p in 1536..x.len() {
            other += x[p].to_f32() * y[p].to_f32();
        }
        vs_pairs |= want.to_bits() != other.to_bits();
    }
    assert!(vs_reference && vs_pairs, "20 random rows gave the same bits in the other orders: {vs_reference} {vs_pairs}");
}

/// Q4_K rows of random bytes (every scale, min and quant pattern), scales `d` and `dmin` from `scale`
pub(crate) fn q4_k_random(r: &mut XorShift, nb: usize, scale: f32) -> Vec<BlockQ4K> {
    let mut x = vec![BlockQ4K { d: f16::ZERO, dmin: f16::ZERO, scales: [0; 12], qs: [0; 128] }; nb];
    r.fill_bytes(as_bytes_mut(&mut x));
    for b in &mut x {
        b.d = f16::from_f32(r.f32_in(0.0, scale));
        b.dmin = f16::from_f32(r.f32_in(0.0, scale));
    }
    x
}

/// the repacked orders' SIMD kernels (row kernels and the multi-row mat-vec forms) equal their
/// plain-Rust definitions bit for bit, at every level, for random bytes with small and large
/// scales, extreme quants (nibbles 0 / 15 against ±127), several block counts
#[test]
fn repack_order_kernels_equal_their_definitions_bit_for_bit() {
    let mut r = XorShift::new(1404);
    for level in Level::available() {
        for nb in [0usize, 1, 2, 3, 8, 17, 64] {
            for (scale, extreme) in [(0.01f32, false), (60000.0, false), (0.5, true)] {
                // Q4_0 in the one repack order (GEMV and GEMM alike)
                let mut x = q4_0_blocks(&mut r, nb, |r| r.f32_in(-scale, scale));
                let mut y = q8_0_blocks(&mut r, nb, 127, |r| r.f32_in(-scale, scale));
                if extreme {
                    for (a, b) in x.iter_mut().zip(y.iter_mut()) {
                        a.qs = [if r.next_u64().is_multiple_of(2) { 0x00 } else { 0xff }; 16];
                        b.qs = std::array::from_fn(|_| if r.next_u64().is_multiple_of(2) { 127 } else { -127 });
                    }
                }
                let want = q4_0_q8_0_repack(&x, &y);
                for order in [Order::RepackGemv, Order::RepackGemm] {
                    let kern = crate::kernels::at(level).dot.row(GgmlType::Q4_0, order);
                    let got = kern.dot(as_bytes(&x), as_bytes(&y));
                    assert_eq!(got.to_bits(), want.to_bits(), "q4_0 {} {order:?} nb={nb} scale={scale}: {got} vs {want}", level.name());
                }
                // Q4_K in its two orders
                let x4 = q4_k_random(&mut r, nb, scale.min(1.0));
                let mut y8 = q8_k_row(&mut r, nb);
                if extreme {
                    for b in &mut y8 {
                        b.qs = std::array::from_fn(|_| if r.next_u64().is_multiple_of(2) { 127 } else { -127 });
                        for j in 0..16 {
                            b.bsums[j] = b.qs[16 * j..16 * j + 16].iter().map(|&q| q as i16).sum();
                        }
                    }
                }
                for (order, def) in [(Order::RepackGemv, q4_k_q8_k_gemv as Q4KDot), (Order::RepackGemm, q4_k_q8_k_gemm)] {
                    let want = def(&x4, &y8);
                    let got = crate::kernels::at(level).dot.row(GgmlType::Q4K, order).dot(as_bytes(&x4), as_bytes(&y8));
                    assert_eq!(got.to_bits(), want.to_bits(), "q4_K {} {order:?} nb={nb} scale={scale}: {got} vs {want}", level.name());
                }
            }
        }
        // the multi-row forms: rows 0..16 (8- and 4-row passes and the rows left), padded strides, Q4_0
        // rows at odd addresses (unaligned loads), against the definitions
        for (ty, order) in
            [(GgmlType::Q4_0, Order::RepackGemv), (GgmlType::Q4_0, Order::RepackGemm), (GgmlType::Q4K, Order::RepackGemv), (GgmlType::Q4K, Order::RepackGemm)]
        {
            let g = crate::kernels::at(level).gemv(ty, order);
            let vt = ty.vec_dot_type().unwrap();
            for k in [256usize, 512, 2048 + 256] {
                let w_len = ty.row_size(k);
                let (stride, shift) = if g.row_align() == 1 { (w_len + 7, 1) } else { (w_len + 8, 0) };
                for rows in [0usize, 1, 3, 4, 5, 8, 9, 13, 16] {
                    let mut buf = AlignedBytes::zeroed(rows * stride + 16);
                    for i in 0..rows {
                        let mut row = AlignedBytes::zeroed(w_len);
                        r.fill_bytes(&mut row);
                        // sane scales: f16 at each block's start (d, then dmin for Q4_K)
                        let bs = ty.type_size();
                        for b in 0..w_len / bs {
                            row[b * bs..b * bs + 2].copy_from_slice(&f16::from_f32(r.f32_in(-0.02, 0.02)).to_le_bytes());
                            if ty == GgmlType::Q4K {
                                row[b * bs + 2..b * bs + 4].copy_from_slice(&f16::from_f32(r.f32_in(0.0, 0.02)).to_le_bytes());
                            }
                        }
                        buf[shift + i * stride..shift + i * stride + w_len].copy_from_slice(&row);
                    }
                    let mut x = AlignedBytes::zeroed(vt.row_size(k));
                    crate::quants::quantize_row(vt, &r.model_like(k), &mut x);
                    let mut out = vec![f32::NAN; rows];
                    // SAFETY: `rows` rows of w_len bytes `stride` apart inside buf; out has `rows` floats
                    unsafe { g.rows(buf.as_ptr().add(shift), stride, rows, &x, out.as_mut_ptr()) };
                    for i in 0..rows {
                        let mut wr = AlignedBytes::zeroed(w_len);
                        wr.copy_from_slice(&buf[shift + i * stride..shift + i * stride + w_len]);
                        let want = match (ty, order) {
                            (GgmlType::Q4_0, _) => q4_0_q8_0_repack(as_blocks(&wr, "w"), as_blocks(&x, "x")),
                            (_, Order::RepackGemv) => q4_k_q8_k_gemv(as_blocks(&wr, "w"), as_blocks(&x, "x")),
                            _ => q4_k_q8_k_gemm(as_blocks(&wr, "w"), as_blocks(&x, "x")),
                        };
                        assert_eq!(
                            out[i].to_bits(),
                            want.to_bits(),
                            "{} {} {order:?} k={k} rows={rows} row {i}: {} vs {want}",
                            ty.name(),
                            level.name(),
                            out[i]
                        );
                    }
                }
            }
        }
    }
}

/// the three Q4_K orders and the two Q4_0 orders are different sums (else the tests above could
/// not tell them apart): on model-like rows of many blocks, each pair differs somewhere
#[test]
fn repack_orders_differ_from_vec_dot() {
    let mut r = XorShift::new(1405);
    let (mut k_diff, mut q_diff) = ([false; 3], false);
    for _ in 0..50 {
        let x4 = q4_k_random(&mut r, 16, 0.01);
        let y8 = q8_k_row(&mut r, 16);
        let (v, gv, gm) = (q4_k_q8_k_reference(&x4, &y8), q4_k_q8_k_gemv(&x4, &y8), q4_k_q8_k_gemm(&x4, &y8));
        k_diff[0] |= v.to_bits() != gv.to_bits();
        k_diff[1] |= v.to_bits() != gm.to_bits();
        k_diff[2] |= gv.to_bits() != gm.to_bits();
        let x = q4_0_blocks(&mut r, 64, |r| r.f32_in(-0.02, 0.02));
        let y = q8_0_blocks(&mut r, 64, 127, |r| r.f32_in(-0.02, 0.02));
        q_diff |= q4_0_q8_0_repack(&x, &y).to_bits() != q4_0_q8_0_reference(&x, &y).to_bits();
    }
    assert_eq!(k_diff, [true; 3], "q4_K: vec_dot / gemv, vec_dot / gemm, gemv / gemm differ");
    assert!(q_diff, "q4_0: repack and vec_dot orders differ");
}

/// where upstream repacks (Q4_0 / Q4_K, 2-D, ne01 % 8 == 0, F32 activations, ne13 == 1, AVX2
/// or above) and which rows of a plane are GEMM rows
#[test]
fn repack_order_conditions() {
    // a set whose upstream build repacks (x86 from AVX2), and the scalar set
    let simd = Dots { repacks: true, ..Dots::SCALAR };
    let ok = |wt, ne01, ne02, ne03, f32, ne13, dots: &Dots| Order::repacked(wt, ne01, ne02, ne03, f32, ne13, dots);
    if !vec_dot_only() {
        assert!(ok(GgmlType::Q4_0, 64, 1, 1, true, 1, &simd));
        assert!(ok(GgmlType::Q4K, 8, 1, 1, true, 1, &simd));
    }
    assert!(!ok(GgmlType::Q4K, 8, 1, 1, true, 1, &Dots::SCALAR), "scalar level: vec_dot's order");
    assert!(!ok(GgmlType::Q4_0, 60, 1, 1, true, 1, &simd), "ne01 % 8 != 0");
    assert!(!ok(GgmlType::Q4_0, 64, 2, 1, true, 1, &simd), "3-D weights");
    assert!(!ok(GgmlType::Q4_0, 64, 1, 2, true, 1, &simd), "4-D weights");
    assert!(!ok(GgmlType::Q4_0, 64, 1, 1, false, 1, &simd), "activations not F32");
    assert!(!ok(GgmlType::Q4_0, 64, 1, 1, true, 2, &simd), "ne13 > 1");
    assert!(!ok(GgmlType::Q8_0, 64, 1, 1, true, 1, &simd), "Q8_0 is not repacked on x86");
    assert!(!ok(GgmlType::Q6K, 64, 1, 1, true, 1, &simd), "Q6_K is not repacked on x86");
    let orders: Vec<Order> = (0..7).map(|i| Order::for_row(true, i, 7)).collect();
    assert_eq!(orders, [[Order::RepackGemm; 4].as_slice(), &[Order::RepackGemv; 3]].concat());
    assert_eq!(Order::for_row(true, 0, 1), Order::RepackGemv, "token generation: all GEMV");
    assert_eq!(Order::for_row(true, 3, 4), Order::RepackGemm);
    assert_eq!(Order::for_row(false, 0, 8), Order::VecDot);
}

/// Q6_K's x86 order is not the reference's (else the test above could not tell them apart), and
/// its SIMD form equals it on extreme quants (every 6-bit value 0 or 63 against ±127)
#[test]
fn q6_k_x86_order_differs_and_holds_on_extremes() {
    let mut r = XorShift::new(1406);
    let mut differs = false;
    for _ in 0..50 {
        let y = q8_k_row(&mut r, 8);
        let mut x6 = vec![BlockQ6K { ql: [0; 128], qh: [0; 64], scales: [0; 16], d: f16::ZERO }; 8];
        r.fill_bytes(as_bytes_mut(&mut x6));
        for b in &mut x6 {
            b.d = f16::from_f32(r.f32_in(-0.01, 0.01));
        }
        differs |= q6_k_q8_k_x86(&x6, &y).to_bits() != q6_k_q8_k_reference(&x6, &y).to_bits();
    }
    assert!(differs, "q6_K: x86 and reference orders differ");
    let mut y = q8_k_row(&mut r, 4);
    for b in &mut y {
        b.qs = std::array::from_fn(|i| if i % 3 == 0 { -127 } else { 127 });
        for j in 0..16 {
            b.bsums[j] = b.qs[16 * j..16 * j + 16].iter().map(|&q| q as i16).sum();
        }
    }
    let x6: Vec<BlockQ6K> = (0..4)
        .map(|i| BlockQ6K {
            ql: [if i % 2 == 0 { 0xff } else { 0 }; 128],
            qh: [0xff; 64],
            scales: [if i < 2 { 127 } else { -128i8 }; 16],
            d: f16::from_f32(0.5),
        })
        .collect();
    for level in Level::available().into_iter().filter(|l| *l >= Level::Avx2) {
        let (got, want) = ((crate::kernels::at(level).dot.q6_k)(&x6, &y), q6_k_q8_k_x86(&x6, &y));
        assert_eq!(got.to_bits(), want.to_bits(), "q6_K x86 extremes {}: {got} vs {want}", level.name());
    }
}

/// Q6_K's tiled-order row kernel equals its definition bit for bit at every level, and the
/// order is not the reference's nor the x86 one
#[test]
fn q6_k_tiled_order_kernel_equals_its_definition() {
    let mut r = XorShift::new(1407);
    let (mut vs_ref, mut vs_x86) = (false, false);
    for nb in [0usize, 1, 2, 5, 16] {
        for _ in 0..10 {
            let y = q8_k_row(&mut r, nb);
            let mut x6 = vec![BlockQ6K { ql: [0; 128], qh: [0; 64], scales: [0; 16], d: f16::ZERO }; nb];
            r.fill_bytes(as_bytes_mut(&mut x6));
            for b in &mut x6 {
                b.d = f16::from_f32(r.f32_in(-0.01, 0.01));
            }
            let want = q6_k_q8_k_tiled(&x6, &y);
            for level in Level::available() {
                let got = (crate::kernels::at(level).dot.q6_k_tiled)(&x6, &y);
                assert_eq!(got.to_bits(), want.to_bits(), "q6_K tiled {} nb={nb}: {got} vs {want}", level.name());
            }
            vs_ref |= want.to_bits() != q6_k_q8_k_reference(&x6, &y).to_bits();
            vs_x86 |= want.to_bits() != q6_k_q8_k_x86(&x6, &y).to_bits();
        }
    }
    assert!(vs_ref && vs_x86, "the tiled order differs from the reference's and the x86 one");
}

/// F32 · F32 at the AVX-512 levels (the row kernel, and MUL_MAT's mat-vec over it) equals
/// upstream's AVX-512 order ([`f32_avx512_order`]) bit for bit: whole blocks of 64 and every kind
/// of leftover (none, under 8, 8..16, 16 and more), rows at unaligned addresses
#[test]
fn f32_avx512_kernel_equals_upstreams_order_bit_for_bit() {
    let mut r = XorShift::new(20);
    for level in Level::available().into_iter().filter(|&l| l >= Level::Avx512) {
        let g = crate::kernels::at(level).gemv(GgmlType::F32, Order::VecDot);
        for k in [0usize, 1, 7, 8, 9, 15, 16, 23, 24, 40, 63, 64, 71, 72, 88, 100, 127, 512, 1536, 2048 + 57, 4096 + 7] {
            let rows = 3;
            let xs: Vec<Vec<f32>> = (0..rows).map(|_| r.model_like(k)).collect();
            let y: Vec<f32> = r.model_like(k).into_iter().map(|v| v * 40.0).collect();
            // rows a float apart more than their length, one float in: unaligned loads
            let stride = 4 * k + 4;
            let mut w = vec![0u8; 4 + rows * stride];
            for (i, x) in xs.iter().enumerate() {
                w[4 + i * stride..][..4 * k].copy_from_slice(&x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
            }
            let mut yb = crate::block::AlignedBytes::zeroed(4 * k);
            yb.iter_mut().zip(y.iter().flat_map(|v| v.to_le_bytes())).for_each(|(b, v)| *b = v);
            let mut out = vec![f32::NAN; rows];
            // SAFETY: `rows` rows of 4k bytes `stride` apart inside w; out has `rows` floats
            unsafe { g.rows(w.as_ptr().add(4), stride, rows, &yb, out.as_mut_ptr()) };
            for (i, x) in xs.iter().enumerate() {
                let want = f32_avx512_order(x, &y);
                let row = (crate::kernels::at(level).dot.f32)(x, &y);
                assert_eq!(row.to_bits(), want.to_bits(), "row kernel {} k={k}: {row} vs {want}", level.name());
                assert_eq!(out[i].to_bits(), want.to_bits(), "gemv {} k={k} row {i}: {} vs {want}", level.name(), out[i]);
            }
        }
    }
}

/// the F32 AVX-512 order is not the f64 reference's, nor the same blocks with the leftovers all
/// rounded products or all fused: cases where each gives other bits
#[test]
fn f32_avx512_order_is_its_own() {
    let mut r = XorShift::new(21);
    let (mut vs_reference, mut vs_rounded, mut vs_fused) = (false, false, false);
    for _ in 0..40 {
        // 1536 in blocks, 63 left: 56 rounded products, 7 fused
        let (x, y) = (r.model_like(1536 + 63), r.model_like(1536 + 63).into_iter().map(|v| v * 40.0).collect::<Vec<_>>());
        let want = f32_avx512_order(&x, &y);
        vs_reference |= want.to_bits() != f32_reference(&x, &y).to_bits();
        let blocks = f32_avx512_order(&x[..1536], &y[..1536]);
        let rounded = (1536..x.len()).fold(blocks, |s, p| s + x[p] * y[p]);
        let fused = (1536..x.len()).fold(blocks, |s, p| x[p].mul_add(y[p], s));
        vs_rounded |= want.to_bits() != rounded.to_bits();
        vs_fused |= want.to_bits() != fused.to_bits();
    }
    assert!(vs_reference && vs_rounded && vs_fused, "40 random rows gave the same bits in the other orders: {vs_reference} {vs_rounded} {vs_fused}");
}
