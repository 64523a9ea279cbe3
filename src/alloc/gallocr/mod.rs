//! `ggml_gallocr`: plans where every tensor of a graph lives in one compute buffer per buffer
//! type, (re)allocates those buffers, and places the tensors.
//!
//! Behaves as upstream's ggml-alloc for every graph upstream gets right, and differs where it
//! does not:
//! - **Ownership.** A tensor that already has data in this allocator's own memory is not
//!   "external": recomputed nodes and inputs are placed again; a tensor that is only read (a
//!   result of an earlier graph) keeps its bytes (it is pinned while the new graph is planned),
//!   unless they were handed to another tensor since, which is an error naming both.
//! - **Replay only for the same graph.** A plan is replayed only when the new graph has the same
//!   structure (tensors, sources, views, flags, layouts, buffer ids), checked in O(n); anything
//!   else is planned anew. Upstream replays any graph with the same node and leaf counts. The
//!   graph placed last, unchanged since, is recognised first by `placed`, in one pass over the
//!   fields upstream's replay reads.
//! - Views are re-initialised whenever they do not point where their source says, not only
//!   when they have no buffer.
//! - A graph that reads a computed tensor in neither of its lists is refused (see `unlisted`);
//!   upstream allocates the tensor and never computes it.
//! - **Inputs already holding bytes** in this allocator's memory are placed anew like any input,
//!   with their bytes carried along when they are still theirs (see `inputs`).
//! - **A reservation holds what it was made for.** A graph whose own plan would not fit the
//!   compute buffers there are is placed at the offsets of a plan that sized them, when it has
//!   the same structure and no larger tensors (see `Template`, `plan::replan_like`): the
//!   planner's placement is not monotone in the sizes, and llama.cpp reserves once.
//!
//! The planning itself is `plan::plan` on the `model` of the graph (the `ggml-plan` crate). The
//! allocator is split by concern: `read` (numbering the graph into the planner's model),
//! `replay` (is this the graph placed last? repeat it), `chunks` (the compute buffers and their
//! chunks), `place` (pointing the tensors at their places); this file holds the allocator, the
//! planning within the buffers there are, and the entry points (`reserve`, `alloc_graph`).

use std::ffi::c_void;
use std::rc::Rc;

use crate::alloc::addr_index::{AddrIndex, Vacancy};
use crate::alloc::dyn_tallocr::{Addr, DynAllocator};
use crate::alloc::inputs::{self, Carried};
use crate::alloc::model::{GraphModel, NodeDesc, Pin, Presence, SrcList, TensorDesc, Tid};
use crate::alloc::placed::PlacedGraph;
use crate::alloc::plan::{self, Plan, PlanError, Planner};
use crate::alloc::residency::{Contents, Names, PlanRecord, Residency};
use crate::alloc::{inplace, unlisted};
use crate::backend::buffer::{OwnedBuffer, buffer_base, buffer_set_usage, buft_alloc_owned, buft_alloc_size, buft_max_size};
use crate::backend::poison;
use crate::backend::tensor_io::{place, reinit_view, tensor_get, tensor_set};
use crate::ggml::handles::{Buffer, BufferType};
use crate::ggml::sys::{self, GGML_MAX_SRC, GGML_STATUS_SUCCESS};
use crate::ggml::tensor::TensorRef;
use ggml_plan::addr_map::AddrMap;
use ggml_plan::model::{Layout, descs_spare, layouts_spare, nodes_spare};
use ggml_plan::plan::placements_spare;

mod chunks;
mod place;
mod read;
mod replay;
pub mod report;

use place::{carry_inputs, record_application, view_is_current};
use read::{Sizes, has_plan_layout};

// the numbering's own arrays, kept for the next graph read on this thread (see `ggml_plan::spare`)
ggml_plan::spare!(tensors_spare: Vec<TensorRef>);
ggml_plan::spare!(index_spare: AddrIndex);

/// See `Gallocr::residence`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Residence {
    /// not placed by this allocator (somebody else's buffer, or no memory)
    Elsewhere,
    /// in one of the allocator's compute buffers
    Compute,
    /// placed by this allocator in a compute buffer it has freed since (it grew): the tensor
    /// still points at the freed buffer
    Freed,
}

/// What an allocator has done: (allocations, plans made).
pub type AllocatorState = (u64, u64);

/// A graph as handed to the allocator: node and leaf lists with their buffer ids, plus flags the
/// caller wants added without writing them into the tensors (the scheduler's pipeline copies).
pub struct GraphInput<'a> {
    pub nodes: &'a [TensorRef],
    pub node_ids: Option<&'a [i32]>,
    pub leafs: &'a [TensorRef],
    pub leaf_ids: Option<&'a [i32]>,
    pub extra_flags: Option<&'a AddrMap<i32>>,
}

/// A plan that sized the compute buffers (or was reserved), with the model of its graph: a later
/// graph of the same structure that the planner would place in more memory is placed like it
/// (see `plan::replan_like`), so that a reservation holds what it was made for.
/// Kept by moving the last plan here when a newer one replaces it (nothing is copied).
struct Template {
    built: Built,
    record: Rc<PlanRecord>,
}

/// Templates kept, newest first (llama.cpp reserves two or three graphs).
const TEMPLATES: usize = 4;

/// What `ensure_buffers` did.
#[derive(Clone, Copy, Debug, Default)]
struct Resized {
    /// a compute buffer was allocated
    any: bool,
    /// a compute buffer that existed was replaced by a larger one
    grew: bool,
}

/// What `alloc_graph` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Allocated {
    /// a new plan was made (the graph was not the last one, or changed)
    pub planned: bool,
    /// a compute buffer that existed was replaced by a larger one: a reallocation, in the sense
    /// of GGML_SCHED_DEBUG_REALLOC (placing a graph anew inside the buffers it has is not one)
    pub grew: bool,
}

/// How many nodes ahead a pass over the graph asks for headers (see `prefetch_header`).
const PREFETCH_AHEAD: usize = 8;

/// Why an allocation failed (already logged when returned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// several buffer types and a graph that needs a new plan: call reserve_n first (upstream)
    NeedsReserve,
    /// a backend could not allocate a compute buffer, or refused a tensor
    Backend(String),
    /// the plan does not fit in the chunks a buffer type allows
    Plan(String),
    /// a result of an earlier graph is read, but its memory was reused in between
    LostResult(String),
    /// a node reads a tensor that is computed by an op but is not in the graph (see `unlisted`)
    Graph(String),
}

impl std::fmt::Display for AllocError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            AllocError::NeedsReserve => f.write_str("the graph needs a new plan over several buffer types: call ggml_gallocr_reserve_n first"),
            AllocError::Backend(why) | AllocError::Plan(why) | AllocError::LostResult(why) | AllocError::Graph(why) => f.write_str(why),
        }
    }
}

/// Where a compute-buffer chunk is: the buffer struct's address (what a tensor's `buffer` holds),
/// its allocator and chunk, and the memory it spans.
#[derive(Clone, Copy, Debug)]
pub(super) struct ChunkEntry {
    pub(super) buffer: usize,
    pub(super) alloc: usize,
    pub(super) chunk: usize,
    pub(super) base: usize,
    pub(super) size: usize,
}

struct AllocState {
    buft: BufferType,
    dyn_alloc: DynAllocator,
    /// the chunks of the compute buffer; None until reserved (upstream's NULL vbuffer)
    chunks: Option<Vec<OwnedBuffer>>,
}

/// A planned graph: its model (to recognise the same graph again), the plan, and the tensors it
/// was made with.
struct Planned {
    built: Built,
    record: Rc<PlanRecord>,
    /// addresses of `built.tensors`, shared with the residency history
    addrs: Rc<Vec<usize>>,
    /// tensors that are neither nodes nor leafs (view sources, sources outside the lists), newest
    /// first: the fast path checks them on their own (see `is_last_graph`)
    loose: Vec<Tid>,
    /// kept as a template once a newer plan replaces it (see `Template`)
    template: bool,
}

/// What the fast path found: the same graph, and whether every tensor is already where the
/// plan puts it (then there is nothing to place).
enum Replay {
    No,
    Same { in_place: bool },
}

pub struct Gallocr {
    /// buffer type of each buffer id
    bufts: Vec<BufferType>,
    /// allocator of each buffer id (ids with the same buffer type share one)
    alloc_of_id: Vec<usize>,
    allocs: Vec<AllocState>,
    planner: Planner,
    last: Option<Planned>,
    /// the last plan's graph as placed, while its headers may still read the same (None once
    /// anything may have moved: a new plan, new chunks, tensors placed again)
    placed: Option<PlacedGraph>,
    residency: Residency,
    seq: u64,
    /// every live chunk, found by its buffer's address
    chunk_index: Vec<ChunkEntry>,
    /// per allocator, per chunk: (buffer address, base address)
    chunk_bases: Vec<Vec<(usize, usize)>>,
    /// plans that sized the buffers or were reserved, newest first (see `Template`)
    templates: Vec<Template>,
    /// what made the last plan ("reserve", "alloc"), for its report
    last_kind: &'static str,
    /// what the scheduler adds to the reports of its allocator's plans (see `report`)
    sched_context: Option<report::SchedContext>,
    /// plans made and plans replayed (for tests and benchmarks)
    pub n_plans: u64,
    pub n_replays: u64,
}

struct Built {
    model: GraphModel,
    tensors: Vec<TensorRef>,
    /// inputs that hold their own bytes in this allocator's memory (see `classify`)
    carried: Vec<Tid>,
    /// inputs that held bytes in this allocator's memory and lost them, and why
    lost: Vec<(Tid, String)>,
}

impl Drop for Built {
    fn drop(&mut self) {
        descs_spare::give(std::mem::take(&mut self.model.tensors));
        layouts_spare::give(std::mem::take(&mut self.model.layouts));
        nodes_spare::give(std::mem::take(&mut self.model.nodes));
        tensors_spare::give(std::mem::take(&mut self.tensors));
    }
}

impl Gallocr {
    pub fn new(bufts: &[BufferType]) -> Gallocr {
        let mut allocs: Vec<AllocState> = Vec::new();
        let mut alloc_of_id = Vec::with_capacity(bufts.len());
        for &buft in bufts {
            match allocs.iter().position(|a| a.buft == buft) {
                Some(a) => alloc_of_id.push(a),
                None => {
                    let dyn_alloc = DynAllocator::new(buft.alignment(), buft_max_size(buft));
                    allocs.push(AllocState { buft, dyn_alloc, chunks: None });
                    alloc_of_id.push(allocs.len() - 1);
                }
            }
        }
        let n = allocs.len();
        Gallocr {
            bufts: bufts.to_vec(),
            alloc_of_id,
            allocs,
            planner: Planner::from_env(),
            last: None,
            placed: None,
            residency: Residency::new(n),
            seq: 0,
            chunk_index: Vec::new(),
            chunk_bases: vec![Vec::new(); n],
            templates: Vec::new(),
            last_kind: "reserve",
            sched_context: None,
            n_plans: 0,
            n_replays: 0,
        }
    }

    pub fn n_buffers(&self) -> usize {
        self.bufts.len()
    }

    /// Number of `alloc_graph` calls so far: "graph #n" in messages.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Plans `built`. When that plan does not fit the compute buffers there are, but a template
    /// places the graph inside them, the template's placement is taken: a buffer a reservation
    /// sized does not grow for a graph of the same structure with no larger tensors.
    /// Returns the plan and whether it came from a template.
    fn plan_in_buffers(&mut self, built: &Built) -> Result<(Plan, bool), AllocError> {
        let plan = self.plan_model(built)?;
        let any_template = !self.templates.is_empty() || self.last.as_ref().is_some_and(|l| l.template);
        if self.planner != Planner::Best || !any_template || self.fits_buffers(&plan) {
            return Ok((plan, false));
        }
        let mut sizer = Sizes::new(&self.bufts, built);
        let last = self.last.as_ref().filter(|l| l.template).map(|l| (&l.built, &l.record));
        for (tpl, record) in last.into_iter().chain(self.templates.iter().map(|t| (&t.built, &t.record))) {
            let Some(like) = plan::replan_like(&tpl.model, &record.plan, &built.model, &mut sizer, &plan) else { continue };
            if self.fits_buffers(&like) {
                placements_spare::give(plan.placements);
                return Ok((like, true));
            }
            placements_spare::give(like.placements);
        }
        Ok((plan, false))
    }

    /// Makes the plan just remembered a template (see `Template`); a kept template of the same
    /// graph structure is dropped.
    fn keep_template(&mut self) {
        let last = self.last.as_mut().expect("just remembered");
        last.template = true;
        let model = &last.built.model;
        self.templates.retain(|t| t.built.model != *model);
    }

    fn record_of(&self, built: &Built, plan: Plan) -> Rc<PlanRecord> {
        Rc::new(PlanRecord::new(plan, built.model.node_tensors()))
    }

    /// Keeps `built` and its plan as the last plan, with what a replay needs to recognise it.
    fn remember(&mut self, built: Built, plan: Plan) {
        let record = self.record_of(&built, plan);
        let mut listed = record.is_node.clone();
        for &(l, _) in &built.model.leafs {
            listed[l] = true;
        }
        // newest first: a tensor is numbered after its view source, so a loose view source comes
        // after the loose view that names it, whose header (checked first) says it is still there
        let loose = (0..listed.len()).rev().filter(|&t| !listed[t]).collect();
        let addrs = Rc::new(built.tensors.iter().map(|t| t.addr()).collect());
        let previous = self.last.replace(Planned { built, record, addrs, loose, template: false });
        self.placed = None;
        if let Some(Planned { built, record, template: true, .. }) = previous {
            self.templates.insert(0, Template { built, record });
            self.templates.truncate(TEMPLATES);
        }
    }

    /// Plans `g` and makes the buffers large enough, without placing any tensor.
    pub fn reserve(&mut self, g: &GraphInput, no_alloc: bool) -> Result<(), AllocError> {
        let built = self.build(g).inspect_err(log_alloc_error)?;
        let (plan, from_template) = self.plan_in_buffers(&built)?;
        self.ensure_buffers(&plan, Some(&built), no_alloc)?;
        self.auto_report(&built, &plan, "reserve");
        self.last_kind = "reserve";
        self.remember(built, plan);
        if !from_template && self.planner == Planner::Best {
            self.keep_template();
        }
        Ok(())
    }

    /// The buffer ids the last plan used, by position, when a graph of the same size comes
    /// without ids (upstream's alloc_graph keeps the ids given to reserve_n).
    pub fn last_ids(&self, n_nodes: usize, n_leafs: usize) -> (Option<Vec<i32>>, Option<Vec<i32>>) {
        if self.bufts.len() == 1 {
            return (None, None); // every id is 0
        }
        match &self.last {
            Some(p) if p.built.model.nodes.len() == n_nodes && p.built.model.leafs.len() == n_leafs => {
                (Some(p.built.model.nodes.iter().map(|n| n.buffer_id as i32).collect()), Some(p.built.model.leafs.iter().map(|&(_, id)| id as i32).collect()))
            }
            _ => (None, None),
        }
    }

    /// Allocates `g`: replays the last plan when `g` is the same graph, else plans it (unless
    /// `auto_reserve` is false, as for upstream's multi-buffer alloc_graph).
    pub fn alloc_graph(&mut self, g: &GraphInput, auto_reserve: bool) -> Result<Allocated, AllocError> {
        if self.placed_unchanged(g) {
            self.replay_last(true)?;
            return Ok(Allocated::default());
        }
        let replay = if self.allocs.iter().all(|a| a.chunks.is_some()) { self.is_last_graph(g) } else { Replay::No };
        if let Replay::Same { in_place } = replay
            && self.last_sizes_fit()
        {
            self.replay_last(in_place)?;
            if in_place {
                self.keep_placed(g);
            } else {
                self.placed = None;
            }
            return Ok(Allocated::default());
        }
        let built = self.build(g).inspect_err(log_alloc_error)?;
        let carried = Carried::save(built.carried.iter().map(|&t| built.tensors[t]));
        let same = match &self.last {
            Some(last) => last.built.model == built.model && self.sizes_fit(&built, &last.record.plan),
            None => false,
        };
        if !same && !auto_reserve {
            crate::log_debug!("ggml_gallocr_alloc_graph: cannot reallocate multi buffer graph automatically, call reserve\n");
            return Err(AllocError::NeedsReserve);
        }
        if !same {
            let (plan, from_template) = self.plan_in_buffers(&built)?;
            let resized = self.ensure_buffers(&plan, Some(&built), false)?;
            self.seq += 1;
            self.apply(&built, &plan)?;
            carry_inputs(carried, &built);
            for t in &built.tensors {
                self.residency.forget_tombstone(t.addr());
            }
            self.auto_report(&built, &plan, "alloc");
            self.last_kind = "alloc";
            self.remember(built, plan);
            if resized.any && !from_template && self.planner == Planner::Best {
                self.keep_template();
            }
            let last = self.last.as_ref().expect("just remembered");
            record_application(&mut self.residency, self.seq, &last.record, &last.built.tensors, last.addrs.clone(), true);
            // a graph just planned is likely to be allocated again as it is (a plan costs ten
            // times the copy): its headers are kept for the fast check at once
            self.keep_placed(g);
            return Ok(Allocated { planned: true, grew: resized.grew });
        }
        self.n_replays += 1;
        let mut grew = false;
        if self.allocs.iter().any(|a| a.chunks.is_none()) {
            // reserved without memory (reserve_n_size) and nothing reallocated it since
            let plan = self.last.as_ref().expect("same").record.plan.clone();
            grew = self.ensure_buffers(&plan, Some(&built), false)?.grew;
        }
        let record = self.last.as_ref().expect("same").record.clone();
        self.seq += 1;
        self.apply(&built, &record.plan)?;
        carry_inputs(carried, &built);
        let addrs: Rc<Vec<usize>> = Rc::new(built.tensors.iter().map(|t| t.addr()).collect());
        for &t in addrs.iter() {
            self.residency.forget_tombstone(t);
        }
        // a structurally equal graph of other tensors, or the plan's own
        let differ = *addrs != *self.last.as_ref().expect("same").addrs;
        record_application(&mut self.residency, self.seq, &record, &built.tensors, addrs, !differ);
        self.placed = None;
        Ok(Allocated { planned: false, grew })
    }
}

pub fn log_alloc_error(e: &AllocError) {
    if let AllocError::LostResult(msg) = e {
        crate::log_error!("ggml_gallocr: {msg}\n");
    }
}
