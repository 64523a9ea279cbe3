//! Properties of the formats that hold without upstream (the byte-for-byte comparison with
//! upstream's quantizers is in tests/upstream.rs).

use super::search::nearest_int;
use super::*;
use crate::block::AlignedBytes;
use crate::rng::XorShift;

/// upstream's float trick rounds half to even
#[test]
fn nearest_int_rounds_half_to_even() {
    for (x, want) in [(0.5, 0), (1.5, 2), (2.5, 2), (-0.5, 0), (-1.5, -2), (3.49, 3), (-7.51, -8), (4194303.0, 4194303)] {
        assert_eq!(nearest_int(x), want, "nearest_int({x})");
    }
}

/// dequantize(quantize(x)) stays within each format's step: Q8_0 half a step of amax/127,
/// Q4_0 one step of amax/8 (asymmetric range), Q8_K half a step, the K-quants a few percent of
/// the block's range (its amax for the symmetric Q6_K and Q3_K; Q2_K's 4 levels and Q3_K's 8 with
/// 4-bit / 6-bit sub-block scales are coarser: up to about a fifth of it)
#[test]
fn round_trips_stay_within_the_format_step() {
    let mut r = XorShift::new(5);
    let n = 4096;
    for _ in 0..8 {
        let x = r.model_like(n);
        for (ty, rel) in [
            (GgmlType::F16, 1e-3),
            (GgmlType::BF16, 8e-3),
            (GgmlType::Q8_0, 0.5 / 127.0 + 1e-3),
            (GgmlType::Q4_0, 1.0 / 8.0 + 1e-3),
            (GgmlType::Q5_0, 1.0 / 16.0 + 1e-3),
            (GgmlType::Q8_1, 0.5 / 127.0 + 1e-3),
            (GgmlType::Q8K, 0.5 / 127.0 + 1e-6),
            (GgmlType::Q6K, 0.04),
            (GgmlType::Q4K, 0.15),
            (GgmlType::Q5K, 0.06),
            (GgmlType::Q3K, 0.3),
            (GgmlType::Q2K, 0.35),
            // IQ4_NL: the from_float form (no scale search beyond the first least-squares step)
            (GgmlType::Iq4Nl, 0.15),
            (GgmlType::Iq4Xs, 0.13),
            // the largest magnitude lies in [2^k, 2^(k+1)) while the largest code is 1.5 · 2^k
            (GgmlType::Mxfp4, 0.25),
        ] {
            let mut q = AlignedBytes::zeroed(ty.row_size(n));
            quantize_row(ty, &x, &mut q);
            let mut y = vec![0f32; n];
            dequantize_row(ty, &q, &mut y);
            for (b, (xb, yb)) in x.chunks(ty.block_size().max(32)).zip(y.chunks(ty.block_size().max(32))).enumerate() {
                let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
                let range = if matches!(ty, GgmlType::Q2K | GgmlType::Q4K | GgmlType::Q5K) {
                    xb.iter().fold(0f32, |m, v| m.max(*v)) - xb.iter().fold(0f32, |m, v| m.min(*v))
                } else {
                    amax
                };
                for (a, c) in xb.iter().zip(yb) {
                    assert!((a - c).abs() <= rel * range + 1e-6 * amax, "{} block {b}: {a} came back as {c} (range {range})", ty.name());
                }
            }
        }
    }
}

/// a zero row quantizes to zero scales and dequantizes to zeros
#[test]
fn zero_rows_stay_zero() {
    for ty in GgmlType::GRID {
        let q = AlignedBytes::zeroed(ty.row_size(512));
        let mut y = vec![1f32; 512];
        dequantize_row(ty, &q, &mut y);
        assert!(y.iter().all(|&v| v == 0.0), "{}", ty.name());
    }
    for ty in GgmlType::ALL.into_iter().filter(|t| t.has_from_float()) {
        let x = vec![0f32; 512];
        let mut q = AlignedBytes::zeroed(ty.row_size(512));
        quantize_row(ty, &x, &mut q);
        let mut y = vec![1f32; 512];
        dequantize_row(ty, &q, &mut y);
        assert!(y.iter().all(|&v| v == 0.0), "{}", ty.name());
    }
}

/// every element of a Q6_K block has its own 6 bits
#[test]
fn q6_k_layout_is_a_bijection() {
    let mut seen = std::collections::HashSet::new();
    for e in 0..256 {
        let (ql, qs, qh, hs) = super::q6_k::q6_index(e);
        assert!(seen.insert((0, ql, qs)) && seen.insert((1, qh, hs)), "element {e} shares bits");
    }
}

/// a row that is not whole blocks is refused with the function's name
#[test]
#[should_panic(expected = "quantize_row_q8_0: 33 elements are not whole blocks of 32")]
fn partial_blocks_are_refused() {
    let mut y = [crate::block::BlockQ8_0 { d: half::f16::ZERO, qs: [0; 32] }; 2];
    quantize_row_q8_0(&[0.0; 33], &mut y);
}

/// Q5_0 / Q5_1 against a naive model of the formats: every quant 0..32 written through the
/// packing and read back by dequantize gives `d·(q − 16)` / `d·q + m`; and quantizing values that
/// lie on the grid gives them back exactly (so bit 4 lands in the right bit of `qh`)
#[test]
fn q5_formats_match_a_naive_model() {
    use crate::block::{BlockQ5_0, BlockQ5_1};
    let mut r = XorShift::new(9);
    for _ in 0..64 {
        let q: [u8; 32] = std::array::from_fn(|_| (r.next_u64() % 32) as u8);
        // naive packing: a u32 of fifth bits, element j's at bit j
        let mut h = 0u32;
        let mut qs = [0u8; 16];
        for j in 0..16 {
            qs[j] = (q[j] & 15) | ((q[j + 16] & 15) << 4);
        }
        for (j, v) in q.iter().enumerate() {
            h |= ((*v as u32) >> 4) << j;
        }
        let d = half::f16::from_f32(0.25);
        let b0 = [BlockQ5_0 { d, qh: h.to_le_bytes(), qs }];
        let mut y = [0f32; 32];
        dequantize_row_q5_0(&b0, &mut y);
        for j in 0..32 {
            assert_eq!(y[j], 0.25 * (q[j] as f32 - 16.0), "q5_0 element {j}");
        }
        let m = half::f16::from_f32(-1.5);
        let b1 = [BlockQ5_1 { d, m, qh: h.to_le_bytes(), qs }];
        dequantize_row_q5_1(&b1, &mut y);
        for j in 0..32 {
            assert_eq!(y[j], 0.25 * q[j] as f32 - 1.5, "q5_1 element {j}");
        }
        // quantize values on Q5_1's grid (q 0 and 31 present, so min/max fix d = 0.25, m = -1.5)
        let mut qq = q;
        qq[0] = 0;
        qq[31] = 31;
        let x: Vec<f32> = qq.iter().map(|&v| 0.25 * v as f32 - 1.5).collect();
        let mut back = [BlockQ5_1 { d: half::f16::ZERO, m: half::f16::ZERO, qh: [0; 4], qs: [0; 16] }];
        quantize_row_q5_1(&x, &mut back);
        assert_eq!(super::unpack5(&back[0].qs, &back[0].qh), qq, "q5_1 quants");
        assert_eq!((back[0].d, back[0].m), (d, m));
        // Q5_0's grid: the largest magnitude −16·d gives d exactly
        let mut qq = q;
        qq[5] = 0;
        let x: Vec<f32> = qq.iter().map(|&v| 0.25 * (v as f32 - 16.0)).collect();
        let mut back = [BlockQ5_0 { d: half::f16::ZERO, qh: [0; 4], qs: [0; 16] }];
        quantize_row_q5_0(&x, &mut back);
        assert_eq!(back[0].d, d);
        assert_eq!(super::unpack5(&back[0].qs, &back[0].qh), qq, "q5_0 quants");
    }
}

/// Q8_1's `s` is `d · Σ qs` of its own quants (with the f32 `d`, so within the two f16 roundings
/// of the stored `d` and `s`)
#[test]
fn q8_1_sum_is_the_scaled_quant_sum() {
    let mut r = XorShift::new(10);
    let x = r.model_like(256);
    for f in [quantize_row_q8_1, quantize_row_q8_1_x86] {
        let mut y = [crate::block::BlockQ8_1 { d: half::f16::ZERO, s: half::f16::ZERO, qs: [0; 32] }; 8];
        f(&x, &mut y);
        for b in &y {
            let sum: i32 = b.qs.iter().map(|&q| q as i32).sum();
            let want = b.d.to_f32() as f64 * sum as f64;
            assert!((b.s.to_f64() - want).abs() <= want.abs() * 2f64.powi(-10) + 1e-7, "s {} vs d·Σq {want}", b.s);
        }
    }
}

/// rows made of IQ4_NL's levels (times a power of two) come back exactly: the first scale fits
/// every element and no try explains more
#[test]
fn iq4_levels_come_back_exactly() {
    for scale in [1.0f32, 0.25, 1024.0] {
        let x: Vec<f32> = (0..256).map(|i| IQ4_NL_LEVELS[(i * 7) % 16] as f32 * scale).collect();
        for ty in [GgmlType::Iq4Nl, GgmlType::Iq4Xs] {
            let mut q = AlignedBytes::zeroed(ty.row_size(256));
            quantize_row(ty, &x, &mut q);
            let mut y = vec![0f32; 256];
            dequantize_row(ty, &q, &mut y);
            assert_eq!(x, y, "{} scale {scale}", ty.name());
        }
    }
}

/// IQ4_XS: sub-blocks of zeros next to live ones get the scale 0 (stored 32) and dequantize to
/// zeros; the others keep their values within the format's step
#[test]
fn iq4_xs_zero_sub_blocks() {
    let mut r = XorShift::new(9);
    let mut x = r.model_like(256);
    x[64..96].fill(0.0);
    let mut q = [crate::block::BlockIq4Xs { d: half::f16::ZERO, scales_h: 0, scales_l: [0; 4], qs: [0; 128] }];
    quantize_row_iq4_xs(&x, &mut q);
    assert_eq!(super::iq4::iq4_xs_scale(&q[0], 2), 32);
    let mut y = vec![1f32; 256];
    dequantize_row_iq4_xs(&q, &mut y);
    assert!(y[64..96].iter().all(|&v| v == 0.0));
}

/// E8M0's half value at the ends of the byte: 2^(e - 128), denormal below e = 2
#[test]
fn e8m0_half_values() {
    for (e, want) in [(0u8, 2f64.powi(-128)), (1, 2f64.powi(-127)), (2, 2f64.powi(-126)), (127, 0.5), (128, 1.0), (254, 2f64.powi(126)), (255, 2f64.powi(127))]
    {
        assert_eq!(e8m0_to_f32_half(e) as f64, want, "e = {e}");
    }
}

/// MXFP4's scale byte: `floor(log2(amax)) + 125`; 0 for a zero block; below 2^-125 it leaves
/// the byte and upstream keeps the low byte of the truncated value (those blocks still come back
/// as zeros: every value is nearer 0 than any other code at such a scale); codes at exact grid
/// points come back exactly, ties take the first (lower-magnitude, positive-zero) code
#[test]
fn mxfp4_scale_byte_and_codes() {
    let block = |amax: f32| {
        let mut x = [0f32; 32];
        x[5] = amax;
        x[6] = -amax / 3.0;
        let mut q = [crate::block::BlockMxfp4 { e: 0, qs: [0; 16] }];
        quantize_row_mxfp4(&x, &mut q);
        let mut y = [1f32; 32];
        dequantize_row_mxfp4(&q, &mut y);
        (q[0].e, y)
    };
    assert_eq!(block(0.0).0, 0);
    assert_eq!(block(1.0).0, 125);
    assert_eq!(block(7.99).0, 127);
    assert_eq!(block(6.0).1[5], 6.0);
    assert_eq!(block(2f32.powi(127)).0, 252);
    // log2f(f32::MAX) rounds to 128.0: one byte more than the exact floor gives; the doubled
    // codes 8 and 12 then overflow to infinity and the largest value comes back as 6 · 2^125
    assert_eq!(block(f32::MAX).0, 253);
    assert_eq!(block(f32::MAX).1[5], 6.0 * 2f32.powi(125));
    assert_eq!(block(2f32.powi(-125)).0, 0);
    let (e, y) = block(2f32.powi(-130));
    // the C cast as GCC compiles it: x86 keeps the low byte of -5, aarch64 saturates to 0
    assert_eq!(e, if cfg!(target_arch = "aarch64") { 0 } else { (-5i32) as u8 });
    assert!(y.iter().all(|&v| v == 0.0));
    // every code's value at scale e = 127 (half = 0.5): the E2M1 grid itself
    let x: Vec<f32> = (0..32).map(|i| [0.0f32, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0][i % 8] * if i % 16 < 8 { 1.0 } else { -1.0 }).collect();
    let mut q = [crate::block::BlockMxfp4 { e: 0, qs: [0; 16] }];
    quantize_row_mxfp4(&x, &mut q);
    assert_eq!(q[0].e, 127);
    let mut y = [0f32; 32];
    dequantize_row_mxfp4(&q, &mut y);
    assert_eq!(&x[..], &y[..]);
    // 2.5 lies halfway between 2 and 3: the first code (2)
    let mut x = [0f32; 32];
    x[0] = 6.0;
    x[1] = 2.5;
    quantize_row_mxfp4(&x, &mut q);
    assert_eq!(q[0].qs[1] & 0xf, 4);
}

/// the grid types' sign codes: 128 distinct sign bytes, each with an even count of minus signs
/// (the eighth sign the parity of the seven stored)
#[test]
fn grid_sign_codes_are_the_even_sign_patterns() {
    let mut seen = std::collections::HashSet::new();
    for c in 0..128u32 {
        let s = super::iq_grid::sign_bits(c);
        assert_eq!(s.count_ones() % 2, 0, "code {c}: {s:08b}");
        assert_eq!(u32::from(s & 127), c);
        assert!(seen.insert(s));
    }
}

/// the grid types against a naive model of their layouts: a block whose every grid index,
/// sign and scale is written by hand dequantizes to `scale · grid[index] · sign` per element
#[test]
fn grid_layouts_match_a_naive_model() {
    use super::iq_grid::{IQ2XS_GRID, IQ3XXS_GRID};
    use crate::block::{BlockIq2Xs, BlockIq3Xxs};
    use half::f16;
    // IQ2_XS: vector k has index 7k + 3 (mod 512), sign code k, scale nibble k % 16
    let mut b = BlockIq2Xs { d: f16::from_f32(0.5), qs: [0; 32], scales: [0; 8] };
    for k in 0..32 {
        b.qs[k] = (((7 * k + 3) % 512) | (k << 9)) as u16;
    }
    for (i, s) in b.scales.iter_mut().enumerate() {
        *s = (((2 * i) % 16) | (((2 * i + 1) % 16) << 4)) as u8;
    }
    let mut y = vec![0f32; 256];
    dequantize_row(GgmlType::Iq2Xs, crate::block::as_bytes(&[b]), &mut y);
    for e in 0..256 {
        let (k, j) = (e / 8, e % 8);
        let s = (k / 2) % 16;
        let signs = super::iq_grid::sign_bits(k as u32);
        let v = 0.5 * (0.5 + s as f32) * 0.25 * IQ2XS_GRID[(7 * k + 3) % 512][j] as f32;
        assert_eq!(y[e], if signs >> j & 1 == 1 { -v } else { v }, "iq2_xs element {e}");
    }
    // IQ3_XXS: vector m (of 4) has index 255 - m, group g sign codes 0, 1, 2, 3 shifted by g and
    // scale g
    let mut b = BlockIq3Xxs { d: f16::from_f32(2.0), qs: [0; 64], scales_signs: [0; 32] };
    for m in 0..64 {
        b.qs[m] = (255 - m) as u8;
    }
    for g in 0..8 {
        let w: u32 = (0..4).map(|l| ((l + g) as u32 & 127) << (7 * l)).sum::<u32>() | (g as u32) << 28;
        b.scales_signs[4 * g..4 * g + 4].copy_from_slice(&w.to_le_bytes());
    }
    dequantize_row(GgmlType::Iq3Xxs, crate::block::as_bytes(&[b]), &mut y);
    for e in 0..256 {
        let (g, l, j) = (e / 32, e % 32 / 8, e % 8);
        let m = e / 4;
        let signs = super::iq_grid::sign_bits((l + g) as u32);
        let v = 2.0 * (0.5 + g as f32) * 0.5 * IQ3XXS_GRID[255 - m][e % 4] as f32;
        assert_eq!(y[e], if signs >> j & 1 == 1 { -v } else { v }, "iq3_xxs element {e}");
    }
}
