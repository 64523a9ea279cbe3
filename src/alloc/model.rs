//! The graph as the planner sees it: tensors numbered in first-use order, with only what decides
//! where they go (views, in-place eligibility, input/output flags, layout, whether the memory is
//! already somebody's). Built from a `ggml_cgraph` (or the scheduler's graph) by `gallocr`; pure
//! data, so the planner and its tests need no ggml.

use crate::alloc::dyn_tallocr::Addr;
use crate::ggml::sys::GGML_MAX_SRC;
use crate::ggml::tensor::Layout;

/// Index of a tensor in a [`GraphModel`].
pub type Tid = usize;

/// Where a tensor's memory comes from before planning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Presence {
    /// needs memory from this allocator
    Fresh,
    /// already lives somewhere the allocator does not manage (weights, caller buffers)
    External,
    /// lives in this allocator's memory at a fixed place and its bytes must survive: a result
    /// carried over from an earlier graph. `alloc` is the allocator index.
    Pinned { alloc: usize, addr: Addr, size: usize },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorDesc {
    /// the view source: views never get memory of their own, they keep their source alive
    pub view_of: Option<Tid>,
    pub input: bool,
    pub output: bool,
    /// the op may write its result over an operand (`ggml_op_can_inplace`)
    pub inplace_op: bool,
    /// op NONE: in the node list, upstream uses op-NONE views as "keep alive" markers
    pub op_none: bool,
    pub layout: Layout,
    pub presence: Presence,
}

/// The sources of a node in order, without the NULL slots (a repeated source appears
/// repeatedly). A fixed array: graphs have thousands of nodes, and this is rebuilt often.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SrcList {
    ids: [u32; GGML_MAX_SRC],
    len: u8,
}

impl SrcList {
    pub fn push(&mut self, t: Tid) {
        self.ids[self.len as usize] = t as u32;
        self.len += 1;
    }

    pub fn iter(&self) -> impl Iterator<Item = Tid> + '_ {
        self.ids[..self.len as usize].iter().map(|&t| t as Tid)
    }

    pub fn truncate(&mut self, n: usize) {
        self.len = self.len.min(n as u8);
    }
}

impl From<&[Tid]> for SrcList {
    fn from(srcs: &[Tid]) -> SrcList {
        let mut l = SrcList::default();
        for &s in srcs {
            l.push(s);
        }
        l
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeDesc {
    pub tensor: Tid,
    pub srcs: SrcList,
    pub buffer_id: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GraphModel {
    pub tensors: Vec<TensorDesc>,
    /// (tensor, buffer id) in graph order
    pub leafs: Vec<(Tid, usize)>,
    pub nodes: Vec<NodeDesc>,
}

impl GraphModel {
    pub fn is_view(&self, t: Tid) -> bool {
        self.tensors[t].view_of.is_some()
    }

    /// Whether `t` is computed by a node of this graph (as opposed to only read).
    pub fn node_tensors(&self) -> Vec<bool> {
        let mut is_node = vec![false; self.tensors.len()];
        for n in &self.nodes {
            is_node[n.tensor] = true;
        }
        is_node
    }
}
