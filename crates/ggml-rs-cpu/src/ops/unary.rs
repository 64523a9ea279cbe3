//! Family `unary`: UNARY (every ggml_unary_op), GLU (SWIGLU, GEGLU, ...), SILU_BACK.

use super::{Exec, Family, Node, OpError};

pub const FAMILY: Family = Family { name: "unary", ops: &[], supports, compute };

fn supports(_node: &Node) -> bool {
    false
}

fn compute(node: &Node, _exec: &mut Exec) -> Result<(), OpError> {
    Err(OpError::new(node, "the unary family computes nothing yet"))
}
