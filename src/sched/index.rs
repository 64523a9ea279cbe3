//! A dense numbering of the tensors of the caller's graph (nodes, leafs, their sources and view
//! sources), so that the scheduler's passes work on arrays instead of hashing pointers again and
//! again. Built once per `split_graph`, or taken over from the previous `split_graph` when the
//! graph has the same nodes, leafs, sources and view sources (checked without hashing).

use crate::alloc::gallocr::Residence;
use crate::alloc::unlisted;
use crate::ggml::handles::Buffer;
use crate::ggml::sys::{GGML_MAX_SRC, ggml_op, op};
use crate::ggml::tensor::TensorRef;
use ggml_plan::addr_map::AddrMap;

/// "no tensor" in the dense arrays
pub const NONE: u32 = ggml_plan::assign::NONE;

pub struct GraphIndex {
    pub tensors: Vec<TensorRef>,
    pub map: AddrMap<u32>,
    /// dense ids of the caller's nodes, in graph order
    pub nodes: Vec<u32>,
    /// dense ids of the caller's leafs, in graph order
    pub leafs: Vec<u32>,
    /// per node (by position in `nodes`): its sources, NONE for empty slots
    pub srcs: Vec<[u32; GGML_MAX_SRC]>,
    /// per tensor: its view source, or NONE
    pub view_src: Vec<u32>,
    /// per tensor: its op (read once; the passes ask often)
    pub ops: Vec<ggml_op>,
    /// per tensor: the buffer that holds its bytes for this graph. None for tensors that will be
    /// placed by the allocator, including those still pointing into one of the scheduler's own
    /// compute buffers from an earlier allocation (recomputed nodes, inputs written again), or
    /// into one it has freed since (their buffer pointer is cleared, see `locate`).
    pub storage: Vec<Option<Buffer>>,
    /// tensors that are neither nodes nor leafs (sources and view sources outside the lists)
    pub loose: Vec<u32>,
    /// a node reading a tensor that is neither a node nor a leaf and is never computed, and that
    /// tensor (see `alloc::unlisted`): the graph cannot be allocated
    pub unlisted: Option<(TensorRef, TensorRef)>,
    /// whether some tensor may be in neither list (numbered first as a source or view source);
    /// false for graphs in ggml's order, where every source is listed before it is read
    has_loose: bool,
    /// whether `locate` cleared the buffer pointer of a tensor placed in a freed compute buffer
    /// (the caller's tensors were written: their headers are not what the caller built)
    pub cleared_freed: bool,
}

impl GraphIndex {
    /// The index of the graph `nodes`/`leafs`: `previous` (the last graph's index) when the graph
    /// is the same (then it is taken out of `previous`), else a new one.
    pub fn of(nodes: &[TensorRef], leafs: &[TensorRef], residence: impl Fn(TensorRef) -> Residence, previous: &mut Option<GraphIndex>) -> GraphIndex {
        let mut ix = match previous.take() {
            Some(mut p) if p.same_graph(nodes, leafs) => {
                for (op, t) in p.ops.iter_mut().zip(&p.tensors) {
                    *op = t.op();
                }
                p
            }
            other => {
                *previous = other;
                GraphIndex::number(nodes, leafs)
            }
        };
        ix.locate(residence);
        ix
    }

    /// Whether `nodes`/`leafs` are the graph this index numbered: the same tensors in the same
    /// order, with the same sources and view sources (so numbering them again gives the same ids).
    fn same_graph(&self, nodes: &[TensorRef], leafs: &[TensorRef]) -> bool {
        if nodes.len() != self.nodes.len() || leafs.len() != self.leafs.len() {
            return false;
        }
        let ptr = |id: u32| if id == NONE { std::ptr::null_mut() } else { self.tensors[id as usize].as_ptr() };
        leafs.iter().zip(&self.leafs).all(|(&l, &id)| l == self.tensors[id as usize])
            && nodes
                .iter()
                .zip(&self.nodes)
                .zip(&self.srcs)
                .all(|((&n, &id), srcs)| n == self.tensors[id as usize] && (0..GGML_MAX_SRC).all(|j| n.src_ptr(j) == ptr(srcs[j])))
            && self.tensors.iter().zip(&self.view_src).all(|(t, &v)| t.view_src_ptr() == ptr(v))
    }

    fn number(nodes: &[TensorRef], leafs: &[TensorRef]) -> GraphIndex {
        let n = nodes.len() * 2 + leafs.len();
        let mut ix = GraphIndex {
            tensors: Vec::with_capacity(n),
            map: AddrMap::with_capacity_and_hasher(n, Default::default()),
            nodes: Vec::with_capacity(nodes.len()),
            leafs: Vec::with_capacity(leafs.len()),
            srcs: Vec::with_capacity(nodes.len()),
            view_src: Vec::with_capacity(n),
            ops: Vec::with_capacity(n),
            storage: Vec::new(),
            loose: Vec::new(),
            unlisted: None,
            has_loose: false,
            cleared_freed: false,
        };
        // tensors numbered by the lists themselves (each one new when it is numbered last): all
        // of them unless a source or view source was numbered first
        let mut n_by_lists = 0;
        for &l in leafs {
            let before = ix.tensors.len();
            let id = ix.id(l);
            n_by_lists += (ix.tensors.len() > before) as usize;
            ix.leafs.push(id);
        }
        for &node in nodes {
            let before = ix.tensors.len();
            let id = ix.id(node);
            n_by_lists += (ix.tensors.len() > before) as usize;
            ix.nodes.push(id);
            let mut s = [NONE; GGML_MAX_SRC];
            for (j, src) in node.srcs().into_iter().enumerate() {
                if let Some(src) = src {
                    s[j] = ix.id(src);
                }
            }
            ix.srcs.push(s);
        }
        ix.has_loose = n_by_lists < ix.tensors.len();
        ix
    }

    /// Where each tensor's bytes are now (`storage`, from the scheduler's allocator's
    /// `residence`), the tensors outside the lists (`loose`), and whether a node reads a tensor
    /// the graph never computes (`unlisted`).
    fn locate(&mut self, residence: impl Fn(TensorRef) -> Residence) {
        let mut is_node = vec![false; self.tensors.len()];
        for &n in &self.nodes {
            is_node[n as usize] = true;
        }
        let root_of = |i: usize| if self.view_src[i] == NONE { i } else { self.view_src[i] as usize };
        let places: Vec<Residence> = self.tensors.iter().map(|&t| if t.buffer_ptr().is_null() { Residence::Elsewhere } else { residence(t) }).collect();
        // a tensor whose place went with a compute buffer the allocator freed (and its views)
        // points at a freed buffer: that pointer goes (its data stays, for the allocator to know
        // it by), so that nothing reads the freed struct, backends' supports_op included (they
        // look at their sources' buffer types); the allocator places it anew, or names it as a
        // result that was lost
        self.cleared_freed = places.contains(&Residence::Freed);
        if self.cleared_freed {
            for i in 0..self.tensors.len() {
                if places[root_of(i)] == Residence::Freed {
                    self.tensors[i].set_buffer(std::ptr::null_mut());
                }
            }
        }
        let storage = (0..self.tensors.len())
            .map(|i| {
                let root = root_of(i);
                let t = self.tensors[root];
                let replaced = match places[root] {
                    Residence::Elsewhere => false,
                    Residence::Compute => is_node[root] || t.is_input(),
                    Residence::Freed => true,
                };
                if replaced { None } else { t.buffer() }
            })
            .collect();
        self.storage = storage;
        self.loose.clear();
        self.unlisted = None;
        if self.has_loose {
            let mut listed = is_node;
            for &l in &self.leafs {
                listed[l as usize] = true;
            }
            self.loose.extend((0..self.tensors.len() as u32).filter(|&t| !listed[t as usize]));
            self.unlisted = self.find_unlisted(&listed);
        }
    }

    /// A node that reads a tensor the graph never computes (see `alloc::unlisted`): the first in
    /// graph order, and that tensor. `listed`: per tensor, whether it is a node or a leaf.
    fn find_unlisted(&self, listed: &[bool]) -> Option<(TensorRef, TensorRef)> {
        let bad: Vec<bool> = (0..self.tensors.len()).map(|t| !listed[t] && self.view_src[t] == NONE && unlisted::is_uncomputed(self.tensors[t])).collect();
        if !bad.contains(&true) {
            return None;
        }
        self.nodes.iter().zip(&self.srcs).find_map(|(&n, srcs)| {
            srcs.iter().filter(|&&s| s != NONE).find_map(|&s| {
                let root = if self.view_src[s as usize] == NONE { s } else { self.view_src[s as usize] };
                bad[root as usize].then(|| (self.tensor(n), self.tensor(root)))
            })
        })
    }

    /// Whether tensor `id`'s op only re-describes its source's memory (VIEW, RESHAPE, ...).
    pub fn is_view_op(&self, id: u32) -> bool {
        op::is_view(self.ops[id as usize])
    }

    pub fn op(&self, id: u32) -> ggml_op {
        self.ops[id as usize]
    }

    /// The dense id of `t`, numbering it (and its view source) on first sight.
    pub fn id(&mut self, t: TensorRef) -> u32 {
        if let Some(&id) = self.map.get(&t.addr()) {
            return id;
        }
        let v = match t.view_src() {
            Some(v) => self.id(v),
            None => NONE,
        };
        let id = self.tensors.len() as u32;
        self.tensors.push(t);
        self.view_src.push(v);
        self.ops.push(t.op());
        self.map.insert(t.addr(), id);
        id
    }

    pub fn get(&self, t: TensorRef) -> Option<u32> {
        self.map.get(&t.addr()).copied()
    }

    pub fn tensor(&self, id: u32) -> TensorRef {
        self.tensors[id as usize]
    }

    pub fn len(&self) -> usize {
        self.tensors.len()
    }
}
