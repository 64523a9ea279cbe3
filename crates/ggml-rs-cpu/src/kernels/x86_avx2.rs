//! The `avx2` set: AVX2 + FMA + F16C (every x86 set above scalar has them), plugged into the
//! scalar table. The orders are those of upstream's build for AVX2 (`GGML_NATIVE=OFF`, the stock
//! x86 configuration).

use super::Kernels;
use crate::accum::x86 as attn;
use crate::dot::gemv::Kind;
use crate::dot::{float, iq_grid, iq4, kquants, lowbit, q4_1, q4_k, q5, q6_k, q8_0, tq};
use crate::expf::x86 as expf;
use crate::vecf::x86 as vecf;

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
    v.silu_lane = crate::expf::silu8;
    v.silu_blocks = expf::silu_blocks8;
    let a = &mut k.acc;
    a.scale16 = attn::scale16_256;
    a.mad16 = attn::mad16_256;
    a.mad32 = attn::mad32_fma;
    // the prompt blocks' mask helpers (their K dots stay the definition's order at AVX2)
    a.live_bits = crate::accum::blocks256::live_bits;
    a.prep_row = crate::accum::blocks256::prep_row;
    // MUL_MAT's row kernels in upstream's x86 orders (what its AVX2 build computes), which
    // repacks Q4_0 / Q4_K weights
    let d = &mut k.dot;
    d.f32 = tf2!(float::x86::f32_avx2);
    d.f16 = tf2!(float::x86::f16_avx2);
    d.bf16 = tf2!(float::x86::bf16_avx2);
    d.bf16_native = d.bf16;
    d.q8_0 = tf2!(q8_0::x86::q8_0_q8_0_avx2);
    d.q4_0 = tf2!(q8_0::x86::q4_0_q8_0_avx2);
    d.q5_0 = tf2!(q5::x86::q5_0_q8_0_avx2);
    d.q5_1 = tf2!(q5::x86::q5_1_q8_1_avx2);
    d.q4_1 = tf2!(q4_1::x86::q4_1_q8_1_avx2);
    d.q4_k = tf2!(q4_k::x86::q4_k_q8_k_avx2);
    d.q6_k = tf2!(q6_k::x86::q6_k_q8_k_x86_avx2);
    d.q2_k = tf2!(kquants::x86::q2_k_q8_k_avx2);
    d.q3_k = tf2!(kquants::x86::q3_k_q8_k_avx2);
    d.q5_k = tf2!(kquants::x86::q5_k_q8_k_avx2);
    d.tq1_0 = tf2!(tq::x86::tq1_0_q8_k_avx2);
    d.tq2_0 = tf2!(tq::x86::tq2_0_q8_k_avx2);
    d.iq4_nl = tf2!(iq4::x86::iq4_nl_q8_0_avx2);
    d.iq4_xs = tf2!(iq4::x86::iq4_xs_q8_k_avx2);
    d.mxfp4 = tf2!(iq4::x86::mxfp4_q8_0_avx2);
    // the grid types in upstream's x86 order (portable definitions of its AVX2 branches' lanes)
    d.iq2_xxs = iq_grid::iq2_xxs_q8_k_x86;
    d.iq2_xs = iq_grid::iq2_xs_q8_k_x86;
    d.iq2_s = iq_grid::iq2_s_q8_k_x86;
    d.iq3_xxs = iq_grid::iq3_xxs_q8_k_x86;
    d.iq3_s = iq_grid::iq3_s_q8_k_x86;
    d.iq1_s = iq_grid::iq1_s_q8_k_x86;
    d.iq1_m = iq_grid::iq1_m_q8_k_x86;
    // the low-bit types: Q1_0 / NVFP4 in the lanes of upstream's x86 branches, Q2_0's generic C
    // as its AVX2 build compiles it (fused)
    d.q1_0 = lowbit::q1_0_q8_0_x86;
    d.q2_0 = lowbit::q2_0_q8_0_fused;
    d.nvfp4 = lowbit::nvfp4_q8_0_x86;
    d.q4_0_repack = tf2!(q8_0::x86::q4_0_q8_0_repack_avx2);
    d.iq4_nl_repack = tf2!(iq4::x86::iq4_nl_q8_0_repack_avx2);
    d.mxfp4_repack = tf2!(iq4::x86::mxfp4_q8_0_repack_avx2);
    d.q4_k_gemv = tf2!(q4_k::x86::q4_k_q8_k_gemv_avx2);
    d.q4_k_gemm = tf2!(q4_k::x86::q4_k_q8_k_gemm_avx2);
    d.q6_k_tiled = tf2!(q6_k::x86::q6_k_q8_k_tiled_avx2);
    d.q2_k_tiled = tf2!(kquants::x86::q2_k_q8_k_tiled_avx2);
    d.q3_k_tiled = tf2!(kquants::x86::q3_k_q8_k_tiled_avx2);
    d.q5_k_tiled = tf2!(kquants::x86::q5_k_q8_k_tiled_avx2);
    d.iq4_xs_tiled = tf2!(iq4::x86::iq4_xs_q8_k_tiled_avx2);
    d.q2_k_gemv = tf2!(kquants::x86::q2_k_q8_k_gemv_avx2);
    d.q2_k_gemm = tf2!(kquants::x86::q2_k_q8_k_gemm_avx2);
    // upstream's AVX2 build runs Q2_K / Q3_K / Q5_K prompts through its tiled K-quant path
    d.kquant_tiled_path = true;
    d.repacks = true;
    let g = &mut k.gemv;
    g.q4_k = Kind::Q4KAvx2;
    g.q6_k = Kind::Q6KAvx2;
    g.q4_0_repack = Kind::Q4_0RepackAvx2;
    g.q4_k_gemv = Kind::Q4KGemvAvx2;
    // AMD's memory system: long rows one stream at a time (GemvKinds::one_stream_from)
    g.one_stream_from = if crate::simd::cpu_vendor_is_amd() { 512 } else { usize::MAX };
    // the prompt tiles: int8 (vpmaddubsw), tinyBLAS's 8-lane order, the float tiles
    k.gemm.qgemm = Some(crate::qgemm::tile_raw_avx2);
    k.gemm.sgemm = Some(crate::sgemm::Tiles { lanes: 8, tile: crate::sgemm::tile_raw_avx2, f16_cols: Some(crate::sgemm::tile_raw_f16_cols) });
    k.gemm.fgemm = Some(crate::fgemm::tile_raw_avx2);
    k.quant.q8_0 = crate::quants::q8_0::quantize_row_q8_0_x86_avx2;
}
