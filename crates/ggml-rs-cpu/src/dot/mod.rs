//! Dot products of a weight row with an activation row, the kernel of MUL_MAT: one file per
//! family, each with a scalar reference (what upstream's `*_generic` computes) and run-time
//! selected SIMD versions, tested against the reference (`tests.rs`). Q8_0's, Q4_0's and
//! Q6_K's SIMD versions are tested bit for bit against upstream's x86 order instead
//! ([`q8_0::q8_0_q8_0_x86`], [`q8_0::q4_0_q8_0_x86`], [`q6_k::q6_k_q8_k_x86`]), F32 and F16 at
//! AVX-512 against upstream's AVX-512 orders (`float::f32_avx512_order`, `f16_avx512_order`);
//! [`Order`] gives the orders of upstream's repacked Q4_0 / Q4_K kernels.
//!
//! | weight | activation | file       | SIMD levels                 | vs reference          |
//! |--------|------------|------------|-----------------------------|-----------------------|
//! | F32    | F32        | `float.rs` | AVX2, AVX-512, NEON         | float tolerance       |
//! | F16    | F16        | `float.rs` | AVX2 (F16C), AVX-512, NEON  | float tolerance       |
//! | BF16   | BF16       | `float.rs` | AVX2, AVX-512               | float tolerance       |
//! | Q8_0   | Q8_0       | `q8_0.rs`  | AVX2, AVX-512 VNNI, NEON(+DotProd) | upstream x86 / arm, bitwise |
//! | Q4_0   | Q8_0       | `q8_0.rs`  | AVX2, AVX-512 VNNI, NEON(+DotProd) | upstream x86 / arm, bitwise |
//! | Q5_0   | Q8_0       | `q5.rs`    | AVX2 (also at AVX-512)      | integers exact        |
//! | Q5_1   | Q8_1       | `q5.rs`    | AVX2 (also at AVX-512)      | integers exact        |
//! | Q4_K   | Q8_K       | `q4_k.rs`  | AVX2, NEON(+DotProd)        | bit for bit (arm: its order) |
//! | Q6_K   | Q8_K       | `q6_k.rs`  | AVX2, NEON(+DotProd)        | upstream x86 / arm, bitwise |
//! | Q1_0 / Q2_0 / NVFP4 | Q8_0 | `lowbit.rs` | x86 and aarch64 lane orders in portable Rust | upstream x86 / arm, bitwise |
//!
//! The aarch64 sets' kernels and the orders of upstream's aarch64 build are in `neon.rs`.
//!
//! [`Dots`] is one kernel set's choice of them (a part of its table, [`crate::kernels`]);
//! [`RowDot`] is the byte-level entry: the kernel of a weight type, applied to rows given as bytes. [`gemv::Gemv`] runs it over many rows, 4 rows per pass where a
//! multi-row form exists (Q4_0, Q8_0 at AVX-512 VNNI, F16 at AVX-512), bit for bit the same.

pub mod float;
pub mod gemv;
pub mod iq4;
pub mod iq_grid;
pub mod kquants;
pub mod lowbit;
pub mod neon;
pub mod q4_1;
pub mod q4_k;
pub mod q5;
pub mod q6_k;
pub mod q8_0;
pub mod tq;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
pub(crate) mod tests;

use crate::GgmlType;
use crate::block::{
    BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4Nl, BlockIq4Xs, BlockMxfp4, BlockNvfp4, BlockQ1_0, BlockQ2_0,
    BlockQ2K, BlockQ3K, BlockQ4_1, BlockQ5K, BlockQ8_0, BlockQ8_1, BlockQ8K, BlockTq1_0, BlockTq2_0, as_blocks,
};

/// a dot product of weight blocks `W` with activation blocks `A` (the types added after the
/// first nine, which have one kernel per set: their definition, or a set's SIMD form)
pub type BlockDot<W, A> = fn(&[W], &[A]) -> f32;

/// The order of float operations a MUL_MAT output is summed in, by where upstream's CPU would
/// compute it (see [`Order::repacked`], [`Order::for_row`]).
///
/// llama.cpp puts Q4_0 / Q4_K weight matrices into upstream's `CPU_REPACK` buffer type, and on
/// x86 with AVX2 upstream then computes their MUL_MATs with F32 activations in its repacked
/// kernels (`ggml_gemv_q4_0_8x8_q8_0`, `ggml_gemm_q4_0_8x8_q8_0`, `ggml_gemv_q4_K_8x8_q8_K`,
/// `ggml_gemm_q4_K_8x8_q8_K`), whose float orders differ from `ggml_vec_dot_*`:
/// - per activation plane, rows `0 .. ne11 - ne11 % 4` go through the GEMM (their activations
///   quantized 4 at a time: for Q8_K with [`crate::quants::quantize_row_q8_k_4x8`]'s tie rule),
///   the last `ne11 % 4` rows through the GEMV (quantized by the type's `from_float`);
/// - Q4_0, GEMV and GEMM alike: per block `acc = fma(f32(isum), f32(dw) · f32(dy), acc)`, blocks
///   in order, no horizontal float sum ([`q8_0::q4_0_q8_0_repack`]);
/// - Q4_K GEMV: one fma per super-block into `acc` (scales) and one into `accm` (mins), then
///   `acc - accm` ([`q4_k::q4_k_q8_k_gemv`]); Q4_K GEMM: the same per pair of sub-blocks
///   ([`q4_k::q4_k_q8_k_gemm`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// `ggml_vec_dot_*`'s (the non-repacked path: any other MUL_MAT)
    VecDot,
    /// a repacked weight's GEMV rows (the last `ne11 % 4` of a plane)
    RepackGemv,
    /// a repacked weight's GEMM rows (the first `ne11 - ne11 % 4` of a plane)
    RepackGemm,
    /// upstream's tiled K-quant path (`ggml-cpu/tiled`: MUL_MATs of Q2_K / Q3_K / Q5_K / Q6_K /
    /// IQ4_XS weights with 8 or more activation rows, weights not repacked; per super-block
    /// `r = d·f32(I)`, less `dmin·f32(M)` in one fma, then `acc = fma(r, dy, acc)`)
    Tiled,
}

impl Order {
    /// Whether upstream would run this MUL_MAT in its repacked kernels (x86, AVX2 or above:
    /// [`Dots::repacks`]): weights `wt` Q4_0, Q4_K, IQ4_NL or MXFP4 (Q2_K too where
    /// [`Dots::repacks_q2_k`]), 2-D (`ne02 = ne03 = 1`), `ne01 % 8 == 0`
    /// (upstream's `ggml_repack_get_optimal_repack_type`), F32 activations with `ne13 == 1` (its
    /// supports_op and forward_mul_mat). Not in the scalar set (use_ref, `GGML_RS_CPU_SIMD=scalar`:
    /// the reference stays `vec_dot`'s), nor with `GGML_RS_CPU_ORDER=fast` ([`vec_dot_only`]).
    pub fn repacked(wt: GgmlType, ne01: i64, ne02: i64, ne03: i64, src1_f32: bool, ne13: i64, dots: &Dots) -> bool {
        (matches!(wt, GgmlType::Q4_0 | GgmlType::Q4K | GgmlType::Iq4Nl | GgmlType::Mxfp4) || (wt == GgmlType::Q2K && dots.repacks_q2_k))
            && dots.repacks
            && ne01 > 0
            && ne01 % 8 == 0
            && ne02 == 1
            && ne03 == 1
            && src1_f32
            && ne13 == 1
            && !vec_dot_only()
    }

    /// Whether upstream would run this MUL_MAT_ID in its repacked kernels: the expert weights
    /// (`[k, ne01, n_expert]`, 3-D: its repack buffer type takes MUL_MAT_ID for `ggml_n_dims ==
    /// 3` only) of a type and shape [`Order::repacked`] takes, F32 activations with `ne13 == 1`;
    /// then every routed activation row goes through the GEMV ([`Order::RepackGemv`]: its
    /// `forward_mul_mat_id` quantizes them all with `from_float`, and has no GEMM rows)
    pub fn repacked_experts(wt: GgmlType, ne01: i64, ne02: i64, ne03: i64, src1_f32: bool, ne13: i64, dots: &Dots) -> bool {
        ne02 > 1 && Self::repacked(wt, ne01, 1, ne03, src1_f32, ne13, dots)
    }

    /// whether upstream's build takes a product of `n_rows` activation rows (`ne11` of a
    /// MUL_MAT, the rows routed to one expert of a MUL_MAT_ID) of weights `wt` not repacked
    /// through its tiled K-quant path ([`Order::Tiled`]): 8 or more rows, F32 or Q8_K
    /// activations; Q6_K where [`q6_k::tiled_order_applies`], Q2_K / Q3_K / Q5_K / IQ4_XS and the
    /// grid types where the set's [`Dots::kquant_tiled_path`] says so
    pub fn tiled(wt: GgmlType, n_rows: i64, src1_ok: bool, dots: &Dots) -> bool {
        match wt {
            GgmlType::Q6K => q6_k::tiled_order_applies(n_rows, src1_ok, dots),
            GgmlType::Q2K
            | GgmlType::Q3K
            | GgmlType::Q5K
            | GgmlType::Iq4Xs
            | GgmlType::Iq2Xxs
            | GgmlType::Iq2Xs
            | GgmlType::Iq2S
            | GgmlType::Iq3Xxs
            | GgmlType::Iq3S
            | GgmlType::Iq1S
            | GgmlType::Iq1M => n_rows >= 8 && src1_ok && dots.kquant_tiled_path,
            _ => false,
        }
    }

    /// the order of activation row `i11` of a plane of `ne11` rows, for a MUL_MAT that
    /// [`Order::repacked`] (else [`Order::VecDot`])
    pub fn for_row(repacked: bool, i11: usize, ne11: usize) -> Order {
        if !repacked {
            Order::VecDot
        } else if i11 < ne11 - ne11 % 4 {
            Order::RepackGemm
        } else {
            Order::RepackGemv
        }
    }
}

/// `GGML_RS_CPU_ORDER=fast` ([`crate::config`]): Q4_0 / Q4_K MUL_MATs summed in
/// `ggml_vec_dot`'s order whatever their shape, and the prompt tiles of Q4_K in their per-block
/// form (faster than upstream's repacked GEMM order's `k_pairs`: `qgemm_bench`)
pub fn vec_dot_only() -> bool {
    crate::config::get().fast()
}

/// a dot-product kernel for one weight type, chosen once
#[derive(Clone, Copy)]
pub enum RowDot {
    F32(float::F32Dot),
    F16(float::F16Dot),
    Bf16(float::Bf16Dot),
    Q8_0(q8_0::Q8_0Dot),
    Q4_0(q8_0::Q4_0Dot),
    Q5_0(q5::Q5_0Dot),
    Q5_1(q5::Q5_1Dot),
    Q4K(q4_k::Q4KDot),
    Q6K(q6_k::Q6KDot),
    Q4_1(BlockDot<BlockQ4_1, BlockQ8_1>),
    Q2K(BlockDot<BlockQ2K, BlockQ8K>),
    Q3K(BlockDot<BlockQ3K, BlockQ8K>),
    Q5K(BlockDot<BlockQ5K, BlockQ8K>),
    Iq4Nl(BlockDot<BlockIq4Nl, BlockQ8_0>),
    Iq4Xs(BlockDot<BlockIq4Xs, BlockQ8K>),
    Tq1_0(BlockDot<BlockTq1_0, BlockQ8K>),
    Tq2_0(BlockDot<BlockTq2_0, BlockQ8K>),
    Mxfp4(BlockDot<BlockMxfp4, BlockQ8_0>),
    Iq2Xxs(BlockDot<BlockIq2Xxs, BlockQ8K>),
    Iq2Xs(BlockDot<BlockIq2Xs, BlockQ8K>),
    Iq2S(BlockDot<BlockIq2S, BlockQ8K>),
    Iq3Xxs(BlockDot<BlockIq3Xxs, BlockQ8K>),
    Iq3S(BlockDot<BlockIq3S, BlockQ8K>),
    Iq1S(BlockDot<BlockIq1S, BlockQ8K>),
    Iq1M(BlockDot<BlockIq1M, BlockQ8K>),
    Q1_0(BlockDot<BlockQ1_0, BlockQ8_0>),
    Q2_0(BlockDot<BlockQ2_0, BlockQ8_0>),
    Nvfp4(BlockDot<BlockNvfp4, BlockQ8_0>),
}

/// The row kernels of one kernel set ([`crate::kernels::Kernels::dot`]): a dot product per weight
/// type in `ggml_vec_dot_*`'s order, the orders of upstream's repacked and tiled paths, and whether
/// upstream's build of the set takes those paths.
#[derive(Clone, Copy)]
pub struct Dots {
    pub f32: float::F32Dot,
    pub f16: float::F16Dot,
    pub bf16: float::Bf16Dot,
    /// BF16 in the order of upstream's native build on this CPU (`ggml_vec_dot_bf16`, what its
    /// FLASH_ATTN_EXT dots a BF16 K with)
    pub bf16_native: float::Bf16Dot,
    pub q8_0: q8_0::Q8_0Dot,
    pub q4_0: q8_0::Q4_0Dot,
    pub q5_0: q5::Q5_0Dot,
    pub q5_1: q5::Q5_1Dot,
    pub q4_k: q4_k::Q4KDot,
    pub q6_k: q6_k::Q6KDot,
    pub q4_1: BlockDot<BlockQ4_1, BlockQ8_1>,
    pub q2_k: BlockDot<BlockQ2K, BlockQ8K>,
    pub q3_k: BlockDot<BlockQ3K, BlockQ8K>,
    pub q5_k: BlockDot<BlockQ5K, BlockQ8K>,
    pub iq4_nl: BlockDot<BlockIq4Nl, BlockQ8_0>,
    pub iq4_xs: BlockDot<BlockIq4Xs, BlockQ8K>,
    pub tq1_0: BlockDot<BlockTq1_0, BlockQ8K>,
    pub tq2_0: BlockDot<BlockTq2_0, BlockQ8K>,
    pub mxfp4: BlockDot<BlockMxfp4, BlockQ8_0>,
    /// the grid types ([`iq_grid`])
    pub iq2_xxs: BlockDot<BlockIq2Xxs, BlockQ8K>,
    pub iq2_xs: BlockDot<BlockIq2Xs, BlockQ8K>,
    pub iq2_s: BlockDot<BlockIq2S, BlockQ8K>,
    pub iq3_xxs: BlockDot<BlockIq3Xxs, BlockQ8K>,
    pub iq3_s: BlockDot<BlockIq3S, BlockQ8K>,
    pub iq1_s: BlockDot<BlockIq1S, BlockQ8K>,
    pub iq1_m: BlockDot<BlockIq1M, BlockQ8K>,
    /// the low-bit types ([`lowbit`]), whose blocks span several activation blocks
    pub q1_0: BlockDot<BlockQ1_0, BlockQ8_0>,
    pub q2_0: BlockDot<BlockQ2_0, BlockQ8_0>,
    pub nvfp4: BlockDot<BlockNvfp4, BlockQ8_0>,
    /// Q4_0 in upstream's repacked order, GEMV and GEMM rows alike ([`q8_0::q4_0_q8_0_repack`])
    pub q4_0_repack: q8_0::Q4_0Dot,
    /// IQ4_NL and MXFP4 in upstream's repacked order, GEMV and GEMM rows alike
    /// ([`iq4::iq4_nl_q8_0_repack`], [`iq4::mxfp4_q8_0_repack`])
    pub iq4_nl_repack: BlockDot<BlockIq4Nl, BlockQ8_0>,
    pub mxfp4_repack: BlockDot<BlockMxfp4, BlockQ8_0>,
    /// Q2_K in upstream's repacked GEMV and GEMM orders ([`kquants::q2_k_q8_k_gemv`],
    /// [`kquants::q2_k_q8_k_gemm`])
    pub q2_k_gemv: BlockDot<BlockQ2K, BlockQ8K>,
    pub q2_k_gemm: BlockDot<BlockQ2K, BlockQ8K>,
    /// Q4_K in upstream's repacked GEMV order ([`q4_k::q4_k_q8_k_gemv`])
    pub q4_k_gemv: q4_k::Q4KDot,
    /// Q4_K in upstream's repacked GEMM order ([`q4_k::q4_k_q8_k_gemm`])
    pub q4_k_gemm: q4_k::Q4KDot,
    /// Q6_K in the order of upstream's tiled K-quant path ([`q6_k::q6_k_q8_k_tiled`])
    pub q6_k_tiled: q6_k::Q6KDot,
    /// Q2_K, Q3_K, Q5_K in the order of that path ([`kquants::q2_k_q8_k_tiled`] and beside it)
    pub q2_k_tiled: BlockDot<BlockQ2K, BlockQ8K>,
    pub q3_k_tiled: BlockDot<BlockQ3K, BlockQ8K>,
    pub q5_k_tiled: BlockDot<BlockQ5K, BlockQ8K>,
    /// IQ4_XS in that order ([`iq4::iq4_xs_q8_k_tiled`])
    pub iq4_xs_tiled: BlockDot<BlockIq4Xs, BlockQ8K>,
    /// upstream's build of this set repacks Q4_0 / Q4_K weights and sums them in the repacked
    /// orders ([`Order::repacked`]): its x86 builds from AVX2
    pub repacks: bool,
    /// upstream's build of this set also repacks Q2_K weights (`q2_K_8x8`): its builds for
    /// AVX-512 (`ggml_cpu_has_avx512` answers what the build was compiled for)
    pub repacks_q2_k: bool,
    /// upstream's build of this set runs Q6_K products of 8 or more activation rows through its
    /// tiled K-quant path ([`q6_k::tiled_order_applies`]): its native AVX-512 VNNI build (its
    /// AVX2 build does too, which our avx2 set does not follow yet: its Q6_K prompt tiles have no
    /// tiled form)
    pub q6_k_tiled_path: bool,
    /// upstream's build of this set runs Q2_K / Q3_K / Q5_K / IQ4_XS products of 8 or more
    /// activation rows through its tiled K-quant path ([`Order::Tiled`]): its x86 builds from AVX2
    pub kquant_tiled_path: bool,
}

impl Dots {
    /// the definitions (the scalar set's kernels; `bf16_native` below AVX-512 is `bf16`'s)
    pub const SCALAR: Dots = Dots {
        f32: float::f32_reference,
        f16: float::f16_reference,
        bf16: float::bf16_reference,
        bf16_native: float::bf16_reference,
        q8_0: q8_0::q8_0_q8_0_reference,
        q4_0: q8_0::q4_0_q8_0_reference,
        q5_0: q5::q5_0_q8_0_reference,
        q5_1: q5::q5_1_q8_1_reference,
        q4_k: q4_k::q4_k_q8_k_reference,
        q6_k: q6_k::q6_k_q8_k_reference,
        q4_1: q4_1::q4_1_q8_1_reference,
        q2_k: kquants::q2_k_q8_k_reference,
        q3_k: kquants::q3_k_q8_k_reference,
        q5_k: kquants::q5_k_q8_k_reference,
        iq4_nl: iq4::iq4_nl_q8_0_reference,
        iq4_xs: iq4::iq4_xs_q8_k_reference,
        tq1_0: tq::tq1_0_q8_k_reference,
        tq2_0: tq::tq2_0_q8_k_reference,
        mxfp4: iq4::mxfp4_q8_0_reference,
        iq2_xxs: iq_grid::iq2_xxs_q8_k_reference,
        iq2_xs: iq_grid::iq2_xs_q8_k_reference,
        iq2_s: iq_grid::iq2_s_q8_k_reference,
        iq3_xxs: iq_grid::iq3_xxs_q8_k_reference,
        iq3_s: iq_grid::iq3_s_q8_k_reference,
        iq1_s: iq_grid::iq1_s_q8_k_reference,
        iq1_m: iq_grid::iq1_m_q8_k_reference,
        q1_0: lowbit::q1_0_q8_0_reference,
        q2_0: lowbit::q2_0_q8_0_reference,
        nvfp4: lowbit::nvfp4_q8_0_reference,
        q4_0_repack: q8_0::q4_0_q8_0_repack,
        iq4_nl_repack: iq4::iq4_nl_q8_0_repack,
        q2_k_gemv: kquants::q2_k_q8_k_gemv,
        q2_k_gemm: kquants::q2_k_q8_k_gemm,
        mxfp4_repack: iq4::mxfp4_q8_0_repack,
        q4_k_gemv: q4_k::q4_k_q8_k_gemv,
        q4_k_gemm: q4_k::q4_k_q8_k_gemm,
        q6_k_tiled: q6_k::q6_k_q8_k_tiled,
        q2_k_tiled: kquants::q2_k_q8_k_tiled,
        q3_k_tiled: kquants::q3_k_q8_k_tiled,
        q5_k_tiled: kquants::q5_k_q8_k_tiled,
        iq4_xs_tiled: iq4::iq4_xs_q8_k_tiled,
        repacks: false,
        repacks_q2_k: false,
        q6_k_tiled_path: false,
        kquant_tiled_path: false,
    };

    /// the kernel for weights of type `ty` summing in `order` (the repack orders exist for Q4_0
    /// and Q4_K, the tiled one for Q2_K / Q3_K / Q5_K / Q6_K; any other type, or
    /// [`Order::VecDot`], sums in `ggml_vec_dot_*`'s order)
    pub fn row(&self, ty: GgmlType, order: Order) -> RowDot {
        match (ty, order) {
            (GgmlType::Q4_0, Order::RepackGemv | Order::RepackGemm) => RowDot::Q4_0(self.q4_0_repack),
            (GgmlType::Iq4Nl, Order::RepackGemv | Order::RepackGemm) => RowDot::Iq4Nl(self.iq4_nl_repack),
            (GgmlType::Mxfp4, Order::RepackGemv | Order::RepackGemm) => RowDot::Mxfp4(self.mxfp4_repack),
            (GgmlType::Q2K, Order::RepackGemv) => RowDot::Q2K(self.q2_k_gemv),
            (GgmlType::Q2K, Order::RepackGemm) => RowDot::Q2K(self.q2_k_gemm),
            (GgmlType::Q4K, Order::RepackGemv) => RowDot::Q4K(self.q4_k_gemv),
            (GgmlType::Q4K, Order::RepackGemm) => RowDot::Q4K(self.q4_k_gemm),
            (GgmlType::Q2K, Order::Tiled) => RowDot::Q2K(self.q2_k_tiled),
            (GgmlType::Q3K, Order::Tiled) => RowDot::Q3K(self.q3_k_tiled),
            (GgmlType::Q5K, Order::Tiled) => RowDot::Q5K(self.q5_k_tiled),
            (GgmlType::Q6K, Order::Tiled) => RowDot::Q6K(self.q6_k_tiled),
            (GgmlType::Iq4Xs, Order::Tiled) => RowDot::Iq4Xs(self.iq4_xs_tiled),
            // the grid types' tiled orders are portable definitions, the same in every set
            (GgmlType::Iq2Xxs, Order::Tiled) => RowDot::Iq2Xxs(iq_grid::iq2_xxs_q8_k_tiled),
            (GgmlType::Iq2Xs, Order::Tiled) => RowDot::Iq2Xs(iq_grid::iq2_xs_q8_k_tiled),
            (GgmlType::Iq2S, Order::Tiled) => RowDot::Iq2S(iq_grid::iq2_s_q8_k_tiled),
            (GgmlType::Iq3Xxs, Order::Tiled) => RowDot::Iq3Xxs(iq_grid::iq3_xxs_q8_k_tiled),
            (GgmlType::Iq3S, Order::Tiled) => RowDot::Iq3S(iq_grid::iq3_s_q8_k_tiled),
            (GgmlType::Iq1S, Order::Tiled) => RowDot::Iq1S(iq_grid::iq1_s_q8_k_tiled),
            (GgmlType::Iq1M, Order::Tiled) => RowDot::Iq1M(iq_grid::iq1_m_q8_k_tiled),
            (GgmlType::F32, _) => RowDot::F32(self.f32),
            (GgmlType::F16, _) => RowDot::F16(self.f16),
            (GgmlType::BF16, _) => RowDot::Bf16(self.bf16),
            (GgmlType::Q8_0, _) => RowDot::Q8_0(self.q8_0),
            (GgmlType::Q4_0, _) => RowDot::Q4_0(self.q4_0),
            (GgmlType::Q5_0, _) => RowDot::Q5_0(self.q5_0),
            (GgmlType::Q5_1, _) => RowDot::Q5_1(self.q5_1),
            (GgmlType::Q4K, _) => RowDot::Q4K(self.q4_k),
            (GgmlType::Q6K, _) => RowDot::Q6K(self.q6_k),
            (GgmlType::Q4_1, _) => RowDot::Q4_1(self.q4_1),
            (GgmlType::Q2K, _) => RowDot::Q2K(self.q2_k),
            (GgmlType::Q3K, _) => RowDot::Q3K(self.q3_k),
            (GgmlType::Q5K, _) => RowDot::Q5K(self.q5_k),
            (GgmlType::Iq4Nl, _) => RowDot::Iq4Nl(self.iq4_nl),
            (GgmlType::Iq4Xs, _) => RowDot::Iq4Xs(self.iq4_xs),
            (GgmlType::Tq1_0, _) => RowDot::Tq1_0(self.tq1_0),
            (GgmlType::Tq2_0, _) => RowDot::Tq2_0(self.tq2_0),
            (GgmlType::Mxfp4, _) => RowDot::Mxfp4(self.mxfp4),
            (GgmlType::Iq2Xxs, _) => RowDot::Iq2Xxs(self.iq2_xxs),
            (GgmlType::Iq2Xs, _) => RowDot::Iq2Xs(self.iq2_xs),
            (GgmlType::Iq2S, _) => RowDot::Iq2S(self.iq2_s),
            (GgmlType::Iq3Xxs, _) => RowDot::Iq3Xxs(self.iq3_xxs),
            (GgmlType::Iq3S, _) => RowDot::Iq3S(self.iq3_s),
            (GgmlType::Iq1S, _) => RowDot::Iq1S(self.iq1_s),
            (GgmlType::Iq1M, _) => RowDot::Iq1M(self.iq1_m),
            (GgmlType::Q1_0, _) => RowDot::Q1_0(self.q1_0),
            (GgmlType::Q2_0, _) => RowDot::Q2_0(self.q2_0),
            (GgmlType::Nvfp4, _) => RowDot::Nvfp4(self.nvfp4),
            (GgmlType::Q8K | GgmlType::Q8_1, _) => panic!("Dots::row: {} is an activation type only, it has no dot product as weights", ty.name()),
        }
    }
}

impl RowDot {
    /// the dot product of weight row `x` with activation row `y` (bytes of whole blocks; the
    /// two rows must hold the same number of elements)
    #[inline]
    pub fn dot(&self, x: &[u8], y: &[u8]) -> f32 {
        /// views both rows as blocks (checked: whole blocks, aligned, the same count) and calls `f`
        fn call<W: crate::block::Block, A: crate::block::Block>(f: fn(&[W], &[A]) -> f32, x: &[u8], y: &[u8], what: &str) -> f32 {
            call_spanning(f, x, y, what, 1)
        }
        /// [`call`] for weight blocks that span `per` activation blocks
        fn call_spanning<W: crate::block::Block, A: crate::block::Block>(f: fn(&[W], &[A]) -> f32, x: &[u8], y: &[u8], what: &str, per: usize) -> f32 {
            let (a, b) = (as_blocks::<W>(x, what), as_blocks::<A>(y, what));
            assert_eq!(a.len() * per, b.len(), "vec_dot {what}: weight row has {} blocks, activation row {}", a.len(), b.len());
            f(a, b)
        }
        match *self {
            RowDot::F32(f) => call(f, x, y, "f32"),
            RowDot::F16(f) => call(f, x, y, "f16"),
            RowDot::Bf16(f) => call(f, x, y, "bf16"),
            RowDot::Q8_0(f) => call(f, x, y, "q8_0"),
            RowDot::Q4_0(f) => call(f, x, y, "q4_0"),
            RowDot::Q5_0(f) => call(f, x, y, "q5_0"),
            RowDot::Q5_1(f) => call(f, x, y, "q5_1"),
            RowDot::Q4K(f) => call(f, x, y, "q4_K"),
            RowDot::Q6K(f) => call(f, x, y, "q6_K"),
            RowDot::Q4_1(f) => call(f, x, y, "q4_1"),
            RowDot::Q2K(f) => call(f, x, y, "q2_K"),
            RowDot::Q3K(f) => call(f, x, y, "q3_K"),
            RowDot::Q5K(f) => call(f, x, y, "q5_K"),
            RowDot::Iq4Nl(f) => call(f, x, y, "iq4_nl"),
            RowDot::Iq4Xs(f) => call(f, x, y, "iq4_xs"),
            RowDot::Tq1_0(f) => call(f, x, y, "tq1_0"),
            RowDot::Tq2_0(f) => call(f, x, y, "tq2_0"),
            RowDot::Mxfp4(f) => call(f, x, y, "mxfp4"),
            RowDot::Iq2Xxs(f) => call(f, x, y, "iq2_xxs"),
            RowDot::Iq2Xs(f) => call(f, x, y, "iq2_xs"),
            RowDot::Iq2S(f) => call(f, x, y, "iq2_s"),
            RowDot::Iq3Xxs(f) => call(f, x, y, "iq3_xxs"),
            RowDot::Iq3S(f) => call(f, x, y, "iq3_s"),
            RowDot::Iq1S(f) => call(f, x, y, "iq1_s"),
            RowDot::Iq1M(f) => call(f, x, y, "iq1_m"),
            RowDot::Q1_0(f) => call_spanning(f, x, y, "q1_0", 4),
            RowDot::Q2_0(f) => call_spanning(f, x, y, "q2_0", 2),
            RowDot::Nvfp4(f) => call_spanning(f, x, y, "nvfp4", 2),
        }
    }
}
