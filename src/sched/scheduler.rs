//! `ggml_backend_sched`: several backends used together on one graph. Owns the backend
//! assignment state, the split plan of the current graph, the graph allocator for the compute
//! buffers (one buffer id per backend), and the events of pipeline parallelism.
//!
//! Differences from upstream, on purpose:
//! - the caller's graph is never written (sources, flags, order, uid): copies are swapped in only
//!   while a split is computed, split node lists are our own, pipeline flags live in a side table;
//!   so `reset` + `alloc_graph` of the same graph works any number of times;
//! - `graph_compute` refuses, with a message, a graph other than the one allocated (upstream
//!   silently computes the allocated one);
//! - a result read by a later graph keeps its memory, or allocation fails naming it
//!   (see `alloc::gallocr`);
//! - a `false` from the eval callback stops the whole compute, as the header documents (upstream
//!   only leaves the current split);
//! - `graph_compute` after a `reserve` or `split_graph` of another graph that came after
//!   `alloc_graph` is refused (upstream allocates anew inside the compute and reads inputs that
//!   are gone, or runs the other graph's splits);
//! - a graph reading a computed tensor that is in neither of its lists is not allocated (see
//!   `alloc::unlisted`);
//! - a compute buffer that cannot be allocated is tried once more with any number of backends
//!   (upstream: only with one, where its allocator's own attempt comes first), with a warning.

use std::cell::RefCell;
use std::ffi::c_void;

use crate::alloc::gallocr::report::{self, SchedContext};
use crate::alloc::gallocr::{AllocError, Gallocr, GraphInput};
use crate::alloc::unlisted;
use crate::backend::buffer::buffer_is_host;
use crate::backend::stream::{default_buffer_type, event_new};
use crate::ggml::abi_backend::ggml_backend_sched_eval_callback;
use crate::ggml::abi_impl::ggml_backend_buffer_type;
use crate::ggml::graph::{GraphRef, next_graph_uid};
use crate::ggml::handles::{Backend, Buffer, BufferType, Event};
use crate::ggml::snapshot::HeaderSnapshot;
use crate::ggml::sys::{self, GGML_STATUS_ALLOC_FAILED, GGML_STATUS_FAILED, ggml_status};
use crate::ggml::tensor::TensorRef;
use crate::sched::assign::Backends;
use crate::sched::compute::{ComputeCtx, Substituted};
use crate::sched::debug;
use crate::sched::index::GraphIndex;
use crate::sched::memo::{AllocMemo, AllocRequest};
use crate::sched::reuse::{PlanMemo, PlanRequest};
use crate::sched::splits::{Preset, SplitParams, SplitPlan, TensorPool, split_graph};
use ggml_plan::addr_map::AddrMap;
use ggml_plan::report::{Report, SplitReport};

pub const MAX_BACKENDS: usize = 16;
pub const MAX_COPIES: usize = crate::config::SCHED_MAX_COPIES;

/// The scheduler's backends as the assignment passes see them (supports_buft answers cached:
/// they depend only on the pair).
pub struct SchedBackends {
    pub backends: Vec<Backend>,
    pub bufts: Vec<BufferType>,
    names: Vec<String>,
    /// supports_buft answers: (buffer type, one answer per backend, -1 unknown)
    buft_support: RefCell<Vec<(usize, [i8; MAX_BACKENDS])>>,
}

impl Backends for SchedBackends {
    fn n(&self) -> usize {
        self.backends.len()
    }
    fn name(&self, b: usize) -> String {
        self.names[b].clone()
    }
    fn supports_op(&self, b: usize, t: TensorRef) -> bool {
        self.backends[b].device().supports_op(t)
    }
    fn supports_buft(&self, b: usize, buft: *mut ggml_backend_buffer_type) -> bool {
        let mut cache = self.buft_support.borrow_mut();
        let k = match cache.iter().position(|e| e.0 == buft as usize) {
            Some(k) => k,
            None => {
                cache.push((buft as usize, [-1; MAX_BACKENDS]));
                cache.len() - 1
            }
        };
        if cache[k].1[b] < 0 {
            cache[k].1[b] = self.backends[b].device().supports_buft(buft) as i8;
        }
        cache[k].1[b] == 1
    }
    fn offload_op(&self, b: usize, t: TensorRef) -> bool {
        self.backends[b].device().offload_op(t.as_ptr()).unwrap_or(false)
    }
    fn buft(&self, b: usize) -> *mut ggml_backend_buffer_type {
        self.bufts[b].as_ptr()
    }
    fn buffer_is_host(&self, buffer: Buffer) -> bool {
        buffer_is_host(buffer)
    }
}

/// Which graph is allocated: computing another one is refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct GraphIdentity {
    n_nodes: usize,
    n_leafs: usize,
    nodes_hash: u64,
}

impl GraphIdentity {
    fn of(graph: GraphRef) -> GraphIdentity {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &p in graph.node_ptrs().iter().chain(graph.leaf_ptrs()) {
            h = (h ^ p as u64).wrapping_mul(0x100_0000_01b3);
        }
        GraphIdentity { n_nodes: graph.n_nodes(), n_leafs: graph.n_leafs(), nodes_hash: h }
    }
}

pub struct Sched {
    pub be: SchedBackends,
    galloc: Gallocr,
    n_copies: usize,
    cur_copy: usize,
    next_copy: usize,
    /// events[backend][copy], pipeline parallelism only
    events: Vec<Vec<Option<Event>>>,
    op_offload: bool,
    debug: i32,
    debug_realloc: i32,
    callback: ggml_backend_sched_eval_callback,
    callback_data: *mut c_void,
    is_reset: bool,
    is_alloc: bool,
    /// set_tensor_backend, kept until reset
    user_ids: AddrMap<usize>,
    plan: Option<SplitPlan>,
    /// whether `plan`'s assignments are still in force (cleared by reset)
    plan_assigned: bool,
    n_splits: usize,
    pool: TensorPool,
    allocated: Option<GraphIdentity>,
    /// a reserve or split of another graph came between alloc_graph and graph_compute (the
    /// function's name): the allocated graph's tensors may lie in memory given to others, and
    /// computing it is refused (cleared by reset and alloc_graph)
    lost_to: Option<&'static str>,
    /// a reserve or split of the allocated graph itself came in between: its inputs and where
    /// they were, to check that the compute's new allocation puts them in the same places
    inputs_before_replan: Option<InputPlaces>,
    prev_buft_ids: (Vec<usize>, Vec<usize>),
    /// the split (counted by `n_split_graphs`) whose allocator graph `prev_buft_ids` were read
    /// from: a plan kept since has the same ones
    prev_buft_ids_of: u64,
    graph_size: (usize, usize),
    dump_dir: Option<String>,
    /// the last allocation, to repeat while nothing changes (see `memo`); None when off
    memo: Option<AllocMemo>,
    memo_on: bool,
    /// consecutive memos that did not hold, and allocations left before the next one is taken:
    /// a program whose graphs always change (new views, new offsets) stops paying for memos
    memo_misses: u32,
    memo_skip: u32,
    /// the graph of the last allocation that went the whole way (not cleared by reset)
    last_allocated: Option<GraphIdentity>,
    /// what the current split plan was made from, to keep it for a graph built anew with the
    /// same structure (see `reuse`); None when off, or when the plan was changed since
    plan_memo: Option<PlanMemo>,
    /// graphs assigned and split, allocations repeated from the memo, and split plans kept for a
    /// graph of the same structure (tests, benchmarks)
    pub n_split_graphs: u64,
    pub n_repeats: u64,
    pub n_plans_kept: u64,
}

fn env_int(name: &str) -> Option<i32> {
    std::env::var(name).ok().map(|v| v.trim().parse::<i32>().unwrap_or(0))
}

impl Sched {
    pub fn new(backends: Vec<Backend>, bufts: Option<Vec<BufferType>>, parallel: bool, op_offload: bool) -> Sched {
        let n = backends.len();
        crate::ensure!(n > 0 && n <= MAX_BACKENDS, "ggml_backend_sched_new: {n} backends given, 1 to {MAX_BACKENDS} supported");
        for (i, b) in backends.iter().enumerate() {
            crate::ensure!(!b.device_ptr().is_null(), "ggml_backend_sched_new: backends[{i}] ('{}') has no device", b.name());
        }
        let last = backends[n - 1];
        crate::ensure!(
            last.device().dev_type() == sys::DEV_TYPE_CPU,
            "ggml_backend_sched_new: the last backend, backends[{}] ('{}'), must be a CPU backend (the fallback for ops \
             no other backend supports)",
            n - 1,
            last.name()
        );
        let bufts: Vec<BufferType> = match bufts {
            Some(b) => b,
            None => backends.iter().map(|&b| default_buffer_type(b)).collect(),
        };
        for (i, (b, buft)) in backends.iter().zip(&bufts).enumerate() {
            crate::ensure!(
                b.device().supports_buft(buft.as_ptr()),
                "ggml_backend_sched_new: backends[{i}] ('{}') cannot use buffer type bufts[{i}] ('{}')",
                b.name(),
                buft.name()
            );
        }
        let n_copies = if parallel { MAX_COPIES } else { 1 };
        let events = backends
            .iter()
            .map(|&b| (0..n_copies).map(|_| if n_copies > 1 { unsafe { Event::from_raw(event_new(Some(b.device()))) } } else { None }).collect())
            .collect();
        let debug_realloc_default = if cfg!(feature = "sched-no-realloc") { 1 } else { 0 };
        let names = backends.iter().map(|b| b.name()).collect();
        let galloc = Gallocr::new(&bufts);
        let debug = env_int("GGML_SCHED_DEBUG").unwrap_or(0);
        let dump_dir = std::env::var("GGML_RS_SCHED_DUMP").ok().filter(|d| !d.is_empty());
        // debug output and plan dumps are made by the whole way; pipeline copies rotate, so
        // consecutive allocations never repeat
        let memo_on = n_copies == 1 && debug == 0 && dump_dir.is_none() && env_int("GGML_RS_SCHED_MEMO") != Some(0);
        if std::env::var("GGML_RS_LOG").is_ok_and(|v| v != "0") {
            crate::log_info!("ggml-rs {}: scheduler with {n} backend(s), {n_copies} copies (Rust implementation)\n", env!("CARGO_PKG_VERSION"));
        }
        Sched {
            be: SchedBackends { backends, bufts, names, buft_support: RefCell::new(Vec::new()) },
            galloc,
            n_copies,
            cur_copy: 0,
            next_copy: 0,
            events,
            op_offload,
            debug,
            debug_realloc: env_int("GGML_SCHED_DEBUG_REALLOC").unwrap_or(debug_realloc_default),
            callback: None,
            callback_data: std::ptr::null_mut(),
            is_reset: true,
            is_alloc: false,
            user_ids: AddrMap::default(),
            plan: None,
            plan_assigned: false,
            n_splits: 0,
            pool: TensorPool::default(),
            allocated: None,
            lost_to: None,
            inputs_before_replan: None,
            prev_buft_ids: (Vec::new(), Vec::new()),
            prev_buft_ids_of: 0,
            graph_size: (0, 0),
            dump_dir,
            memo: None,
            memo_on,
            memo_misses: 0,
            memo_skip: 0,
            last_allocated: None,
            plan_memo: None,
            n_split_graphs: 0,
            n_repeats: 0,
            n_plans_kept: 0,
        }
    }

    pub fn n_backends(&self) -> usize {
        self.be.backends.len()
    }

    pub fn backend(&self, i: usize) -> Backend {
        crate::ensure!(i < self.n_backends(), "ggml_backend_sched_get_backend: index {i} out of range ({} backends)", self.n_backends());
        self.be.backends[i]
    }

    pub fn backend_index(&self, backend: *mut crate::ggml::abi_impl::ggml_backend, function: &str) -> usize {
        match self.be.backends.iter().position(|b| b.as_ptr() == backend) {
            Some(i) => i,
            None => crate::fatal!("{function}: the backend is not one of the scheduler's"),
        }
    }

    pub fn n_splits(&self) -> usize {
        self.n_splits
    }

    pub fn n_copies(&self) -> usize {
        self.n_copies
    }

    pub fn buffer_type(&self, b: usize) -> BufferType {
        self.be.bufts[b]
    }

    pub fn buffer_size(&self, b: usize) -> usize {
        self.galloc.buffer_size(b)
    }

    pub fn set_eval_callback(&mut self, callback: ggml_backend_sched_eval_callback, data: *mut c_void) {
        self.callback = callback;
        self.callback_data = data;
    }

    pub fn set_tensor_backend(&mut self, node: TensorRef, b: usize) {
        self.user_ids.insert(node.addr(), b);
        if let Some(plan) = &mut self.plan {
            if let Some(i) = plan.ix.get(node) {
                plan.ids[i as usize] = b as i32;
            }
        }
        self.is_reset = false;
    }

    pub fn tensor_backend(&self, node: TensorRef) -> Option<Backend> {
        let from_plan = if self.plan_assigned { self.plan.as_ref().and_then(|p| p.ix.get(node).map(|i| p.ids[i as usize])) } else { None };
        from_plan.filter(|&b| b >= 0).map(|b| b as usize).or_else(|| self.user_ids.get(&node.addr()).copied()).map(|b| self.be.backends[b])
    }

    pub fn reset(&mut self) {
        if !self.is_reset {
            self.user_ids.clear();
            self.plan_assigned = false;
            self.is_reset = true;
        }
        self.is_alloc = false;
        self.allocated = None;
        self.lost_to = None;
        self.inputs_before_replan = None;
    }

    pub fn synchronize(&mut self) {
        for b in &self.be.backends {
            b.synchronize();
        }
        if !self.is_alloc {
            // keep using copy 0 between graphs, so repeated graphs stay identical for backends
            // that cache them (CUDA graphs)
            self.next_copy = 0;
        }
    }

    pub fn split_graph(&mut self, graph: GraphRef) {
        self.memo = None;
        let view_ctx = graph.view_context();
        if self.keep_plan(graph, &view_ctx) {
            return;
        }
        self.plan_memo = None;
        self.n_split_graphs += 1;
        let (nodes, leafs) = (graph.node_slice(), graph.leaf_slice());
        // a plan made without the previous graph's assignments (after a reset) can be kept for a
        // graph of the same structure (see `reuse`); the headers are taken before any pass runs
        let memo_wanted = self.memo_on && !self.plan_assigned;
        let mut headers = None;
        let (previous, previous_ids) = match self.plan.take() {
            Some(p) => (Some(p.ix), self.plan_assigned.then_some(p.ids)),
            None => (None, None),
        };
        let preset = Preset { user: &self.user_ids, previous, previous_ids };
        let params =
            SplitParams { backends: &self.be, handles: &self.be.backends, op_offload: self.op_offload, n_copies: self.n_copies, cur_copy: self.cur_copy };
        let galloc = &self.galloc;
        let user = &self.user_ids;
        let cur_copy = self.cur_copy;
        let on_index = |ix: &GraphIndex| {
            if memo_wanted && !ix.cleared_freed && ix.unlisted.is_none() {
                let req = PlanRequest { nodes, leafs, user, cur_copy, view_ctx: &view_ctx };
                headers = Some(HeaderSnapshot::take(PlanMemo::listed_first(&req, ix)));
            }
        };
        let plan = split_graph(&params, nodes, leafs, preset, |t| galloc.residence(t), &mut self.pool, &view_ctx, on_index);
        if let Some(headers) = headers {
            let req = PlanRequest { nodes, leafs, user: &self.user_ids, cur_copy: self.cur_copy, view_ctx: &view_ctx };
            self.plan_memo = Some(PlanMemo::take(&req, &plan.ix, headers, |t| galloc.residence(t), self.pool.headers(), &plan.ids));
        }
        self.is_reset = false;
        self.n_splits = plan.splits.len();
        if self.debug > 0 {
            debug::print_assignments(&plan, graph, &self.be.names, self.debug);
        }
        if let Some(dir) = &self.dump_dir {
            let seq = self.galloc.seq() + 1;
            let _ = std::fs::create_dir_all(dir);
            let _ = std::fs::write(format!("{dir}/sched-{seq:04}.json"), debug::plan_json(&plan, nodes, &self.be.names, self.n_copies, seq));
            let _ = std::fs::write(format!("{dir}/sched-{seq:04}.dot"), debug::plan_dot(&plan, nodes, &self.be.names));
        }
        let total_inputs: usize = plan.splits.iter().map(|s| s.inputs.len()).sum::<usize>() + plan.graph_inputs.len();
        let size = nodes.len().max(leafs.len()) + total_inputs * 2 * self.n_copies;
        self.graph_size = (self.graph_size.1, size);
        self.plan = Some(plan);
        self.plan_assigned = true;
    }

    pub fn dump_plan(&self, graph: Option<GraphRef>, dot: bool) -> String {
        let Some(plan) = &self.plan else { return String::new() };
        let nodes: Vec<TensorRef> = match graph {
            Some(g) => g.nodes().collect(),
            None => plan.ix.nodes.iter().map(|&i| plan.ix.tensor(i)).collect(),
        };
        if dot { debug::plan_dot(plan, &nodes, &self.be.names) } else { debug::plan_json(plan, &nodes, &self.be.names, self.n_copies, self.galloc.seq()) }
    }

    /// Runs `f` on the plan's allocation graph while its nodes read the split-local copies: the
    /// allocator must see what the backends will read, not the originals.
    fn with_copies<R>(plan: &SplitPlan, f: impl FnOnce(&GraphInput) -> R) -> R {
        let _guards: Vec<Substituted> = plan.splits.iter().map(|s| Substituted::apply(&s.substitutions)).collect();
        let g = &plan.alloc_graph;
        f(&GraphInput { nodes: &g.nodes, node_ids: Some(&g.node_ids), leafs: &g.leafs, leaf_ids: Some(&g.leaf_ids), extra_flags: Some(&g.extra_flags) })
    }

    fn buft_ids(&self, ids: &[i32]) -> Vec<usize> {
        ids.iter().map(|&b| self.be.bufts[b as usize].as_ptr() as usize).collect()
    }

    /// The splits in the allocator's node steps, for the memory plan report.
    fn report_splits(&self) -> Vec<SplitReport> {
        let Some(plan) = &self.plan else { return Vec::new() };
        plan.splits
            .iter()
            .map(|s| SplitReport { backend: self.be.names[s.backend].clone(), first: s.alloc_steps.0 as u32, end: s.alloc_steps.1 as u32 })
            .collect()
    }

    /// With `GGML_RS_ALLOC_REPORT` set, the allocator's next reports carry the splits.
    fn report_context(&mut self) {
        if report::enabled() {
            let splits = self.report_splits();
            self.galloc.set_sched_context(Some(SchedContext { splits }));
        }
    }

    /// The memory plan report of the last allocation or reservation, with the splits; None when
    /// nothing was planned yet.
    pub fn last_report(&self) -> Option<Report> {
        let mut r = self.galloc.last_report()?;
        if !r.kind.starts_with("sched-") {
            r.kind = format!("sched-{}", r.kind);
        }
        r.splits = self.report_splits();
        Some(r)
    }

    fn alloc_splits(&mut self) -> Result<(), AllocError> {
        self.report_context();
        let plan = self.plan.as_ref().expect("split_graph ran");
        // the allocator graph changes only with a new split (a kept plan keeps its buffer ids)
        let same_split = self.prev_buft_ids_of == self.n_split_graphs && self.n_split_graphs > 0;
        let ids = if same_split {
            std::mem::take(&mut self.prev_buft_ids)
        } else {
            (self.buft_ids(&plan.alloc_graph.node_ids), self.buft_ids(&plan.alloc_graph.leaf_ids))
        };
        let changed = !same_split && ids != self.prev_buft_ids;
        let mut allocated = Self::with_copies(plan, |g| self.galloc.alloc_graph(g, true));
        if let Err(AllocError::Backend(why)) = &allocated {
            // upstream's scheduler tries a failed allocation a second time (see README); a
            // buffer that could not be had now may be had once the backends are idle
            crate::log_warn!("ggml_backend_sched_alloc_graph: {why}; trying once more\n");
            for b in &self.be.backends {
                b.synchronize();
            }
            allocated = Self::with_copies(plan, |g| self.galloc.alloc_graph(g, true));
        }
        self.prev_buft_ids = ids;
        self.prev_buft_ids_of = self.n_split_graphs;
        // upstream counts what its allocator cannot place without reserving anew; ggml-rs counts
        // what that is meant to catch: a compute buffer replaced by a larger one (with one backend
        // upstream never counts, its allocator re-plans on its own; a new plan that fits the
        // buffers is no reallocation)
        if allocated?.grew && self.debug_realloc > 0 {
            let unexpected = !changed && self.graph_size.0 == self.graph_size.1;
            if unexpected || self.debug_realloc > 1 {
                crate::fatal!(
                    "ggml_backend_sched_alloc_splits: unexpected graph reallocation (graph size = {}, nodes = {}, leafs = {}), debug_realloc = {}",
                    self.graph_size.1,
                    plan.alloc_graph.nodes.len(),
                    plan.alloc_graph.leafs.len(),
                    self.debug_realloc
                );
            }
        }
        Ok(())
    }

    pub fn alloc_graph(&mut self, graph: GraphRef) -> bool {
        crate::ensure!(!self.is_alloc, "ggml_backend_sched_alloc_graph: a graph is already allocated; call ggml_backend_sched_reset first");
        self.lost_to = None;
        self.cur_copy = self.next_copy;
        self.next_copy = (self.next_copy + 1) % self.n_copies;
        if self.repeat_last(graph) {
            self.is_alloc = true;
            self.allocated = Some(GraphIdentity::of(graph));
            return true;
        }
        // read before anything is placed: a graph built anew has nodes without data
        let placed_before = self.memo_on && self.memo_skip > 0 && graph.node_slice().iter().all(|n| !n.data().is_null());
        self.split_graph(graph);
        if self.refuse_unlisted("ggml_backend_sched_alloc_graph") {
            return false;
        }
        // a new plan may move split inputs: let the backends finish with the old addresses first
        for b in &self.be.backends {
            b.synchronize();
        }
        if let Err(e) = self.alloc_splits() {
            crate::log_error!("ggml_backend_sched_alloc_graph: failed to allocate the graph: {}\n", describe(&e));
            return false;
        }
        self.is_alloc = true;
        let identity = GraphIdentity::of(graph);
        self.allocated = Some(identity);
        // after misses, memos are taken less often; but the graph allocated last handed again
        // with its nodes still placed (not built anew: new tensors come without data) is likely
        // to come again unchanged, so its memo is taken at once: a program that settles on one
        // graph pays the whole way once, not up to 32 times. (Only whether to take a memo; the
        // memo itself is exact.)
        let repeating = placed_before && self.last_allocated == Some(identity);
        self.last_allocated = Some(identity);
        if self.memo_on && self.memo_skip > 0 && !repeating {
            self.memo_skip -= 1;
        } else if self.memo_on {
            self.memo = Some(self.memo_of(graph));
        }
        true
    }

    /// The memo of the allocation of `graph` just made.
    fn memo_of(&self, graph: GraphRef) -> AllocMemo {
        let ix = &self.plan.as_ref().expect("split_graph ran").ix;
        let mut listed = vec![false; ix.len()];
        for &t in ix.nodes.iter().chain(&ix.leafs) {
            listed[t as usize] = true;
        }
        // the listed tensors, then the others newest first: a view source is numbered before
        // the view that names it
        let loose = (0..ix.len()).rev().filter(|&t| !listed[t]).map(|t| ix.tensors[t]);
        let tensors = graph.node_slice().iter().chain(graph.leaf_slice()).copied().chain(self.pool.in_use()).chain(loose);
        AllocMemo::take(&self.alloc_request(&graph), tensors, self.galloc.state())
    }

    fn alloc_request<'a>(&'a self, graph: &'a GraphRef) -> AllocRequest<'a> {
        AllocRequest { nodes: graph.node_slice(), leafs: graph.leaf_slice(), user: &self.user_ids, cur_copy: self.cur_copy }
    }

    /// Repeats the last allocation when `graph` and everything it touched are unchanged
    /// (see `memo`): the same assignments, splits and places, the compute buffers reset.
    fn repeat_last(&mut self, graph: GraphRef) -> bool {
        let Some(memo) = &self.memo else { return false };
        if !self.galloc.can_repeat(memo.allocator()) || !memo.holds_for(&self.alloc_request(&graph)) {
            self.memo_misses = (self.memo_misses + 1).min(6);
            self.memo_skip = (1 << (self.memo_misses - 1)) - 1;
            return false;
        }
        self.galloc.repeat_last();
        self.memo_misses = 0;
        self.n_repeats += 1;
        let state = self.galloc.state();
        self.memo.as_mut().expect("checked").repeated(state);
        // what split_graph leaves behind, as the last one left it
        self.is_reset = false;
        self.plan_assigned = true;
        self.graph_size.0 = self.graph_size.1;
        for split in &mut self.plan.as_mut().expect("a memo has a plan").splits {
            split.graph.set_uid(next_graph_uid());
        }
        true
    }

    /// Keeps the current split plan for `graph` when it is what splitting `graph` would make (see
    /// `reuse`): the scheduler's tensors go back to what the split made them, the split graphs
    /// get new ids, as after a split.
    fn keep_plan(&mut self, graph: GraphRef, view_ctx: &crate::ggml::graph::ViewContext) -> bool {
        let (Some(memo), Some(plan)) = (&self.plan_memo, &mut self.plan) else { return false };
        let req = PlanRequest { nodes: graph.node_slice(), leafs: graph.leaf_slice(), user: &self.user_ids, cur_copy: self.cur_copy, view_ctx };
        let galloc = &self.galloc;
        // a plan still in force (no reset since) was made from another plan's assignments
        if self.plan_assigned || !memo.holds_for(&req, &plan.ix, |t| galloc.residence(t)) {
            return false;
        }
        self.pool.restore(memo.pool());
        // set_tensor_backend writes the plan's assignments too (see there)
        memo.restore_ids(&mut plan.ids);
        for split in &mut plan.splits {
            split.graph.set_uid(next_graph_uid());
        }
        self.n_plans_kept += 1;
        self.is_reset = false;
        self.graph_size.0 = self.graph_size.1;
        self.plan_assigned = true;
        true
    }

    /// `ggml_backend_sched_split_graph`: a new split plan, which ends any allocation (see
    /// `before_replan`).
    pub fn split_graph_only(&mut self, graph: GraphRef) {
        let replan = self.before_replan("ggml_backend_sched_split_graph", graph);
        self.split_graph(graph);
        self.after_replan(replan);
    }

    pub fn reserve(&mut self, measure: GraphRef) -> bool {
        let replan = self.before_replan("ggml_backend_sched_reserve", measure);
        self.synchronize();
        self.split_graph(measure);
        self.report_context();
        let ok = !self.refuse_unlisted("ggml_backend_sched_reserve")
            && Self::with_copies(self.plan.as_ref().expect("split_graph ran"), |g| self.galloc.reserve(g, false)).is_ok();
        self.reset();
        self.after_replan(replan);
        ok
    }

    /// Whether the split plan's graph reads a tensor it never computes (see `alloc::unlisted`),
    /// which `function` then reports, naming both.
    fn refuse_unlisted(&self, function: &str) -> bool {
        let Some((node, src)) = self.plan.as_ref().expect("split_graph ran").ix.unlisted else { return false };
        crate::log_error!("{}\n", unlisted::message(function, node, src));
        true
    }

    /// What a new split plan made by `function` for `measure` does to the graph allocated now:
    /// the plan of another graph takes its memory (or the memory was taken already), so computing
    /// it is refused until it is allocated again; the plan of the same graph puts it back in its
    /// places when the compute allocates it again, which is checked on its inputs.
    fn before_replan(&self, function: &'static str, measure: GraphRef) -> Replan {
        let lost = self.lost_to.or_else(|| (self.is_alloc && self.allocated != Some(GraphIdentity::of(measure))).then_some(function));
        let inputs = (self.is_alloc && lost.is_none()).then(|| {
            let all = measure.leaf_slice().iter().chain(measure.node_slice());
            InputPlaces { graph: GraphIdentity::of(measure), places: all.filter(|t| t.is_input()).map(|&t| (t, t.data() as usize)).collect() }
        });
        Replan { lost, inputs }
    }

    /// The allocation is over (the split plan and the copies are the new plan's); see
    /// `before_replan`.
    fn after_replan(&mut self, replan: Replan) {
        self.is_alloc = false;
        self.allocated = None;
        self.lost_to = replan.lost;
        self.inputs_before_replan = replan.inputs;
    }

    pub fn reserve_size(&mut self, measure: GraphRef) -> Vec<usize> {
        let replan = self.before_replan("ggml_backend_sched_reserve_size", measure);
        self.reset();
        self.after_replan(replan);
        self.synchronize();
        self.split_graph(measure);
        self.report_context();
        let plan = self.plan.as_ref().expect("split_graph ran");
        let reserved = Self::with_copies(plan, |g| self.galloc.reserve(g, true));
        if let Err(e) = reserved {
            crate::fatal!("ggml_backend_sched_reserve_size: {}", describe(&e));
        }
        self.galloc.planned_sizes()
    }

    pub fn graph_compute_async(&mut self, graph: GraphRef) -> ggml_status {
        if let Some(function) = self.lost_to {
            crate::log_error!(
                "ggml_backend_sched_graph_compute: {function} of another graph came after \
                 ggml_backend_sched_alloc_graph, so the allocated graph's tensors (and the inputs set in them) may lie \
                 in memory given to others; call ggml_backend_sched_alloc_graph again and set the inputs before \
                 computing ({} nodes)\n",
                graph.n_nodes()
            );
            return GGML_STATUS_FAILED;
        }
        let inputs_before_replan = self.inputs_before_replan.take();
        if !self.is_reset && !self.is_alloc {
            self.reset();
        }
        if !self.is_alloc {
            if !self.alloc_graph(graph) {
                return GGML_STATUS_ALLOC_FAILED;
            }
            // allocated again after a reserve or split of the same graph: the inputs the caller
            // set must still be where they were (they are, while the plan is the same)
            let kept = inputs_before_replan.filter(|p| p.graph == GraphIdentity::of(graph)).map(|p| p.places);
            if let Some(moved) = kept.iter().flatten().find(|(t, data)| t.data() as usize != *data) {
                crate::log_error!(
                    "ggml_backend_sched_graph_compute: input {} moved when the graph was allocated again after a \
                     reserve or split of it; call ggml_backend_sched_alloc_graph after those and set the inputs\n",
                    moved.0
                );
                return GGML_STATUS_FAILED;
            }
        } else if self.allocated != Some(GraphIdentity::of(graph)) {
            crate::log_error!(
                "ggml_backend_sched_graph_compute: asked to compute a graph ({} nodes) that is not the allocated one; \
                 call ggml_backend_sched_reset and ggml_backend_sched_alloc_graph for it first\n",
                graph.n_nodes()
            );
            return GGML_STATUS_FAILED;
        }
        // an input placed anew after losing its bytes, and not set since (see `alloc::inputs`);
        // checked on the caller's graph: a split may read it through a copy
        if !crate::alloc::inputs::check(graph.nodes(), "ggml_backend_sched_graph_compute") {
            return GGML_STATUS_FAILED;
        }
        let ctx = ComputeCtx {
            backends: &self.be.backends,
            events: &self.events,
            cur_copy: self.cur_copy,
            callback: self.callback,
            callback_data: self.callback_data,
        };
        ctx.run(self.plan.as_mut().expect("allocated"))
    }

    pub fn graph_compute(&mut self, graph: GraphRef) -> ggml_status {
        let status = self.graph_compute_async(graph);
        self.synchronize();
        status
    }
}

/// See `Sched::before_replan`.
struct Replan {
    lost: Option<&'static str>,
    inputs: Option<InputPlaces>,
}

/// The inputs of an allocated graph and where their bytes were (`data`), kept across a reserve
/// or split of that same graph (see `Sched::before_replan`).
struct InputPlaces {
    graph: GraphIdentity,
    places: Vec<(TensorRef, usize)>,
}

fn describe(e: &AllocError) -> String {
    match e {
        AllocError::NeedsReserve => "the graph needs a new plan".to_string(),
        AllocError::Backend(m) | AllocError::Plan(m) | AllocError::LostResult(m) | AllocError::Graph(m) => m.clone(),
    }
}

impl Drop for Sched {
    fn drop(&mut self) {
        for per_backend in &self.events {
            for e in per_backend.iter().flatten() {
                crate::backend::stream::event_free(*e);
            }
        }
    }
}
