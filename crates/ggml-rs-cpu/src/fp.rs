//! f16 and bf16 rows: conversions from and to f32 through `half`, which rounds to nearest even as
//! ggml's `GGML_FP32_TO_FP16` / `GGML_FP32_TO_BF16` do. The f16 rows go through `half`'s slice
//! conversions, eight elements per F16C instruction where the CPU has it (checked once per row;
//! the same bits as its per-element conversion, which the rows called one element at a time,
//! through a call each: 12% of a medium F16 model's prompt processing).

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

pub fn f32_to_f16_row(x: &[f32], y: &mut [f16]) {
    assert_eq!(x.len(), y.len(), "f32_to_f16_row: lengths differ");
    y.convert_from_f32_slice(x);
}

pub fn f16_to_f32_row(x: &[f16], y: &mut [f32]) {
    assert_eq!(x.len(), y.len(), "f16_to_f32_row: lengths differ");
    x.convert_to_f32_slice(y);
}

pub fn f32_to_bf16_row(x: &[f32], y: &mut [bf16]) {
    assert_eq!(x.len(), y.len(), "f32_to_bf16_row: lengths differ");
    for (d, s) in y.iter_mut().zip(x) {
        *d = bf16::from_f32(*s);
    }
}

pub fn bf16_to_f32_row(x: &[bf16], y: &mut [f32]) {
    assert_eq!(x.len(), y.len(), "bf16_to_f32_row: lengths differ");
    for (d, s) in y.iter_mut().zip(x) {
        *d = s.to_f32();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::XorShift;

    /// the row conversions (F16C eight at a time, with a tail) against `half`'s software
    /// conversions (`*_const`, no hardware), bit for bit: every length around the 8-wide
    /// chunks, values of every magnitude, halfway cases, subnormals, infinities and NaN
    #[test]
    fn f16_rows_equal_the_software_conversion() {
        let mut r = XorShift::new(7);
        let special =
            [0.0f32, -0.0, 1.0, 65504.0, 65520.0, 1e-8, -6e-8, 2f32.powi(-25), 1.0 + 3.0 * 2f32.powi(-11), f32::INFINITY, f32::NEG_INFINITY, f32::NAN];
        for n in [0usize, 1, 7, 8, 9, 15, 16, 17, 33, 1000] {
            let x: Vec<f32> =
                (0..n).map(|i| if i % 5 == 0 { special[(i / 5) % special.len()] } else { r.f32_in(-1.0, 1.0) * 2f32.powi((i % 40) as i32 - 25) }).collect();
            let mut y = vec![f16::ZERO; n];
            f32_to_f16_row(&x, &mut y);
            for (i, (s, d)) in x.iter().zip(&y).enumerate() {
                let want = f16::from_f32_const(*s);
                assert!(d.to_bits() == want.to_bits() || (d.is_nan() && want.is_nan()), "n={n} [{i}] {s}: {d} vs {want}");
            }
            let mut back = vec![0f32; n];
            f16_to_f32_row(&y, &mut back);
            for (i, (s, d)) in y.iter().zip(&back).enumerate() {
                let want = s.to_f32_const();
                assert!(d.to_bits() == want.to_bits() || (d.is_nan() && want.is_nan()), "n={n} [{i}] {s}: {d} vs {want}");
            }
        }
    }
}
