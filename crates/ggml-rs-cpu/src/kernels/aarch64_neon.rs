//! The aarch64 sets `neon` and `dotprod`, plugged into the scalar table, in the orders of
//! upstream's aarch64 build (GCC, `-march=armv8.2-a+dotprod`; see `dot/neon.rs`).

use super::Kernels;
use crate::dot::lowbit;
use crate::dot::neon::{self, kernels as nk};

pub(super) fn plug(k: &mut Kernels) {
    let v = &mut k.vec;
    // upstream's NEON `ggml_v_expf` is the AVX2 exp lane for lane, in blocks of 4
    v.softmax_exp = crate::expf::exp_sub_sum_row4;
    v.silu_block = 4;
    v.silu_lane = crate::expf::silu8;
    v.silu_blocks = crate::expf::silu_blocks8_def;
    // the integer lanes grouped as upstream's build without DotProd does (smull + saddlp); the
    // K-quants' portable definitions in upstream's aarch64 order (LLVM vectorizes them)
    let d = &mut k.dot;
    d.f32 = tf2!(nk::f32_neon);
    d.f16 = tf2!(nk::f16_neon);
    d.q8_0 = tf2!(nk::q8_0_q8_0_neon);
    d.q4_0 = tf2!(nk::q4_0_q8_0_neon);
    d.q4_k = neon::q4_k_q8_k_arm;
    d.q6_k = neon::q6_k_q8_k_arm;
    // the low-bit types in upstream's aarch64 lanes (portable Rust)
    d.q1_0 = lowbit::q1_0_q8_0_neon;
    d.q2_0 = lowbit::q2_0_q8_0_neon;
    d.nvfp4 = lowbit::nvfp4_q8_0_arm;
}

/// DotProd (`sdot`) on top of [`plug`]
pub(super) fn plug_dotprod(k: &mut Kernels) {
    let d = &mut k.dot;
    d.q8_0 = tf2!(nk::q8_0_q8_0_dotprod);
    d.q4_0 = tf2!(nk::q4_0_q8_0_dotprod);
    d.q4_k = tf2!(nk::q4_k_q8_k_dotprod);
    d.q6_k = tf2!(nk::q6_k_q8_k_dotprod);
    d.q1_0 = lowbit::q1_0_q8_0_dotprod;
    d.q2_0 = lowbit::q2_0_q8_0_dotprod;
}
