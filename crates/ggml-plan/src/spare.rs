//! Spare arrays kept on the thread that plans, one per kind, by the module that owns the kind.
//!
//! A graph of a few thousand tensors needs about a megabyte of arrays per plan. Memory handed
//! back to the C allocator between two plans (a scheduler freed and made again, as llama.cpp does
//! per context) tends to go back to the kernel, and comes back as fresh pages that must be
//! faulted in and zeroed, which costs more than the planning itself. So one spare of each array
//! is kept per thread, the largest seen, emptied when stored; it is freed with the thread.

/// `spare!(vis name: Type)` makes a module `name` with `take(n)` (an empty container with room for
/// `n`: the thread's spare when there is one) and `give(v)` (keeps `v`'s memory as the thread's
/// spare when it is larger than the one kept). `Type` needs `Default`, `clear`, `reserve` and
/// `capacity`, and is named as from the module that invokes the macro.
#[macro_export]
macro_rules! spare {
    ($vis:vis $name:ident: $t:ty) => {
        #[doc = concat!("The thread's spare `", stringify!($t), "` (see `ggml_plan::spare`).")]
        $vis mod $name {
            #[allow(unused_imports)]
            use super::*;

            ::std::thread_local! {
                static SPARE: ::std::cell::RefCell<$t> = ::std::cell::RefCell::new(<$t>::default());
            }

            /// An empty container with room for `n`: the thread's spare when there is one.
            #[inline]
            pub fn take(n: usize) -> $t {
                let mut v = SPARE.try_with(|s| ::std::mem::take(&mut *s.borrow_mut())).unwrap_or_default();
                v.clear();
                v.reserve(n);
                v
            }

            /// Keeps `v`'s memory as the thread's spare when it is larger than the one kept.
            #[inline]
            pub fn give(mut v: $t) {
                v.clear();
                let _ = SPARE.try_with(|s| {
                    let mut s = s.borrow_mut();
                    if v.capacity() > s.capacity() {
                        *s = v;
                    }
                });
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::spare!(words: Vec<usize>);

    #[test]
    fn the_larger_spare_is_kept_and_handed_out_empty() {
        words::give(Vec::with_capacity(10));
        let mut big = Vec::with_capacity(1000);
        big.push(1);
        words::give(big);
        words::give(Vec::with_capacity(5)); // smaller: dropped
        let v = words::take(3);
        assert!(v.is_empty());
        assert!(v.capacity() >= 1000);
        assert!(words::take(3).capacity() < 1000, "taken once");
    }
}
