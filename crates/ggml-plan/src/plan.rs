//! The planning pass: walks the graph in execution order, gives every fresh tensor an address
//! and takes it back after its last use, exactly as upstream's ggml-alloc does:
//!
//! - leafs first, then tensors flagged input (before anything is freed, so inputs never overlap);
//! - a node may take over a parent's memory (in place) when its op allows it, the parent is this
//!   plan's own, not an output, has the same layout, and this node is its only remaining reader;
//! - a tensor is freed when its last reader and its last view are done; outputs never are.
//!
//! On top of upstream: memory pinned before planning (results carried over from an earlier graph,
//! see `residency`), a live-bytes lower bound, and an alternative offline placement
//! (`offline::best_placement`, the best of a few greedy orders) that is kept when it needs less
//! memory.

use crate::dyn_tallocr::{Addr, DynAllocator, OutOfChunks};
use crate::model::{GraphModel, Pin, Presence, TensorDesc, Tid};
use crate::offline;

/// Alloc size of tensor `t` in the buffer type of `buffer_id` (the buffer type may pad).
pub trait Sizer {
    fn size(&mut self, t: Tid, buffer_id: usize) -> usize;
}

impl<F: FnMut(Tid, usize) -> usize> Sizer for F {
    fn size(&mut self, t: Tid, buffer_id: usize) -> usize {
        self(t, buffer_id)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Placement {
    pub buffer_id: usize,
    /// allocator index (buffer ids of one buffer type share an allocator)
    pub alloc: usize,
    pub addr: Addr,
    /// the alloc size it was planned with (the most it may grow to on replay)
    pub size: usize,
}

// the placements of a plan, kept for the next plan made on this thread (see `crate::spare`)
crate::spare!(pub placements_spare: Vec<Option<Placement>>);

/// A contiguous allocation and the steps it is live in, `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub alloc: usize,
    pub size: usize,
    pub start: u32,
    pub end: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Planner {
    /// upstream's online placement, offset for offset
    Upstream,
    /// the smallest of upstream's placement and a few offline greedy placements of the same
    /// lifetimes (`offline::best_placement`, greedy-by-size among them), per allocator
    Best,
    /// plain offline greedy-by-size (largest first, smallest fitting gap) of the lifetimes of
    /// upstream's walk, wherever it applies (one chunk, no pins): the reference the benchmark
    /// compares `Best` with
    GreedyBySize,
}

impl Planner {
    pub fn from_env() -> Planner {
        match std::env::var("GGML_RS_ALLOC_PLANNER").as_deref() {
            Ok("upstream") => Planner::Upstream,
            Ok("greedy-by-size") => Planner::GreedyBySize,
            _ => Planner::Best,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// per tensor: where it lives (None: external, pinned, a view, or unused)
    pub placements: Vec<Option<Placement>>,
    /// per tensor: the order in which it was given memory (later writers overwrite earlier ones)
    pub write_order: Vec<Option<u32>>,
    /// per allocator: the size each chunk must have
    pub chunk_sizes: Vec<Vec<usize>>,
    /// per allocator: the most bytes live at once (the lower bound of any placement)
    pub live_peak: Vec<usize>,
    /// per allocator: which placement was kept
    pub offline: Vec<bool>,
}

impl Plan {
    #[inline]
    pub fn total_size(&self, alloc: usize) -> usize {
        self.chunk_sizes.get(alloc).map(|c| c.iter().sum()).unwrap_or(0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError {
    pub alloc: usize,
    pub tensor: Tid,
    pub size: usize,
    pub largest_free: usize,
}

/// What a plan's run tells an observer: which node step it is at, which tensor gets memory,
/// takes over its parent's in place, or gives its memory back. The planner runs with `()`
/// (nothing, compiled away); the memory plan report runs it with [`Lifetimes`].
pub trait Tracer {
    fn node(&mut self, _step: u32) {}
    fn alloc(&mut self, _t: Tid) {}
    fn take_over(&mut self, _t: Tid, _parent: Tid) {}
    fn free(&mut self, _t: Tid) {}
}

impl Tracer for () {}

/// Per tensor, the node steps its own memory is live in (`first..=last`; NONE: never given
/// memory, or for `last`, never given back: live until the graph ends) and, for a tensor computed
/// in place of a source, that source (whose memory it took over at its `first` step).
/// Leafs and inputs are given memory before the first node: step 0.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lifetimes {
    pub first: Vec<u32>,
    pub last: Vec<u32>,
    pub took_from: Vec<Option<Tid>>,
    step: u32,
}

impl Lifetimes {
    pub const NONE: u32 = u32::MAX;

    fn new(n: usize) -> Lifetimes {
        Lifetimes { first: vec![Lifetimes::NONE; n], last: vec![Lifetimes::NONE; n], took_from: vec![None; n], step: 0 }
    }
}

impl Tracer for Lifetimes {
    fn node(&mut self, step: u32) {
        self.step = step;
    }
    fn alloc(&mut self, t: Tid) {
        self.first[t] = self.step;
    }
    fn take_over(&mut self, t: Tid, parent: Tid) {
        self.first[t] = self.step;
        self.last[parent] = self.step;
        self.took_from[t] = Some(parent);
    }
    fn free(&mut self, t: Tid) {
        self.last[t] = self.step;
    }
}

struct Sim<'a, S: Sizer, Tr: Tracer> {
    tracer: &'a mut Tr,
    model: &'a GraphModel,
    alloc_of_id: &'a [usize],
    allocs: &'a mut [DynAllocator],
    sizer: &'a mut S,
    n_children: Vec<i32>,
    n_views: Vec<i32>,
    own: Vec<bool>,
    /// per tensor: needs memory from this allocator (fresh, and not a view)
    placeable: Vec<bool>,
    /// per tensor: its lifetime block in `blocks` (NO_BLOCK: none); in-place children share
    /// their parent's block
    block: Vec<u32>,
    /// where each tensor lives (also the address and buffer id an in-place child takes over)
    placements: Vec<Option<Placement>>,
    write_order: Vec<Option<u32>>,
    writes: u32,
    step: u32,
    blocks: Vec<Block>,
    live: Vec<usize>,
    live_peak: Vec<usize>,
    /// per tensor: the index of the node computing it (NO_NODE: a leaf or an unlisted source)
    node_of: Vec<u32>,
}

const NO_BLOCK: u32 = u32::MAX;
const NO_NODE: u32 = u32::MAX;

impl<S: Sizer, Tr: Tracer> Sim<'_, S, Tr> {
    fn alloc_bytes(&mut self, t: Tid, buffer_id: usize) -> Result<(), PlanError> {
        let a = self.alloc_of_id[buffer_id];
        let size = self.sizer.size(t, buffer_id);
        let addr = self.allocs[a].alloc(size).map_err(|OutOfChunks { size, largest_free }| PlanError { alloc: a, tensor: t, size, largest_free })?;
        let aligned = self.allocs[a].aligned(size);
        self.block[t] = self.blocks.len() as u32;
        self.blocks.push(Block { alloc: a, size: aligned, start: self.step, end: u32::MAX });
        self.step += 1;
        self.live[a] += aligned;
        self.live_peak[a] = self.live_peak[a].max(self.live[a]);
        self.placements[t] = Some(Placement { buffer_id, alloc: a, addr, size });
        self.write_order[t] = Some(self.writes);
        self.writes += 1;
        self.tracer.alloc(t);
        Ok(())
    }

    /// Gives `t` memory unless it has some (its own, somebody else's, or its view source's).
    /// Called for every source of every node, and nearly always with nothing to do.
    #[inline(always)]
    fn allocate(&mut self, t: Tid, buffer_id: usize) -> Result<(), PlanError> {
        if !self.placeable[t] || self.own[t] {
            return Ok(());
        }
        self.allocate_fresh(t, buffer_id)
    }

    #[inline(never)]
    fn allocate_fresh(&mut self, t: Tid, buffer_id: usize) -> Result<(), PlanError> {
        self.own[t] = true;
        let desc = &self.model.tensors[t];
        if desc.inplace_op {
            let n = self.node_of[t];
            if n != NO_NODE {
                for p in self.model.nodes[n as usize].srcs.iter() {
                    // not external, pinned, or already handed over; read by this node only
                    if !self.own[p] || self.n_children[p] != 1 || self.n_views[p] != 0 {
                        continue;
                    }
                    let pd = &self.model.tensors[p];
                    let view_src_output = pd.view_of.is_some_and(|v| self.model.tensors[v].output);
                    if pd.output || view_src_output || self.model.layouts[p] != self.model.layouts[t] {
                        continue;
                    }
                    self.take_over(t, p);
                    return Ok(());
                }
            }
        }
        self.alloc_bytes(t, buffer_id)
    }

    /// `t` computes in place of its parent `p`: same address, and the parent's tail comes back
    /// when `t` is smaller.
    fn take_over(&mut self, t: Tid, p: Tid) {
        let parent = self.placements[p].expect("an owned parent is placed");
        let (buffer_id, a, addr) = (parent.buffer_id, parent.alloc, parent.addr);
        self.block[t] = self.block[p];
        self.own[p] = false;
        self.tracer.take_over(t, p);
        let p_size = parent.size;
        let t_size = self.sizer.size(t, buffer_id);
        assert!(p_size >= t_size, "in-place tensor is larger than its parent");
        let (p_aligned, t_aligned) = (self.allocs[a].aligned(p_size), self.allocs[a].aligned(t_size));
        if p_aligned > t_aligned {
            let tail = Addr { chunk: addr.chunk, offset: addr.offset + t_aligned };
            self.allocs[a].free(tail, p_aligned - t_aligned);
            self.live[a] -= p_aligned - t_aligned;
        }
        self.placements[t] = Some(Placement { buffer_id, alloc: a, addr, size: t_size });
        self.write_order[t] = Some(self.writes);
        self.writes += 1;
    }

    fn free(&mut self, t: Tid) {
        if self.model.tensors[t].output {
            return;
        }
        let Placement { alloc: a, addr, size, .. } = self.placements[t].expect("an owned tensor is placed");
        self.allocs[a].free(addr, size);
        self.live[a] -= self.allocs[a].aligned(size);
        if self.block[t] != NO_BLOCK {
            self.blocks[self.block[t] as usize].end = self.step;
        }
        self.step += 1;
        self.own[t] = false;
        self.tracer.free(t);
    }

    fn run(&mut self) -> Result<(), PlanError> {
        let model = self.model;
        for &(leaf, id) in &model.leafs {
            self.allocate(leaf, id)?;
        }

        // count readers and views; place explicit inputs before anything is freed
        for node in &model.nodes {
            let t = node.tensor;
            let desc = &model.tensors[t];
            if let Some(v) = desc.view_of {
                // op-NONE views in the node list are keep-alive markers, not views
                if !desc.op_none {
                    self.n_views[v] += 1;
                }
            }
            if desc.input {
                self.allocate(t, node.buffer_id)?;
            }
            for s in node.srcs.iter() {
                self.n_children[s] += 1;
                if model.tensors[s].input {
                    self.allocate(s, node.buffer_id)?;
                }
            }
        }

        for (i, node) in model.nodes.iter().enumerate() {
            self.tracer.node(i as u32);
            for s in node.srcs.iter() {
                self.allocate(s, node.buffer_id)?;
            }
            self.allocate(node.tensor, node.buffer_id)?;
            for s in node.srcs.iter() {
                self.n_children[s] -= 1;
                if self.n_children[s] != 0 || self.n_views[s] != 0 {
                    continue;
                }
                if let Some(v) = model.tensors[s].view_of {
                    self.n_views[v] -= 1;
                    if self.n_views[v] == 0 && self.n_children[v] == 0 && self.own[v] {
                        self.free(v);
                    }
                } else if self.own[s] {
                    self.free(s);
                }
            }
        }
        Ok(())
    }
}

/// Plans `model` into `allocs` (reset first). `alloc_of_id[buffer_id]` names the allocator of
/// each buffer id.
pub fn plan(model: &GraphModel, alloc_of_id: &[usize], allocs: &mut [DynAllocator], sizer: &mut impl Sizer, planner: &Planner) -> Result<Plan, PlanError> {
    let mut untraced = ();
    let (mut sim, pinned_any) = new_sim(model, alloc_of_id, allocs, sizer, &mut untraced);
    sim.run()?;
    let n = model.tensors.len();
    let n_allocs = sim.allocs.len();

    let Sim { placements, write_order, blocks, block, live_peak, allocs, .. } = sim;
    let mut plan = Plan { chunk_sizes: allocs.iter().map(|a| a.chunk_sizes()).collect(), placements, write_order, live_peak, offline: vec![false; n_allocs] };

    if *planner != Planner::Upstream {
        for a in 0..n_allocs {
            let online = plan.total_size(a);
            let single_chunk = plan.chunk_sizes[a].len() <= 1;
            // constrained by pins or chunks: keep upstream's placement
            if pinned_any[a] || !single_chunk {
                continue;
            }
            let ids: Vec<usize> = (0..blocks.len()).filter(|&b| blocks[b].alloc == a).collect();
            let intervals: Vec<offline::Interval> =
                ids.iter().map(|&b| offline::Interval { size: blocks[b].size, start: blocks[b].start, end: blocks[b].end }).collect();
            let (offsets, arena) = match planner {
                Planner::GreedyBySize => offline::greedy_by_size(&intervals),
                _ => {
                    // at the lower bound: nothing can be smaller. Anywhere else the offline
                    // passes run, however close upstream's placement is (a chain-shaped
                    // transformer graph placed 1 KiB above the bound is 1 KiB above
                    // greedy-by-size, which its first pass is)
                    if online <= plan.live_peak[a] {
                        continue;
                    }
                    offline::best_placement(&intervals, plan.live_peak[a])
                }
            };
            let keep = match planner {
                Planner::GreedyBySize => true,
                _ => arena < online,
            };
            if keep && arena <= allocs[a].max_chunk_size() {
                let mut offset_of_block = vec![usize::MAX; blocks.len()];
                for (k, &b) in ids.iter().enumerate() {
                    offset_of_block[b] = offsets[k];
                }
                for (t, &b) in block.iter().enumerate().take(n) {
                    if let Some(p) = plan.placements[t].as_mut().filter(|p| p.alloc == a && b != NO_BLOCK) {
                        p.addr = Addr { chunk: 0, offset: offset_of_block[b as usize] };
                    }
                }
                plan.chunk_sizes[a] = vec![arena];
                plan.offline[a] = true;
            }
        }
    }
    Ok(plan)
}

/// Places `model` where `template` (the plan of a graph of the same structure, `template_model`)
/// placed its tensors, when that is sound: the same tensors, sources, views, flags, buffer ids
/// and pins, every placed tensor no larger than the template placed it, and every in-place
/// take-over of the template still allowed (the tensor and the parent it computes over have the
/// same layout). The planner's own placement is not monotone in the sizes (a graph with smaller
/// tensors may need a few bytes more), so this is how the buffer that a worst-case graph sized
/// holds every graph of that structure made afterwards. `fresh` is `model`'s own plan (its
/// live-bytes bound is kept). None when the template does not apply.
pub fn replan_like(template_model: &GraphModel, template: &Plan, model: &GraphModel, sizer: &mut impl Sizer, fresh: &Plan) -> Option<Plan> {
    let n = model.tensors.len();
    if template_model.tensors.len() != n
        || template.placements.len() != n
        || template_model.nodes != model.nodes
        || template_model.leafs != model.leafs
        || template_model.pins != model.pins
    {
        return None;
    }
    let same_kind = |a: &TensorDesc, b: &TensorDesc| {
        a.view_of == b.view_of
            && a.presence == b.presence
            && a.input == b.input
            && a.output == b.output
            && a.inplace_op == b.inplace_op
            && a.op_none == b.op_none
    };
    if !template_model.tensors.iter().zip(&model.tensors).all(|(a, b)| same_kind(a, b)) {
        return None;
    }
    // an in-place child lives at its parent's address (two tensors live at once never share one)
    for node in &model.nodes {
        let Some(pt) = template.placements[node.tensor] else { continue };
        for s in node.srcs.iter() {
            let shares = template.placements[s].is_some_and(|ps| ps.alloc == pt.alloc && ps.addr == pt.addr);
            if shares && model.layouts[s] != model.layouts[node.tensor] {
                return None;
            }
        }
    }
    let mut placements = placements_spare::take(n);
    for (t, p) in template.placements.iter().enumerate() {
        match *p {
            Some(p) => {
                let size = sizer.size(t, p.buffer_id);
                if size > p.size {
                    placements_spare::give(placements);
                    return None;
                }
                placements.push(Some(Placement { size, ..p }));
            }
            None => placements.push(None),
        }
    }
    Some(Plan {
        placements,
        write_order: template.write_order.clone(),
        chunk_sizes: template.chunk_sizes.clone(),
        live_peak: fresh.live_peak.clone(),
        offline: template.offline.clone(),
    })
}

/// The node steps each tensor's memory is live in when `model` is planned (see [`Lifetimes`]),
/// for the memory plan report: the planner's own run, observed. `allocs` are used as scratch
/// (reset first), as by [`plan`]; placement does not change lifetimes, so the planner's choice
/// between placements does not matter here.
pub fn trace(model: &GraphModel, alloc_of_id: &[usize], allocs: &mut [DynAllocator], sizer: &mut impl Sizer) -> Result<Lifetimes, PlanError> {
    let mut life = Lifetimes::new(model.tensors.len());
    let (mut sim, _) = new_sim(model, alloc_of_id, allocs, sizer, &mut life);
    let result = sim.run();
    placements_spare::give(std::mem::take(&mut sim.placements));
    drop(sim);
    result.map(|()| life)
}

/// The simulation of `model` over `allocs` (reset, pins reserved), and per allocator whether it
/// holds pins.
fn new_sim<'a, S: Sizer, Tr: Tracer>(
    model: &'a GraphModel,
    alloc_of_id: &'a [usize],
    allocs: &'a mut [DynAllocator],
    sizer: &'a mut S,
    tracer: &'a mut Tr,
) -> (Sim<'a, S, Tr>, Vec<bool>) {
    for a in allocs.iter_mut() {
        a.reset();
    }
    let n = model.tensors.len();
    let n_allocs = allocs.len();
    let mut live = vec![0usize; n_allocs];
    let mut pinned_any = vec![false; n_allocs];
    for &Pin { alloc, addr, size, .. } in &model.pins {
        allocs[alloc].reserve_at(addr, size);
        live[alloc] += allocs[alloc].aligned(size);
        pinned_any[alloc] = true;
    }
    let mut node_of = vec![NO_NODE; n];
    for (i, node) in model.nodes.iter().enumerate() {
        node_of[node.tensor] = i as u32;
    }
    let live_peak = live.clone();
    let sim = Sim {
        tracer,
        model,
        alloc_of_id,
        allocs,
        sizer,
        n_children: vec![0; n],
        n_views: vec![0; n],
        own: vec![false; n],
        placeable: model.tensors.iter().map(|d| d.presence == Presence::Fresh && d.view_of.is_none()).collect(),
        block: vec![NO_BLOCK; n],
        placements: {
            let mut p = placements_spare::take(n);
            p.resize(n, None);
            p
        },
        write_order: vec![None; n],
        writes: 0,
        step: 0,
        blocks: Vec::with_capacity(n),
        live,
        live_peak,
        node_of,
    };
    (sim, pinned_any)
}
