//! A typed view over `struct ggml_cgraph` (private to ggml, layout checked by the ABI test),
//! and graph views the library builds itself to hand parts of a graph to a backend.

use std::ptr::NonNull;

use crate::sys::{ggml_cgraph, ggml_hash_set, ggml_tensor};
use crate::tensor::TensorRef;

#[derive(Clone, Copy, PartialEq, Eq)]
pub struct GraphRef(NonNull<ggml_cgraph>);

impl GraphRef {
    /// # Safety
    /// `ptr` is NULL or points to a live `ggml_cgraph` whose `nodes`/`leafs` arrays hold
    /// `n_nodes`/`n_leafs` valid tensor pointers, for as long as the value is used.
    #[inline]
    pub unsafe fn from_raw(ptr: *const ggml_cgraph) -> Option<GraphRef> {
        NonNull::new(ptr as *mut ggml_cgraph).map(GraphRef)
    }

    #[inline]
    pub fn as_ptr(self) -> *mut ggml_cgraph {
        self.0.as_ptr()
    }

    fn raw(&self) -> &ggml_cgraph {
        // SAFETY: from_raw's contract; the reference is dropped before any C code runs.
        unsafe { self.0.as_ref() }
    }

    #[inline]
    pub fn n_nodes(self) -> usize {
        self.raw().n_nodes.max(0) as usize
    }

    #[inline]
    pub fn n_leafs(self) -> usize {
        self.raw().n_leafs.max(0) as usize
    }

    #[inline]
    pub fn size(self) -> usize {
        self.raw().size.max(0) as usize
    }

    /// The graph's id (0: not set). ggml 0.9.8's graphs carry none: always 0 there.
    #[inline]
    pub fn uid(self) -> u64 {
        #[cfg(not(feature = "abi-0-9-8"))]
        return self.raw().uid;
        #[cfg(feature = "abi-0-9-8")]
        0
    }

    #[inline]
    pub fn node_ptrs(&self) -> &[*mut ggml_tensor] {
        let g = self.raw();
        if g.nodes.is_null() || g.n_nodes <= 0 {
            return &[];
        }
        // SAFETY: from_raw's contract: `nodes` holds n_nodes pointers.
        unsafe { std::slice::from_raw_parts(g.nodes, g.n_nodes as usize) }
    }

    #[inline]
    pub fn leaf_ptrs(&self) -> &[*mut ggml_tensor] {
        let g = self.raw();
        if g.leafs.is_null() || g.n_leafs <= 0 {
            return &[];
        }
        // SAFETY: from_raw's contract: `leafs` holds n_leafs pointers.
        unsafe { std::slice::from_raw_parts(g.leafs, g.n_leafs as usize) }
    }

    /// The nodes as tensors, without copying them out (a NULL node is a fatal error).
    #[inline]
    pub fn node_slice(&self) -> &[TensorRef] {
        // SAFETY: from_raw's contract: graph nodes are valid tensors.
        unsafe { TensorRef::slice_from_raw(self.node_ptrs()) }.unwrap_or_else(|| crate::fatal!("a graph node is NULL"))
    }

    /// The leafs as tensors, without copying them out (a NULL leaf is a fatal error).
    #[inline]
    pub fn leaf_slice(&self) -> &[TensorRef] {
        // SAFETY: from_raw's contract: graph leafs are valid tensors.
        unsafe { TensorRef::slice_from_raw(self.leaf_ptrs()) }.unwrap_or_else(|| crate::fatal!("a graph leaf is NULL"))
    }

    #[inline]
    pub fn node(self, i: usize) -> TensorRef {
        let p = self.node_ptrs()[i];
        // SAFETY: graph nodes are valid tensors (from_raw's contract).
        unsafe { TensorRef::from_raw(p) }.unwrap_or_else(|| crate::fatal!("graph node {i} is NULL"))
    }

    #[inline]
    pub fn nodes(self) -> impl Iterator<Item = TensorRef> {
        (0..self.n_nodes()).map(move |i| self.node(i))
    }

    /// Sets node `i` (only on graphs the library created: graph copies).
    #[inline]
    pub fn set_node(self, i: usize, t: TensorRef) {
        let g = self.raw();
        assert!(i < g.size.max(0) as usize);
        // SAFETY: i < size and `nodes` has `size` slots; this graph was created by us.
        unsafe { *g.nodes.add(i) = t.as_ptr() };
    }

    #[inline]
    pub fn set_n_nodes(self, n: usize) {
        // SAFETY: a plain field write on a graph the library created.
        unsafe { (*self.0.as_ptr()).n_nodes = n as i32 };
    }

    /// The parts of the caller's graph that backends read from a partial view: the use counts
    /// (fusion decisions) and the evaluation order.
    #[inline]
    pub fn view_context(self) -> ViewContext {
        let g = self.raw();
        ViewContext { use_counts: g.use_counts, visited_hash_set: copy_hash_set(&g.visited_hash_set), order: g.order }
    }
}

fn copy_hash_set(h: &ggml_hash_set) -> ggml_hash_set {
    ggml_hash_set { size: h.size, used: h.used, keys: h.keys }
}

/// What a graph view borrows from the graph it was taken from.
pub struct ViewContext {
    use_counts: *mut i32,
    visited_hash_set: ggml_hash_set,
    order: i32,
}

impl ViewContext {
    /// For views of graphs without use counts.
    #[inline]
    pub fn empty() -> ViewContext {
        ViewContext {
            use_counts: std::ptr::null_mut(),
            visited_hash_set: ggml_hash_set { size: 0, used: std::ptr::null_mut(), keys: std::ptr::null_mut() },
            order: 0,
        }
    }
}

impl PartialEq for ViewContext {
    /// The same graph memory: views taken with either read the same use counts and hash set.
    fn eq(&self, o: &Self) -> bool {
        let (a, b) = (&self.visited_hash_set, &o.visited_hash_set);
        self.use_counts == o.use_counts && a.size == b.size && a.used == b.used && a.keys == b.keys && self.order == o.order
    }
}

impl Clone for ViewContext {
    fn clone(&self) -> Self {
        ViewContext { use_counts: self.use_counts, visited_hash_set: copy_hash_set(&self.visited_hash_set), order: self.order }
    }
}

/// A `ggml_cgraph` over a node list the library owns (like `ggml_graph_view`, but the nodes may
/// be reordered by a backend's `graph_optimize` without touching the caller's graph).
pub struct GraphView {
    nodes: Vec<*mut ggml_tensor>,
    raw: Box<ggml_cgraph>,
}

impl GraphView {
    #[inline]
    pub fn new(nodes: Vec<*mut ggml_tensor>, ctx: &ViewContext, uid: u64) -> GraphView {
        let mut view = GraphView {
            nodes,
            raw: Box::new(ggml_cgraph {
                size: 0,
                n_nodes: 0,
                n_leafs: 0,
                nodes: std::ptr::null_mut(),
                grads: std::ptr::null_mut(),
                grad_accs: std::ptr::null_mut(),
                leafs: std::ptr::null_mut(),
                use_counts: ctx.use_counts,
                visited_hash_set: copy_hash_set(&ctx.visited_hash_set),
                order: ctx.order,
                #[cfg(not(feature = "abi-0-9-8"))]
                uid,
            }),
        };
        #[cfg(feature = "abi-0-9-8")]
        let _ = uid;
        view.sync();
        view
    }

    fn sync(&mut self) {
        self.raw.nodes = self.nodes.as_mut_ptr();
        self.raw.n_nodes = self.nodes.len() as i32;
        self.raw.size = self.nodes.len() as i32;
    }

    /// The graph as backends take it. Backends may reorder `nodes` in place (graph_optimize);
    /// call [`GraphView::reload`] afterwards.
    #[inline]
    pub fn as_ptr(&mut self) -> *mut ggml_cgraph {
        self.sync();
        &mut *self.raw
    }

    /// Picks up a node count a backend changed (graph_optimize may only reorder, but be exact).
    #[inline]
    pub fn reload(&mut self) {
        let n = (self.raw.n_nodes.max(0) as usize).min(self.nodes.len());
        self.nodes.truncate(n);
    }

    /// The view's id (0 in ggml 0.9.8, whose graphs carry none).
    #[inline]
    pub fn uid(&self) -> u64 {
        #[cfg(not(feature = "abi-0-9-8"))]
        return self.raw.uid;
        #[cfg(feature = "abi-0-9-8")]
        0
    }

    /// Sets the view's id (nothing to set in ggml 0.9.8).
    #[inline]
    pub fn set_uid(&mut self, uid: u64) {
        #[cfg(not(feature = "abi-0-9-8"))]
        {
            self.raw.uid = uid;
        }
        #[cfg(feature = "abi-0-9-8")]
        let _ = uid;
    }

    #[inline]
    pub fn nodes(&self) -> impl Iterator<Item = TensorRef> + '_ {
        // SAFETY: the node list holds tensors of the caller's graph (valid while it is computed).
        self.nodes.iter().map(|&p| unsafe { TensorRef::from_raw(p) }.expect("graph view nodes are never NULL"))
    }

    #[inline]
    pub fn node_ptrs(&self) -> &[*mut ggml_tensor] {
        &self.nodes
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// A view of nodes `[i0, i1)` of this view (for the eval callback), uid 0 like upstream.
    #[inline]
    pub fn sub_view(&self, i0: usize, i1: usize) -> GraphView {
        let ctx = ViewContext { use_counts: self.raw.use_counts, visited_hash_set: copy_hash_set(&self.raw.visited_hash_set), order: self.raw.order };
        GraphView::new(self.nodes[i0..i1].to_vec(), &ctx, 0)
    }
}

/// A fresh graph id (`ggml_graph_next_uid`): backends that cache per graph (CUDA graphs, RPC)
/// key on it. ggml 0.9.8 has no graph ids: 0 ("not set") there.
#[inline]
pub fn next_graph_uid() -> u64 {
    #[cfg(not(feature = "abi-0-9-8"))]
    // SAFETY: an atomic counter in ggml-base.
    return unsafe { crate::sys::ggml_graph_next_uid() };
    #[cfg(feature = "abi-0-9-8")]
    0
}

impl GraphRef {
    /// `use_counts` of a node, as the scheduler's debug print shows it (ggml_hash_find on the
    /// graph's visited set); 0 when the graph has none.
    #[inline]
    pub fn use_count(self, node: TensorRef) -> i32 {
        let g = self.raw();
        let set = &g.visited_hash_set;
        if g.use_counts.is_null() || set.size == 0 || set.keys.is_null() || set.used.is_null() {
            return 0;
        }
        let start = (node.addr() >> 4) % set.size;
        let mut i = start;
        loop {
            // SAFETY: i < size; `used` is a bitset of `size` bits and `keys` has `size` slots.
            let used = unsafe { *set.used.add(i / 32) } & (1u32 << (i % 32)) != 0;
            if !used {
                return 0;
            }
            if unsafe { *set.keys.add(i) } == node.as_ptr() {
                return unsafe { *g.use_counts.add(i) };
            }
            i = (i + 1) % set.size;
            if i == start {
                return 0;
            }
        }
    }
}
