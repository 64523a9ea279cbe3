//! Cutting an assigned graph into splits, on plain data: consecutive nodes on one backend, and
//! the sources each split must have copied in because its backend cannot read them where they
//! are. A source copied to a backend once is copied once per graph: later splits on that backend
//! read the same copy. A node reading weights that sit on another backend its own cannot read
//! starts a new split when the current one already copies something in, so that the memory of
//! the copies made so far can be reused.
//!
//! ggml-rs makes the copy tensors, points the sources at them while a split runs, and builds the
//! graph the allocator plans from the result.

use crate::MAX_SRC;
use crate::addr_map::AddrMap;
use crate::assign::{Assigner, NONE, Oracle};

/// One split: nodes `i_start..i_end` of the node list, run on `backend`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitModel {
    pub backend: usize,
    pub i_start: usize,
    pub i_end: usize,
    /// the sources (tensor ids) first copied to this backend in this split, in order of first use
    pub inputs: Vec<u32>,
    /// every source read through a copy: node position, source slot, the source
    pub reads: Vec<CopyRead>,
}

/// A node of the split reads source slot `slot` through the copy of `src` on the split's backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyRead {
    pub node: usize,
    pub slot: usize,
    pub src: u32,
}

/// A tensor the assignment left without a backend (it assigns every node and source).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitError {
    NodeWithoutBackend { node: u32 },
    SourceWithoutBackend { node: u32, src: u32 },
}

/// The splits of the graph `asg` assigned. `stored_as_weights(t)`: whether the buffer that holds
/// `t`'s bytes for this graph is a buffer of weights.
pub fn cut<O: Oracle>(asg: &Assigner<'_, O>, stored_as_weights: impl Fn(u32) -> bool) -> Result<Vec<SplitModel>, SplitError> {
    let g = asg.graph;
    let ids = &asg.ids;
    // (source, backend) pairs copied so far, as `copy_key`
    let mut copied: AddrMap<()> = AddrMap::default();
    let mut splits = Vec::new();
    let first = g.nodes.iter().position(|&n| !asg.oracle.is_view_op(n));
    let mut cur =
        SplitModel { backend: first.map(|i| ids[g.nodes[i] as usize]).unwrap_or(0) as usize, i_start: 0, i_end: 0, inputs: Vec::new(), reads: Vec::new() };
    for (i, &n) in g.nodes.iter().enumerate() {
        if asg.oracle.is_view_op(n) {
            continue;
        }
        let node_b = ids[n as usize];
        if node_b == -1 {
            return Err(SplitError::NodeWithoutBackend { node: n });
        }
        let node_b = node_b as usize;

        let mut new_split = false;
        if node_b == cur.backend && !cur.inputs.is_empty() {
            new_split = g.srcs[i]
                .iter()
                .filter(|&&s| s != NONE)
                .any(|&s| stored_as_weights(s) && ids[s as usize] != cur.backend as i32 && !asg.buffer_supported(s, cur.backend));
        }
        if node_b != cur.backend || new_split {
            let next = SplitModel { backend: node_b, i_start: i, i_end: 0, inputs: Vec::new(), reads: Vec::new() };
            let mut done = std::mem::replace(&mut cur, next);
            done.i_end = i;
            splits.push(done);
        }

        for (slot, &s) in g.srcs[i].iter().enumerate().take(MAX_SRC) {
            if s == NONE {
                continue;
            }
            let sb = ids[s as usize];
            if sb == -1 {
                return Err(SplitError::SourceWithoutBackend { node: n, src: s });
            }
            if sb as usize == cur.backend || asg.buffer_supported(s, cur.backend) {
                continue;
            }
            if copied.insert(copy_key(s, cur.backend), ()).is_none() {
                cur.inputs.push(s);
            }
            cur.reads.push(CopyRead { node: i, slot, src: s });
        }
    }
    cur.i_end = g.nodes.len();
    splits.push(cur);
    if first.is_none() {
        // a graph of views only: one empty split on the first backend, as upstream
        splits.truncate(1);
    }
    Ok(splits)
}

/// One number for a (source, backend) pair: backends are fewer than 32.
#[inline]
pub fn copy_key(src: u32, backend: usize) -> usize {
    ((src as usize) << 5) | backend
}
