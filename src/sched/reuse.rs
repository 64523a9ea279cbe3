//! Splitting again a graph built anew with the same structure as the last one split.
//!
//! llama.cpp, whisper.cpp and stable-diffusion.cpp build a new graph object for every evaluation,
//! in the same context memory: the same tensors at the same addresses, written afresh (no data,
//! no buffer), with the same ops, shapes, sources and views. The backend assignment, the splits,
//! the copies and the allocator's graph depend only on what the passes read: the tensors' headers
//! (the passes and the backends' `supports_op` / `offload_op` see nothing else), where the
//! allocator says their bytes are, the buffers those headers name, the user's assignments and the
//! pipeline copy. When all of that is byte for byte what it was when the plan was made, the plan
//! is the plan the passes would make again: the scheduler keeps it, puts its own tensors (split
//! input copies, keep-alive markers) back as the plan made them, and lets the allocator place the
//! graph as usual. Anything that differs (a shape, an op, an op parameter, a view offset, a flag,
//! a source, a name, a buffer, a user assignment) goes the whole way.
//!
//! Unlike `memo` (an unchanged graph, allocation included), this holds before allocation: it is
//! compared with the headers as they were when the last split began, not as it left them.
//!
//! Backends' `supports_op`, `offload_op`, `supports_buft` and `graph_optimize` answers are taken
//! to depend only on the tensors and buffer types they are given (see `memo`).

use crate::alloc::gallocr::Residence;
use crate::ggml::abi_impl::ggml_backend_buffer_type;
use crate::ggml::graph::ViewContext;
use crate::ggml::handles::Buffer;
use crate::ggml::snapshot::HeaderSnapshot;
use crate::ggml::sys::BufferUsage;
use crate::ggml::tensor::{Header, TensorRef};
use crate::sched::index::GraphIndex;
use ggml_plan::addr_map::AddrMap;

pub struct PlanMemo {
    nodes: Vec<TensorRef>,
    leafs: Vec<TensorRef>,
    /// every tensor of the plan's index, listed ones first, as the split read them
    tensors: HeaderSnapshot,
    /// where the allocator said the bytes of every tensor with a buffer were (by dense id)
    places: Vec<(u32, Residence)>,
    /// every buffer a tensor pointed at, with the type and usage it had
    buffers: Vec<(Buffer, *mut ggml_backend_buffer_type, BufferUsage)>,
    user: AddrMap<usize>,
    cur_copy: usize,
    /// the graph memory the split graphs' views borrow (use counts, hash set)
    view_ctx: ViewContext,
    /// the scheduler's own tensors as the split left them (before allocation)
    pool: Vec<Header>,
    /// the plan's assignments as the split made them
    ids: Vec<i32>,
}

/// What a plan memo is checked against: the graph and the scheduler's state at `split_graph`.
pub struct PlanRequest<'a> {
    pub nodes: &'a [TensorRef],
    pub leafs: &'a [TensorRef],
    pub user: &'a AddrMap<usize>,
    pub cur_copy: usize,
    pub view_ctx: &'a ViewContext,
}

impl PlanMemo {
    /// The inputs of the split just made: `headers`, taken of `ix`'s tensors (listed first, see
    /// `listed_first`) before any pass ran; the index's places as `residence` says now; `pool`,
    /// the scheduler's tensors as the split left them; `ids`, the assignments it made.
    pub fn take(
        req: &PlanRequest,
        ix: &GraphIndex,
        headers: HeaderSnapshot,
        residence: impl Fn(TensorRef) -> Residence,
        pool: Vec<Header>,
        ids: &[i32],
    ) -> PlanMemo {
        let mut places = Vec::new();
        let mut buffers: Vec<(Buffer, *mut ggml_backend_buffer_type, BufferUsage)> = Vec::new();
        let mut last = None;
        for (i, &t) in ix.tensors.iter().enumerate() {
            let Some(b) = t.buffer() else { continue };
            places.push((i as u32, residence(t)));
            if last != Some(b) && !buffers.iter().any(|e| e.0 == b) {
                buffers.push((b, b.buft_ptr(), b.usage()));
            }
            last = Some(b);
        }
        PlanMemo {
            nodes: req.nodes.to_vec(),
            leafs: req.leafs.to_vec(),
            tensors: headers,
            places,
            buffers,
            user: req.user.clone(),
            cur_copy: req.cur_copy,
            view_ctx: req.view_ctx.clone(),
            pool,
            ids: ids.to_vec(),
        }
    }

    /// `ix`'s tensors in the order a memo compares them: the graph's nodes and leafs (which the
    /// caller's graph vouches for), then the others newest first (each named by a tensor
    /// compared before it: a view source is numbered before its view).
    pub fn listed_first<'a>(req: &'a PlanRequest, ix: &'a GraphIndex) -> impl Iterator<Item = TensorRef> + 'a {
        req.nodes.iter().chain(req.leafs).copied().chain(ix.loose.iter().rev().map(|&t| ix.tensor(t)))
    }

    /// Whether splitting `req`'s graph would make the plan this memo was taken with (`ix`: that
    /// plan's index), the allocator answering `residence`.
    pub fn holds_for(&self, req: &PlanRequest, ix: &GraphIndex, residence: impl Fn(TensorRef) -> Residence) -> bool {
        // pointers first, then headers (each tensor named by one already found unchanged), then
        // what the headers point at
        req.cur_copy == self.cur_copy
            && *req.view_ctx == self.view_ctx
            && req.nodes == &self.nodes[..]
            && req.leafs == &self.leafs[..]
            && *req.user == self.user
            && self.tensors.holds()
            && self.buffers.iter().all(|&(b, buft, usage)| b.buft_ptr() == buft && b.usage() == usage)
            && self.places.iter().all(|&(i, place)| residence(ix.tensor(i)) == place)
    }

    /// Puts back the assignments the split made (`set_tensor_backend` writes into the plan).
    pub fn restore_ids(&self, ids: &mut [i32]) {
        if ids != &self.ids[..] {
            ids.copy_from_slice(&self.ids);
        }
    }

    /// The scheduler's tensors as the split left them.
    pub fn pool(&self) -> &[Header] {
        &self.pool
    }
}
