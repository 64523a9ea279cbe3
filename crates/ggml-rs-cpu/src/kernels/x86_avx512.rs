//! The `avx512` (AVX-512 F/BW/VL) and `avx512vnni` sets, plugged on top of the avx2 table. The
//! orders are those of upstream's native build on such a CPU.

use super::Kernels;
use crate::ops::attn::x86 as attn;
use crate::ops::expf::x86 as expf;
use crate::ops::vecf::x86 as vecf;

pub(super) fn plug(k: &mut Kernels) {
    let v = &mut k.vec;
    v.mad_f32 = vecf::mad_f32_512;
    v.mad_f16 = vecf::mad_f16_512;
    v.scale = vecf::scale_512;
    v.exp_sub_sum = vecf::exp_sub_sum_512;
    v.max = vecf::max_512;
    v.tiles = Some((vecf::score_tile_512, vecf::acc_tile_512));
    v.rope_pairs = vecf::rope_pairs_512;
    v.rope_halves = vecf::rope_halves_512;
    v.sum_sq = vecf::sum_sq_512;
    v.scale_mul_into = vecf::scale_mul_into_512;
    // upstream's AVX-512 build: SiLU and SOFT_MAX's exp in blocks of 16 of its `__m512` exp
    v.softmax_exp = expf::exp_sub_sum_row16;
    v.silu_block = 16;
    v.silu_lane = crate::ops::expf::silu16;
    v.silu_blocks = expf::silu_blocks;
    let a = &mut k.acc;
    a.scale16 = attn::scale16_512;
    a.mad16 = attn::mad16_512;
    // F16 accumulators' f16 part in AVX512-FP16 instructions where the CPU has them
    a.fp16 = crate::simd::has_avx512fp16();
}

/// VNNI (`vpdpbusd`) on top of [`plug`]
pub(super) fn plug_vnni(_k: &mut Kernels) {}
