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
//!
//! The aarch64 sets' kernels and the orders of upstream's aarch64 build are in `neon.rs`.
//!
//! [`Dots`] is one kernel set's choice of them (a part of its table, [`crate::kernels`]);
//! [`RowDot`] is the byte-level entry: the kernel of a weight type, applied to rows given as bytes. [`gemv::Gemv`] runs it over many rows, 4 rows per pass where a
//! multi-row form exists (Q4_0, Q8_0 at AVX-512 VNNI, F16 at AVX-512), bit for bit the same.

pub mod float;
pub mod gemv;
pub mod neon;
pub mod q4_k;
pub mod q5;
pub mod q6_k;
pub mod q8_0;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
pub(crate) mod tests;

use crate::GgmlType;
use crate::block::as_blocks;

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
}

impl Order {
    /// Whether upstream would run this MUL_MAT in its repacked kernels (x86, AVX2 or above:
    /// [`Dots::repacks`]): weights `wt` Q4_0 or Q4_K, 2-D (`ne02 = ne03 = 1`), `ne01 % 8 == 0`
    /// (upstream's `ggml_repack_get_optimal_repack_type`), F32 activations with `ne13 == 1` (its
    /// supports_op and forward_mul_mat). Not in the scalar set (use_ref, `GGML_RS_CPU_SIMD=scalar`:
    /// the reference stays `vec_dot`'s), nor with `GGML_RS_CPU_ORDER=fast` ([`vec_dot_only`]).
    pub fn repacked(wt: GgmlType, ne01: i64, ne02: i64, ne03: i64, src1_f32: bool, ne13: i64, dots: &Dots) -> bool {
        matches!(wt, GgmlType::Q4_0 | GgmlType::Q4K)
            && dots.repacks
            && ne01 > 0
            && ne01 % 8 == 0
            && ne02 == 1
            && ne03 == 1
            && src1_f32
            && ne13 == 1
            && !vec_dot_only()
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
    /// Q4_0 in upstream's repacked order, GEMV and GEMM rows alike ([`q8_0::q4_0_q8_0_repack`])
    pub q4_0_repack: q8_0::Q4_0Dot,
    /// Q4_K in upstream's repacked GEMV order ([`q4_k::q4_k_q8_k_gemv`])
    pub q4_k_gemv: q4_k::Q4KDot,
    /// Q4_K in upstream's repacked GEMM order ([`q4_k::q4_k_q8_k_gemm`])
    pub q4_k_gemm: q4_k::Q4KDot,
    /// Q6_K in the order of upstream's tiled K-quant path ([`q6_k::q6_k_q8_k_tiled`])
    pub q6_k_tiled: q6_k::Q6KDot,
    /// upstream's build of this set repacks Q4_0 / Q4_K weights and sums them in the repacked
    /// orders ([`Order::repacked`]): its x86 builds from AVX2
    pub repacks: bool,
    /// upstream's build of this set runs Q6_K products of 8 or more activation rows through its
    /// tiled K-quant path ([`q6_k::tiled_order_applies`]): its native AVX-512 VNNI build
    pub q6_k_tiled_path: bool,
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
        q4_0_repack: q8_0::q4_0_q8_0_repack,
        q4_k_gemv: q4_k::q4_k_q8_k_gemv,
        q4_k_gemm: q4_k::q4_k_q8_k_gemm,
        q6_k_tiled: q6_k::q6_k_q8_k_tiled,
        repacks: false,
        q6_k_tiled_path: false,
    };

    /// the kernel for weights of type `ty` summing in `order` (the repack orders exist for Q4_0
    /// and Q4_K; any other type, or [`Order::VecDot`], sums in `ggml_vec_dot_*`'s order)
    pub fn row(&self, ty: GgmlType, order: Order) -> RowDot {
        match (ty, order) {
            (GgmlType::Q4_0, Order::RepackGemv | Order::RepackGemm) => RowDot::Q4_0(self.q4_0_repack),
            (GgmlType::Q4K, Order::RepackGemv) => RowDot::Q4K(self.q4_k_gemv),
            (GgmlType::Q4K, Order::RepackGemm) => RowDot::Q4K(self.q4_k_gemm),
            (GgmlType::F32, _) => RowDot::F32(self.f32),
            (GgmlType::F16, _) => RowDot::F16(self.f16),
            (GgmlType::BF16, _) => RowDot::Bf16(self.bf16),
            (GgmlType::Q8_0, _) => RowDot::Q8_0(self.q8_0),
            (GgmlType::Q4_0, _) => RowDot::Q4_0(self.q4_0),
            (GgmlType::Q5_0, _) => RowDot::Q5_0(self.q5_0),
            (GgmlType::Q5_1, _) => RowDot::Q5_1(self.q5_1),
            (GgmlType::Q4K, _) => RowDot::Q4K(self.q4_k),
            (GgmlType::Q6K, _) => RowDot::Q6K(self.q6_k),
            (GgmlType::Q8K | GgmlType::Q8_1, _) => panic!("Dots::row: {} is an activation type only, it has no dot product as weights", ty.name()),
        }
    }
}

impl RowDot {
    /// the dot product of weight row `x` with activation row `y` (bytes of whole blocks; the
    /// two rows must hold the same number of elements)
    #[inline]
    pub fn dot(&self, x: &[u8], y: &[u8]) -> f32 {
        fn same<A, B>(x: &[A], y: &[B], what: &str) {
            assert_eq!(x.len(), y.len(), "vec_dot {what}: weight row has {} blocks, activation row {}", x.len(), y.len());
        }
        match *self {
            RowDot::F32(f) => {
                let (a, b) = (as_blocks(x, "vec_dot f32"), as_blocks(y, "vec_dot f32"));
                same::<f32, f32>(a, b, "f32");
                f(a, b)
            }
            RowDot::F16(f) => {
                let (a, b) = (as_blocks(x, "vec_dot f16"), as_blocks(y, "vec_dot f16"));
                same::<half::f16, half::f16>(a, b, "f16");
                f(a, b)
            }
            RowDot::Bf16(f) => {
                let (a, b) = (as_blocks(x, "vec_dot bf16"), as_blocks(y, "vec_dot bf16"));
                same::<half::bf16, half::bf16>(a, b, "bf16");
                f(a, b)
            }
            RowDot::Q8_0(f) => {
                let (a, b) = (as_blocks(x, "vec_dot q8_0"), as_blocks(y, "vec_dot q8_0 activations"));
                same(a, b, "q8_0");
                f(a, b)
            }
            RowDot::Q4_0(f) => {
                let (a, b) = (as_blocks(x, "vec_dot q4_0"), as_blocks(y, "vec_dot q4_0 activations"));
                same(a, b, "q4_0");
                f(a, b)
            }
            RowDot::Q5_0(f) => {
                let (a, b) = (as_blocks(x, "vec_dot q5_0"), as_blocks(y, "vec_dot q5_0 activations"));
                same(a, b, "q5_0");
                f(a, b)
            }
            RowDot::Q5_1(f) => {
                let (a, b) = (as_blocks(x, "vec_dot q5_1"), as_blocks(y, "vec_dot q5_1 activations"));
                same(a, b, "q5_1");
                f(a, b)
            }
            RowDot::Q4K(f) => {
                let (a, b) = (as_blocks(x, "vec_dot q4_K"), as_blocks(y, "vec_dot q4_K activations"));
                same(a, b, "q4_K");
                f(a, b)
            }
            RowDot::Q6K(f) => {
                let (a, b) = (as_blocks(x, "vec_dot q6_K"), as_blocks(y, "vec_dot q6_K activations"));
                same(a, b, "q6_K");
                f(a, b)
            }
        }
    }
}
