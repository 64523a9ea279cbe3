//! Which backend runs each node: upstream's priorities, pass for pass.
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

use crate::ggml::abi_impl::ggml_backend_buffer_type;
use crate::ggml::handles::Buffer;
use crate::ggml::sys::{self, op};
use crate::ggml::tensor::TensorRef;
use crate::sched::index::{GraphIndex, NONE};

/// What the passes ask about the scheduler's backends (index = priority, last = CPU).
pub trait Backends {
    fn n(&self) -> usize;
    fn name(&self, b: usize) -> String;
    fn supports_op(&self, b: usize, t: TensorRef) -> bool;
    fn supports_buft(&self, b: usize, buft: *mut ggml_backend_buffer_type) -> bool;
    fn offload_op(&self, b: usize, t: TensorRef) -> bool;
    /// the buffer type the scheduler allocates for backend `b`
    fn buft(&self, b: usize) -> *mut ggml_backend_buffer_type;
    fn buffer_is_host(&self, buffer: Buffer) -> bool;
}

pub struct Assigner<'a, B: Backends> {
    pub ix: &'a GraphIndex,
    pub backends: &'a B,
    pub op_offload: bool,
    /// backend per dense tensor id, -1 when unassigned
    pub ids: Vec<i32>,
}

impl<B: Backends> Assigner<'_, B> {
    fn id_of(&self, t: u32) -> i32 {
        if t == NONE { -1 } else { self.ids[t as usize] }
    }

    /// Highest-priority backend that can use `buffer` and run `op`.
    fn backend_from_buffer(&self, buffer: Option<Buffer>, op: TensorRef) -> i32 {
        let Some(buffer) = buffer else { return -1 };
        let buft = buffer.buft_ptr();
        for b in 0..self.backends.n() {
            if self.backends.supports_buft(b, buft) && self.backends.supports_op(b, op) {
                return b as i32;
            }
        }
        -1
    }

    /// Pass 1 for tensor `id` (`node`: its position in the node list, for its sources).
    fn from_current_location(&self, id: u32, node: Option<usize>) -> i32 {
        let ix = self.ix;
        let t = ix.tensor(id);
        let storage = ix.storage[id as usize];
        let b = self.backend_from_buffer(storage, t);
        if b != -1 {
            return b;
        }
        let vs = ix.view_src[id as usize];
        if vs != NONE {
            let b = self.backend_from_buffer(ix.storage[vs as usize], t);
            if b != -1 {
                return b;
            }
        }
        if let Some(buffer) = storage {
            let buft_name = buffer.buft().map(|b| b.name()).unwrap_or_default();
            crate::fatal!(
                "pre-allocated tensor {} in a buffer ({}) that cannot run the operation ({}): no backend of the scheduler supports it",
                t,
                buft_name,
                t.op_name()
            );
        }
        if t.is_input() {
            return self.backends.n() as i32 - 1;
        }
        // ops reading weights run where the weights are; ROPE's frequency table and FLASH_ATTN's
        // sinks are too small to decide
        let o = ix.op(id);
        let Some(node) = node else { return -1 };
        if o == op::ROPE || o == op::FLASH_ATTN_EXT {
            return -1;
        }
        for &s in ix.srcs[node].iter().filter(|&&s| s != NONE) {
            // (where the source is for this graph: a tensor pointing into a compute buffer that
            // was freed has no storage, and its buffer must not be read)
            let Some(buffer) = ix.storage[s as usize] else { continue };
            if buffer.usage() != sys::USAGE_WEIGHTS {
                continue;
            }
            let src_b = self.backend_from_buffer(ix.storage[s as usize], t);
            let last = self.backends.n() as i32 - 1;
            if self.op_offload && src_b == last && self.backends.buffer_is_host(buffer) {
                for b in 0..last as usize {
                    if self.backends.supports_op(b, t) && self.backends.offload_op(b, t) {
                        return b as i32;
                    }
                }
            }
            return src_b;
        }
        -1
    }

    fn set_if_supported(&mut self, node: u32, b: i32) {
        if self.backends.supports_op(b as usize, self.ix.tensor(node)) {
            self.ids[node as usize] = b;
        }
    }

    /// Whether backend `b` can read `t` where it is (or where its assigned backend will put it).
    pub fn buffer_supported(&self, t: u32, b: usize) -> bool {
        let buft = match self.ix.storage[t as usize] {
            Some(buffer) => buffer.buft_ptr(),
            None => {
                let mut tb = self.id_of(t);
                if tb == -1 {
                    tb = self.id_of(self.ix.view_src[t as usize]);
                }
                if tb == -1 {
                    return false;
                }
                self.backends.buft(tb as usize)
            }
        };
        !buft.is_null() && self.backends.supports_buft(b, buft)
    }

    fn is_view_node(&self, node: u32) -> bool {
        self.ix.is_view_op(node)
    }

    /// Runs passes 1 to 4; afterwards every node and source has a backend.
    pub fn run(&mut self) {
        let ix = self.ix;
        // pass 1
        for &l in &ix.leafs {
            if self.ids[l as usize] == -1 {
                self.ids[l as usize] = self.from_current_location(l, None);
            }
        }
        // (not upstream) tensors with memory that are neither nodes nor leafs (graphs built with
        // ggml_graph_add_node: weights, results of earlier graphs) go where their memory is, as
        // leafs do, so that a node on another backend reads a copy. Upstream gives them the
        // backend of the node reading them, which then reads them where they are (an rpc-server's
        // memory: a crash).
        for &t in &ix.loose {
            if self.ids[t as usize] == -1 && ix.storage[t as usize].is_some() {
                self.ids[t as usize] = self.from_current_location(t, None);
            }
        }
        for (i, &n) in ix.nodes.iter().enumerate() {
            if self.ids[n as usize] == -1 {
                self.ids[n as usize] = self.from_current_location(n, Some(i));
            }
        }

        // pass 2: spread, the non-CPU backends first, then all
        let last = self.backends.n() as i32 - 1;
        for (up, skip_cpu) in [(false, true), (true, true), (false, false), (true, false)] {
            let mut cur = -1;
            let n_nodes = ix.nodes.len();
            for k in 0..n_nodes {
                let n = ix.nodes[if up { n_nodes - 1 - k } else { k }];
                if self.is_view_node(n) {
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
        for (i, &n) in ix.nodes.iter().enumerate() {
            if self.is_view_node(n) {
                continue;
            }
            let node = ix.tensor(n);
            let b = self.ids[n as usize];
            if b == -1 {
                let mut best = -1i32;
                for cand in 0..self.backends.n() {
                    if !self.backends.supports_op(cand, node) {
                        continue;
                    }
                    let supported = ix.srcs[i]
                        .iter()
                        .filter(|&&s| s != NONE)
                        .filter(|&&s| {
                            (self.id_of(s) != -1 || self.id_of(ix.view_src[s as usize]) != -1) && self.buffer_supported(s, cand)
                        })
                        .count() as i32;
                    if supported > best {
                        best = supported;
                        self.ids[n as usize] = cand as i32;
                    }
                }
            } else {
                for cand in 0..b as usize {
                    if self.backends.buft(cand) == self.backends.buft(b as usize)
                        && self.backends.supports_op(cand, node)
                        && ix.srcs[i].iter().filter(|&&s| s != NONE).all(|&s| self.buffer_supported(s, cand))
                    {
                        self.ids[n as usize] = cand as i32;
                        break;
                    }
                }
            }
        }

        // pass 4: sources and leftovers
        for (i, &n) in ix.nodes.iter().enumerate() {
            let vs = ix.view_src[n as usize];
            if vs != NONE && self.ids[n as usize] == -1 {
                self.ids[n as usize] = self.ids[vs as usize];
            }
            for &s in ix.srcs[i].iter().filter(|&&s| s != NONE) {
                if self.ids[s as usize] == -1 {
                    let svs = ix.view_src[s as usize];
                    self.ids[s as usize] = if svs != NONE { self.ids[svs as usize] } else { self.ids[n as usize] };
                }
            }
            let mut cand = 0;
            while self.ids[n as usize] == -1 && cand < self.backends.n() {
                self.set_if_supported(n, cand as i32);
                cand += 1;
            }
            if self.ids[n as usize] == -1 {
                let node = ix.tensor(n);
                crate::fatal!(
                    "ggml_backend_sched: no backend can run node {} (op {}); the last backend must be a CPU backend that supports it",
                    node,
                    node.op_name()
                );
            }
        }

        // pass 5: views live where their source lives
        for t in 0..ix.len() {
            let vs = ix.view_src[t];
            if vs != NONE && self.ids[vs as usize] != -1 {
                self.ids[t] = self.ids[vs as usize];
            }
        }
    }
}
