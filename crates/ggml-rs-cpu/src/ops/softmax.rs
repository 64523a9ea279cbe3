//! Family `softmax`: SOFT_MAX (mask F16/F32, scale, ALiBi max_bias, sinks), SOFT_MAX_BACK.

use super::{Exec, Family, Node, OpError};

pub const FAMILY: Family = Family { name: "softmax", ops: &[], supports, compute };

fn supports(_node: &Node) -> bool {
    false
}

fn compute(node: &Node, _exec: &mut Exec) -> Result<(), OpError> {
    Err(OpError::new(node, "the softmax family computes nothing yet"))
}
