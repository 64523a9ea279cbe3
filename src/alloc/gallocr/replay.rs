//! The replay check: whether the graph handed again is the one placed last (`placed`, then the
//! precise comparison with the model its plan was made from), and repeating the last allocation.

use super::*;

/// Whether the graph placed last may be recognised by `placed` (see `Gallocr::keep_placed`):
/// not when the caller adds flags that are not in the tensors, nor when poisoning (every
/// allocation must place and fill again).
pub(super) fn may_keep_placed(g: &GraphInput) -> bool {
    g.extra_flags.is_none_or(|m| m.is_empty()) && !poison::enabled()
}

impl Gallocr {
    /// The fast path of `alloc_graph`: `g` is, node for node and source for source, the graph
    /// the last plan was made for (the model `build` would make of it equals the last one), and
    /// every tensor's memory is as the plan expects. One pass over the graph, no hashing, nothing
    /// stored but the model. Anything else goes through `build`, which decides precisely.
    pub(super) fn is_last_graph(&self, g: &GraphInput) -> Replay {
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
    /// somebody else's memory that it still is; for the allocator's own tensors also flags, op
    /// class and layout (sizes and in-place reuse follow from them).
    #[inline]
    pub(super) fn as_planned(&self, last: &Planned, t: Tid, g: &GraphInput) -> Option<bool> {
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
        // op class and layout even for a tensor exactly where the plan put it: a caller may grow
        // a tensor or change its op in place (upstream's replay checks the size)
        let op = tensor.op();
        if inplace::op_can_inplace(op) != desc.inplace_op || (op == sys::op::NONE) != desc.op_none || !has_plan_layout(tensor, &last.built.model.layouts[t]) {
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
                return Some(true);
            }
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

    /// Whether `g` is the graph placed last, every header as it was right after placing (see
    /// `placed`): then nothing needs to be placed, nor checked further.
    pub(super) fn placed_unchanged(&self, g: &GraphInput) -> bool {
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
                || ids_match(g.node_ids, model.nodes.iter().map(|n| n.buffer_id)) && ids_match(g.leaf_ids, model.leafs.iter().map(|l| l.1)))
            && placed.unchanged(g.nodes, g.leafs)
    }

    /// Reads `g`, the last plan's graph just planned, or allocated again with every tensor
    /// already in place, for `placed_unchanged` (unless `may_keep_placed` says no). Not after
    /// the plan was applied again to tensors placed anew: a graph built anew each time
    /// (llama.cpp) or a scheduler's graph (its copies are placed anew) does not come unchanged,
    /// and the copy of its headers would be wasted.
    pub(super) fn keep_placed(&mut self, g: &GraphInput) {
        if !may_keep_placed(g) {
            self.placed = None;
            return;
        }
        let last = self.last.as_ref().expect("a graph was just placed");
        self.placed = PlacedGraph::take(&last.built.tensors, &last.built.model, &last.loose);
    }

    /// Allocates the last planned graph again, its tensors `in_place` already or not.
    pub(super) fn replay_last(&mut self, in_place: bool) -> Result<(), AllocError> {
        self.n_replays += 1;
        self.seq += 1;
        let last = self.last.take().expect("a last plan to replay");
        let applied = if in_place {
            self.reset_buffers();
            Ok(())
        } else {
            self.apply(&last.built, &last.record.plan)
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

    pub(super) fn last_sizes_fit(&self) -> bool {
        let last = self.last.as_ref().expect("checked by the caller");
        self.sizes_fit(&last.built, &last.record.plan)
    }

    /// Buffer types with their own alloc size may need more for the same layout (a different
    /// op): check those against the sizes the plan reserved.
    pub(super) fn sizes_fit(&self, built: &Built, plan: &Plan) -> bool {
        if !self.bufts.iter().any(|b| b.has_alloc_size()) {
            return true; // sizes follow from the layouts, which are equal
        }
        built.tensors.iter().enumerate().all(|(t, &tensor)| match plan.placements[t] {
            Some(p) => buft_alloc_size(self.bufts[p.buffer_id], tensor) <= p.size,
            None => true,
        })
    }
}
