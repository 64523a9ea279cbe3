//! Reference quantization and dequantization, one file per block format, each producing exactly
//! the bytes of upstream's reference quantizer (`quantize_row_*_ref` in ggml-quants.c at the pin,
//! which `ggml_quantize_chunk` uses without an importance matrix): the same operations in the
//! same order, no fused multiply-add (ggml-base is built without it), the same rounding helpers.
//! The integration test `tests/upstream.rs` checks the bytes against upstream's library.

mod iq4;
pub mod iq_grid;
#[rustfmt::skip]
mod iq_grids;
mod lowbit;
mod mxfp4;
mod q2_k;
mod q3_k;
mod q4_0;
mod q4_1;
mod q4_k;
mod q5;
mod q5_k;
mod q6_k;
pub(crate) mod q8_0;
pub(crate) mod q8_k;
mod search;
mod tq;

pub use iq_grid::{
    dequantize_row_iq1_m, dequantize_row_iq1_s, dequantize_row_iq2_s, dequantize_row_iq2_xs, dequantize_row_iq2_xxs, dequantize_row_iq3_s,
    dequantize_row_iq3_xxs,
};
pub(crate) use iq4::{IQ4_NL_LEVELS, iq4_xs_scale};
pub use iq4::{dequantize_row_iq4_nl, dequantize_row_iq4_xs, quantize_iq4_nl_chunk, quantize_row_iq4_nl, quantize_row_iq4_xs};
pub(crate) use lowbit::ue4m3_to_f32_half;
pub use lowbit::{dequantize_row_nvfp4, dequantize_row_q1_0, dequantize_row_q2_0, quantize_row_nvfp4, quantize_row_q1_0, quantize_row_q2_0};
pub(crate) use mxfp4::{E2M1_DOUBLED, e8m0_to_f32_half};
pub use mxfp4::{dequantize_row_mxfp4, quantize_row_mxfp4};
pub(crate) use q2_k::q2_get;
pub use q2_k::{dequantize_row_q2_k, quantize_row_q2_k};
pub use q3_k::{dequantize_row_q3_k, quantize_row_q3_k};
pub(crate) use q3_k::{q3_get, q3_scale};
pub use q4_0::{dequantize_row_q4_0, quantize_row_q4_0};
pub use q4_1::{dequantize_row_q4_1, quantize_row_q4_1};
pub use q4_k::{dequantize_row_q4_k, get_scale_min_k4, quantize_row_q4_k};
pub(crate) use q5::unpack5;
pub use q5::{dequantize_row_q5_0, dequantize_row_q5_1, dequantize_row_q8_1, quantize_row_q5_0, quantize_row_q5_1, quantize_row_q8_1, quantize_row_q8_1_x86};
pub(crate) use q5_k::q5_get;
pub use q5_k::{dequantize_row_q5_k, quantize_row_q5_k};
pub(crate) use q6_k::q6_get;
pub use q6_k::{dequantize_row_q6_k, quantize_row_q6_k};
pub use q8_0::{dequantize_row_q8_0, quantize_row_q8_0, quantize_row_q8_0_arm, quantize_row_q8_0_cpu, quantize_row_q8_0_x86};
pub use q8_k::{dequantize_row_q8_k, quantize_row_q8_k, quantize_row_q8_k_4x8};
pub use tq::{dequantize_row_tq1_0, dequantize_row_tq2_0, quantize_row_tq1_0, quantize_row_tq2_0};
pub(crate) use tq::{tq1_0_trits, tq2_0_trits};

use crate::GgmlType;
use crate::block::{as_blocks, as_blocks_mut};

/// Quantizes (or converts) the row `x` into `y`, upstream's `from_float_ref` of `ty`; panics for
/// a type without one ([`GgmlType::has_from_float`]: the grid types, whose quantizer needs an
/// importance matrix and which upstream's CPU never writes).
pub fn quantize_row(ty: GgmlType, x: &[f32], y: &mut [u8]) {
    let what = ty.name();
    assert_eq!(y.len(), ty.row_size(x.len()), "quantize_row {what}: destination is not one row of {} elements", x.len());
    match ty {
        GgmlType::F32 => as_blocks_mut::<f32>(y, what).copy_from_slice(x),
        GgmlType::F16 => crate::fp::f32_to_f16_row(x, as_blocks_mut(y, what)),
        GgmlType::BF16 => crate::fp::f32_to_bf16_row(x, as_blocks_mut(y, what)),
        GgmlType::Q8_0 => quantize_row_q8_0(x, as_blocks_mut(y, what)),
        GgmlType::Q4_0 => quantize_row_q4_0(x, as_blocks_mut(y, what)),
        GgmlType::Q5_0 => quantize_row_q5_0(x, as_blocks_mut(y, what)),
        GgmlType::Q5_1 => quantize_row_q5_1(x, as_blocks_mut(y, what)),
        GgmlType::Q8_1 => quantize_row_q8_1(x, as_blocks_mut(y, what)),
        GgmlType::Q4K => quantize_row_q4_k(x, as_blocks_mut(y, what)),
        GgmlType::Q6K => quantize_row_q6_k(x, as_blocks_mut(y, what)),
        GgmlType::Q8K => quantize_row_q8_k(x, as_blocks_mut(y, what)),
        GgmlType::Q4_1 => quantize_row_q4_1(x, as_blocks_mut(y, what)),
        GgmlType::Q2K => quantize_row_q2_k(x, as_blocks_mut(y, what)),
        GgmlType::Q3K => quantize_row_q3_k(x, as_blocks_mut(y, what)),
        GgmlType::Q5K => quantize_row_q5_k(x, as_blocks_mut(y, what)),
        GgmlType::Iq4Nl => quantize_row_iq4_nl(x, as_blocks_mut(y, what)),
        GgmlType::Iq4Xs => quantize_row_iq4_xs(x, as_blocks_mut(y, what)),
        GgmlType::Tq1_0 => quantize_row_tq1_0(x, as_blocks_mut(y, what)),
        GgmlType::Tq2_0 => quantize_row_tq2_0(x, as_blocks_mut(y, what)),
        GgmlType::Mxfp4 => quantize_row_mxfp4(x, as_blocks_mut(y, what)),
        GgmlType::Q1_0 => quantize_row_q1_0(x, as_blocks_mut(y, what)),
        GgmlType::Q2_0 => quantize_row_q2_0(x, as_blocks_mut(y, what)),
        GgmlType::Nvfp4 => quantize_row_nvfp4(x, as_blocks_mut(y, what)),
        GgmlType::Iq2Xxs | GgmlType::Iq2Xs | GgmlType::Iq2S | GgmlType::Iq3Xxs | GgmlType::Iq3S | GgmlType::Iq1S | GgmlType::Iq1M => {
            panic!("quantize_row: {what} has no from_float (upstream's CPU does not quantize into it)")
        }
    }
}

/// Dequantizes (or converts) the row `x` into `y`, upstream's `to_float` of `ty`.
pub fn dequantize_row(ty: GgmlType, x: &[u8], y: &mut [f32]) {
    let what = ty.name();
    assert_eq!(x.len(), ty.row_size(y.len()), "dequantize_row {what}: source is not one row of {} elements", y.len());
    match ty {
        GgmlType::F32 => y.copy_from_slice(as_blocks::<f32>(x, what)),
        GgmlType::F16 => crate::fp::f16_to_f32_row(as_blocks(x, what), y),
        GgmlType::BF16 => crate::fp::bf16_to_f32_row(as_blocks(x, what), y),
        GgmlType::Q8_0 => dequantize_row_q8_0(as_blocks(x, what), y),
        GgmlType::Q4_0 => dequantize_row_q4_0(as_blocks(x, what), y),
        GgmlType::Q5_0 => dequantize_row_q5_0(as_blocks(x, what), y),
        GgmlType::Q5_1 => dequantize_row_q5_1(as_blocks(x, what), y),
        GgmlType::Q8_1 => dequantize_row_q8_1(as_blocks(x, what), y),
        GgmlType::Q4K => dequantize_row_q4_k(as_blocks(x, what), y),
        GgmlType::Q6K => dequantize_row_q6_k(as_blocks(x, what), y),
        GgmlType::Q8K => dequantize_row_q8_k(as_blocks(x, what), y),
        GgmlType::Q4_1 => dequantize_row_q4_1(as_blocks(x, what), y),
        GgmlType::Q2K => dequantize_row_q2_k(as_blocks(x, what), y),
        GgmlType::Q3K => dequantize_row_q3_k(as_blocks(x, what), y),
        GgmlType::Q5K => dequantize_row_q5_k(as_blocks(x, what), y),
        GgmlType::Iq4Nl => dequantize_row_iq4_nl(as_blocks(x, what), y),
        GgmlType::Iq4Xs => dequantize_row_iq4_xs(as_blocks(x, what), y),
        GgmlType::Tq1_0 => dequantize_row_tq1_0(as_blocks(x, what), y),
        GgmlType::Tq2_0 => dequantize_row_tq2_0(as_blocks(x, what), y),
        GgmlType::Mxfp4 => dequantize_row_mxfp4(as_blocks(x, what), y),
        GgmlType::Q1_0 => dequantize_row_q1_0(as_blocks(x, what), y),
        GgmlType::Q2_0 => dequantize_row_q2_0(as_blocks(x, what), y),
        GgmlType::Nvfp4 => dequantize_row_nvfp4(as_blocks(x, what), y),
        GgmlType::Iq2Xxs => dequantize_row_iq2_xxs(as_blocks(x, what), y),
        GgmlType::Iq2Xs => dequantize_row_iq2_xs(as_blocks(x, what), y),
        GgmlType::Iq2S => dequantize_row_iq2_s(as_blocks(x, what), y),
        GgmlType::Iq3Xxs => dequantize_row_iq3_xxs(as_blocks(x, what), y),
        GgmlType::Iq3S => dequantize_row_iq3_s(as_blocks(x, what), y),
        GgmlType::Iq1S => dequantize_row_iq1_s(as_blocks(x, what), y),
        GgmlType::Iq1M => dequantize_row_iq1_m(as_blocks(x, what), y),
    }
}

/// the smallest and largest value of a block, by upstream's comparisons (`v < min`, `v > max`
/// from `FLT_MAX` / `-FLT_MAX`: a NaN changes neither), for Q4_1 / Q5_1
fn min_max(xb: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in xb {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

fn check_blocks(what: &str, n: usize, qk: usize, nb: usize) {
    assert!(n.is_multiple_of(qk), "{what}: {n} elements are not whole blocks of {qk}");
    assert_eq!(n / qk, nb, "{what}: {n} elements need {} blocks, got {nb}", n / qk);
}

#[cfg(test)]
mod tests;

/// `a · b + c` as upstream's reference quantizers compute it (`x0 = x·id; (int8_t)(x0 + 8.5f)`)
/// on this architecture: GCC contracts the two into one fused multiply-add where FMA is in the
/// baseline (aarch64: `fmadd` / `fmla` in its `quantize_row_q4_0_ref` and the Q4_1 / Q5_0 / Q5_1
/// ones), not on x86-64's baseline
#[inline(always)]
pub(crate) fn mul_add_as_built(a: f32, b: f32, c: f32) -> f32 {
    if cfg!(target_arch = "aarch64") { a.mul_add(b, c) } else { a * b + c }
}
