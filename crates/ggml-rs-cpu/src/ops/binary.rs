//! Family `binary`: ADD, SUB, MUL, DIV (broadcast of src1 over dst), ADD1, ADD_ID, ACC, SCALE, CLAMP, SQR, SQRT, LOG, SIN, COS, LEAKY_RELU, FILL.

use super::{Exec, Family, Node, OpError};

pub const FAMILY: Family = Family { name: "binary", ops: &[], supports, compute };

fn supports(_node: &Node) -> bool {
    false
}

fn compute(node: &Node, _exec: &mut Exec) -> Result<(), OpError> {
    Err(OpError::new(node, "the binary family computes nothing yet"))
}
