//! The kernel table: every kernel the ops call through, one table per kernel set, built once.
//!
//! A [`Kernels`] is a plain struct of function pointers (and the few numbers that go with them:
//! a block length, whether a tiled form exists). `scalar::table` fills it with the portable
//! definitions, which are also the reference every other set is tested against; each instruction
//! set's file then *plugs in* the kernels it has, on top of the set below it (the way
//! tract-linalg's `Ops` is built by `generic()` and each ISA's `plug`):
//!
//! | set (`GGML_RS_CPU_SIMD`) | built as                                   | file              |
//! |--------------------------|--------------------------------------------|-------------------|
//! | `scalar`                 | the definitions                            | `scalar.rs`       |
//! | `avx2`                   | scalar + AVX2/FMA/F16C                     | `x86_avx2.rs`     |
//! | `avx512`                 | avx2 + AVX-512 F/BW/VL                     | `x86_avx512.rs`   |
//! | `avx512vnni`             | avx512 + VNNI                              | `x86_avx512.rs`   |
//! | `neon`                   | scalar + NEON (upstream aarch64's orders)  | `aarch64_neon.rs` |
//! | `dotprod`                | neon + DotProd                             | `aarch64_neon.rs` |
//!
//! The set is chosen once ([`active`]: the detected one, capped by `GGML_RS_CPU_SIMD`; the
//! backend's use_ref takes [`at`]`(Scalar)`), and the ops only read the table they are handed:
//! no op tests a CPU feature or compares levels. A table's kernels may only be called on a CPU
//! that has its set, which [`at`] asserts when it builds one; that is the safety argument of every
//! `unsafe fn` pointer in the table (the rest of each pointer's contract is in its field's doc).

use crate::simd::Level;
use std::sync::OnceLock;

/// a table entry for the `#[target_feature]` kernel `$k` of two slices (the row dot products)
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(unused_macros))]
macro_rules! tf2 {
    ($k:path) => {
        |x, y| {
            // SAFETY: a set's table is built only on a CPU that has the set (`kernels::at`)
            unsafe { $k(x, y) }
        }
    };
}

#[cfg(target_arch = "aarch64")]
mod aarch64_neon;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86_avx2;
#[cfg(target_arch = "x86_64")]
mod x86_avx512;

use crate::GgmlType;
pub use crate::accum::AccOps;
pub use crate::dot::Dots;
use crate::dot::gemv::Gemv;
pub use crate::dot::gemv::GemvKinds;
use crate::dot::{Order, RowDot};
pub use crate::vecf::VecF;

/// one kernel set's kernels
#[derive(Clone)]
pub struct Kernels {
    /// the set these are ([`Level::name`] is `GGML_RS_CPU_SIMD`'s word for it)
    pub set: Level,
    /// element-wise vectors: `y += s·x`, scales, exp and its sum (SOFT_MAX), SiLU / SwiGLU rows,
    /// RoPE rotations, RMS_NORM's sums, attention's score / accumulate tiles
    pub vec: VecF,
    /// flash attention's accumulators (f16 and f32 `y = y·s + x·v`)
    pub acc: AccOps,
    /// MUL_MAT's row kernels: a dot product per weight type, and upstream's repacked / tiled orders
    pub dot: Dots,
    /// the multi-row forms of the row kernels (token generation's mat-vec)
    pub gemv: GemvKinds,
    /// the tiled GEMMs of prompt processing, where the set has them
    pub gemm: Gemms,
    /// the activation quantizers (MUL_MAT's src1 to the weights' vec-dot type)
    pub quant: Quant,
}

/// One kernel set's activation quantizers: the bytes of this architecture's definition, by the
/// set's blocks. Unsafe: `x` holds a block's values per block of `y` (checked by the callers,
/// [`crate::quants::quantize_row_q8_0_cpu`], [`crate::quants::quantize_row_q8_k`]).
#[derive(Clone, Copy)]
pub struct Quant {
    /// Q8_0 as upstream's CPU backend quantizes activations on this architecture
    pub q8_0: unsafe fn(&[f32], &mut [crate::block::BlockQ8_0]),
    /// Q8_K (the K-quants' activations)
    pub q8_k: unsafe fn(&[f32], &mut [crate::block::BlockQ8K]),
}

/// One kernel set's tiled GEMMs (`None`: the set has none, MUL_MAT goes row by row)
#[derive(Clone, Copy)]
pub struct Gemms {
    /// int8 tiles of Q8_0 / Q4_0 / Q4_K / Q6_K weights ([`crate::qgemm`])
    pub qgemm: Option<crate::qgemm::TileFn>,
    /// F32 / F16 tiles in upstream's tinyBLAS orders ([`crate::sgemm`])
    pub sgemm: Option<crate::sgemm::Tiles>,
    /// F32 / F16 / BF16 float tiles ([`crate::fgemm`]: BF16 prompts, the fast order, flash
    /// attention's blocks)
    pub fgemm: Option<crate::fgemm::TileFn>,
    /// the gather form of fgemm's repacking of 16-bit weights ([`crate::fgemm::Repack16Fn`])
    pub fgemm_repack16: Option<crate::fgemm::Repack16Fn>,
}

impl Gemms {
    /// none (the scalar set)
    pub const NONE: Gemms = Gemms { qgemm: None, sgemm: None, fgemm: None, fgemm_repack16: None };
}

impl Kernels {
    /// the row kernel for weights of `ty` (activations of `ty.vec_dot_type()`), in
    /// `ggml_vec_dot_*`'s order
    pub fn row_dot(&self, ty: GgmlType) -> RowDot {
        self.dot.row(ty, Order::VecDot)
    }

    /// the mat-vec for weights of `ty` summing in `order`
    pub fn gemv(&self, ty: GgmlType, order: Order) -> Gemv {
        Gemv::new(ty, self, order)
    }

    /// the reference set: the scalar one, which the backend's use_ref
    /// (`ggml_backend_cpu_set_use_ref`) computes with; ops take upstream's reference paths there
    pub fn is_reference(&self) -> bool {
        self.set == Level::Scalar
    }
}

/// the table of `level` (at most the detected set of this CPU: asserted), built on first use
pub fn at(level: Level) -> &'static Kernels {
    assert!(
        level <= crate::simd::detected() && Level::of_this_arch().contains(&level),
        "kernels::at: the {} set is not supported by this CPU (it has {})",
        level.name(),
        crate::simd::detected().name()
    );
    static TABLES: [OnceLock<Kernels>; 6] = [const { OnceLock::new() }; 6];
    TABLES[level as usize].get_or_init(|| build(level))
}

/// the table this process computes with ([`crate::simd::active`])
pub fn active() -> &'static Kernels {
    at(crate::simd::active())
}

/// every table this CPU runs, lowest set first (what the tests compare)
pub fn available() -> Vec<&'static Kernels> {
    Level::available().into_iter().map(at).collect()
}

fn build(level: Level) -> Kernels {
    let mut k = scalar::table();
    #[cfg(target_arch = "x86_64")]
    {
        if level >= Level::Avx2 {
            x86_avx2::plug(&mut k);
        }
        if level >= Level::Avx512 {
            x86_avx512::plug(&mut k);
        }
        if level >= Level::Avx512Vnni {
            x86_avx512::plug_vnni(&mut k);
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if level >= Level::Neon {
            aarch64_neon::plug(&mut k);
        }
        if level >= Level::NeonDot {
            aarch64_neon::plug_dotprod(&mut k);
        }
    }
    k.set = level;
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_set_builds_once_and_names_itself() {
        for k in available() {
            assert!(std::ptr::eq(k, at(k.set)), "{}: one table per set", k.set.name());
        }
        assert_eq!(at(Level::Scalar).set, Level::Scalar);
        assert_eq!(active().set, crate::simd::active());
    }
}
