//! The `avx512` (AVX-512 F/BW/VL) and `avx512vnni` sets, plugged on top of the avx2 table. The
//! orders are those of upstream's native build on such a CPU.

use super::Kernels;
use crate::accum::x86 as attn;
use crate::dot::float;
use crate::dot::gemv::Kind;
use crate::dot::q8_0;
use crate::expf::x86 as expf;
use crate::vecf::x86 as vecf;

pub(super) fn plug(k: &mut Kernels) {
    // upstream's builds for AVX-512 repack Q2_K weights (q2_K_8x8; its ggml_cpu_has_avx512 is the build's)
    k.dot.repacks_q2_k = true;
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
    v.silu_lane = crate::expf::silu16;
    v.silu_blocks = expf::silu_blocks;
    let a = &mut k.acc;
    a.scale16 = attn::scale16_512;
    a.mad16 = attn::mad16_512;
    // F16 accumulators' f16 part in AVX512-FP16 instructions where the CPU has them
    a.fp16 = crate::simd::has_avx512fp16();
    // the prompt blocks' helpers in masked 512-bit vectors
    a.live_bits = crate::accum::blocks512::live_bits;
    a.dot_rows = [crate::accum::blocks512::dot_rows::<0>, crate::accum::blocks512::dot_rows::<1>, crate::accum::blocks512::dot_rows::<2>];
    a.prep_row = crate::accum::blocks512::prep_row;
    // F32 / F16 / BF16 rows in upstream's AVX-512 orders; BF16 for flash attention as its native
    // build compiles `ggml_vec_dot_bf16` on this CPU (vdpbf16ps where there is AVX512-BF16)
    let d = &mut k.dot;
    d.f32 = tf2!(float::x86::f32_avx512);
    d.f16 = tf2!(float::x86::f16_avx512);
    d.bf16 = tf2!(float::x86::bf16_avx512);
    d.bf16_native = if std::arch::is_x86_feature_detected!("avx512bf16") { float::bf16_dpbf16_order } else { float::bf16_avx512f_order };
    let g = &mut k.gemv;
    g.f16 = Kind::F16Avx512;
    g.q6_k = Kind::Q6KAvx512;
    // tinyBLAS's 16-lane order (upstream's AVX-512 build), the float tiles in 512-bit vectors
    k.gemm.sgemm = Some(crate::sgemm::Tiles { lanes: 16, tile: crate::sgemm::tile_raw_512, f16_cols: None });
    k.gemm.fgemm = Some(crate::fgemm::tile_raw_512);
    k.gemm.fgemm_repack16 = Some(crate::fgemm::x86::repack16);
    k.quant.q8_0 = crate::quants::q8_0::quantize_row_q8_0_x86_512;
    k.quant.q8_k = crate::quants::q8_k::quantize_row_q8_k_512;
}

/// VNNI (`vpdpbusd`) on top of [`plug`]
pub(super) fn plug_vnni(k: &mut Kernels) {
    let d = &mut k.dot;
    d.q8_0 = tf2!(q8_0::x86::q8_0_q8_0_vnni);
    d.q4_0 = tf2!(q8_0::x86::q4_0_q8_0_vnni);
    // upstream's native build runs Q6_K prompts through its tiled K-quant path
    d.q6_k_tiled_path = true;
    // its native build rounds the odd last block of IQ4_NL / MXFP4 twice (the AVX2 build fuses)
    d.iq4_nl = tf2!(crate::dot::iq4::x86::iq4_nl_q8_0_native);
    d.mxfp4 = tf2!(crate::dot::iq4::x86::mxfp4_q8_0_native);
    // and compiles Q2_0's generic C unfused (the definition)
    d.q2_0 = crate::dot::lowbit::q2_0_q8_0_reference;
    let g = &mut k.gemv;
    g.q4_0 = Kind::Q4_0Vnni;
    g.q8_0 = Kind::Q8_0Vnni;
    g.q4_k = Kind::Q4KVnni;
    g.q4_0_repack = Kind::Q4_0RepackVnni;
    g.q4_k_gemv = Kind::Q4KGemvVnni;
    // the int8 tiles in 512-bit vectors with vpdpbusd (and Q6_K's tiled form)
    k.gemm.qgemm = Some(crate::qgemm::tile_raw_vnni);
}
