//! Allocating again a graph that has not changed since the scheduler last allocated it.
//!
//! `reset` + `alloc_graph` of the same graph is the common loop of programs that do not keep their
//! graph allocated (whisper.cpp, stable-diffusion.cpp, llama.cpp with graph reuse off). When the
//! graph has the same nodes and leafs, and every header of every tensor the last allocation
//! touched (the caller's tensors and the scheduler's copies) is byte for byte what that
//! allocation left, the backend assignment, the splits and the plan would come out the same: the
//! scheduler takes them over and only resets the compute buffers, as the allocator's replay does.
//! Anything that differs, however small (a view offset, a flag, a user assignment, a buffer
//! freed and another allocated at its address), goes the whole way.
//!
//! Backends' `supports_op`, `offload_op` and `supports_buft` answers are taken to depend only on
//! the tensors and buffer types they are asked about, as upstream's scheduler also assumes when
//! it asks them once per tensor.

use crate::alloc::gallocr::AllocatorState;
use crate::ggml::abi_impl::ggml_backend_buffer_type;
use crate::ggml::handles::Buffer;
use crate::ggml::snapshot::HeaderSnapshot;
use crate::ggml::sys::BufferUsage;
use crate::ggml::tensor::TensorRef;
use ggml_plan::addr_map::AddrMap;

pub struct AllocMemo {
    nodes: Vec<TensorRef>,
    leafs: Vec<TensorRef>,
    tensors: HeaderSnapshot,
    /// every buffer a tensor points at, with the type and usage it had
    buffers: Vec<(Buffer, *mut ggml_backend_buffer_type, BufferUsage)>,
    user: AddrMap<usize>,
    cur_copy: usize,
    /// the allocator's state right after the allocation: the memo holds only while nothing else
    /// was allocated or planned (the allocator checks, `Gallocr::can_repeat`)
    allocator: AllocatorState,
}

/// What a memo is checked against: the graph and the scheduler's state at `alloc_graph`.
pub struct AllocRequest<'a> {
    pub nodes: &'a [TensorRef],
    pub leafs: &'a [TensorRef],
    pub user: &'a AddrMap<usize>,
    pub cur_copy: usize,
}

impl AllocMemo {
    /// The state right after allocating `req`'s graph, whose plan touched `tensors`: first the
    /// graph's nodes and leafs and the scheduler's own tensors, then the others (sources and view
    /// sources outside the lists), each after a tensor that points at it. `allocator`: the
    /// allocator's state then.
    pub fn take(req: &AllocRequest, tensors: impl IntoIterator<Item = TensorRef>, allocator: AllocatorState) -> AllocMemo {
        let tensors = HeaderSnapshot::take(tensors);
        let mut buffers: Vec<(Buffer, *mut ggml_backend_buffer_type, BufferUsage)> = Vec::new();
        let mut last = None;
        for b in tensors.tensors().iter().filter_map(|t| t.buffer()) {
            if last != Some(b) && !buffers.iter().any(|e| e.0 == b) {
                buffers.push((b, b.buft_ptr(), b.usage()));
            }
            last = Some(b);
        }
        AllocMemo { nodes: req.nodes.to_vec(), leafs: req.leafs.to_vec(), tensors, buffers, user: req.user.clone(), cur_copy: req.cur_copy, allocator }
    }

    /// Whether allocating `req` would do exactly what the memorised allocation did, given that
    /// the allocator is as it was (`allocator`).
    pub fn holds_for(&self, req: &AllocRequest) -> bool {
        // pointers first, then headers in the order `take` was given (each tensor named by a
        // header already found unchanged), then the buffers those headers name: nothing is read
        // through a pointer the caller's graph no longer vouches for
        req.cur_copy == self.cur_copy
            && req.nodes == &self.nodes[..]
            && req.leafs == &self.leafs[..]
            && *req.user == self.user
            && self.tensors.holds()
            && self.buffers.iter().all(|&(b, buft, usage)| b.buft_ptr() == buft && b.usage() == usage)
    }

    /// The allocator's state right after the memorised allocation.
    pub fn allocator(&self) -> AllocatorState {
        self.allocator
    }

    /// The allocation was repeated: the allocator moved on by one allocation.
    pub fn repeated(&mut self, allocator: AllocatorState) {
        self.allocator = allocator;
    }
}
