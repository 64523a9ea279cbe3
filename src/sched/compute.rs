//! Running the splits: copy each split's inputs to its backend (synchronising through events when
//! the backends have them), point the nodes at the copies for the duration of the backend call,
//! compute, and put the caller's source pointers back.

use std::ffi::c_void;

use crate::backend::buffer::buffer_is_host;
use crate::backend::stream::graph_compute_async;
use crate::backend::tensor_io::{tensor_copy, tensor_get_async, tensor_set_async};
use crate::ggml::abi_backend::ggml_backend_sched_eval_callback;
use crate::ggml::graph::GraphView;
use crate::ggml::handles::{Backend, Event};
use crate::ggml::sys::{self, GGML_STATUS_SUCCESS, ggml_status, op};
use crate::ggml::tensor::TensorRef;
use crate::sched::splits::{Split, SplitPlan, Substitution};

/// Points the nodes of a split at their input copies; the caller's pointers come back when the
/// guard is dropped, whatever happens in between.
pub struct Substituted<'a> {
    subs: &'a [Substitution],
}

impl<'a> Substituted<'a> {
    pub fn apply(subs: &'a [Substitution]) -> Substituted<'a> {
        for s in subs {
            s.node.set_src(s.index, s.copy);
        }
        Substituted { subs }
    }
}

impl Drop for Substituted<'_> {
    fn drop(&mut self) {
        for s in self.subs.iter().rev() {
            s.node.set_src(s.index, s.original);
        }
    }
}

pub struct ComputeCtx<'a> {
    pub backends: &'a [Backend],
    /// events[backend][copy]
    pub events: &'a [Vec<Option<Event>>],
    pub cur_copy: usize,
    pub callback: ggml_backend_sched_eval_callback,
    pub callback_data: *mut c_void,
}

impl ComputeCtx<'_> {
    fn event(&self, b: usize) -> Option<Event> {
        self.events[b].get(self.cur_copy).copied().flatten()
    }

    /// Host-side wait until backend `b` is done with the current copy slot.
    fn wait_host(&self, b: usize) {
        match self.event(b) {
            Some(e) => crate::backend::stream::event_synchronize(e),
            None => self.backends[b].synchronize(),
        }
    }

    fn backend_of(&self, plan: &SplitPlan, t: TensorRef) -> Backend {
        let b = plan.ix.get(t).map(|i| plan.ids[i as usize]).unwrap_or(-1);
        crate::ensure!(b >= 0, "ggml_backend_sched: input {t} has no backend");
        self.backends[b as usize]
    }

    fn copy_inputs(&self, plan: &SplitPlan, split: &Split) {
        let split_backend = self.backends[split.backend];
        for (k, (&input, &copy)) in split.inputs.iter().zip(&split.input_copies).enumerate() {
            let input_backend = self.backend_of(plan, input);
            if input.is_input() {
                // inputs from the caller are copied now, before the caller can overwrite them
                self.wait_host(split.backend);
                tensor_copy(input, copy);
                continue;
            }
            // wait until the split's backend is done with the copy slot
            match self.event(split.backend) {
                Some(e) => split_backend.event_wait(e),
                None => split_backend.synchronize(),
            }
            if self.copy_used_experts(plan, split, k, input, copy, input_backend) {
                continue;
            }
            if split_backend.cpy_tensor_async(input_backend.as_ptr(), input, copy) != Some(true) {
                input_backend.synchronize();
                self.wait_host(split.backend);
                tensor_copy(input, copy);
            }
        }
    }

    /// Offloaded MoE weights: copy only the experts the ids select (runs of consecutive experts,
    /// plus a little padding so the backend never reads uninitialised bytes after the last one).
    /// Returns false when this input is not such a case.
    fn copy_used_experts(&self, plan: &SplitPlan, split: &Split, k: usize, input: TensorRef, copy: TensorRef, input_backend: Backend) -> bool {
        let Some(node) = split.graph.nodes().next() else { return false };
        let Some(buffer) = input.buffer() else { return false };
        let src0_is_copy = split.substitutions.iter().any(|s| s.node == node && s.index == 0 && s.copy == copy.as_ptr());
        if node.op() != op::MUL_MAT_ID || !src0_is_copy || buffer.usage() != sys::USAGE_WEIGHTS || !buffer_is_host(buffer) {
            return false;
        }
        let split_backend = self.backends[split.backend];
        let n_expert = input.ne()[2];
        let expert_size = input.nb()[2];
        input_backend.synchronize();

        let Some(ids_orig) = node.src(2) else { return false };
        if ids_orig.nelements() == 0 {
            return true;
        }
        // ids copied in later by this split are not there yet: read the original then
        let later = split.inputs.iter().skip(k + 1).any(|&t| t == ids_orig);
        let sub = split.substitutions.iter().find(|s| s.node == node && s.index == 2);
        let (ids_tensor, ids_backend) = match sub {
            // SAFETY: substitution copies are the scheduler's own tensors.
            Some(s) if !later => (unsafe { TensorRef::from_raw(s.copy) }.expect("copy"), split_backend),
            Some(_) => (ids_orig, self.backend_of(plan, ids_orig)),
            None => (ids_orig, split_backend),
        };
        let n_ids = ids_tensor.nbytes() / 4;
        let mut ids = vec![0i32; n_ids];
        tensor_get_async(ids_backend, ids_tensor, ids.as_mut_ptr() as *mut c_void, 0, n_ids * 4);
        ids_backend.synchronize();

        let (ne, nb) = (ids_tensor.ne(), ids_tensor.nb());
        let mut used = vec![false; n_expert.max(0) as usize];
        for i1 in 0..ne[1] as usize {
            for i0 in 0..ne[0] as usize {
                let id = ids[i1 * nb[1] / 4 + i0 * nb[0] / 4];
                crate::ensure!(id >= 0 && (id as i64) < n_expert, "ggml_backend_sched: expert id {id} out of range (0..{n_expert}) in {ids_tensor}");
                used[id as usize] = true;
            }
        }
        let copy_run = |first: usize, last: usize| {
            let offset = first * expert_size;
            let padding = if (last as i64) < n_expert - 1 { expert_size.min(512) } else { 0 };
            let size = (last - first + 1) * expert_size + padding;
            tensor_set_async(split_backend, copy, (input.data() as *const u8).wrapping_add(offset) as *const c_void, offset, size);
        };
        let mut run: Option<(usize, usize)> = None;
        for (id, &u) in used.iter().enumerate() {
            if !u {
                continue;
            }
            run = match run {
                Some((first, last)) if id == last + 1 => Some((first, id)),
                Some((first, last)) => {
                    copy_run(first, last);
                    Some((id, id))
                }
                None => Some((id, id)),
            };
        }
        if let Some((first, last)) = run {
            copy_run(first, last);
        }
        true
    }

    /// Computes the split, handing nodes to the eval callback when there is one. Returns the
    /// status, and false in the second field when the callback asked to stop.
    fn compute_split(&self, split: &mut Split) -> (ggml_status, bool) {
        let backend = self.backends[split.backend];
        let poison = crate::backend::poison::enabled();
        let compute = |graph: &mut GraphView| {
            if poison { crate::backend::stream::compute_checking_poison(backend, graph) } else { graph_compute_async(backend, graph.as_ptr()) }
        };
        let Some(cb) = self.callback else {
            return (compute(&mut split.graph), true);
        };
        let n = split.graph.len();
        let nodes: Vec<TensorRef> = split.graph.nodes().collect();
        // SAFETY (both calls below): the caller's callback with a node of its graph and its data.
        let ask = |t: TensorRef| unsafe { cb(t.as_ptr(), true, self.callback_data) };
        let mut j0 = 0;
        while j0 < n {
            let mut j1 = j0;
            let mut need = ask(nodes[j0]);
            while !need && j1 + 1 < n {
                j1 += 1;
                need = ask(nodes[j1]);
            }
            let mut view = split.graph.sub_view(j0, j1 + 1);
            let status = compute(&mut view);
            if status != GGML_STATUS_SUCCESS {
                return (status, true);
            }
            backend.synchronize();
            if need && !unsafe { cb(nodes[j1].as_ptr(), false, self.callback_data) } {
                return (GGML_STATUS_SUCCESS, false);
            }
            j0 = j1 + 1;
        }
        (GGML_STATUS_SUCCESS, true)
    }

    pub fn run(&self, plan: &mut SplitPlan) -> ggml_status {
        let mut prev: Option<usize> = None;
        for i in 0..plan.splits.len() {
            let b = plan.splits[i].backend;
            // the allocator may reuse memory across splits: the previous backend must be done
            if plan.splits[i].inputs.is_empty() {
                if let Some(p) = prev.filter(|&p| p != b) {
                    self.wait_host(p);
                }
            }
            self.copy_inputs(plan, &plan.splits[i]);
            let split = &mut plan.splits[i];
            let subs = std::mem::take(&mut split.substitutions);
            let (status, go_on) = {
                let _guard = Substituted::apply(&subs);
                self.compute_split(split)
            };
            split.substitutions = subs;
            if status != GGML_STATUS_SUCCESS {
                return status;
            }
            if let Some(e) = self.event(b) {
                self.backends[b].event_record(e);
            }
            if !go_on {
                break;
            }
            prev = Some(b);
        }
        GGML_STATUS_SUCCESS
    }
}
