//! Q6_K: 256 values in 16 sub-blocks of 16, each with an int8 scale relative to the super-block's
//! f16 `d`; 6-bit quants offset by 32, the low 4 bits in `ql` and the high 2 in `qh`, interleaved
//! in groups of 128 (see [`q6_index`]).

use half::f16;

use super::check_blocks;
use super::search::{GROUP_MAX_EPS, make_qx_quants_rmse1, nearest_int};
use crate::block::{BlockQ6K, QK_K};

/// where the 6-bit quant of element `e` (0..256) lives: (byte of `ql`, nibble shift, byte of `qh`,
/// bit shift)
#[inline]
pub(crate) fn q6_index(e: usize) -> (usize, u32, usize, u32) {
    let half = e / 128; // 0..2
    let quarter = (e % 128) / 32; // 0..4
    let l = e % 32;
    let ql = 64 * half + l + if quarter % 2 == 1 { 32 } else { 0 };
    let ql_shift = if quarter >= 2 { 4 } else { 0 };
    (ql, ql_shift, 32 * half + l, 2 * quarter as u32)
}

/// the quant of element `e`, 0..64 (value + 32)
#[inline]
pub(crate) fn q6_get(b: &BlockQ6K, e: usize) -> u8 {
    let (ql, qs, qh, hs) = q6_index(e);
    ((b.ql[ql] >> qs) & 0xf) | (((b.qh[qh] >> hs) & 3) << 4)
}

pub fn quantize_row_q6_k(x: &[f32], y: &mut [BlockQ6K]) {
    check_blocks("quantize_row_q6_k", x.len(), QK_K, y.len());
    let mut l = [0i8; QK_K];
    let mut scales = [0f32; QK_K / 16];
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        let mut max_scale = 0.0f32;
        let mut max_abs_scale = 0.0f32;
        for ib in 0..QK_K / 16 {
            let scale = make_qx_quants_rmse1(&xb[16 * ib..16 * ib + 16], 32, &mut l[16 * ib..16 * ib + 16]);
            scales[ib] = scale;
            if scale.abs() > max_abs_scale {
                max_abs_scale = scale.abs();
                max_scale = scale;
            }
        }
        if max_abs_scale < GROUP_MAX_EPS {
            *yb = BlockQ6K { ql: [0; QK_K / 2], qh: [0; QK_K / 4], scales: [0; QK_K / 16], d: f16::from_f32(0.0) };
            continue;
        }
        let iscale = -128.0 / max_scale;
        yb.d = f16::from_f32(1.0 / iscale);
        for ib in 0..QK_K / 16 {
            yb.scales[ib] = nearest_int(iscale * scales[ib]).min(127) as i8;
        }
        for j in 0..QK_K / 16 {
            let d = yb.d.to_f32() * yb.scales[j] as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let q = nearest_int(xb[16 * j + ii] / d).clamp(-32, 31);
                l[16 * j + ii] = (q + 32) as i8;
            }
        }
        yb.ql = [0; QK_K / 2];
        yb.qh = [0; QK_K / 4];
        for (e, &q) in l.iter().enumerate() {
            let (ql, qs, qh, hs) = q6_index(e);
            let q = q as u8;
            yb.ql[ql] |= (q & 0xf) << qs;
            yb.qh[qh] |= (q >> 4) << hs;
        }
    }
}

pub fn dequantize_row_q6_k(x: &[BlockQ6K], y: &mut [f32]) {
    check_blocks("dequantize_row_q6_k", y.len(), QK_K, x.len());
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = xb.d.to_f32();
        for (e, o) in yb.iter_mut().enumerate() {
            let q = q6_get(xb, e) as i32 - 32;
            *o = d * xb.scales[e / 16] as f32 * q as f32;
        }
    }
}
