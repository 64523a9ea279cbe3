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
/// the block's range
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
            (GgmlType::Q8K, 0.5 / 127.0 + 1e-6),
            (GgmlType::Q6K, 0.04),
            (GgmlType::Q4K, 0.15),
        ] {
            let mut q = AlignedBytes::zeroed(ty.row_size(n));
            quantize_row(ty, &x, &mut q);
            let mut y = vec![0f32; n];
            dequantize_row(ty, &q, &mut y);
            for (b, (xb, yb)) in x.chunks(ty.block_size().max(32)).zip(y.chunks(ty.block_size().max(32))).enumerate() {
                let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
                let range = if ty == GgmlType::Q4K { xb.iter().fold(0f32, |m, v| m.max(*v)) - xb.iter().fold(0f32, |m, v| m.min(*v)) } else { amax };
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
    for ty in GgmlType::ALL {
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
