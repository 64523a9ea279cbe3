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
//! The planning itself is `plan::plan` on the `model` of the graph.

use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

use crate::alloc::dyn_tallocr::{Addr, DynAllocator};
use crate::alloc::addr_index::{AddrIndex, Vacancy};
use crate::alloc::model::{GraphModel, NodeDesc, Pin, Presence, SrcList, TensorDesc, Tid};
use crate::alloc::placed::{PlacedGraph, Seen};
use crate::alloc::plan::{self, Plan, PlanError, Planner};
use crate::alloc::residency::{Contents, Names, PlanRecord, Residency};
use crate::alloc::inputs::{self, Carried};
use crate::alloc::{inplace, poison, recycle, unlisted};
use crate::backend::buffer::{buffer_base, buffer_free, buffer_set_usage, buft_alloc_buffer, buft_alloc_size, buft_max_size};
use crate::backend::tensor_io::{place, reinit_view, tensor_get, tensor_set};
use crate::ggml::handles::{Buffer, BufferType};
use crate::ggml::sys::{self, GGML_MAX_SRC, GGML_STATUS_SUCCESS};
use crate::ggml::tensor::{Layout, TensorRef};

/// Hashes tensor addresses (distinct, 16-byte aligned) with one multiply.
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _bytes: &[u8]) {
        unreachable!("only usize keys are hashed")
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = ((n as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub type AddrMap<V> = HashMap<usize, V, BuildHasherDefault<AddrHasher>>;

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

/// The tensors of a graph as `build` numbers them, in first-use order.
struct Numbering<'a> {
    index: AddrIndex,
    tensors: Vec<TensorRef>,
    descs: Vec<TensorDesc>,
    layouts: Vec<Layout>,
    /// the tensors that already had memory (data) when first seen: whether it is this
    /// allocator's depends on whether a later node computes them (see `classify`)
    with_data: Vec<Tid>,
    extra_flags: Option<&'a AddrMap<i32>>,
}

impl Numbering<'_> {
    /// The id of `t`, numbering it (after its view source) and reading its header on first sight.
    #[inline]
    fn tid_of(&mut self, t: TensorRef) -> Tid {
        let tensors = &self.tensors;
        match self.index.find(t.addr(), |id| tensors[id as usize].addr()) {
            Ok(id) => id as Tid,
            Err(vacancy) => self.number(t, vacancy),
        }
    }

    fn number(&mut self, t: TensorRef, vacancy: Vacancy) -> Tid {
        let view_of = t.view_src().map(|v| self.tid_of(v));
        let extra = self.extra_flags.and_then(|m| m.get(&t.addr()).copied()).unwrap_or(0);
        let flags = t.flags() | extra;
        let op = t.op();
        let layout = t.layout();
        let id = self.tensors.len();
        self.tensors.push(t);
        self.descs.push(TensorDesc {
            view_of,
            nbytes: layout.nbytes(),
            presence: match (t.data().is_null(), t.buffer_ptr().is_null()) {
                _ if view_of.is_some() => Presence::External,
                (true, true) => Presence::Fresh,
                // upstream: a tensor with a buffer but no data is on an external buffer
                (true, false) => Presence::External,
                (false, _) => Presence::Fresh, // until `build` classifies it
            },
            input: flags & sys::GGML_TENSOR_FLAG_INPUT != 0,
            output: flags & sys::GGML_TENSOR_FLAG_OUTPUT != 0,
            inplace_op: inplace::op_can_inplace(op),
            op_none: op == sys::op::NONE,
        });
        self.layouts.push(layout);
        if view_of.is_none() && !t.data().is_null() {
            self.with_data.push(id);
        }
        let tensors = &self.tensors;
        self.index.insert_at(vacancy, t.addr(), id as u32, |id| tensors[id as usize].addr());
        id
    }
}

/// The alloc size of every tensor of a graph in the buffer type of a buffer id: buffer types
/// without get_alloc_size take ggml_nbytes, which follows from the layout; the others are asked
/// once per tensor and buffer id.
struct Sizes<'a> {
    bufts: &'a [BufferType],
    built: &'a Built,
    plain: Vec<bool>,
    memo: Vec<(usize, usize)>,
}

impl<'a> Sizes<'a> {
    fn new(bufts: &'a [BufferType], built: &'a Built) -> Sizes<'a> {
        let plain: Vec<bool> = bufts.iter().map(|b| !b.has_alloc_size()).collect();
        let memo = if plain.iter().all(|&p| p) { Vec::new() } else { vec![(usize::MAX, 0); built.tensors.len()] };
        Sizes { bufts, built, plain, memo }
    }
}

impl plan::Sizer for Sizes<'_> {
    fn size(&mut self, t: Tid, id: usize) -> usize {
        let (tensors, descs) = (&self.built.tensors, &self.built.model.tensors);
        if self.plain[id] {
            debug_assert_eq!(descs[t].nbytes, tensors[t].nbytes(), "Layout::nbytes disagrees with ggml_nbytes");
            return descs[t].nbytes;
        }
        if self.memo[t].0 != id {
            self.memo[t] = (id, buft_alloc_size(self.bufts[id], tensors[t]));
        }
        self.memo[t].1
    }
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

struct AllocState {
    buft: BufferType,
    dyn_alloc: DynAllocator,
    /// the chunks of the compute buffer; None until reserved (upstream's NULL vbuffer)
    chunks: Option<Vec<Buffer>>,
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
    /// (chunk buffer address, allocator, chunk, base, size) of all live chunks
    chunk_index: Vec<(usize, usize, usize, usize, usize)>,
    /// per allocator, per chunk: (buffer address, base address)
    chunk_bases: Vec<Vec<(usize, usize)>>,
    /// plans that sized the buffers or were reserved, newest first (see `Template`)
    templates: Vec<Template>,
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
        recycle::give_descs(std::mem::take(&mut self.model.tensors));
        recycle::give_layouts(std::mem::take(&mut self.model.layouts));
        recycle::give_nodes(std::mem::take(&mut self.model.nodes));
        recycle::give_tensors(std::mem::take(&mut self.tensors));
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
            n_plans: 0,
            n_replays: 0,
        }
    }

    pub fn n_buffers(&self) -> usize {
        self.bufts.len()
    }

    pub fn set_planner(&mut self, planner: Planner) {
        self.planner = planner;
    }

    /// Number of `alloc_graph` calls so far: "graph #n" in messages.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    fn id_of(&self, ids: Option<&[i32]>, i: usize, what: &str) -> usize {
        let id = ids.map(|ids| ids[i]).unwrap_or(0);
        crate::ensure!(
            id >= 0 && (id as usize) < self.bufts.len(),
            "ggml_gallocr: {what} {i} has buffer id {id}, but the allocator has {} buffer(s)",
            self.bufts.len()
        );
        id as usize
    }

    fn find_chunk(&self, buffer: usize) -> Option<(usize, usize, usize, usize)> {
        self.chunk_index.iter().find(|e| e.0 == buffer).map(|&(_, a, c, base, size)| (a, c, base, size))
    }

    fn rebuild_chunk_index(&mut self) {
        self.chunk_index.clear();
        for (bases, st) in self.chunk_bases.iter_mut().zip(&self.allocs) {
            bases.clear();
            bases.extend(st.chunks.iter().flatten().map(|&b| (b.as_ptr() as usize, buffer_base(b) as usize)));
        }
        for (a, st) in self.allocs.iter().enumerate() {
            for (c, &b) in st.chunks.iter().flatten().enumerate() {
                self.chunk_index.push((b.as_ptr() as usize, a, c, buffer_base(b) as usize, b.size()));
            }
        }
    }

    /// Where `t`'s memory comes from, given whether this graph computes it.
    /// A pinned tensor's place goes to `pins`, under its number `tid`.
    /// An input (a leaf the caller writes) that already holds bytes in this allocator's memory is
    /// placed anew like any input, and goes to `carried` when those bytes are still its own: they
    /// are copied to its new place (see `Carried`), so a caller that does not set it again reads
    /// what it held. When they are gone, it goes to `lost` with the reason (see `inputs`).
    fn classify(
        &self,
        t: TensorRef,
        tid: Tid,
        is_node: bool,
        input: bool,
        pins: &mut Vec<Pin>,
        carried: &mut Vec<Tid>,
        lost: &mut Vec<(Tid, String)>,
    ) -> Result<Presence, AllocError> {
        if t.is_view() {
            return Ok(Presence::External);
        }
        let data = t.data() as usize;
        let buf = t.buffer_ptr() as usize;
        if data == 0 {
            // upstream: a tensor with a buffer but no data is on an external buffer
            return Ok(if buf == 0 { Presence::Fresh } else { Presence::External });
        }
        // its memory went with a compute buffer that was freed (the address may belong to a new
        // buffer now, even one of ours: the bytes are gone all the same)
        if let Some(stone) = self.residency.tombstone(t.addr(), data) {
            if input && !is_node {
                lost.push((tid, format!("the compute buffer that held it was reallocated by graph #{}", stone.lost_at)));
            }
            if is_node || input || !stone.result {
                return Ok(Presence::Fresh); // recomputed or written again; a leaf the caller sets
            }
            let how = if stone.intact { "" } else { ", and its memory had been given to another tensor before that" };
            return Err(AllocError::LostResult(format!(
                "tensor {t} was computed by graph #{} and is read again by graph #{}, but the compute buffer that held it \
                 was reallocated by graph #{} (it grew){how}; reserve the largest graph first, or keep the tensor in a \
                 buffer of its own",
                stone.seq,
                self.seq + 1,
                stone.lost_at
            )));
        }
        let Some((a, c, base, size)) = self.find_chunk(buf) else {
            return Ok(Presence::External); // somebody else's buffer, or allocated without ggml-backend
        };
        if is_node {
            return Ok(Presence::Fresh); // recomputed: place again
        }
        if data < base || data >= base + size {
            // outside the chunk its buffer pointer names: stale, from a freed buffer whose
            // struct's address was reused
            if input {
                lost.push((tid, "the compute buffer that held it was freed".to_string()));
                return Ok(Presence::Fresh);
            }
            return match self.residency.computed_in(t.addr()) {
                Some(computed) => Err(AllocError::LostResult(format!(
                    "tensor {t} was computed by graph #{computed}, but the compute buffer that held it was reallocated since"
                ))),
                None => Ok(Presence::Fresh),
            };
        }
        let off = data - base;
        let bytes = buft_alloc_size(self.allocs[a].buft, t).max(1);
        let pin = Pin { tensor: tid, alloc: a, addr: Addr { chunk: c, offset: off }, size: bytes };
        let overwritten_by = match self.residency.contents(a, c, off, off + bytes) {
            Contents::Unknown => None,
            // its own bytes, or bytes it aliases on purpose (placed there by the caller)
            Contents::Valid { writer, .. } if writer == t.addr() || !self.residency.placed(t.addr()) => None,
            Contents::Valid { name, seq, .. } | Contents::Overwritten { by: name, seq } => Some((name, seq)),
        };
        if input {
            match overwritten_by {
                None => carried.push(tid),
                Some((by, seq)) => lost.push((tid, format!("tensor '{by}' of graph #{seq} was placed over those"))),
            }
            return Ok(Presence::Fresh); // placed again, as every input
        }
        let Some((by, seq)) = overwritten_by else {
            pins.push(pin);
            return Ok(Presence::Pinned(pins.len() as u32 - 1));
        };
        match self.residency.computed_in(t.addr()) {
            Some(computed) => Err(AllocError::LostResult(format!(
                "tensor {t} was computed by graph #{computed} and is read again by graph #{}, but its memory was \
                 given to tensor '{by}' of graph #{seq} in between; keep it in a buffer of its own, or mark it \
                 as an output and read it before allocating another graph",
                self.seq + 1
            ))),
            // a leaf whose bytes came from the caller: the caller sets it again (upstream's contract)
            None => Ok(Presence::Fresh),
        }
    }

    /// Numbers the tensors of the graph and describes them (see `model`). Each tensor's header
    /// is read once, when it is first seen; where its memory comes from is decided afterwards
    /// (it depends on whether a later node computes it), from what was read.
    fn build(&self, g: &GraphInput) -> Result<Built, AllocError> {
        // sources outside the node and leaf lists are rare: the lists are the size
        let n_hint = g.nodes.len() + g.leafs.len() + 64;
        let mut n = Numbering {
            index: recycle::take_index(n_hint),
            tensors: recycle::take_tensors(n_hint),
            descs: recycle::take_descs(n_hint),
            layouts: recycle::take_layouts(n_hint),
            with_data: Vec::new(),
            extra_flags: g.extra_flags.filter(|m| !m.is_empty()),
        };
        let mut leafs = Vec::with_capacity(g.leafs.len());
        for (i, &leaf) in g.leafs.iter().enumerate() {
            if let Some(next) = g.leafs.get(i + PREFETCH_AHEAD) {
                next.prefetch_header();
            }
            let id = self.id_of(g.leaf_ids, i, "leaf");
            leafs.push((n.tid_of(leaf), id));
        }
        let mut nodes = recycle::take_nodes(g.nodes.len());
        for (i, &node) in g.nodes.iter().enumerate() {
            if let Some(next) = g.nodes.get(i + PREFETCH_AHEAD) {
                next.prefetch_header();
            }
            let id = self.id_of(g.node_ids, i, "node");
            // filled where it lies: a list built aside and copied in would be read back, wide,
            // right after its narrow stores (a stall per node)
            nodes.push(NodeDesc { tensor: 0, srcs: SrcList::default(), buffer_id: id });
            let desc = nodes.last_mut().expect("just pushed");
            for j in 0..GGML_MAX_SRC {
                if let Some(s) = node.src(j) {
                    desc.srcs.set(j, n.tid_of(s));
                }
            }
            desc.tensor = n.tid_of(node);
        }

        let Numbering { tensors, mut descs, layouts, with_data, index, .. } = n;
        recycle::give_index(index);
        let mut pins = Vec::new();
        let mut carried = Vec::new();
        let mut lost = Vec::new();
        // what each tensor is in the lists: carried tensors are classified by it, and a tensor in
        // neither list must not be one the graph reads but never computes (see `unlisted`)
        const LOOSE: u8 = 0;
        const LEAF: u8 = 1;
        const NODE: u8 = 2;
        let mut listed = vec![LOOSE; tensors.len()];
        for &(l, _) in &leafs {
            listed[l] = LEAF;
        }
        for node in &nodes {
            listed[node.tensor] = NODE;
        }
        for t in with_data {
            descs[t].presence =
                self.classify(tensors[t], t, listed[t] == NODE, descs[t].input, &mut pins, &mut carried, &mut lost)?;
        }
        if listed.contains(&LOOSE) {
            let is_listed: Vec<bool> = listed.iter().map(|&k| k != LOOSE).collect();
            if let Some((node, src)) = unlisted::find(&tensors, &descs, &nodes, &is_listed) {
                let msg = unlisted::message("ggml_gallocr", tensors[node], tensors[src]);
                crate::log_error!("{msg}\n");
                return Err(AllocError::Graph(msg));
            }
        }
        Ok(Built { model: GraphModel { tensors: descs, layouts, pins, leafs, nodes }, tensors, carried, lost })
    }

    fn plan_model(&mut self, built: &Built) -> Result<Plan, AllocError> {
        self.n_plans += 1;
        let mut sizer = Sizes::new(&self.bufts, built);
        let mut dyn_allocs: Vec<DynAllocator> = self.allocs.iter().map(|a| a.dyn_alloc.clone()).collect();
        let result = plan::plan(&built.model, &self.alloc_of_id, &mut dyn_allocs, &mut sizer, &self.planner);
        for (st, d) in self.allocs.iter_mut().zip(dyn_allocs) {
            st.dyn_alloc = d;
        }
        result.map_err(|PlanError { alloc, tensor, size, largest_free }| {
            let msg = format!(
                "ggml_gallocr: not enough space in the {} compute buffer for tensor {} ({size} bytes, largest free block \
                 {largest_free} bytes, all {} chunks used)",
                self.allocs[alloc].buft.name(),
                built.tensors[tensor],
                crate::alloc::dyn_tallocr::MAX_CHUNKS
            );
            crate::log_error!("{msg}\n");
            AllocError::Plan(msg)
        })
    }

    /// Makes the compute buffers at least as large as `plan` needs. With `no_alloc`, buffers that
    /// would have to grow are freed and left unallocated (reserve_n_size).
    fn ensure_buffers(&mut self, plan: &Plan, built: Option<&Built>, no_alloc: bool) -> Result<Resized, AllocError> {
        let mut resized = Resized::default();
        for a in 0..self.allocs.len() {
            let wanted = &plan.chunk_sizes[a];
            let realloc = match &self.allocs[a].chunks {
                None => true,
                Some(chunks) => wanted.iter().enumerate().any(|(c, &w)| w > chunks.get(c).map(|b| b.size()).unwrap_or(0)),
            };
            if !realloc {
                continue;
            }
            // results that stay pinned in this allocator move to the new chunks with their bytes
            let mut moving: Vec<(TensorRef, Addr, Vec<u8>)> = Vec::new();
            if let (Some(b), Some(_), false) = (built, &self.allocs[a].chunks, no_alloc) {
                for pin in b.model.pins.iter().filter(|p| p.alloc == a) {
                    let tensor = b.tensors[pin.tensor];
                    let mut bytes = vec![0u8; tensor.nbytes()];
                    tensor_get(tensor, bytes.as_mut_ptr() as *mut c_void, 0, bytes.len());
                    moving.push((tensor, pin.addr, bytes));
                }
            }
            resized.grew |= self.allocs[a].chunks.is_some();
            resized.any = true;
            let old_size: usize = self.allocs[a].chunks.iter().flatten().map(|b| b.size()).sum();
            let new_size: usize = wanted.iter().sum();
            if old_size > 0 && cfg!(debug_assertions) {
                crate::log_debug!(
                    "ggml_gallocr: reallocating {} compute buffer from {:.2} MiB to {:.2} MiB\n",
                    self.allocs[a].buft.name(),
                    old_size as f64 / 1048576.0,
                    new_size as f64 / 1048576.0
                );
            }
            self.free_chunks(a);
            if no_alloc {
                continue;
            }
            let buft = self.allocs[a].buft;
            let mut chunks = Vec::with_capacity(wanted.len());
            for &size in wanted {
                match buft_alloc_buffer(buft, size) {
                    Some(b) => {
                        buffer_set_usage(b, sys::USAGE_COMPUTE);
                        chunks.push(b);
                    }
                    None => {
                        for b in chunks {
                            // SAFETY: created just above by buft_alloc_buffer, not shared.
                            unsafe { buffer_free(b) };
                        }
                        let msg = format!("ggml_gallocr: failed to allocate {} buffer of size {new_size}", buft.name());
                        crate::log_error!("{msg}\n");
                        self.rebuild_chunk_index();
                        return Err(AllocError::Backend(msg));
                    }
                }
            }
            self.allocs[a].chunks = Some(chunks);
            self.rebuild_chunk_index();
            for (tensor, addr, bytes) in moving {
                let chunk = self.allocs[a].chunks.as_ref().expect("just allocated")[addr.chunk];
                tensor.set_buffer(std::ptr::null_mut());
                tensor.set_data(std::ptr::null_mut());
                let at = (buffer_base(chunk) as usize + addr.offset) as *mut c_void;
                if place(chunk, tensor, at) != GGML_STATUS_SUCCESS {
                    return Err(AllocError::Backend(format!("ggml_gallocr: buffer refused tensor {tensor}")));
                }
                tensor_set(tensor, bytes.as_ptr() as *const c_void, 0, bytes.len());
            }
        }
        self.rebuild_chunk_index();
        Ok(resized)
    }

    /// Whether `plan` fits the compute buffers there are (an allocator without buffers takes any).
    fn fits_buffers(&self, plan: &Plan) -> bool {
        self.allocs.iter().zip(&plan.chunk_sizes).all(|(st, wanted)| match &st.chunks {
            None => true,
            Some(chunks) => wanted.iter().enumerate().all(|(c, &w)| w <= chunks.get(c).map_or(0, |b| b.size())),
        })
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
                recycle::give_placements(plan.placements);
                return Ok((like, true));
            }
            recycle::give_placements(like.placements);
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

    fn free_chunks(&mut self, a: usize) {
        if let Some(chunks) = self.allocs[a].chunks.take() {
            self.placed = None;
            let bases: Vec<usize> = chunks.iter().map(|&b| buffer_base(b) as usize).collect();
            self.residency.chunks_freed(a, &bases, self.seq + 1);
            for b in chunks {
                // SAFETY: the allocator created these chunks and is their only owner.
                unsafe { buffer_free(b) };
            }
        }
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
            Some(p) if p.built.model.nodes.len() == n_nodes && p.built.model.leafs.len() == n_leafs => (
                Some(p.built.model.nodes.iter().map(|n| n.buffer_id as i32).collect()),
                Some(p.built.model.leafs.iter().map(|&(_, id)| id as i32).collect()),
            ),
            _ => (None, None),
        }
    }

    /// Per buffer id, the bytes the last plan needs (upstream's reserve_n_size).
    pub fn planned_sizes(&self) -> Vec<usize> {
        let plan = self.last.as_ref().map(|p| &p.record.plan);
        self.alloc_of_id.iter().map(|&a| plan.map(|p| p.total_size(a)).unwrap_or(0)).collect()
    }

    /// The lower bound of the last plan for buffer id `id`: the most bytes live at once.
    pub fn planned_lower_bound(&self, id: usize) -> usize {
        self.last.as_ref().map(|p| p.record.plan.live_peak.get(self.alloc_of_id[id]).copied().unwrap_or(0)).unwrap_or(0)
    }

    /// The fast path of `alloc_graph`: `g` is, node for node and source for source, the graph
    /// the last plan was made for (the model `build` would make of it equals the last one), and
    /// every tensor's memory is as the plan expects. One pass over the graph, no hashing, nothing
    /// stored but the model. Anything else goes through `build`, which decides precisely.
    fn is_last_graph(&self, g: &GraphInput) -> Replay {
        let Some(last) = &self.last else { return Replay::No };
        let (model, tensors) = (&last.built.model, &last.built.tensors);
        if g.nodes.len() != model.nodes.len() || g.leafs.len() != model.leafs.len() {
            return Replay::No;
        }
        let id = |ids: Option<&[i32]>, i: usize| ids.map(|v| v[i] as usize).unwrap_or(0);
        let mut in_place = !poison::enabled();
        for (i, (&n, desc)) in g.nodes.iter().zip(&model.nodes).enumerate() {
            if n != tensors[desc.tensor] || id(g.node_ids, i) != desc.buffer_id {
                return Replay::No;
            }
            for (j, &e) in desc.srcs.slots().iter().enumerate() {
                let p = n.src_ptr(j);
                let same = if e == SrcList::NONE { p.is_null() } else { tensors.get(e as usize).is_some_and(|t| t.as_ptr() == p) };
                if !same {
                    return Replay::No;
                }
            }
            match self.as_planned(last, desc.tensor, g) {
                Some(here) => in_place &= here,
                None => return Replay::No,
            }
        }
        for (i, (&l, &(t, buffer_id))) in g.leafs.iter().zip(&model.leafs).enumerate() {
            if l != tensors[t] || id(g.leaf_ids, i) != buffer_id {
                return Replay::No;
            }
            match self.as_planned(last, t, g) {
                Some(here) => in_place &= here,
                None => return Replay::No,
            }
        }
        for &t in &last.loose {
            match self.as_planned(last, t, g) {
                Some(here) => in_place &= here,
                None => return Replay::No,
            }
        }
        Replay::Same { in_place }
    }

    /// Whether tensor `t` of the last plan still has what the plan was made from: None if not;
    /// else whether it is already where the plan puts it. Only what the plan depends on is
    /// compared: for a view its source and whether it is a keep-alive marker (op NONE); for
    /// somebody else's memory that it still is; for the allocator's own tensors also flags, and,
    /// unless the tensor is exactly where the plan put it (then it is the tensor placed there:
    /// tensors are made without data), op class and layout (sizes and in-place reuse follow
    /// from them).
    #[inline]
    fn as_planned(&self, last: &Planned, t: Tid, g: &GraphInput) -> Option<bool> {
        let desc = &last.built.model.tensors[t];
        let tensor = last.built.tensors[t];
        let view_src = tensor.view_src_ptr();
        if let Some(v) = desc.view_of {
            if view_src != last.built.tensors[v].as_ptr() || (tensor.op() == sys::op::NONE) != desc.op_none {
                return None;
            }
            return Some(view_is_current(tensor, last.built.tensors[v]));
        }
        let data = tensor.data() as usize;
        let buffer = tensor.buffer_ptr() as usize;
        if !view_src.is_null() {
            return None;
        }
        if let Presence::External = desc.presence {
            let ours = self.find_chunk(buffer).is_some() || self.residency.tombstone(tensor.addr(), data).is_some();
            return (data != 0 && !ours).then_some(true);
        }
        let extra = match g.extra_flags {
            Some(m) if !m.is_empty() => m.get(&tensor.addr()).copied().unwrap_or(0),
            _ => 0,
        };
        let flags = tensor.flags() | extra;
        if (flags & sys::GGML_TENSOR_FLAG_INPUT != 0) != desc.input || (flags & sys::GGML_TENSOR_FLAG_OUTPUT != 0) != desc.output {
            return None;
        }
        let placement = match desc.presence {
            Presence::Fresh => last.record.plan.placements[t],
            _ => None,
        };
        if let Some(p) = placement {
            let (chunk, base) = self.chunk_bases[p.alloc][p.addr.chunk];
            if buffer == chunk && data == base + p.addr.offset {
                // where the plan put it, so the tensor it placed: a tensor made anew has no data
                // (upstream takes any tensor with data as it is, without looking at its size)
                return Some(true);
            }
        }
        let op = tensor.op();
        if inplace::op_can_inplace(op) != desc.inplace_op || (op == sys::op::NONE) != desc.op_none || !tensor.has_layout(&last.built.model.layouts[t]) {
            return None;
        }
        match desc.presence {
            Presence::Fresh => {
                // a leaf the plan places must have no data, or exactly the planned place (else
                // its bytes came from elsewhere and deserve the full classification, an input's
                // to be carried to its place); anything computed anew may be anywhere in this
                // allocator's memory
                let leaf_placed = placement.is_some() && !last.record.is_node[t];
                (data == 0 || (!leaf_placed && self.find_chunk(buffer).is_some())).then_some(false)
            }
            Presence::Pinned(i) => {
                let Pin { alloc, addr, .. } = last.built.model.pins[i as usize];
                let &(_, base) = self.chunk_bases[alloc].get(addr.chunk)?;
                (data == base + addr.offset).then_some(true)
            }
            Presence::External => unreachable!("handled above"),
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
            let seen = self.replay_last(in_place)?;
            self.keep_placed(g, seen);
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
            let seen = self.apply(&built, &plan)?;
            carry_inputs(carried, &built);
            for t in &built.tensors {
                self.residency.forget_tombstone(t.addr());
            }
            self.remember(built, plan);
            if resized.any && !from_template && self.planner == Planner::Best {
                self.keep_template();
            }
            let last = self.last.as_ref().expect("just remembered");
            record_application(&mut self.residency, self.seq, &last.record, &last.built.tensors, last.addrs.clone(), true);
            self.keep_placed(g, Some(seen));
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
        let seen = self.apply(&built, &record.plan)?;
        carry_inputs(carried, &built);
        let addrs: Rc<Vec<usize>> = Rc::new(built.tensors.iter().map(|t| t.addr()).collect());
        for &t in addrs.iter() {
            self.residency.forget_tombstone(t);
        }
        // a structurally equal graph of other tensors, or the plan's own
        let differ = *addrs != *self.last.as_ref().expect("same").addrs;
        record_application(&mut self.residency, self.seq, &record, &built.tensors, addrs, !differ);
        if !differ {
            self.keep_placed(g, Some(seen));
        } else {
            recycle::give_seen(seen);
        }
        Ok(Allocated { planned: false, grew })
    }

    /// Whether `g` is the graph placed last, every header as it was right after placing (see
    /// `placed`): then nothing needs to be placed, nor checked further.
    fn placed_unchanged(&self, g: &GraphInput) -> bool {
        let (Some(placed), Some(last)) = (&self.placed, &self.last) else { return false };
        let model = &last.built.model;
        fn ids_match(ids: Option<&[i32]>, mut want: impl Iterator<Item = usize>) -> bool {
            match ids {
                None => want.all(|id| id == 0),
                Some(ids) => ids.iter().zip(want).all(|(&a, b)| a as usize == b),
            }
        }
        may_keep_placed(g)
            && (self.bufts.len() == 1 && g.node_ids.is_none() && g.leaf_ids.is_none()
                || ids_match(g.node_ids, model.nodes.iter().map(|n| n.buffer_id))
                    && ids_match(g.leaf_ids, model.leafs.iter().map(|l| l.1)))
            && placed.unchanged(g.nodes, g.leafs)
    }

    /// Reads `g`, just placed as the last plan's graph with the last plan's tensors, for
    /// `placed_unchanged` (unless `may_keep_placed` says no).
    /// `seen`: what `apply` saw of every tensor, when it placed them (else the headers are read).
    fn keep_placed(&mut self, g: &GraphInput, seen: Option<Vec<Seen>>) {
        if !may_keep_placed(g) {
            self.placed = None;
            if let Some(seen) = seen {
                recycle::give_seen(seen);
            }
            return;
        }
        let last = self.last.as_ref().expect("a graph was just placed");
        let (tensors, model) = (&last.built.tensors, &last.built.model);
        let seen = seen.unwrap_or_else(|| {
            let mut seen = recycle::take_seen(tensors.len());
            seen.extend(tensors.iter().map(|&t| Seen::of(t)));
            seen
        });
        self.placed = Some(PlacedGraph::take(tensors, model, &last.loose, &seen));
        recycle::give_seen(seen);
    }

    /// Allocates the last planned graph again, its tensors `in_place` already or not.
    /// Returns what `apply` saw, when it placed the tensors.
    fn replay_last(&mut self, in_place: bool) -> Result<Option<Vec<Seen>>, AllocError> {
        self.n_replays += 1;
        self.seq += 1;
        let last = self.last.take().expect("a last plan to replay");
        let applied = if in_place {
            self.reset_buffers();
            Ok(None)
        } else {
            self.apply(&last.built, &last.record.plan).map(Some)
        };
        if !self.residency.is_newest(&last.record, &last.addrs) {
            record_application(&mut self.residency, self.seq, &last.record, &last.built.tensors, last.addrs.clone(), true);
        }
        self.last = Some(last);
        applied
    }

    /// Whether `repeat_last` may be used: the allocator neither allocated nor planned anything
    /// since it was in state `since`, and it does not poison fresh memory.
    pub fn can_repeat(&self, since: AllocatorState) -> bool {
        since == self.state() && self.last.is_some() && self.allocs.iter().all(|a| a.chunks.is_some()) && !poison::enabled()
    }

    /// Allocates the last allocated graph again, for a caller that knows that nothing changed
    /// since that allocation (`can_repeat`, and not the graph, not a header of its tensors).
    /// Every tensor is where the plan put it, so only the buffers are reset, as for a replay.
    pub fn repeat_last(&mut self) {
        debug_assert!(self.last.is_some() && !poison::enabled());
        // in place: nothing is placed, so nothing can fail
        let _ = self.replay_last(true);
    }

    /// (allocations, plans made) so far: any change means the memory may have moved.
    pub fn state(&self) -> AllocatorState {
        (self.seq, self.n_plans)
    }

    fn last_sizes_fit(&self) -> bool {
        let last = self.last.as_ref().expect("checked by the caller");
        self.sizes_fit(&last.built, &last.record.plan)
    }

    /// Buffer types with their own alloc size may need more for the same layout (a different
    /// op): check those against the sizes the plan reserved.
    fn sizes_fit(&self, built: &Built, plan: &Plan) -> bool {
        if !self.bufts.iter().any(|b| b.has_alloc_size()) {
            return true; // sizes follow from the layouts, which are equal
        }
        built.tensors.iter().enumerate().all(|(t, &tensor)| match plan.placements[t] {
            Some(p) => buft_alloc_size(self.bufts[p.buffer_id], tensor) <= p.size,
            None => true,
        })
    }

    /// Resets the compute buffers (as upstream does before placing tensors).
    fn reset_buffers(&self) {
        for st in &self.allocs {
            for &b in st.chunks.iter().flatten() {
                b.reset();
            }
        }
    }

    /// Places every tensor of `built` where `plan` says (tensors already there are left alone,
    /// unless poisoning), and points views at their sources.
    fn apply(&mut self, built: &Built, plan: &Plan) -> Result<Vec<Seen>, AllocError> {
        self.placed = None;
        self.reset_buffers();
        let bases: Vec<Vec<(Buffer, usize)>> =
            self.allocs.iter().map(|st| st.chunks.iter().flatten().map(|&b| (b, buffer_base(b) as usize)).collect()).collect();
        let mut moved = vec![false; built.tensors.len()];
        let poisoning = poison::enabled();
        // what each header reads once placed, for `keep_placed`: what this loop touches anyway,
        // the rest from the model (read from the same headers by `build`)
        let mut seen = recycle::take_seen(built.tensors.len());
        for (t, &tensor) in built.tensors.iter().enumerate() {
            let desc = &built.model.tensors[t];
            let status = if let Some(v) = desc.view_of {
                if moved[v] || !view_is_current(tensor, built.tensors[v]) {
                    reinit_view(tensor)
                } else {
                    GGML_STATUS_SUCCESS
                }
            } else if let Some(p) = plan.placements[t] {
                let (chunk, base) = bases[p.alloc][p.addr.chunk];
                let at = base + p.addr.offset;
                if poisoning || tensor.data() as usize != at || tensor.buffer_ptr() != chunk.as_ptr() {
                    // (else already there: placed by an earlier allocation of this plan)
                    moved[t] = true;
                    let status = place(chunk, tensor, at as *mut c_void);
                    if poisoning && status == GGML_STATUS_SUCCESS {
                        poison::fill(tensor);
                    }
                    status
                } else {
                    GGML_STATUS_SUCCESS
                }
            } else {
                GGML_STATUS_SUCCESS
            };
            if status != GGML_STATUS_SUCCESS {
                recycle::give_seen(seen);
                let msg = format!("ggml_gallocr: the buffer refused tensor {tensor} (init_tensor returned {status})");
                crate::log_error!("{msg}\n");
                return Err(AllocError::Backend(msg));
            }
            seen.push(Seen::new(tensor, desc.input, desc.output, desc.view_of.map(|v| built.tensors[v])));
        }
        Ok(seen)
    }

    /// Bytes of the compute buffer of buffer id `id` (0 when it shares an earlier id's buffer).
    pub fn buffer_size(&self, id: usize) -> usize {
        crate::ensure!(id < self.bufts.len(), "ggml_gallocr_get_buffer_size: buffer id {id} out of range ({})", self.bufts.len());
        let a = self.alloc_of_id[id];
        if self.alloc_of_id[..id].contains(&a) {
            return 0;
        }
        self.allocs[a].chunks.iter().flatten().map(|b| b.size()).sum()
    }

    /// The chunk buffers of buffer id `id` (for tests and the scheduler's diagnostics).
    pub fn chunks(&self, id: usize) -> Vec<Buffer> {
        self.allocs[self.alloc_of_id[id]].chunks.clone().unwrap_or_default()
    }

    /// Where `t`'s bytes are, as far as this allocator knows, from `t`'s header alone: the
    /// buffer it points at is never read (it may be one this allocator freed).
    pub fn residence(&self, t: TensorRef) -> Residence {
        let data = t.data() as usize;
        // first: a freed chunk's struct address may have been taken by a new buffer since
        if data != 0 && self.residency.tombstone(t.addr(), data).is_some() {
            return Residence::Freed;
        }
        if self.find_chunk(t.buffer_ptr() as usize).is_some() { Residence::Compute } else { Residence::Elsewhere }
    }
}

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

impl Drop for Gallocr {
    fn drop(&mut self) {
        for a in 0..self.allocs.len() {
            if let Some(chunks) = self.allocs[a].chunks.take() {
                for b in chunks {
                    // SAFETY: the allocator created these chunks and is their only owner.
                    unsafe { buffer_free(b) };
                }
            }
        }
    }
}

/// Whether the graph placed last may be recognised by `placed` (see `Gallocr::keep_placed`):
/// not when the caller adds flags that are not in the tensors, nor when poisoning (every
/// allocation must place and fill again).
fn may_keep_placed(g: &GraphInput) -> bool {
    g.extra_flags.is_none_or(|m| m.is_empty()) && !poison::enabled()
}

/// Tells `residency` that allocation `seq` placed `tensors` (addresses `addrs`) as `record`
/// says. Their names are read now, while they are there: into the record when they are the
/// tensors it was planned with (`own_tensors`), else beside it.
fn record_application(residency: &mut Residency, seq: u64, record: &Rc<PlanRecord>, tensors: &[TensorRef], addrs: Rc<Vec<usize>>, own_tensors: bool) {
    let names = if own_tensors {
        record.names_or(|| placed_names(tensors, &record.plan));
        None
    } else {
        Some(Rc::new(placed_names(tensors, &record.plan)))
    };
    residency.record(seq, record.clone(), addrs, names);
}

/// The names of the tensors `plan` places, for messages: those are the tensors whose memory
/// another one may take over.
fn placed_names(tensors: &[TensorRef], plan: &Plan) -> Names {
    Names::from_raw(tensors.iter().zip(&plan.placements).map(|(t, p)| p.map(|_| t.name_bytes())))
}

/// Once `built` is placed: its carried inputs get their bytes back, and the inputs that lost
/// theirs are marked (see `inputs`).
fn carry_inputs(carried: Carried, built: &Built) {
    let kept = built.carried.iter().chain(built.lost.iter().map(|(t, _)| t)).map(|&t| built.tensors[t]);
    inputs::placed(&built.tensors, kept);
    carried.restore();
    for (t, why) in &built.lost {
        inputs::watch(built.tensors[*t], why.clone());
    }
}

/// Whether `view` points where its source says (`data = view_src->data + view_offs`, same
/// buffer), or its source has no memory from ggml-backend to point into.
fn view_is_current(view: TensorRef, src: TensorRef) -> bool {
    let (src_data, src_buffer) = (src.data(), src.buffer_ptr());
    src_buffer.is_null()
        || src_data.is_null()
        || (view.buffer_ptr() == src_buffer && view.data() as usize == src_data as usize + view.view_offs())
}

pub fn log_alloc_error(e: &AllocError) {
    if let AllocError::LostResult(msg) = e {
        crate::log_error!("ggml_gallocr: {msg}\n");
    }
}
