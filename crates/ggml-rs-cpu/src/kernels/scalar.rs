//! The scalar set: the portable definitions, the reference every other set is tested against
//! and what every set starts from.

use super::{AccOps, Dots, GemvKinds, Kernels, VecF};
use crate::simd::Level;

pub(super) fn table() -> Kernels {
    Kernels { set: Level::Scalar, vec: VecF::SCALAR, acc: AccOps::scalar(), dot: Dots::SCALAR, gemv: GemvKinds::ROWS }
}
