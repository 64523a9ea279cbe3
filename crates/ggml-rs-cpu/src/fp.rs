//! f16 and bf16 rows: conversions from and to f32 through `half`, which rounds to nearest even as
//! ggml's `GGML_FP32_TO_FP16` / `GGML_FP32_TO_BF16` do.

use half::{bf16, f16};

pub fn f32_to_f16_row(x: &[f32], y: &mut [f16]) {
    assert_eq!(x.len(), y.len(), "f32_to_f16_row: lengths differ");
    for (d, s) in y.iter_mut().zip(x) {
        *d = f16::from_f32(*s);
    }
}

pub fn f16_to_f32_row(x: &[f16], y: &mut [f32]) {
    assert_eq!(x.len(), y.len(), "f16_to_f32_row: lengths differ");
    for (d, s) in y.iter_mut().zip(x) {
        *d = s.to_f32();
    }
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
