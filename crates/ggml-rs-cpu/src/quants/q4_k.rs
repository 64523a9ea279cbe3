//! Q4_K: 256 values in 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min relative to
//! the super-block's f16 `d` and `dmin`; the reference searches each sub-block's scale and min
//! (weights `rms + |x|`), quantizes them to 6 bits, then requantizes the values with the rounded
//! scales.

use half::f16;

use super::check_blocks;
use super::search::{make_qkx2_quants, nearest_int};
use crate::block::{BlockQ4K, QK_K};

/// the 6-bit scale and min of sub-block `j` (0..8) from the 12 packed bytes
#[inline]
pub fn get_scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 { (q[j] & 63, q[j + 4] & 63) } else { ((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)) }
}

/// What Q4_K and Q5_K share, for one super-block `xb`: per sub-block of 32 the scale and min
/// search (weights `rms + |x|`, `make_qkx2_quants` over levels `0..=nmax` from `rmin` in `nstep`
/// steps of 0.1), the scales and mins quantized to 6 bits and packed as `get_scale_min_k4` reads
/// them, `d` and `dmin`; then every element's level with the rounded scales into `l`. Returns
/// (packed scales, d, dmin).
pub(super) fn scales_mins_k(xb: &[f32], nmax: i32, rmin: f32, nstep: i32, l: &mut [u8; QK_K]) -> ([u8; 12], f16, f16) {
    let mut laux = [0u8; 32];
    let mut weights = [0f32; 32];
    let mut mins = [0f32; QK_K / 32];
    let mut scales = [0f32; QK_K / 32];
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for j in 0..QK_K / 32 {
        let xs = &xb[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        scales[j] = make_qkx2_quants(xs, nmax, &weights, &mut l[32 * j..32 * j + 32], &mut mins[j], &mut laux, rmin, 0.1, nstep, false);
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut packed = [0u8; 12];
    for j in 0..QK_K / 32 {
        // upstream stores nearest_int into a uint8_t (wrapping) before capping at 63
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0xf) | ((lm & 0xf) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    let (d, dmin) = (f16::from_f32(max_scale / 63.0), f16::from_f32(max_min / 63.0));
    for j in 0..QK_K / 32 {
        let (sc, m) = get_scale_min_k4(j, &packed);
        let dj = d.to_f32() * sc as f32;
        if dj == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * m as f32;
        for ii in 0..32 {
            l[32 * j + ii] = nearest_int((xb[32 * j + ii] + dm) / dj).clamp(0, nmax) as u8;
        }
    }
    (packed, d, dmin)
}

pub fn quantize_row_q4_k(x: &[f32], y: &mut [BlockQ4K]) {
    check_blocks("quantize_row_q4_k", x.len(), QK_K, y.len());
    let mut l = [0u8; QK_K];
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        (yb.scales, yb.d, yb.dmin) = scales_mins_k(xb, 15, -1.0, 20, &mut l);
        for (g, q) in yb.qs.chunks_exact_mut(32).enumerate() {
            for i in 0..32 {
                q[i] = l[64 * g + i] | (l[64 * g + 32 + i] << 4);
            }
        }
    }
}

pub fn dequantize_row_q4_k(x: &[BlockQ4K], y: &mut [f32]) {
    check_blocks("dequantize_row_q4_k", y.len(), QK_K, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = xb.d.to_f32();
        let min = xb.dmin.to_f32();
        for (g, (q, out)) in xb.qs.chunks_exact(32).zip(yb.chunks_exact_mut(64)).enumerate() {
            let (sc1, m1) = get_scale_min_k4(2 * g, &xb.scales);
            let (sc2, m2) = get_scale_min_k4(2 * g + 1, &xb.scales);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            for i in 0..32 {
                out[i] = d1 * (q[i] & 0xf) as f32 - m1;
                out[32 + i] = d2 * (q[i] >> 4) as f32 - m2;
            }
        }
    }
}
