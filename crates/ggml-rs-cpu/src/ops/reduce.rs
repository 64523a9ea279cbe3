//! Family `reduce`: SUM, SUM_ROWS, MEAN, ARGMAX, COUNT_EQUAL, REPEAT, REPEAT_BACK, CONCAT, ARGSORT, TOP_K, CUMSUM, ARANGE, PAD.

use super::{Exec, Family, Node, OpError};

pub const FAMILY: Family = Family { name: "reduce", ops: &[], supports, compute };

fn supports(_node: &Node) -> bool {
    false
}

fn compute(node: &Node, _exec: &mut Exec) -> Result<(), OpError> {
    Err(OpError::new(node, "the reduce family computes nothing yet"))
}
