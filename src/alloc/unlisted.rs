//! Sources a graph reads but neither lists nor computes: a tensor made by an op (not NONE), with
//! no memory, that is neither a node nor a leaf of the graph (a hand-built graph that left out a
//! node, or a graph view that starts after it). Upstream allocates it like a leaf and never
//! computes it, so the node reading it computes on whatever its memory held; here the allocation
//! fails with a message naming both (the graph allocator and the scheduler).
//!
//! Not reported: tensors with memory (a result of an earlier graph, weights), views (their
//! source is checked instead), and op NONE tensors (the caller's inputs; ggml lets only those be
//! flagged input).

use crate::alloc::model::{NodeDesc, TensorDesc, Tid};
use crate::ggml::tensor::TensorRef;

/// Whether the allocator would place `t` without computing it, where `t` is neither a node nor
/// a leaf of the graph: its header, read once (only for tensors outside the lists, which are rare).
pub fn is_uncomputed(t: TensorRef) -> bool {
    !t.is_view() && t.op() != crate::ggml::sys::op::NONE && t.data().is_null() && t.buffer_ptr().is_null()
}

/// The message for `node` reading `src` (directly or through a view of it).
pub fn message(function: &str, node: TensorRef, src: TensorRef) -> String {
    format!(
        "{function}: node {node} reads tensor {src} (op {}), which is neither a node nor a leaf of the graph and has \
         no memory: it would be allocated but never computed; add it to the graph (ggml_build_forward_expand) before \
         {node}, or give it data",
        src.op_name()
    )
}

/// The graph allocator's check on its numbering: `listed[t]` says whether tensor `t` is a node or
/// a leaf; returns the first (node, source) pair in graph order where the source is not computed.
pub fn find(tensors: &[TensorRef], descs: &[TensorDesc], nodes: &[NodeDesc], listed: &[bool]) -> Option<(Tid, Tid)> {
    let bad: Vec<bool> = (0..tensors.len()).map(|t| !listed[t] && descs[t].view_of.is_none() && is_uncomputed(tensors[t])).collect();
    if !bad.contains(&true) {
        return None;
    }
    nodes.iter().find_map(|n| {
        n.srcs.iter().find_map(|s| {
            let root = descs[s].view_of.unwrap_or(s);
            bad[root].then_some((n.tensor, root))
        })
    })
}
