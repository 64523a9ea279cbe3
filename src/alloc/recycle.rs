//! The planner's largest arrays, recycled on the thread that plans.
//!
//! A graph of a few thousand tensors needs about a megabyte of them per plan. Memory handed back
//! to the C allocator between two plans (a scheduler freed and made again, as llama.cpp does per
//! context) tends to go back to the kernel, and comes back as fresh pages that must be faulted
//! in and zeroed, which costs more than the planning itself. So one spare of each array is kept
//! per thread, the largest seen, emptied when stored; it is freed with the thread.

use std::cell::RefCell;

use crate::alloc::addr_index::AddrIndex;
use crate::alloc::model::{NodeDesc, TensorDesc};
use crate::alloc::placed::Seen;
use crate::alloc::plan::Placement;
use crate::ggml::tensor::{Layout, TensorRef};

#[derive(Default)]
struct Spares {
    descs: Vec<TensorDesc>,
    nodes: Vec<NodeDesc>,
    tensors: Vec<TensorRef>,
    placements: Vec<Option<Placement>>,
    index: AddrIndex,
    layouts: Vec<Layout>,
    seen: Vec<Seen>,
    words: Vec<usize>,
}

thread_local! {
    static SPARES: RefCell<Spares> = RefCell::new(Spares::default());
}

macro_rules! spare {
    ($take:ident, $give:ident, $field:ident, $t:ty) => {
        /// An empty container with room for `n`: the thread's spare when there is one.
        pub fn $take(n: usize) -> $t {
            let mut v = SPARES.try_with(|s| std::mem::take(&mut s.borrow_mut().$field)).unwrap_or_default();
            v.clear();
            v.reserve(n);
            v
        }

        /// Keeps `v`'s memory as the thread's spare when it is larger than the one kept.
        pub fn $give(mut v: $t) {
            v.clear();
            let _ = SPARES.try_with(|s| {
                let mut s = s.borrow_mut();
                if v.capacity() > s.$field.capacity() {
                    s.$field = v;
                }
            });
        }
    };
}

spare!(take_descs, give_descs, descs, Vec<TensorDesc>);
spare!(take_nodes, give_nodes, nodes, Vec<NodeDesc>);
spare!(take_tensors, give_tensors, tensors, Vec<TensorRef>);
spare!(take_placements, give_placements, placements, Vec<Option<Placement>>);
spare!(take_layouts, give_layouts, layouts, Vec<Layout>);
spare!(take_seen, give_seen, seen, Vec<Seen>);
spare!(take_words, give_words, words, Vec<usize>);
spare!(take_index, give_index, index, AddrIndex);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_larger_spare_is_kept_and_handed_out_empty() {
        give_words(Vec::with_capacity(10));
        let mut big = Vec::with_capacity(1000);
        big.push(1);
        give_words(big);
        give_words(Vec::with_capacity(5)); // smaller: dropped
        let v = take_words(3);
        assert!(v.is_empty());
        assert!(v.capacity() >= 1000);
        assert!(take_words(3).capacity() < 1000, "taken once");
    }
}
