//! Which backend runs each node: the passes are `ggml_plan::assign` (upstream's priorities, pass
//! for pass, on dense ids); this answers their questions from ggml's tensors and the scheduler's
//! backends, and names what fails.

use crate::ggml::abi_impl::ggml_backend_buffer_type;
use crate::ggml::handles::Buffer;
use crate::ggml::sys::{self, op};
use crate::ggml::tensor::TensorRef;
use crate::sched::index::GraphIndex;
use ggml_plan::assign::{AssignError, AssignGraph, Assigner, Oracle};

/// What the passes ask about the scheduler's backends (index = priority, last = CPU).
pub trait Backends {
    fn n(&self) -> usize;
    fn name(&self, b: usize) -> String;
    fn supports_op(&self, b: usize, t: TensorRef) -> bool;
    fn supports_buft(&self, b: usize, buft: *mut ggml_backend_buffer_type) -> bool;
    fn offload_op(&self, b: usize, t: TensorRef) -> bool;
    /// the buffer type the scheduler allocates for backend `b`
    fn buft(&self, b: usize) -> *mut ggml_backend_buffer_type;
    fn buffer_is_host(&self, buffer: Buffer) -> bool;
}

/// The passes' questions, answered from the graph's tensors (by dense id) and the backends.
pub struct SchedOracle<'a, B: Backends> {
    pub ix: &'a GraphIndex,
    pub backends: &'a B,
}

impl<B: Backends> Oracle for SchedOracle<'_, B> {
    type Buft = *mut ggml_backend_buffer_type;

    #[inline]
    fn n_backends(&self) -> usize {
        self.backends.n()
    }
    #[inline]
    fn supports_op(&self, b: usize, t: u32) -> bool {
        self.backends.supports_op(b, self.ix.tensor(t))
    }
    #[inline]
    fn offload_op(&self, b: usize, t: u32) -> bool {
        self.backends.offload_op(b, self.ix.tensor(t))
    }
    #[inline]
    fn supports_buft(&self, b: usize, buft: Self::Buft) -> bool {
        self.backends.supports_buft(b, buft)
    }
    #[inline]
    fn backend_buft(&self, b: usize) -> Option<Self::Buft> {
        Some(self.backends.buft(b)).filter(|p| !p.is_null())
    }
    #[inline]
    fn buft_is_null(&self, buft: Self::Buft) -> bool {
        buft.is_null()
    }
    #[inline]
    fn storage_buft(&self, t: u32) -> Option<Self::Buft> {
        self.ix.storage[t as usize].map(|b| b.buft_ptr())
    }
    #[inline]
    fn is_input(&self, t: u32) -> bool {
        self.ix.tensor(t).is_input()
    }
    #[inline]
    fn is_view_op(&self, t: u32) -> bool {
        self.ix.is_view_op(t)
    }
    #[inline]
    fn follows_weights(&self, t: u32) -> bool {
        let o = self.ix.op(t);
        o != op::ROPE && o != op::FLASH_ATTN_EXT
    }
    #[inline]
    fn in_weights(&self, t: u32) -> bool {
        // where the tensor is for this graph: one pointing into a compute buffer that was freed
        // has no storage, and its buffer must not be read
        self.ix.storage[t as usize].is_some_and(|b| b.usage() == sys::USAGE_WEIGHTS)
    }
    #[inline]
    fn weights_on_host(&self, t: u32) -> bool {
        self.ix.storage[t as usize].is_some_and(|b| self.backends.buffer_is_host(b))
    }
}

/// Assigns a backend to every node and source of `ix`, keeping the assignments already in `ids`
/// (the user's, -1 elsewhere); aborts naming the tensor when there is none, as upstream.
pub fn assign<'a, B: Backends>(ix: &'a GraphIndex, backends: &'a B, op_offload: bool, ids: Vec<i32>) -> Assigner<'a, SchedOracle<'a, B>> {
    let graph = AssignGraph { nodes: &ix.nodes, leafs: &ix.leafs, loose: &ix.loose, srcs: &ix.srcs, view_src: &ix.view_src };
    let mut asg = Assigner { graph, oracle: SchedOracle { ix, backends }, op_offload, ids };
    match asg.run() {
        Ok(()) => asg,
        Err(AssignError::PreallocatedUnsupported { tensor }) => {
            let t = ix.tensor(tensor);
            let buft_name = ix.storage[tensor as usize].and_then(|b| b.buft()).map(|b| b.name()).unwrap_or_default();
            crate::fatal!(
                "pre-allocated tensor {} in a buffer ({}) that cannot run the operation ({}): no backend of the scheduler supports it",
                t,
                buft_name,
                t.op_name()
            );
        }
        Err(AssignError::NoBackend { node }) => {
            let node = ix.tensor(node);
            crate::fatal!(
                "ggml_backend_sched: no backend can run node {} (op {}); the last backend must be a CPU backend that supports it",
                node,
                node.op_name()
            );
        }
    }
}
