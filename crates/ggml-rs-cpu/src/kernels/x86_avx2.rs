//! The `avx2` set: AVX2 + FMA + F16C (every x86 set above scalar has them), plugged into the
//! scalar table. The orders are those of upstream's build for AVX2 (`GGML_NATIVE=OFF`, the stock
//! x86 configuration).

use super::Kernels;
use crate::ops::attn::x86 as attn;
use crate::ops::expf::x86 as expf;
use crate::ops::vecf::x86 as vecf;

pub(super) fn plug(k: &mut Kernels) {
    let v = &mut k.vec;
    v.mad_f32 = vecf::mad_f32_256;
    v.mad_f16 = vecf::mad_f16_256;
    v.scale = vecf::scale_256;
    v.exp_sub_sum = vecf::exp_sub_sum_256;
    v.rope_pairs = vecf::rope_pairs_256;
    v.rope_halves = vecf::rope_halves_256;
    v.sum_sq = vecf::sum_sq_256;
    v.scale_mul_into = vecf::scale_mul_into_256;
    // upstream's AVX2 build: SiLU and SOFT_MAX's exp in blocks of 8 of its `__m256` exp
    v.softmax_exp = expf::exp_sub_sum_row8;
    v.silu_block = 8;
    v.silu_lane = crate::ops::expf::silu8;
    v.silu_blocks = expf::silu_blocks8;
    let a = &mut k.acc;
    a.scale16 = attn::scale16_256;
    a.mad16 = attn::mad16_256;
    a.mad32 = attn::mad32_fma;
}
