//! Family `copy`: DUP, CPY, CONT, SET, GET_ROWS, GET_ROWS_BACK, SET_ROWS, DIAG_MASK_INF/ZERO; conversions between F32, F16, BF16, I32 and the quantized types.

use super::{Exec, Family, Node, OpError};

pub const FAMILY: Family = Family { name: "copy", ops: &[], supports, compute };

fn supports(_node: &Node) -> bool {
    false
}

fn compute(node: &Node, _exec: &mut Exec) -> Result<(), OpError> {
    Err(OpError::new(node, "the copy family computes nothing yet"))
}
