//! Which ops may write their result over an operand (upstream's `ggml_op_can_inplace`). Backends
//! must not use restrict pointers for these ops.

use crate::ggml::sys::{ggml_op, op::*};

pub fn op_can_inplace(op: ggml_op) -> bool {
    // ggml 0.9.8's list has no CLAMP
    #[cfg(feature = "abi-0-9-8")]
    if op == CLAMP {
        return false;
    }
    matches!(
        op,
        FILL | SCALE
            | DIAG_MASK_ZERO
            | DIAG_MASK_INF
            | ADD
            | ADD_ID
            | ADD1
            | SUB
            | MUL
            | DIV
            | SQR
            | SQRT
            | LOG
            | UNARY
            | ROPE
            | ROPE_BACK
            | SILU_BACK
            | RMS_NORM
            | RMS_NORM_BACK
            | CLAMP
            | SOFT_MAX
            | SOFT_MAX_BACK
    )
}
