//! The aarch64 sets `neon` and `dotprod`, plugged into the scalar table, in the orders of
//! upstream's aarch64 build (GCC, `-march=armv8.2-a+dotprod`; see `dot/neon.rs`).

use super::Kernels;

pub(super) fn plug(k: &mut Kernels) {
    let v = &mut k.vec;
    // upstream's NEON `ggml_v_expf` is the AVX2 exp lane for lane, in blocks of 4
    v.softmax_exp = crate::ops::expf::exp_sub_sum_row4;
    v.silu_block = 4;
    v.silu_lane = crate::ops::expf::silu8;
    v.silu_blocks = crate::ops::expf::silu_blocks8_def;
}

/// DotProd (`sdot`) on top of [`plug`]
pub(super) fn plug_dotprod(_k: &mut Kernels) {}
