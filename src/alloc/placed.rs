//! The last graph a `gallocr` placed, as the headers of its tensors read right after placing:
//! the cheapest way to know that a graph handed again is the same graph with every tensor still
//! where it was put.
//!
//! Upstream's replay reads the node and leaf lists, every source slot, and `data`, `view_src`
//! and `buffer` of every tensor, twice (once to decide, once to place). This reads the same
//! fields once and compares them with arrays laid out in the order they are read. Whatever does
//! not match goes to `gallocr`'s precise check, which decides what still holds.

use crate::alloc::model::{GraphModel, Tid};
use crate::ggml::sys::ggml_tensor;
use crate::ggml::tensor::TensorRef;
use std::mem::offset_of;

// the check's array, kept for the next graph placed on this thread (see `ggml_plan::spare`)
ggml_plan::spare!(pub(crate) seen_spare: Vec<Seen>);

/// The header bytes the check compares, as two windows: `[0, HEAD)`, the type, buffer, shape,
/// strides and op (and the first op parameters, which only make the check stricter), and
/// `[TAIL, END)`, flags, every source slot, view source and offset, and data (and the last op
/// parameter). Not the name, nor `extra`. Read as 16-byte chunks, compared without branches.
const HEAD: usize = 96;
const TAIL: usize = 144;
const END: usize = offset_of!(ggml_tensor, data) + 8;
const CHUNKS: usize = (HEAD + END - TAIL) / 16;
const _: () = {
    assert!(offset_of!(ggml_tensor, type_) == 0 && offset_of!(ggml_tensor, buffer) < HEAD);
    assert!(offset_of!(ggml_tensor, nb) + 8 * crate::ggml::sys::GGML_MAX_DIMS <= HEAD && offset_of!(ggml_tensor, op) + 4 <= HEAD);
    assert!(TAIL <= offset_of!(ggml_tensor, flags) && TAIL <= offset_of!(ggml_tensor, src) && TAIL <= offset_of!(ggml_tensor, view_src));
    assert!(offset_of!(ggml_tensor, view_offs) < END && END <= std::mem::size_of::<ggml_tensor>());
    assert!(HEAD % 16 == 0 && (END - TAIL) % 16 == 0 && TAIL >= HEAD);
};

/// One tensor as the check reads it: its address and the two windows of its header (see `HEAD`):
/// where it is, what it views and reads, its flags, type, op and layout. The layout and op are
/// read although ggml's constructors never change them in a tensor: a caller may (a tensor
/// grown in place, an op swapped), and the plan depends on them (sizes; whether a node may take
/// its source's memory).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct Seen {
    words: [u64; 2 * CHUNKS],
    tensor: usize,
}

impl Seen {
    /// As the header of `t` reads now.
    #[inline]
    pub fn of(t: TensorRef) -> Seen {
        let mut words = [0u64; 2 * CHUNKS];
        let p = t.as_ptr() as *const u8;
        // SAFETY: `t` is a valid tensor (TensorRef's contract); both windows lie inside its
        // struct (checked at compile time above) and are read by value, unaligned, as plain bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(p, words.as_mut_ptr() as *mut u8, HEAD);
            std::ptr::copy_nonoverlapping(p.add(TAIL), (words.as_mut_ptr() as *mut u8).add(HEAD), END - TAIL);
        }
        Seen { words, tensor: t.addr() }
    }

    /// Whether `t` is this tensor and its header reads as it did.
    #[inline]
    fn holds(&self, t: TensorRef) -> bool {
        t.addr() == self.tensor && windows_equal(t, &self.words)
    }
}

/// SSE2 (every x86-64 has it): 13 chunks of 16 bytes, xor-ed and or-ed together, one test.
#[cfg(target_arch = "x86_64")]
#[inline]
fn windows_equal(t: TensorRef, words: &[u64; 2 * CHUNKS]) -> bool {
    use std::arch::x86_64::*;
    let p = t.as_ptr() as *const u8;
    let w = words.as_ptr() as *const __m128i;
    // SAFETY: SSE2 is part of x86-64; the tensor's windows lie inside its struct (see `HEAD`),
    // read with unaligned loads; `words` is 16-byte aligned (Seen is align(16), words first).
    unsafe {
        let mut acc = _mm_setzero_si128();
        for i in 0..HEAD / 16 {
            acc = _mm_or_si128(acc, _mm_xor_si128(_mm_loadu_si128(p.add(16 * i) as *const __m128i), _mm_load_si128(w.add(i))));
        }
        for i in 0..(END - TAIL) / 16 {
            acc = _mm_or_si128(acc, _mm_xor_si128(_mm_loadu_si128(p.add(TAIL + 16 * i) as *const __m128i), _mm_load_si128(w.add(HEAD / 16 + i))));
        }
        _mm_movemask_epi8(_mm_cmpeq_epi8(acc, _mm_setzero_si128())) == 0xffff
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn windows_equal(t: TensorRef, words: &[u64; 2 * CHUNKS]) -> bool {
    Seen::of(t).words == *words
}

/// A placed graph: what `Seen` reads of every tensor (nodes, then leafs, then tensors in neither
/// list), in reading order.
pub struct PlacedGraph {
    n_nodes: usize,
    n_leafs: usize,
    /// the tensors in neither list (view sources, sources outside the lists), newest first
    loose: Vec<TensorRef>,
    seen: Vec<Seen>,
}

impl PlacedGraph {
    /// The graph of `tensors` (numbered as in `model`) as their headers read now;
    /// `loose`: the tensors neither in the node nor in the leaf list, newest first.
    pub fn take(tensors: &[TensorRef], model: &GraphModel, loose: &[Tid]) -> PlacedGraph {
        // recycled: a graph's worth of fresh pages per allocation would cost more than reading it
        let mut seen = seen_spare::take(tensors.len());
        let order = model.nodes.iter().map(|n| n.tensor).chain(model.leafs.iter().map(|l| l.0)).chain(loose.iter().copied());
        seen.extend(order.map(|t| Seen::of(tensors[t])));
        PlacedGraph { n_nodes: model.nodes.len(), n_leafs: model.leafs.len(), loose: loose.iter().map(|&t| tensors[t]).collect(), seen }
    }

    /// Whether `nodes` and `leafs` are the placed graph and every header still reads as it did
    /// (every source slot included, as upstream's replay reads them).
    // Not inlined into its one caller: the loop keeps its registers to itself (inlined into
    // `Gallocr::alloc_graph` it costs 1.7% more instructions per replay, bench_alloc under callgrind).
    #[inline(never)]
    pub fn unchanged(&self, nodes: &[TensorRef], leafs: &[TensorRef]) -> bool {
        if nodes.len() != self.n_nodes || leafs.len() != self.n_leafs {
            return false;
        }
        let (node_seen, rest) = self.seen.split_at(self.n_nodes);
        let (leaf_seen, loose_seen) = rest.split_at(self.n_leafs);
        nodes.iter().zip(node_seen).all(|(&n, seen)| seen.holds(n))
            && leafs.iter().zip(leaf_seen).all(|(&l, seen)| seen.holds(l))
            // each named by a node, leaf or loose tensor checked before it (a view before its source)
            && self.loose.iter().zip(loose_seen).all(|(&t, seen)| seen.holds(t))
    }
}

impl Drop for PlacedGraph {
    fn drop(&mut self) {
        seen_spare::give(std::mem::take(&mut self.seen));
    }
}
