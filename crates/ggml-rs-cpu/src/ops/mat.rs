//! Family `mat`: MUL_MAT, MUL_MAT_ID, OUT_PROD (activations quantized to the weight type's vec-dot type).

use super::{Exec, Family, Node, OpError};

pub const FAMILY: Family = Family { name: "mat", ops: &[], supports, compute };

fn supports(_node: &Node) -> bool {
    false
}

fn compute(node: &Node, _exec: &mut Exec) -> Result<(), OpError> {
    Err(OpError::new(node, "the mat family computes nothing yet"))
}
