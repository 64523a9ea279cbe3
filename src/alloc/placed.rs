//! The last graph a `gallocr` placed, as the headers of its tensors read right after placing:
//! the cheapest way to know that a graph handed again is the same graph with every tensor still
//! where it was put.
//!
//! Upstream's replay reads the node and leaf lists, every source slot, and `data`, `view_src`
//! and `buffer` of every tensor, twice (once to decide, once to place). This reads those fields
//! once, and the type, shape, strides and op too, and compares them with arrays laid out in the
//! order they are read. Whatever does not match goes to `gallocr`'s precise check, which decides
//! what still holds.
//!
//! The check is bound by memory, not instructions: a graph of a few thousand tensors has headers
//! of about 1.5 MB, more than L2 holds. So the copy is kept small (a copy of every compared byte,
//! 224 bytes a tensor, made a 2804-node graph's replay loop 2x slower): per tensor 80 bytes
//! (`Seen`: slots 0 to 3, slot 9, view, offset, data, the tensor, flags), slots 4 to 9 apart for
//! the few tensors that use them (`Wide`), and the layout window `[0, HEAD)` as an index into a
//! table of distinct windows (`Head`: a graph of repeated layers has few, the same shapes in every
//! layer). And the headers are asked for `AHEAD` tensors before they are read. Every byte is
//! compared exactly; the hash that finds equal windows while taking the copy is only a filter.

use crate::alloc::model::{GraphModel, Tid};
use crate::ggml::sys::{GGML_MAX_SRC, ggml_tensor};
use crate::ggml::tensor::TensorRef;
use std::mem::offset_of;

// the check's arrays, kept for the next graph placed on this thread (see `ggml_plan::spare`)
ggml_plan::spare!(pub(crate) seen_spare: Vec<Seen>);
ggml_plan::spare!(wide_spare: Vec<Wide>);
ggml_plan::spare!(heads_spare: Vec<Head>);

/// The header bytes `[0, HEAD)`: type, buffer, shape, strides, op (and the first op parameters,
/// which only make the check stricter). The plan depends on them (sizes; whether a node may take
/// its source's memory), and a caller may change them in place (a tensor grown, an op swapped)
/// although ggml's constructors never do.
const HEAD: usize = 96;
const _: () = {
    assert!(offset_of!(ggml_tensor, type_) == 0 && offset_of!(ggml_tensor, buffer) < HEAD);
    assert!(offset_of!(ggml_tensor, nb) + 8 * crate::ggml::sys::GGML_MAX_DIMS <= HEAD && offset_of!(ggml_tensor, op) + 4 <= HEAD);
    assert!(HEAD % 16 == 0 && HEAD <= std::mem::size_of::<ggml_tensor>());
};

/// One distinct `[0, HEAD)` window, as 16-byte chunks.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct Head([u64; HEAD / 8]);

impl Head {
    #[inline]
    fn of(t: TensorRef) -> Head {
        let mut w = [0u64; HEAD / 8];
        // SAFETY: `t` is a valid tensor (TensorRef's contract); `[0, HEAD)` lies inside its struct
        // (checked at compile time above) and is read by value, unaligned, as plain bytes.
        unsafe { std::ptr::copy_nonoverlapping(t.as_ptr() as *const u8, w.as_mut_ptr() as *mut u8, HEAD) };
        Head(w)
    }

    /// Where to look for a window equal to `t`'s already in the table (a filter only: the window
    /// found there is compared in full before it is shared). From the words that tell layouts
    /// apart: type, shape, op and its first parameter (buffer and strides mostly follow).
    #[inline]
    fn bucket_of(t: TensorRef) -> usize {
        let p = t.as_ptr() as *const u64;
        // SAFETY: `t` is a valid tensor (TensorRef's contract); words 0 to 11 lie inside `[0, HEAD)`,
        // inside its struct, read by value, unaligned.
        let h = [0, 2, 3, 4, 5, 10].iter().fold(0u64, |h, &i| (h ^ unsafe { p.add(i).read_unaligned() }).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        (h >> 54) as usize // BUCKETS = 1024
    }

    /// Whether `t`'s window reads as this one.
    #[inline(always)]
    fn matches(&self, t: TensorRef) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            // SAFETY: SSE2 is part of x86-64
            unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(self.diff(t), _mm_setzero_si128())) == 0xffff }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Head::of(t) == *self
        }
    }

    /// The bytes where `t`'s window differs from this one, or-ed into one chunk (SSE2, every
    /// x86-64 has it: 6 chunks of 16 bytes, xor-ed, no branch).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn diff(&self, t: TensorRef) -> std::arch::x86_64::__m128i {
        use std::arch::x86_64::*;
        let p = t.as_ptr() as *const u8;
        let h = self.0.as_ptr() as *const __m128i;
        // SAFETY: SSE2 is part of x86-64; `[0, HEAD)` lies inside the tensor's struct (checked at
        // compile time above), read with unaligned loads; `Head` is 16-byte aligned.
        unsafe {
            let mut acc = _mm_setzero_si128();
            for i in 0..HEAD / 16 {
                acc = _mm_or_si128(acc, _mm_xor_si128(_mm_loadu_si128(p.add(16 * i) as *const __m128i), _mm_load_si128(h.add(i))));
            }
            acc
        }
    }
}

const BUCKETS: usize = 1024;

/// The source slots, view source, view offset and data: `[SRC, SRC + 104)`, one run of words.
const SRC: usize = offset_of!(ggml_tensor, src);
const _: () = {
    assert!(GGML_MAX_SRC == 10 && SRC % 8 == 0 && offset_of!(ggml_tensor, view_src) == SRC + 80);
    assert!(offset_of!(ggml_tensor, view_offs) == SRC + 88 && offset_of!(ggml_tensor, data) == SRC + 96);
};

/// Slots 4 to 9 of a tensor that uses any of them (few ops have more than four sources).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct Wide([u64; 6]);

/// One tensor as the check reads it: source slots 0 to 3, slot 9 and the view source, view
/// offset and data (as 16-byte chunks, in the header's order), itself, its flags, which layout
/// window it has (`meta >> 1`, an index into `PlacedGraph::heads`) and whether it uses slots 4
/// to 9 (`meta & 1`: they are the next row of `PlacedGraph::wide`; else they must be NULL).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct Seen {
    src01: [u64; 2],
    src23: [u64; 2],
    src9_view: [u64; 2],
    offs_data: [u64; 2],
    tensor: usize,
    flags: u32,
    meta: u32,
}

impl Seen {
    /// As the header of `t` reads now (`meta`: the wide bit only), and its slots 4 to 9 if used.
    #[inline]
    fn of(t: TensorRef) -> (Seen, Option<Wide>) {
        let mut w = [0u64; 13];
        // SAFETY: `t` is a valid tensor (TensorRef's contract); `[SRC, SRC + 104)` lies inside its
        // struct (checked at compile time above) and is read by value, unaligned, as plain words.
        unsafe { std::ptr::copy_nonoverlapping((t.as_ptr() as *const u8).add(SRC), w.as_mut_ptr() as *mut u8, 104) };
        let wide = w[4..10].iter().any(|&s| s != 0);
        let seen = Seen {
            src01: [w[0], w[1]],
            src23: [w[2], w[3]],
            src9_view: [w[9], w[10]],
            offs_data: [w[11], w[12]],
            tensor: t.addr(),
            flags: t.flags() as u32,
            meta: wide as u32,
        };
        (seen, wide.then(|| Wide([w[4], w[5], w[6], w[7], w[8], w[9]])))
    }

    /// Whether `t` is this tensor and its header reads as it did; `heads`, `wide`: the graph's.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn holds(&self, t: TensorRef, heads: &[Head], wide: &mut std::slice::Iter<'_, Wide>) -> bool {
        use std::arch::x86_64::*;
        let Some(head) = heads.get((self.meta >> 1) as usize) else { return false };
        let rest = if self.meta & 1 == 0 {
            None
        } else {
            match wide.next() {
                Some(w) => Some(w),
                None => return false,
            }
        };
        if t.addr() != self.tensor || t.flags() as u32 != self.flags {
            return false;
        }
        let p = t.as_ptr() as *const u8;
        // SAFETY: SSE2 is part of x86-64; `[0, HEAD)` and `[SRC, SRC + 104)` lie inside the tensor's
        // struct (checked at compile time above), read with unaligned loads (the load at SRC + 72
        // overlaps the one at SRC + 64 by slot 9); `Seen`, `Head` and `Wide` are 16-byte aligned.
        unsafe {
            let ld = |off: usize| _mm_loadu_si128(p.add(off) as *const __m128i);
            let mine = |a: &[u64; 2]| _mm_load_si128(a.as_ptr() as *const __m128i);
            let mut acc = head.diff(t);
            acc = _mm_or_si128(acc, _mm_xor_si128(ld(SRC), mine(&self.src01)));
            acc = _mm_or_si128(acc, _mm_xor_si128(ld(SRC + 16), mine(&self.src23)));
            acc = _mm_or_si128(acc, _mm_xor_si128(ld(SRC + 72), mine(&self.src9_view)));
            acc = _mm_or_si128(acc, _mm_xor_si128(ld(SRC + 88), mine(&self.offs_data)));
            let (s45, s67, s89) = (ld(SRC + 32), ld(SRC + 48), ld(SRC + 64));
            match rest {
                None => acc = _mm_or_si128(acc, _mm_or_si128(s45, _mm_or_si128(s67, s89))),
                Some(w) => {
                    let w = w.0.as_ptr() as *const __m128i;
                    acc = _mm_or_si128(acc, _mm_xor_si128(s45, _mm_load_si128(w)));
                    acc = _mm_or_si128(acc, _mm_xor_si128(s67, _mm_load_si128(w.add(1))));
                    acc = _mm_or_si128(acc, _mm_xor_si128(s89, _mm_load_si128(w.add(2))));
                }
            }
            _mm_movemask_epi8(_mm_cmpeq_epi8(acc, _mm_setzero_si128())) == 0xffff
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn holds(&self, t: TensorRef, heads: &[Head], wide: &mut std::slice::Iter<'_, Wide>) -> bool {
        let (now, now_wide) = Seen::of(t);
        let rest = if self.meta & 1 == 0 { None } else { wide.next() };
        heads.get((self.meta >> 1) as usize).is_some_and(|h| Head::of(t) == *h)
            && Seen { meta: self.meta, ..now } == *self
            && now_wide.as_ref() == rest
            && (self.meta & 1 == 0 || rest.is_some())
    }
}

/// Whether each of `ts` holds its `seen` (see `Seen::holds`).
#[inline(always)]
fn all_hold(ts: &[TensorRef], seen: &[Seen], heads: &[Head], wide: &mut std::slice::Iter<'_, Wide>) -> bool {
    for (i, (&t, s)) in ts.iter().zip(seen).enumerate() {
        if let Some(&ahead) = ts.get(i + AHEAD) {
            prefetch_header(ahead);
        }
        if !s.holds(t, heads, wide) {
            return false;
        }
    }
    true
}

/// How many tensors ahead the check asks for headers: their addresses are known from the list
/// long before they are read, and the headers of a large graph come from L3, not L2.
const AHEAD: usize = 8;

/// Asks for the cache lines of `[0, SRC + 104)` of `t`'s header (however it is aligned).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_header(t: TensorRef) {
    use std::arch::x86_64::*;
    let p = t.as_ptr() as *const i8;
    // SAFETY: a prefetch is a hint: it reads nothing the program sees and cannot fault; the
    // addresses lie inside the tensor's struct anyway (SRC + 104 <= its size).
    unsafe {
        for off in [0, 64, 128, 192, SRC + 103] {
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off));
        }
    }
}

/// Elsewhere: none (the hardware's own prefetcher only).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn prefetch_header(_: TensorRef) {}

/// A placed graph: what `Seen` reads of every tensor (nodes, then leafs, then tensors in neither
/// list) in reading order, the distinct layout windows, and slots 4 to 9 where used.
pub struct PlacedGraph {
    n_nodes: usize,
    n_leafs: usize,
    /// the tensors in neither list (view sources, sources outside the lists), newest first
    loose: Vec<TensorRef>,
    seen: Vec<Seen>,
    /// the distinct layout windows (an equal window may appear twice: sharing is only a saving)
    heads: Vec<Head>,
    /// slots 4 to 9 of the tensors that use them, in reading order
    wide: Vec<Wide>,
}

impl PlacedGraph {
    /// The graph of `tensors` (numbered as in `model`) as their headers read now;
    /// `loose`: the tensors neither in the node nor in the leaf list, newest first.
    /// None when the graph has more tensors than `Seen::meta` can number layouts for.
    pub fn take(tensors: &[TensorRef], model: &GraphModel, loose: &[Tid]) -> Option<PlacedGraph> {
        if tensors.len() >= 1 << 31 {
            return None;
        }
        // recycled: a graph's worth of fresh pages per allocation would cost more than reading it
        let mut p = PlacedGraph {
            n_nodes: model.nodes.len(),
            n_leafs: model.leafs.len(),
            loose: loose.iter().map(|&t| tensors[t]).collect(),
            seen: seen_spare::take(tensors.len()),
            heads: heads_spare::take(256),
            wide: wide_spare::take(16),
        };
        let mut buckets = [u32::MAX; BUCKETS];
        let (heads, wide) = (&mut p.heads, &mut p.wide);
        let order = model.nodes.iter().map(|n| n.tensor).chain(model.leafs.iter().map(|l| l.0)).chain(loose.iter().copied());
        // one `extend` of a sized iterator: no capacity check per tensor
        p.seen.extend(order.map(|t| {
            let t = tensors[t];
            let b = Head::bucket_of(t);
            let id = match buckets[b] {
                id if id != u32::MAX && heads[id as usize].matches(t) => id,
                _ => {
                    buckets[b] = heads.len() as u32;
                    heads.push(Head::of(t));
                    buckets[b]
                }
            };
            let (mut seen, slots) = Seen::of(t);
            seen.meta |= id << 1;
            wide.extend(slots);
            seen
        }));
        Some(p)
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
        let mut wide = self.wide.iter();
        all_hold(nodes, node_seen, &self.heads, &mut wide)
            && all_hold(leafs, leaf_seen, &self.heads, &mut wide)
            // each named by a node, leaf or loose tensor checked before it (a view before its source)
            && all_hold(&self.loose, loose_seen, &self.heads, &mut wide)
    }
}

impl Drop for PlacedGraph {
    fn drop(&mut self) {
        wide_spare::give(std::mem::take(&mut self.wide));
        heads_spare::give(std::mem::take(&mut self.heads));
        seen_spare::give(std::mem::take(&mut self.seen));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::model::NodeDesc;

    /// `n` zeroed headers (a plain C struct: all zeros is a valid, empty tensor), a chain:
    /// tensor 0 a leaf, every later one a node reading the one before; `shape(i)` its ne[0].
    fn chain(n: usize, shape: impl Fn(usize) -> i64) -> Vec<ggml_tensor> {
        // SAFETY: ggml_tensor is a C struct of integers, pointers and arrays of them; zero is valid.
        let mut ts: Vec<ggml_tensor> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
        let base = ts.as_mut_ptr();
        for (i, t) in ts.iter_mut().enumerate() {
            t.ne = [shape(i), 4, 1, 1];
            t.nb = [4, 4 * shape(i) as usize, 16 * shape(i) as usize, 16 * shape(i) as usize];
            t.data = (0x1000 + 64 * i) as *mut _;
            if i > 0 {
                // SAFETY: i - 1 < n: an address inside `ts`, only compared, never read here
                t.src[0] = unsafe { base.add(i - 1) };
                t.op = crate::ggml::sys::op::SCALE;
            }
        }
        ts
    }

    fn placed(ts: &mut [ggml_tensor]) -> (PlacedGraph, Vec<TensorRef>) {
        // SAFETY: pointers into `ts`, which outlives every use below
        let refs: Vec<TensorRef> = ts.iter_mut().map(|t| unsafe { TensorRef::from_raw(t) }.unwrap()).collect();
        let model = GraphModel {
            leafs: vec![(0, 0)],
            nodes: (1..ts.len()).map(|tensor| NodeDesc { tensor, srcs: Default::default(), buffer_id: 0 }).collect(),
            ..Default::default()
        };
        (PlacedGraph::take(&refs, &model, &[]).unwrap(), refs)
    }

    /// A copy of a header, to put back after a change (ggml_tensor is plain C data, not `Copy`).
    fn copy(t: &ggml_tensor) -> ggml_tensor {
        // SAFETY: a C struct of integers, pointers and arrays of them: a bitwise copy is a valid value
        unsafe { std::ptr::read(t) }
    }

    fn unchanged(p: &PlacedGraph, refs: &[TensorRef]) -> bool {
        p.unchanged(&refs[1..], &refs[..1])
    }

    /// A change made to a header in place; the second argument: another tensor to point to.
    type Change = fn(&mut ggml_tensor, *mut ggml_tensor);

    #[test]
    fn repeated_layouts_share_one_window_and_each_field_is_still_checked() {
        let mut ts = chain(64, |i| if i % 8 == 0 { 32 } else { 8 });
        // two tensors that use slots past the fourth (as a few ops do): 5, and every slot
        let other = &raw mut ts[40];
        ts[20].src[5] = other;
        ts[30].src = [other; GGML_MAX_SRC];
        let (p, refs) = placed(&mut ts);
        assert_eq!(p.wide.len(), 2);
        assert_eq!(p.heads.len(), 3, "the leaf, the nodes of 8, the nodes of 32: every repeat shared");
        assert!(unchanged(&p, &refs));
        // each change, made in place and undone: a node that shares its window with others
        let changes: [(&str, Change); 8] = [
            ("grown", |t, _| t.ne[1] = 5),
            ("stride", |t, _| t.nb[1] = 64),
            ("op", |t, _| t.op = crate::ggml::sys::op::ADD),
            ("type", |t, _| t.type_ = 1 /* F16 */),
            ("data", |t, _| t.data = 0x10 as *mut _),
            ("flags", |t, _| t.flags = 2),
            ("last source slot", |t, o| t.src[GGML_MAX_SRC - 1] = o),
            ("view", |t, o| t.view_src = o),
        ];
        for (what, change) in changes {
            for i in [9, 20, 30, 63] {
                let keep = copy(&ts[i]);
                change(&mut ts[i], other);
                if ts[i].src != keep.src || ts[i].view_src != keep.view_src || what != "last source slot" && what != "view" {
                    assert!(!unchanged(&p, &refs), "{what} of tensor {i} changed, not noticed");
                }
                ts[i] = keep;
                assert!(unchanged(&p, &refs), "{what} of tensor {i} restored");
            }
        }
        // slots 4 to 8, each: filled in a tensor that used none (9), changed or emptied where used (20, 30)
        for (i, j, to) in [(9, 4, other), (9, 7, other), (20, 6, other), (20, 5, std::ptr::null_mut()), (30, 9, &raw mut ts[3]), (30, 4, std::ptr::null_mut())]
        {
            let keep = ts[i].src[j];
            ts[i].src[j] = to;
            assert!(!unchanged(&p, &refs), "slot {j} of tensor {i} changed, not noticed");
            ts[i].src[j] = keep;
        }
        assert!(unchanged(&p, &refs));
    }

    #[test]
    fn more_distinct_windows_than_buckets_each_compared_with_its_own() {
        // every node its own shape: the table's buckets are shared and overwritten
        let n = 3 * BUCKETS;
        let mut ts = chain(n, |i| 1 + i as i64);
        let (p, refs) = placed(&mut ts);
        assert_eq!(p.heads.len(), n);
        assert!(unchanged(&p, &refs));
        for i in (1..n).step_by(97) {
            let keep = copy(&ts[i]);
            // the window of another tensor: stored in the table, but not this tensor's
            let (ne, nb) = (ts[i - 1].ne, ts[i - 1].nb);
            ts[i].ne = ne;
            ts[i].nb = nb;
            assert!(!unchanged(&p, &refs), "tensor {i} given tensor {}'s shape, not noticed", i - 1);
            ts[i] = keep;
        }
        assert!(unchanged(&p, &refs));
    }
}
