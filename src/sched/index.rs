//! A dense numbering of the tensors of the caller's graph (nodes, leafs, their sources and view
//! sources), so that the scheduler's passes work on arrays instead of hashing pointers again and
//! again. Built once per `split_graph`.

use crate::alloc::gallocr::AddrMap;
use crate::ggml::handles::Buffer;
use crate::ggml::sys::GGML_MAX_SRC;
use crate::ggml::tensor::TensorRef;

/// "no tensor" in the dense arrays
pub const NONE: u32 = u32::MAX;

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
    /// per tensor: the buffer that holds its bytes for this graph. None for tensors that will be
    /// placed by the allocator, including those still pointing into one of the scheduler's own
    /// compute buffers from an earlier allocation (recomputed nodes, inputs written again).
    pub storage: Vec<Option<Buffer>>,
}

impl GraphIndex {
    pub fn new(nodes: &[TensorRef], leafs: &[TensorRef], is_compute_buffer: impl Fn(usize) -> bool) -> GraphIndex {
        let n = nodes.len() * 2 + leafs.len();
        let mut ix = GraphIndex {
            tensors: Vec::with_capacity(n),
            map: AddrMap::with_capacity_and_hasher(n, Default::default()),
            nodes: Vec::with_capacity(nodes.len()),
            leafs: Vec::with_capacity(leafs.len()),
            srcs: Vec::with_capacity(nodes.len()),
            view_src: Vec::with_capacity(n),
            storage: Vec::new(),
        };
        for &l in leafs {
            let id = ix.id(l);
            ix.leafs.push(id);
        }
        for &node in nodes {
            let id = ix.id(node);
            ix.nodes.push(id);
            let mut s = [NONE; GGML_MAX_SRC];
            for (j, src) in node.srcs().into_iter().enumerate() {
                if let Some(src) = src {
                    s[j] = ix.id(src);
                }
            }
            ix.srcs.push(s);
        }
        let mut is_node = vec![false; ix.tensors.len()];
        for &n in &ix.nodes {
            is_node[n as usize] = true;
        }
        ix.storage = (0..ix.tensors.len())
            .map(|i| {
                let root = if ix.view_src[i] == NONE { i } else { ix.view_src[i] as usize };
                let t = ix.tensors[root];
                let buffer = t.buffer()?;
                let replaced = is_compute_buffer(buffer.as_ptr() as usize) && (is_node[root] || t.is_input());
                (!replaced).then_some(buffer)
            })
            .collect();
        ix
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

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}
