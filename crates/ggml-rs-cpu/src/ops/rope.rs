//! Family `rope`: ROPE, ROPE_BACK (normal, NeoX, multi-section, vision; frequency factors; YaRN).

use super::{Exec, Family, Node, OpError};

pub const FAMILY: Family = Family { name: "rope", ops: &[], supports, compute };

fn supports(_node: &Node) -> bool {
    false
}

fn compute(node: &Node, _exec: &mut Exec) -> Result<(), OpError> {
    Err(OpError::new(node, "the rope family computes nothing yet"))
}
