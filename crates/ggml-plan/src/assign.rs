//! Which backend runs each node: upstream's priorities, pass for pass, on plain data.
//!
//! 1. Tensors that already live in a buffer go to the highest-priority backend that can use that
//!    buffer type and run the op; inputs go to the last backend (the CPU); an op reading weights
//!    goes where the weights are (or, with op offload, to a higher-priority backend that asks for
//!    it when the weights sit in host memory of the CPU backend). User assignments are kept.
//! 2. Assignments spread to neighbours: first the non-CPU backends down and up the graph, then
//!    every backend, as long as the backend supports the op.
//! 3. Nodes still unassigned go to the backend that supports the op and can read the most of its
//!    sources; assigned nodes move up to a higher-priority backend with the same buffer type when
//!    it supports the op and can read all sources.
//! 4. Sources take their view source's backend or their consumer's; leftovers go to the first
//!    backend that supports them. (Not upstream: sources with memory that are neither nodes nor
//!    leafs were placed in pass 1, by their memory, as leafs are.)
//! 5. (not upstream) A view always takes its source's backend, whatever it was assigned: a view
//!    computes nothing, and a view "on" another backend than its source made upstream copy the
//!    source's bytes before the source was computed.
//!
//! The graph is dense tensor ids ([`AssignGraph`]); everything the passes ask about tensors,
//! buffers and backends goes through an [`Oracle`] (ggml-rs answers from ggml's tensors and the
//! backends' devices; the tests from random tables).

use crate::MAX_SRC;

/// "no tensor" in the dense arrays.
pub const NONE: u32 = u32::MAX;

/// The graph as the passes read it: dense tensor ids `0..n_tensors`.
#[derive(Clone, Copy)]
pub struct AssignGraph<'a> {
    /// the node ids, in graph order
    pub nodes: &'a [u32],
    /// the leaf ids, in graph order
    pub leafs: &'a [u32],
    /// the tensors that are neither nodes nor leafs (sources outside the lists)
    pub loose: &'a [u32],
    /// per node (by position in `nodes`): its sources, NONE for empty slots
    pub srcs: &'a [[u32; MAX_SRC]],
    /// per tensor: its view source, or NONE
    pub view_src: &'a [u32],
}

/// What the passes ask about tensors, their buffers and the backends (index = priority, the
/// last one the CPU).
pub trait Oracle {
    /// A buffer type; equal values are the same buffer type.
    type Buft: Copy + PartialEq;
    fn n_backends(&self) -> usize;
    /// Whether backend `b` runs the op of tensor `t`.
    fn supports_op(&self, b: usize, t: u32) -> bool;
    /// Whether backend `b` asks for the op of `t` to be offloaded to it.
    fn offload_op(&self, b: usize, t: u32) -> bool;
    /// Whether backend `b` can use buffers of type `buft`.
    fn supports_buft(&self, b: usize, buft: Self::Buft) -> bool;
    /// The buffer type the scheduler allocates for backend `b` (None: it has none).
    fn backend_buft(&self, b: usize) -> Option<Self::Buft>;
    /// Whether `buft` is no buffer type (ggml allows a buffer without one): no backend reads a
    /// tensor through it in [`Assigner::buffer_supported`].
    fn buft_is_null(&self, _buft: Self::Buft) -> bool {
        false
    }
    /// The type of the buffer that holds `t`'s bytes for this graph (None: `t` will be placed).
    fn storage_buft(&self, t: u32) -> Option<Self::Buft>;
    /// Whether `t` is flagged input.
    fn is_input(&self, t: u32) -> bool;
    /// Whether the op of `t` is a view op (reshape, view, permute, transpose).
    fn is_view_op(&self, t: u32) -> bool;
    /// Whether the op of node `t` goes where the weights it reads are (not ROPE, whose frequency
    /// table, nor FLASH_ATTN_EXT, whose sinks, are too small to decide).
    fn follows_weights(&self, t: u32) -> bool;
    /// Whether `t` is in a buffer of weights.
    fn in_weights(&self, t: u32) -> bool;
    /// Whether the buffer of weights holding `t` is host memory.
    fn weights_on_host(&self, t: u32) -> bool;
}

/// Why no assignment exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssignError {
    /// `tensor` lives in a buffer no backend both can use and can run its op with
    PreallocatedUnsupported { tensor: u32 },
    /// no backend runs `node`
    NoBackend { node: u32 },
}

pub struct Assigner<'a, O: Oracle> {
    pub graph: AssignGraph<'a>,
    pub oracle: O,
    pub op_offload: bool,
    /// backend per dense tensor id, -1 when unassigned (set beforehand: the user's assignments)
    pub ids: Vec<i32>,
}

impl<O: Oracle> Assigner<'_, O> {
    #[inline]
    fn id_of(&self, t: u32) -> i32 {
        if t == NONE { -1 } else { self.ids[t as usize] }
    }

    /// Highest-priority backend that can use `buft` and run the op of `t`.
    fn backend_from_buft(&self, buft: Option<O::Buft>, t: u32) -> i32 {
        let Some(buft) = buft else { return -1 };
        for b in 0..self.oracle.n_backends() {
            if self.oracle.supports_buft(b, buft) && self.oracle.supports_op(b, t) {
                return b as i32;
            }
        }
        -1
    }

    /// Pass 1 for tensor `id` (`node`: its position in the node list, for its sources).
    fn by_current_location(&self, id: u32, node: Option<usize>) -> Result<i32, AssignError> {
        let storage = self.oracle.storage_buft(id);
        let b = self.backend_from_buft(storage, id);
        if b != -1 {
            return Ok(b);
        }
        let vs = self.graph.view_src[id as usize];
        if vs != NONE {
            let b = self.backend_from_buft(self.oracle.storage_buft(vs), id);
            if b != -1 {
                return Ok(b);
            }
        }
        if storage.is_some() {
            return Err(AssignError::PreallocatedUnsupported { tensor: id });
        }
        if self.oracle.is_input(id) {
            return Ok(self.oracle.n_backends() as i32 - 1);
        }
        let Some(node) = node else { return Ok(-1) };
        if !self.oracle.follows_weights(id) {
            return Ok(-1);
        }
        for &s in self.graph.srcs[node].iter().filter(|&&s| s != NONE) {
            if !self.oracle.in_weights(s) {
                continue;
            }
            let src_b = self.backend_from_buft(self.oracle.storage_buft(s), id);
            let last = self.oracle.n_backends() as i32 - 1;
            if self.op_offload && src_b == last && self.oracle.weights_on_host(s) {
                for b in 0..last as usize {
                    if self.oracle.supports_op(b, id) && self.oracle.offload_op(b, id) {
                        return Ok(b as i32);
                    }
                }
            }
            return Ok(src_b);
        }
        Ok(-1)
    }

    fn set_if_supported(&mut self, node: u32, b: i32) {
        if self.oracle.supports_op(b as usize, node) {
            self.ids[node as usize] = b;
        }
    }

    /// Whether backend `b` can read `t` where it is (or where its assigned backend will put it).
    pub fn buffer_supported(&self, t: u32, b: usize) -> bool {
        let buft = match self.oracle.storage_buft(t) {
            Some(buft) => Some(buft).filter(|&buft| !self.oracle.buft_is_null(buft)),
            None => {
                let mut tb = self.id_of(t);
                if tb == -1 {
                    tb = self.id_of(self.graph.view_src[t as usize]);
                }
                if tb == -1 {
                    return false;
                }
                self.oracle.backend_buft(tb as usize)
            }
        };
        buft.is_some_and(|buft| self.oracle.supports_buft(b, buft))
    }

    /// Runs passes 1 to 5; afterwards every node and source has a backend.
    pub fn run(&mut self) -> Result<(), AssignError> {
        let g = self.graph;
        // pass 1
        for &l in g.leafs {
            if self.ids[l as usize] == -1 {
                self.ids[l as usize] = self.by_current_location(l, None)?;
            }
        }
        // (not upstream) tensors with memory that are neither nodes nor leafs (graphs built with
        // ggml_graph_add_node: weights, results of earlier graphs) go where their memory is, as
        // leafs do, so that a node on another backend reads a copy. Upstream gives them the
        // backend of the node reading them, which then reads them where they are (an rpc-server's
        // memory: a crash).
        for &t in g.loose {
            if self.ids[t as usize] == -1 && self.oracle.storage_buft(t).is_some() {
                self.ids[t as usize] = self.by_current_location(t, None)?;
            }
        }
        for (i, &n) in g.nodes.iter().enumerate() {
            if self.ids[n as usize] == -1 {
                self.ids[n as usize] = self.by_current_location(n, Some(i))?;
            }
        }

        // pass 2: spread, the non-CPU backends first, then all
        let last = self.oracle.n_backends() as i32 - 1;
        for (up, skip_cpu) in [(false, true), (true, true), (false, false), (true, false)] {
            let mut cur = -1;
            let n_nodes = g.nodes.len();
            for k in 0..n_nodes {
                let n = g.nodes[if up { n_nodes - 1 - k } else { k }];
                if self.oracle.is_view_op(n) {
                    continue;
                }
                let b = self.ids[n as usize];
                if b != -1 {
                    cur = if skip_cpu && b == last { -1 } else { b };
                } else if cur != -1 {
                    self.set_if_supported(n, cur);
                }
            }
        }

        // pass 3: the remaining nodes, and upgrades to higher-priority backends
        for (i, &n) in g.nodes.iter().enumerate() {
            if self.oracle.is_view_op(n) {
                continue;
            }
            let b = self.ids[n as usize];
            if b == -1 {
                let mut best = -1i32;
                for cand in 0..self.oracle.n_backends() {
                    if !self.oracle.supports_op(cand, n) {
                        continue;
                    }
                    let supported = g.srcs[i]
                        .iter()
                        .filter(|&&s| s != NONE)
                        .filter(|&&s| (self.id_of(s) != -1 || self.id_of(g.view_src[s as usize]) != -1) && self.buffer_supported(s, cand))
                        .count() as i32;
                    if supported > best {
                        best = supported;
                        self.ids[n as usize] = cand as i32;
                    }
                }
            } else {
                for cand in 0..b as usize {
                    if self.oracle.backend_buft(cand) == self.oracle.backend_buft(b as usize)
                        && self.oracle.supports_op(cand, n)
                        && g.srcs[i].iter().filter(|&&s| s != NONE).all(|&s| self.buffer_supported(s, cand))
                    {
                        self.ids[n as usize] = cand as i32;
                        break;
                    }
                }
            }
        }

        // pass 4: sources and leftovers
        for (i, &n) in g.nodes.iter().enumerate() {
            let vs = g.view_src[n as usize];
            if vs != NONE && self.ids[n as usize] == -1 {
                self.ids[n as usize] = self.ids[vs as usize];
            }
            for &s in g.srcs[i].iter().filter(|&&s| s != NONE) {
                if self.ids[s as usize] == -1 {
                    let svs = g.view_src[s as usize];
                    self.ids[s as usize] = if svs != NONE { self.ids[svs as usize] } else { self.ids[n as usize] };
                }
            }
            let mut cand = 0;
            while self.ids[n as usize] == -1 && cand < self.oracle.n_backends() {
                self.set_if_supported(n, cand as i32);
                cand += 1;
            }
            if self.ids[n as usize] == -1 {
                return Err(AssignError::NoBackend { node: n });
            }
        }

        // pass 5: views live where their source lives
        for t in 0..self.ids.len() {
            let vs = g.view_src[t];
            if vs != NONE && self.ids[vs as usize] != -1 {
                self.ids[t] = self.ids[vs as usize];
            }
        }
        Ok(())
    }
}
