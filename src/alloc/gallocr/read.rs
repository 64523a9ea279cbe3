//! Reading the graph: numbering its tensors in first-use order (`Numbering`), classifying
//! where each one's memory comes from (`classify`), and building the planner's model (`build`).

use super::*;

/// The planner's copy of a tensor's layout (type, shape, strides).
#[inline]
pub(super) fn plan_layout(t: &crate::ggml::tensor::Layout) -> Layout {
    Layout { type_: t.type_, ne: t.ne, nb: t.nb }
}

/// Whether `tensor` still has the layout the planner was given.
#[inline]
pub(super) fn has_plan_layout(tensor: TensorRef, layout: &Layout) -> bool {
    tensor.ne() == layout.ne && tensor.nb() == layout.nb && tensor.type_() == layout.type_
}

/// The tensors of a graph as `build` numbers them, in first-use order.
pub(super) struct Numbering<'a> {
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
    pub(super) fn tid_of(&mut self, t: TensorRef) -> Tid {
        let tensors = &self.tensors;
        match self.index.find(t.addr(), |id| tensors[id as usize].addr()) {
            Ok(id) => id as Tid,
            Err(vacancy) => self.number(t, vacancy),
        }
    }

    pub(super) fn number(&mut self, t: TensorRef, vacancy: Vacancy) -> Tid {
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
        self.layouts.push(plan_layout(&layout));
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
pub(super) struct Sizes<'a> {
    bufts: &'a [BufferType],
    built: &'a Built,
    plain: Vec<bool>,
    memo: Vec<(usize, usize)>,
}

impl<'a> Sizes<'a> {
    pub(super) fn new(bufts: &'a [BufferType], built: &'a Built) -> Sizes<'a> {
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

impl Gallocr {
    pub(super) fn id_of(&self, ids: Option<&[i32]>, i: usize, what: &str) -> usize {
        let id = ids.map(|ids| ids[i]).unwrap_or(0);
        crate::ensure!(
            id >= 0 && (id as usize) < self.bufts.len(),
            "ggml_gallocr: {what} {i} has buffer id {id}, but the allocator has {} buffer(s)",
            self.bufts.len()
        );
        id as usize
    }

    /// Where `t`'s memory comes from, given whether this graph computes it.
    /// A pinned tensor's place goes to `pins`, under its number `tid`.
    /// An input (a leaf the caller writes) that already holds bytes in this allocator's memory is
    /// placed anew like any input, and goes to `carried` when those bytes are still its own: they
    /// are copied to its new place (see `Carried`), so a caller that does not set it again reads
    /// what it held. When they are gone, it goes to `lost` with the reason (see `inputs`).
    #[allow(clippy::too_many_arguments)] // the outputs are the caller's three lists
    pub(super) fn classify(
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
        let Some(ChunkEntry { alloc: a, chunk: c, base, size, .. }) = self.find_chunk(buf) else {
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
    pub(super) fn build(&self, g: &GraphInput) -> Result<Built, AllocError> {
        // sources outside the node and leaf lists are rare: the lists are the size
        let n_hint = g.nodes.len() + g.leafs.len() + 64;
        let mut n = Numbering {
            index: index_spare::take(n_hint),
            tensors: tensors_spare::take(n_hint),
            descs: descs_spare::take(n_hint),
            layouts: layouts_spare::take(n_hint),
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
        let mut nodes = nodes_spare::take(g.nodes.len());
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
        index_spare::give(index);
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
            descs[t].presence = self.classify(tensors[t], t, listed[t] == NODE, descs[t].input, &mut pins, &mut carried, &mut lost)?;
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

    pub(super) fn plan_model(&mut self, built: &Built) -> Result<Plan, AllocError> {
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
}
