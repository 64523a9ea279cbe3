//! Family `attn`: FLASH_ATTN_EXT (F16/F32/quantized K and V, mask, sinks, soft-cap, ALiBi).

use super::{Exec, Family, Node, OpError};

pub const FAMILY: Family = Family { name: "attn", ops: &[], supports, compute };

fn supports(_node: &Node) -> bool {
    false
}

fn compute(node: &Node, _exec: &mut Exec) -> Result<(), OpError> {
    Err(OpError::new(node, "the attn family computes nothing yet"))
}
