//! The scalar set: the portable definitions, the reference every other set is tested against
//! and what every set starts from.

use super::{AccOps, Dots, Gemms, GemvKinds, Kernels, Quant, VecF};
use crate::simd::Level;

pub(super) fn table() -> Kernels {
    Kernels {
        set: Level::Scalar,
        vec: VecF::SCALAR,
        acc: AccOps {
            // upstream's native build's f16 rule on this CPU, reproduced by every set
            f16_native: crate::simd::has_avx512fp16(),
            ..AccOps::scalar()
        },
        dot: Dots::SCALAR,
        gemv: GemvKinds::ROWS,
        gemm: Gemms::NONE,
        quant: Quant { q8_0: crate::quants::q8_0::Q8_0_CPU_DEF, q8_k: crate::quants::q8_k::quantize_row_q8_k_def },
    }
}
