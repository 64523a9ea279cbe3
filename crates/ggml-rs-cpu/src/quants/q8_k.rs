//! Q8_K: 256 activations, an f32 scale `max / -127` (max = the value of largest magnitude, sign
//! kept), quants rounded to nearest even, and the sums of each 16 quants (`bsums`) that the
//! K-quant dot products use for their mins.

use super::check_blocks;
use super::search::nearest_int;
use crate::block::{BlockQ8K, QK_K};

pub fn quantize_row_q8_k(x: &[f32], y: &mut [BlockQ8K]) {
    check_blocks("quantize_row_q8_k", x.len(), QK_K, y.len());
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        let mut max = 0.0f32;
        let mut amax = 0.0f32;
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            yb.d = 0.0;
            yb.qs = [0; QK_K];
            // upstream leaves bsums as they were; a fresh block has them zero
            yb.bsums = [0; QK_K / 16];
            continue;
        }
        let iscale = -127.0 / max;
        for (q, &v) in yb.qs.iter_mut().zip(xb) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (j, s) in yb.bsums.iter_mut().enumerate() {
            *s = yb.qs[j * 16..j * 16 + 16].iter().map(|&q| q as i16).sum();
        }
        yb.d = 1.0 / iscale;
    }
}

pub fn dequantize_row_q8_k(x: &[BlockQ8K], y: &mut [f32]) {
    check_blocks("dequantize_row_q8_k", y.len(), QK_K, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        for (o, &q) in yb.iter_mut().zip(&xb.qs) {
            *o = xb.d * q as f32;
        }
    }
}
