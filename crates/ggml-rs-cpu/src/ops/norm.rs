//! Family `norm`: NORM, RMS_NORM, RMS_NORM_BACK, L2_NORM, GROUP_NORM.

use super::{Exec, Family, Node, OpError};

pub const FAMILY: Family = Family { name: "norm", ops: &[], supports, compute };

fn supports(_node: &Node) -> bool {
    false
}

fn compute(node: &Node, _exec: &mut Exec) -> Result<(), OpError> {
    Err(OpError::new(node, "the norm family computes nothing yet"))
}
