//! Cutting the assigned graph into splits (consecutive nodes on one backend), the copies each
//! split needs of sources that live where its backend cannot read them, and the graph the
//! allocator plans (the caller's nodes plus those copies plus keep-alive markers).
//!
//! The caller's graph is never written: a node's source is pointed at its copy only while its
//! split is computed (`Substitution`), and each split's node list is our own array, so a
//! backend's `graph_optimize` may reorder it freely.

use std::ffi::c_void;

use crate::alloc::gallocr::Residence;
use crate::ggml::abi_impl::ggml_backend_graph_optimize_params;
use crate::ggml::graph::{GraphView, ViewContext, next_graph_uid};
use crate::ggml::handles::Backend;
use crate::ggml::sys::{self, GGML_MAX_SRC, ggml_tensor};
use crate::ggml::tensor::{Header, OwnedTensor, TensorRef};
use crate::sched::assign::{Backends, assign};
use crate::sched::index::GraphIndex;
use ggml_plan::addr_map::AddrMap;
use ggml_plan::splits::{SplitError, copy_key};

/// Point `node->src[index]` at `copy` while the split runs.
#[derive(Clone, Copy, Debug)]
pub struct Substitution {
    pub node: TensorRef,
    pub index: usize,
    pub copy: *mut ggml_tensor,
    pub original: *mut ggml_tensor,
}

pub struct Split {
    pub backend: usize,
    /// positions in the caller's node list
    pub i_start: usize,
    pub i_end: usize,
    /// sources copied in from other backends, in the order they are copied
    pub inputs: Vec<TensorRef>,
    /// the copy of each input for this allocation (same order as `inputs`)
    pub input_copies: Vec<TensorRef>,
    pub substitutions: Vec<Substitution>,
    pub graph: GraphView,
    /// its steps `start..end` in the graph the allocator plans (the copies of its inputs first)
    pub alloc_steps: (usize, usize),
}

/// Tensors the scheduler creates, kept from one allocation to the next so that the same graph
/// gets the same tensor addresses (cheap plan replay, stable graphs for backends that cache).
#[derive(Default)]
pub struct TensorPool {
    tensors: Vec<OwnedTensor>,
    used: usize,
}

impl TensorPool {
    pub fn rewind(&mut self) {
        self.used = 0;
    }

    /// The tensors taken since the last rewind.
    pub fn in_use(&self) -> impl Iterator<Item = TensorRef> + '_ {
        self.tensors[..self.used].iter().map(|t| t.tensor())
    }

    /// The headers of the tensors taken since the last rewind, as they are now.
    pub fn headers(&self) -> Vec<Header> {
        self.in_use().map(|t| t.header()).collect()
    }

    /// Back to the moment `headers` were taken (with no tensor dropped since): the same tensors
    /// taken, each byte for byte as it was then.
    pub fn restore(&mut self, headers: &[Header]) {
        crate::ensure!(headers.len() <= self.tensors.len(), "ggml_backend_sched: restoring more scheduler tensors than exist");
        for (t, h) in self.tensors.iter_mut().zip(headers) {
            t.restore(h);
        }
        self.used = headers.len();
    }

    pub fn take(&mut self, like: TensorRef, name: &str) -> TensorRef {
        if self.used == self.tensors.len() {
            self.tensors.push(OwnedTensor::with_layout_of(like, name));
        } else {
            self.tensors[self.used].reinit(like, name);
        }
        self.used += 1;
        self.tensors[self.used - 1].tensor()
    }
}

/// Keep-alive requests a backend's `graph_optimize` made: `until` -> tensors to keep.
#[derive(Default)]
pub struct AllocDeps {
    pub keep: AddrMap<Vec<*mut ggml_tensor>>,
    pub n_markers: usize,
}

/// `add_alloc_dep` of `ggml_backend_graph_optimize_params`.
pub unsafe extern "C" fn add_alloc_dep(user_data: *mut c_void, tensor: *mut ggml_tensor, until: *mut ggml_tensor) {
    crate::ffi_boundary!({
        // SAFETY: user_data is the &mut AllocDeps passed with the params, alive during the call.
        let deps = unsafe { &mut *(user_data as *mut AllocDeps) };
        let keep = deps.keep.entry(until as usize).or_default();
        if !keep.contains(&tensor) {
            keep.push(tensor);
        }
    })
}

/// The graph the allocator plans, with one buffer id (= backend index) per entry.
#[derive(Default)]
pub struct AllocGraph {
    pub nodes: Vec<TensorRef>,
    pub node_ids: Vec<i32>,
    pub leafs: Vec<TensorRef>,
    pub leaf_ids: Vec<i32>,
    /// flags added for the allocator only (pipeline copies of the caller's input leafs)
    pub extra_flags: AddrMap<i32>,
}

pub struct SplitPlan {
    pub ix: GraphIndex,
    /// backend of every tensor of `ix`
    pub ids: Vec<i32>,
    pub splits: Vec<Split>,
    /// caller leafs flagged input, with their copies (pipeline parallelism only)
    pub graph_inputs: Vec<(TensorRef, Vec<TensorRef>)>,
    pub alloc_graph: AllocGraph,
}

pub struct SplitParams<'a, B: Backends> {
    pub backends: &'a B,
    pub handles: &'a [Backend],
    pub op_offload: bool,
    pub n_copies: usize,
    pub cur_copy: usize,
}

/// What decides a tensor's backend before the passes run.
pub struct Preset<'a> {
    /// `ggml_backend_sched_set_tensor_backend`, by tensor address
    pub user: &'a AddrMap<usize>,
    /// the previous graph's index (taken over when the graph is the same)
    pub previous: Option<GraphIndex>,
    /// the previous graph's assignments, when they still hold (no reset since)
    pub previous_ids: Option<Vec<i32>>,
}

/// Runs the assignment passes and builds the splits for `nodes`/`leafs` (the caller's graph);
/// `on_index` sees the graph's index before any pass runs.
#[allow(clippy::too_many_arguments)]
pub fn split_graph<B: Backends>(
    p: &SplitParams<B>,
    nodes: &[TensorRef],
    leafs: &[TensorRef],
    preset: Preset,
    residence: impl Fn(TensorRef) -> Residence,
    pool: &mut TensorPool,
    view_ctx: &ViewContext,
    on_index: impl FnOnce(&GraphIndex),
) -> SplitPlan {
    let Preset { user, mut previous, previous_ids } = preset;
    let ix = GraphIndex::of(nodes, leafs, residence, &mut previous);
    on_index(&ix);
    // user assignments, then (no reset since) the previous graph's assignments
    let mut ids = match (&previous, previous_ids) {
        (None, Some(old)) if old.len() == ix.len() => old, // the same graph: the same ids
        (Some(old_ix), Some(old)) => ix.tensors.iter().map(|&t| old_ix.get(t).map_or(-1, |k| old[k as usize])).collect(),
        _ => vec![-1i32; ix.len()],
    };
    if !user.is_empty() {
        for (i, t) in ix.tensors.iter().enumerate() {
            if let Some(&b) = user.get(&t.addr()) {
                ids[i] = b as i32;
            }
        }
    }
    let asg = assign(&ix, p.backends, p.op_offload, ids);

    pool.rewind();
    let n_copies = p.n_copies;
    // copies of a source for a backend (`copy_key`): n_copies pool tensors
    let mut copies: AddrMap<Vec<TensorRef>> = AddrMap::default();

    // pass 5: splits and the copies they need (ggml_plan::splits), then the copy tensors
    let stored_as_weights = |s: u32| ix.storage[s as usize].is_some_and(|b| b.usage() == sys::USAGE_WEIGHTS);
    let models = match ggml_plan::splits::cut(&asg, stored_as_weights) {
        Ok(models) => models,
        Err(SplitError::NodeWithoutBackend { node }) => crate::fatal!("ggml_backend_sched: node {} has no backend", ix.tensor(node)),
        Err(SplitError::SourceWithoutBackend { node, src }) => {
            crate::fatal!("ggml_backend_sched: source {} of node {} has no backend", ix.tensor(src), ix.tensor(node))
        }
    };
    let mut splits: Vec<Split> = Vec::with_capacity(models.len());
    for m in &models {
        let mut cur = SplitBuilder::new(m.backend, m.i_start);
        for &s in &m.inputs {
            let src = ix.tensor(s);
            let name_b = p.backends.name(m.backend);
            let made: Vec<TensorRef> = (0..n_copies)
                .map(|c| {
                    let t = pool.take(src, &format!("{}#{}#{}", name_b, src.name(), c));
                    if n_copies > 1 {
                        t.set_flags(sys::GGML_TENSOR_FLAG_INPUT | sys::GGML_TENSOR_FLAG_OUTPUT);
                    }
                    t
                })
                .collect();
            cur.inputs.push(src);
            cur.input_copies.push(made[p.cur_copy]);
            copies.insert(copy_key(s, m.backend), made);
        }
        for r in &m.reads {
            let copy = copies[&copy_key(r.src, m.backend)][p.cur_copy];
            let node = ix.tensor(ix.nodes[r.node]);
            cur.substitutions.push(Substitution { node, index: r.slot, copy: copy.as_ptr(), original: ix.tensor(r.src).as_ptr() });
        }
        splits.push(cur.finish(m.i_end));
    }

    // pass 6 (pipeline parallelism): every caller leaf flagged input gets n_copies slots
    let mut graph_inputs = Vec::new();
    let mut extra_flags = AddrMap::default();
    if n_copies > 1 {
        for &l in &ix.leafs {
            let leaf = ix.tensor(l);
            if !leaf.is_input() {
                continue;
            }
            let lb = asg.ids[l as usize];
            crate::ensure!(lb != -1, "ggml_backend_sched: leaf {leaf} has no backend");
            let name_b = p.backends.name(lb as usize);
            let slots: Vec<TensorRef> = (0..n_copies)
                .map(|c| {
                    if c == p.cur_copy {
                        leaf
                    } else {
                        let t = pool.take(leaf, &format!("{}#{}#{}", name_b, leaf.name(), c));
                        t.set_flags(sys::GGML_TENSOR_FLAG_INPUT | sys::GGML_TENSOR_FLAG_OUTPUT);
                        t
                    }
                })
                .collect();
            extra_flags.insert(leaf.addr(), sys::GGML_TENSOR_FLAG_INPUT | sys::GGML_TENSOR_FLAG_OUTPUT);
            graph_inputs.push((leaf, slots));
        }
    }

    // let each backend optimise its splits; collect the keep-alive requests
    let mut deps = AllocDeps::default();
    for split in &mut splits {
        let mut params = ggml_backend_graph_optimize_params { add_alloc_dep: Some(add_alloc_dep), user_data: &mut deps as *mut AllocDeps as *mut c_void };
        let ptrs: Vec<*mut ggml_tensor> = nodes[split.i_start..split.i_end].iter().map(|t| t.as_ptr()).collect();
        split.graph = GraphView::new(ptrs, view_ctx, 0);
        p.handles[split.backend].graph_optimize(split.graph.as_ptr(), &mut params);
        split.graph.reload();
    }

    let ids = asg.ids;
    let mut g = AllocGraph { extra_flags, ..Default::default() };
    let dep_marker = |pool: &mut TensorPool, of: TensorRef, srcs: &[*mut ggml_tensor]| -> TensorRef {
        let t = pool.take(of, &format!("{} (dep)", of.name()));
        t.set_view(of, 0);
        for (k, &s) in srcs.iter().enumerate() {
            t.set_src(k, s);
        }
        t
    };
    let mut n_markers = 0;
    let mut alloc_steps = Vec::with_capacity(splits.len());
    for split in &splits {
        let start = g.nodes.len();
        for (k, &input) in split.inputs.iter().enumerate() {
            // keep the source alive until it is copied, and place the copy at the split's start
            let input_b = ids[ix.get(input).expect("inputs are graph tensors") as usize];
            let marker = dep_marker(pool, input, &[input.as_ptr()]);
            g.nodes.push(marker);
            g.node_ids.push(input_b);
            g.nodes.push(split.input_copies[k]);
            g.node_ids.push(split.backend as i32);
        }
        // the split's nodes in the caller's order (no graph_optimize, or one that changed nothing):
        // their ids are known by position
        let caller = &nodes[split.i_start..split.i_end];
        let in_order = split.graph.len() == caller.len() && split.graph.node_ptrs().iter().zip(caller).all(|(&p, t)| p == t.as_ptr());
        for (k, node) in split.graph.nodes().enumerate() {
            let id = if in_order { Some(ix.nodes[split.i_start + k]) } else { ix.get(node) };
            let b = id.map(|i| ids[i as usize]).unwrap_or(split.backend as i32);
            g.nodes.push(node);
            g.node_ids.push(b);
            if deps.keep.is_empty() {
                continue;
            }
            if let Some(keep) = deps.keep.get(&node.addr()) {
                for chunk in keep.chunks(GGML_MAX_SRC) {
                    // SAFETY: keep-alive tensors come from the backend's view of our graph.
                    let of = unsafe { TensorRef::from_raw(chunk[0]) }.expect("add_alloc_dep with a NULL tensor");
                    g.nodes.push(dep_marker(pool, of, chunk));
                    g.node_ids.push(split.backend as i32);
                    n_markers += 1;
                }
            }
        }
        alloc_steps.push((start, g.nodes.len()));
    }
    let expected: usize = deps.keep.values().map(|v| v.len().div_ceil(GGML_MAX_SRC)).sum();
    crate::ensure!(n_markers == expected, "ggml_backend_sched: a backend's graph_optimize asked to keep tensors alive until a node that is not in its graph");

    if n_copies > 1 {
        for (leaf, slots) in &graph_inputs {
            let b = ids[ix.get(*leaf).expect("graph input") as usize];
            for &s in slots {
                g.leafs.push(s);
                g.leaf_ids.push(b);
            }
        }
        for split in &splits {
            for &input in &split.inputs {
                let key = copy_key(ix.get(input).expect("inputs are graph tensors"), split.backend);
                for &c in &copies[&key] {
                    g.leafs.push(c);
                    g.leaf_ids.push(split.backend as i32);
                }
            }
        }
    }
    for &l in &ix.leafs {
        g.leafs.push(ix.tensor(l));
        g.leaf_ids.push(ids[l as usize]);
    }

    for (split, steps) in splits.iter_mut().zip(alloc_steps) {
        split.graph.set_uid(next_graph_uid());
        split.alloc_steps = steps;
    }
    deps.n_markers = n_markers;
    SplitPlan { ix, ids, splits, graph_inputs, alloc_graph: g }
}

struct SplitBuilder {
    backend: usize,
    i_start: usize,
    inputs: Vec<TensorRef>,
    input_copies: Vec<TensorRef>,
    substitutions: Vec<Substitution>,
}

impl SplitBuilder {
    fn new(backend: usize, i_start: usize) -> SplitBuilder {
        SplitBuilder { backend, i_start, inputs: Vec::new(), input_copies: Vec::new(), substitutions: Vec::new() }
    }

    fn finish(self, i_end: usize) -> Split {
        Split {
            backend: self.backend,
            i_start: self.i_start,
            i_end,
            inputs: self.inputs,
            input_copies: self.input_copies,
            substitutions: self.substitutions,
            graph: GraphView::new(Vec::new(), &ViewContext::empty(), 0),
            alloc_steps: (0, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_puts_back_every_taken_tensor_byte_for_byte() {
        // SAFETY: ggml_tensor is a C struct of integers, pointers and arrays of them; zero is valid.
        let mut like: Box<ggml_tensor> = Box::new(unsafe { std::mem::zeroed() });
        like.ne = [8, 2, 1, 1];
        like.nb = [4, 32, 64, 64];
        // SAFETY: the box outlives every use of the reference below.
        let like = unsafe { TensorRef::from_raw(&*like) }.expect("not null");
        let mut pool = TensorPool::default();
        let a = pool.take(like, "a");
        a.set_flags(sys::GGML_TENSOR_FLAG_INPUT);
        let b = pool.take(like, "b (dep)");
        b.set_view(a, 16);
        let saved = pool.headers();
        assert_eq!(saved.len(), 2);
        // what an allocation and a later split leave in them
        a.set_data(0x1000 as *mut c_void);
        a.set_flags(0);
        b.set_src(0, a.as_ptr());
        pool.rewind();
        let c = pool.take(a, "c");
        c.set_name("another name");
        assert!(!a.has_header(&saved[0]) && !b.has_header(&saved[1]));
        pool.restore(&saved);
        assert!(a.has_header(&saved[0]) && b.has_header(&saved[1]));
        assert_eq!(pool.in_use().count(), 2);
        assert_eq!(a.name(), "a");
        assert!(a.is_input() && a.data().is_null());
        assert_eq!(b.view_src_ptr(), a.as_ptr());
    }
}
