//! The graph as the planner sees it: tensors numbered in first-use order, with only what decides
//! where they go (views, in-place eligibility, input/output flags, size and layout, whether the
//! memory is already somebody's). Built from a `ggml_cgraph` (or the scheduler's graph) by `gallocr`; pure
//! data, so the planner and its tests need no ggml.

use crate::MAX_DIMS;
use crate::MAX_SRC as GGML_MAX_SRC;
use crate::dyn_tallocr::Addr;

/// What decides in-place compatibility of a tensor: type (`ggml_type`), shape and strides. A plain
/// copy of the tensor's fields: equal layouts are all the planner asks of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Layout {
    pub type_: i32,
    pub ne: [i64; MAX_DIMS],
    pub nb: [usize; MAX_DIMS],
}

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
    /// carried over from an earlier graph; the index of its `Pin` in `GraphModel::pins`
    Pinned(u32),
}

/// Where a pinned tensor lives: `alloc` is the allocator index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pin {
    pub tensor: Tid,
    pub alloc: usize,
    pub addr: Addr,
    pub size: usize,
}

/// What the planner reads of a tensor at every step, kept small (a graph has thousands); the
/// layout, needed only to decide in-place reuse, is in `GraphModel::layouts`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorDesc {
    /// the view source: views never get memory of their own, they keep their source alive
    pub view_of: Option<Tid>,
    /// `ggml_nbytes`: the size in buffer types that do not pad
    pub nbytes: usize,
    pub presence: Presence,
    pub input: bool,
    pub output: bool,
    /// the op may write its result over an operand (`ggml_op_can_inplace`)
    pub inplace_op: bool,
    /// op NONE: in the node list, upstream uses op-NONE views as "keep alive" markers
    pub op_none: bool,
}

/// The sources of a node by slot (`ggml_tensor::src`), NONE for empty slots (a repeated source
/// appears repeatedly). A fixed array: graphs have thousands of nodes, and this is rebuilt often;
/// `len` is one past the last slot in use (most nodes use the first two or three).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SrcList {
    ids: [u32; GGML_MAX_SRC],
    len: u8,
}

impl Default for SrcList {
    fn default() -> SrcList {
        SrcList { ids: [SrcList::NONE; GGML_MAX_SRC], len: 0 }
    }
}

impl SrcList {
    pub const NONE: u32 = u32::MAX;

    /// Puts `t` in the first empty slot.
    #[inline]
    pub fn push(&mut self, t: Tid) {
        let free = self.ids.iter().position(|&s| s == SrcList::NONE).expect("at most GGML_MAX_SRC sources");
        self.set(free, t);
    }

    /// Puts `t` in slot `j`.
    #[inline]
    pub fn set(&mut self, j: usize, t: Tid) {
        self.ids[j] = t as u32;
        self.len = self.len.max(j as u8 + 1);
    }

    /// The slots, NONE where empty.
    #[inline]
    pub fn slots(&self) -> &[u32; GGML_MAX_SRC] {
        &self.ids
    }

    /// The slots up to the last one in use, NONE where empty.
    #[inline]
    pub fn used_slots(&self) -> &[u32] {
        &self.ids[..self.len as usize]
    }

    /// The sources in slot order, empty slots skipped.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = Tid> + '_ {
        self.used_slots().iter().filter(|&&t| t != SrcList::NONE).map(|&t| t as Tid)
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
    /// per tensor: type, shape and strides (in-place reuse needs equal layouts)
    pub layouts: Vec<Layout>,
    /// the pinned tensors (see `Presence::Pinned`)
    pub pins: Vec<Pin>,
    /// (tensor, buffer id) in graph order
    pub leafs: Vec<(Tid, usize)>,
    pub nodes: Vec<NodeDesc>,
}

// the model's largest arrays, kept for the next model built on this thread (see `crate::spare`)
crate::spare!(pub descs_spare: Vec<TensorDesc>);
crate::spare!(pub layouts_spare: Vec<Layout>);
crate::spare!(pub nodes_spare: Vec<NodeDesc>);

impl GraphModel {
    /// Adds a tensor: its description and layout.
    #[inline]
    pub fn push_tensor(&mut self, desc: TensorDesc, layout: Layout) -> Tid {
        self.tensors.push(desc);
        self.layouts.push(layout);
        self.tensors.len() - 1
    }

    /// Whether `t` is computed by a node of this graph (as opposed to only read).
    #[inline]
    pub fn node_tensors(&self) -> Vec<bool> {
        let mut is_node = vec![false; self.tensors.len()];
        for n in &self.nodes {
            is_node[n.tensor] = true;
        }
        is_node
    }
}
