//! The last graph a `gallocr` placed, as the headers of its tensors read right after placing:
//! the cheapest way to know that a graph handed again is the same graph with every tensor still
//! where it was put.
//!
//! Upstream's replay reads the node and leaf lists, every source slot, and `data`, `view_src`
//! and `buffer` of every tensor, twice (once to decide, once to place). This reads the same
//! fields once and compares them with arrays laid out in the order they are read. Whatever does
//! not match goes to `gallocr`'s precise check, which decides what still holds.

use crate::alloc::model::{GraphModel, SrcList, Tid};
use crate::ggml::sys::{self, GGML_MAX_DIMS, GGML_MAX_SRC};
use crate::ggml::tensor::TensorRef;

// the check's arrays, kept for the next graph placed on this thread (see `ggml_plan::spare`)
ggml_plan::spare!(pub(crate) seen_spare: Vec<Seen>);
ggml_plan::spare!(words_spare: Vec<usize>);

/// One tensor as the check reads it: itself, where it is, what it views, its input and output
/// flags, its type, op and layout, and (for a node) how many source slots follow in
/// `PlacedGraph::slots`. The layout and op are read although ggml's constructors never change
/// them in a tensor: a caller may (a tensor grown in place, an op swapped), and the plan depends
/// on them (sizes; whether a node may take its source's memory).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Seen {
    tensor: usize,
    data: usize,
    buffer: usize,
    view_src: usize,
    view_offs: usize,
    flags: u32,
    n_slots: u32,
    /// the type in the low half, the op in the high half
    type_op: u64,
    /// shape and strides (`TensorRef::layout_words`)
    layout: [u64; 2 * GGML_MAX_DIMS],
}

const FLAGS: i32 = sys::GGML_TENSOR_FLAG_INPUT | sys::GGML_TENSOR_FLAG_OUTPUT;

impl Seen {
    /// From what is known of `t`: its place, its flags as the plan took them, its view source.
    #[inline]
    pub fn new(t: TensorRef, input: bool, output: bool, view_src: Option<TensorRef>) -> Seen {
        let flags = if input { sys::GGML_TENSOR_FLAG_INPUT } else { 0 } | if output { sys::GGML_TENSOR_FLAG_OUTPUT } else { 0 };
        Seen {
            tensor: t.addr(),
            data: t.data() as usize,
            buffer: t.buffer_ptr() as usize,
            view_src: view_src.map_or(0, |v| v.addr()),
            view_offs: t.view_offs(),
            flags: flags as u32,
            n_slots: 0,
            type_op: type_op(t),
            layout: t.layout_words(),
        }
    }

    /// As the header of `t` reads now.
    #[inline]
    pub fn of(t: TensorRef) -> Seen {
        let flags = t.flags();
        Seen::new(t, flags & sys::GGML_TENSOR_FLAG_INPUT != 0, flags & sys::GGML_TENSOR_FLAG_OUTPUT != 0, t.view_src())
    }

    /// Zero when `t` is this tensor and reads as it did; gathered, not branched on.
    #[inline]
    fn diff(&self, t: TensorRef) -> usize {
        (t.addr() ^ self.tensor)
            | (t.data() as usize ^ self.data)
            | (t.buffer_ptr() as usize ^ self.buffer)
            | (t.view_src_ptr() as usize ^ self.view_src)
            | (t.view_offs() ^ self.view_offs)
            | ((t.flags() & FLAGS) as u32 ^ self.flags) as usize
            | (type_op(t) ^ self.type_op) as usize
            | layout_diff(&t.layout_words(), &self.layout)
    }
}

/// Nonzero when the eight layout words differ. SSE2 (every x86-64 has it) compares them 16 bytes
/// at a time: about half the instructions of the word-by-word form, on every replayed tensor.
#[cfg(target_arch = "x86_64")]
#[inline]
fn layout_diff(a: &[u64; 2 * GGML_MAX_DIMS], b: &[u64; 2 * GGML_MAX_DIMS]) -> usize {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86-64; the loads read the 64 bytes of each array (unaligned loads).
    unsafe {
        let (pa, pb) = (a.as_ptr() as *const __m128i, b.as_ptr() as *const __m128i);
        let x0 = _mm_or_si128(_mm_xor_si128(_mm_loadu_si128(pa), _mm_loadu_si128(pb)), _mm_xor_si128(_mm_loadu_si128(pa.add(1)), _mm_loadu_si128(pb.add(1))));
        let x1 = _mm_or_si128(
            _mm_xor_si128(_mm_loadu_si128(pa.add(2)), _mm_loadu_si128(pb.add(2))),
            _mm_xor_si128(_mm_loadu_si128(pa.add(3)), _mm_loadu_si128(pb.add(3))),
        );
        (_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_or_si128(x0, x1), _mm_setzero_si128())) ^ 0xffff) as usize
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn layout_diff(a: &[u64; 2 * GGML_MAX_DIMS], b: &[u64; 2 * GGML_MAX_DIMS]) -> usize {
    a.iter().zip(b).fold(0, |d, (x, y)| d | (x ^ y)) as usize
}

#[inline]
fn type_op(t: TensorRef) -> u64 {
    t.type_() as u32 as u64 | (t.op() as u32 as u64) << 32
}

/// A placed graph: what `Seen` reads of every tensor (nodes, then leafs, then tensors in neither
/// list), and the source slots of every node, in reading order.
pub struct PlacedGraph {
    n_nodes: usize,
    n_leafs: usize,
    /// the tensors in neither list (view sources, sources outside the lists), newest first
    loose: Vec<TensorRef>,
    seen: Vec<Seen>,
    /// the slots of every node, up to the last one in use, one node after the other (NULL: 0)
    slots: Vec<usize>,
}

impl PlacedGraph {
    /// The graph of `tensors` (numbered as in `model`) as `seen` (by tensor) right after it was
    /// placed; `loose`: the tensors neither in the node nor in the leaf list, newest first.
    pub fn take(tensors: &[TensorRef], model: &GraphModel, loose: &[Tid], seen: &[Seen]) -> PlacedGraph {
        // recycled: a graph's worth of fresh pages per allocation would cost more than reading it
        let mut p = PlacedGraph {
            n_nodes: model.nodes.len(),
            n_leafs: model.leafs.len(),
            loose: loose.iter().map(|&t| tensors[t]).collect(),
            seen: seen_spare::take(tensors.len()),
            slots: words_spare::take(model.nodes.len() * 3),
        };
        for n in &model.nodes {
            let slots = n.srcs.used_slots();
            p.slots.extend(slots.iter().map(|&s| if s == SrcList::NONE { 0 } else { tensors[s as usize].addr() }));
            p.seen.push(Seen { n_slots: slots.len() as u32, ..seen[n.tensor] });
        }
        p.seen.extend(model.leafs.iter().map(|l| seen[l.0]).chain(loose.iter().map(|&t| seen[t])));
        p
    }

    /// Whether `nodes` and `leafs` are the placed graph and every header still reads as it did.
    // Not inlined into its one caller: the loop keeps its registers to itself (inlined into
    // `Gallocr::alloc_graph` it costs 1.7% more instructions per replay, bench_alloc under callgrind).
    #[inline(never)]
    pub fn unchanged(&self, nodes: &[TensorRef], leafs: &[TensorRef]) -> bool {
        if nodes.len() != self.n_nodes || leafs.len() != self.n_leafs {
            return false;
        }
        let (node_seen, rest) = self.seen.split_at(self.n_nodes);
        let mut slots = self.slots.as_slice();
        for (&n, seen) in nodes.iter().zip(node_seen) {
            let used = seen.n_slots as usize;
            let (want, tail) = slots.split_at(used);
            slots = tail;
            // every slot is read (as upstream does)
            let mut diff = seen.diff(n);
            for (j, want) in want.iter().copied().chain(std::iter::repeat(0)).take(GGML_MAX_SRC).enumerate() {
                diff |= n.src_ptr(j) as usize ^ want;
            }
            if diff != 0 {
                return false;
            }
        }
        let (leaf_seen, loose_seen) = rest.split_at(self.n_leafs);
        leafs.iter().zip(leaf_seen).all(|(&l, seen)| seen.diff(l) == 0)
            // each named by a node, leaf or loose tensor checked before it (a view before its source)
            && self.loose.iter().zip(loose_seen).all(|(&t, seen)| seen.diff(t) == 0)
    }
}

impl Drop for PlacedGraph {
    fn drop(&mut self) {
        words_spare::give(std::mem::take(&mut self.slots));
        seen_spare::give(std::mem::take(&mut self.seen));
    }
}
