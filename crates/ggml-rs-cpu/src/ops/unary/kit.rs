//! What the kernels of the families `unary`, `softmax`, `rope`, `attn`, `reduce` and `train` share:
//! element access to F32 / F16 / BF16 / I32 views, row addressing, row-parallel chunking, and
//! (for the tests) tensors built from plain vectors in contiguous and non-contiguous layouts.
//!
//! Memory contract: a [`View`] handed to a kernel describes memory the backend owns for the whole
//! computation (mod.rs): every address `data + Σ i_k·nb[k]` with `i_k < ne[k]` is readable, and
//! the destination's are writable by the one chunk that computes them. The accessors here rely on
//! that contract and on nothing else.

use super::super::{Exec, Scratch, View, raw_type};
use half::{bf16, f16};

/// whether values of this type can be read and written as floats here
pub fn is_float(ty: i32) -> bool {
    matches!(ty, raw_type::F32 | raw_type::F16 | raw_type::BF16)
}

/// bytes of one element of a float or integer type, `None` for a block type
pub fn elem_size(ty: i32) -> Option<usize> {
    match ty {
        raw_type::F32 | raw_type::I32 => Some(4),
        raw_type::F16 | raw_type::BF16 | raw_type::I16 => Some(2),
        raw_type::I8 => Some(1),
        raw_type::I64 | raw_type::F64 => Some(8),
        _ => None,
    }
}

/// reads one float element (F32, F16 or BF16; other types read 0: callers check `is_float`)
///
/// # Safety
/// `p` points to a readable element of type `ty`.
#[inline(always)]
pub unsafe fn ld(ty: i32, p: *const u8) -> f32 {
    // SAFETY: the caller's promise; unaligned reads, since views need not be aligned in tests
    unsafe {
        match ty {
            raw_type::F32 => (p as *const f32).read_unaligned(),
            raw_type::F16 => f16::from_bits((p as *const u16).read_unaligned()).to_f32(),
            raw_type::BF16 => bf16::from_bits((p as *const u16).read_unaligned()).to_f32(),
            _ => 0.0,
        }
    }
}

/// writes one float element, rounding to nearest even for F16 / BF16 as ggml does
///
/// # Safety
/// `p` points to a writable element of type `ty`.
#[inline(always)]
pub unsafe fn st(ty: i32, p: *mut u8, v: f32) {
    // SAFETY: the caller's promise
    unsafe {
        match ty {
            raw_type::F32 => (p as *mut f32).write_unaligned(v),
            raw_type::F16 => (p as *mut u16).write_unaligned(f16::from_f32(v).to_bits()),
            raw_type::BF16 => (p as *mut u16).write_unaligned(bf16::from_f32(v).to_bits()),
            _ => {}
        }
    }
}

/// address of element (i0, i1, i2, i3)
#[inline(always)]
pub fn at(v: &View, i0: i64, i1: i64, i2: i64, i3: i64) -> *mut u8 {
    v.data.wrapping_add(i0 as usize * v.nb[0] + i1 as usize * v.nb[1] + i2 as usize * v.nb[2] + i3 as usize * v.nb[3])
}

/// element (i0, i1, i2, i3) of a float view
#[inline(always)]
pub fn get(v: &View, i0: i64, i1: i64, i2: i64, i3: i64) -> f32 {
    // SAFETY: an in-range element of a view (module contract)
    unsafe { ld(v.ty, at(v, i0, i1, i2, i3)) }
}

/// sets element (i0, i1, i2, i3) of a float view
#[inline(always)]
pub fn set(v: &View, i0: i64, i1: i64, i2: i64, i3: i64, x: f32) {
    // SAFETY: an in-range element of the destination, written by the chunk that owns it (module contract)
    unsafe { st(v.ty, at(v, i0, i1, i2, i3), x) }
}

/// element (i0, i1, i2, i3) of an I32 view
#[inline(always)]
pub fn get_i32(v: &View, i0: i64, i1: i64, i2: i64, i3: i64) -> i32 {
    // SAFETY: an in-range element of a view (module contract)
    unsafe { (at(v, i0, i1, i2, i3) as *const i32).read_unaligned() }
}

/// sets element (i0, i1, i2, i3) of an I32 view
#[inline(always)]
pub fn set_i32(v: &View, i0: i64, i1: i64, i2: i64, i3: i64, x: i32) {
    // SAFETY: as for `set`
    unsafe { (at(v, i0, i1, i2, i3) as *mut i32).write_unaligned(x) }
}

/// the flat row index `r` as (i1, i2, i3) of shape `ne`
#[inline(always)]
pub fn unflatten(r: i64, ne: &[i64; 4]) -> (i64, i64, i64) {
    let i3 = r / (ne[1] * ne[2]);
    let i2 = (r - i3 * ne[1] * ne[2]) / ne[1];
    (r - i3 * ne[1] * ne[2] - i2 * ne[1], i2, i3)
}

/// row `(i1, i2, i3)` of an F32 view whose elements are packed, as a slice of `n` floats; `None`
/// when the view is not packed F32 or the row is not aligned for f32 (callers fall back to the
/// element-wise form)
#[inline(always)]
pub fn f32_row<'a>(v: &View, n: i64, i1: i64, i2: i64, i3: i64) -> Option<&'a [f32]> {
    let p = at(v, 0, i1, i2, i3);
    if v.ty != raw_type::F32 || v.nb[0] != 4 || !(p as usize).is_multiple_of(4) {
        return None;
    }
    // SAFETY: n packed in-range f32 elements, aligned (checked) (module contract)
    Some(unsafe { std::slice::from_raw_parts(p as *const f32, n as usize) })
}

/// as [`f32_row`], writable: the destination row of the calling chunk
#[inline(always)]
#[allow(clippy::mut_from_ref)]
pub fn f32_row_mut<'a>(v: &View, n: i64, i1: i64, i2: i64, i3: i64) -> Option<&'a mut [f32]> {
    let p = at(v, 0, i1, i2, i3);
    if v.ty != raw_type::F32 || v.nb[0] != 4 || !(p as usize).is_multiple_of(4) {
        return None;
    }
    // SAFETY: as for f32_row; the row belongs to the calling chunk only (module contract)
    Some(unsafe { std::slice::from_raw_parts_mut(p as *mut f32, n as usize) })
}

/// the most chunks [`par_ranges`] splits into on this pool (scratch areas per chunk are sized by it)
pub fn max_chunks(exec: &Exec) -> usize {
    exec.n_threads() * 4
}

/// runs `f(r0, r1)` over `0..n` split in contiguous ranges over the pool's threads
pub fn par_ranges<F: Fn(i64, i64) + Sync>(exec: &mut Exec, n: i64, f: F) {
    par_ranges_c(exec, n, |_, r0, r1| f(r0, r1))
}

/// as [`par_ranges`], `f` also told its chunk's index (below [`max_chunks`])
pub fn par_ranges_c<F: Fn(usize, i64, i64) + Sync>(exec: &mut Exec, n: i64, f: F) {
    par_chunks(exec, n, 1, f)
}

/// the fewest elements [`par_rows_c`] gives a chunk: a job split over the pool costs ~1-3 µs
/// (waking the other threads, waiting for their last chunk; far more when a thread is
/// descheduled on a shared machine), about what 4096 elements of a cheap row op take on one
/// thread, so smaller ops run whole on the calling thread (token generation's rope of 8 heads,
/// 512 elements, took 3.6 µs on one thread and 18 µs split in 8 chunks over 2 threads)
pub const MIN_CHUNK_ELEMS: i64 = 4096;

/// as [`par_ranges_c`] over `n` rows of `row_len` elements each, every chunk but the last given
/// at least [`MIN_CHUNK_ELEMS`] elements (a small op is one chunk, run on the calling thread
/// without a pool job)
pub fn par_rows_c<F: Fn(usize, i64, i64) + Sync>(exec: &mut Exec, n: i64, row_len: i64, f: F) {
    let min_rows = (MIN_CHUNK_ELEMS + row_len.max(1) - 1) / row_len.max(1);
    par_chunks(exec, n, min_rows, f)
}

/// as [`par_rows_c`], without the chunk index
pub fn par_rows<F: Fn(i64, i64) + Sync>(exec: &mut Exec, n: i64, row_len: i64, f: F) {
    par_rows_c(exec, n, row_len, |_, r0, r1| f(r0, r1))
}

/// `0..n` in at most [`max_chunks`] contiguous ranges of at least `min_per` items (the last
/// excepted), `f(chunk, start, end)` for each on the pool
fn par_chunks<F: Fn(usize, i64, i64) + Sync>(exec: &mut Exec, n: i64, min_per: i64, f: F) {
    if n <= 0 {
        return;
    }
    let (chunks, per) = chunk_split(n, min_per, max_chunks(exec) as i64);
    exec.parallel(chunks as usize, |c| {
        let r0 = c as i64 * per;
        f(c, r0, (r0 + per).min(n));
    });
}

/// `(chunks, items per chunk)` for `n > 0` items: at most `max` chunks (at least one), none but
/// the last under `min_per` items
fn chunk_split(n: i64, min_per: i64, max: i64) -> (i64, i64) {
    let chunks = max.min(n / min_per.max(1)).max(1);
    let per = (n + chunks - 1) / chunks;
    ((n + per - 1) / per, per)
}

/// chunk `c`'s `len` floats of a scratch area split in equal parts
#[allow(clippy::mut_from_ref)]
pub fn scratch_f32<'a>(s: &Scratch, c: usize, len: usize) -> &'a mut [f32] {
    assert!((c + 1) * len * 4 <= s.len, "scratch_f32: chunk {c} of {len} floats is past the scratch area");
    // SAFETY: in bounds (checked), 8-byte aligned base; each chunk uses its own part (Exec::scratch's contract)
    unsafe { std::slice::from_raw_parts_mut((s.ptr as *mut f32).add(c * len), len) }
}

#[cfg(test)]
mod chunking_tests {
    use super::*;

    /// the row-parallel helpers' split: every row in exactly one chunk, at most `max` chunks, no
    /// chunk but the last under the minimum, and an op of MIN_CHUNK_ELEMS elements or fewer in
    /// one chunk (run on the calling thread, no pool job): token generation's rope (8 rows of 64)
    /// was split in 8 chunks of one row, each refilling the rotation cache (18 µs on 2 threads,
    /// 3.6 µs on one)
    #[test]
    fn rows_split_into_chunks_of_the_minimum_size_at_least() {
        for (n, row_len, max) in [
            (8i64, 64i64, 8i64),
            (1, 1536, 8),
            (64, 64, 8),
            (65, 64, 8),
            (512, 1, 8),
            (4096, 1, 8),
            (10_000, 1, 8),
            (512, 512, 8),
            (7, 4096, 4),
            (3, 100_000, 8),
        ] {
            let min_rows = (MIN_CHUNK_ELEMS + row_len - 1) / row_len;
            let (chunks, per) = chunk_split(n, min_rows, max);
            assert!((1..=max).contains(&chunks), "n={n} row_len={row_len}: {chunks} chunks");
            assert!(per * chunks >= n && per * (chunks - 1) < n, "n={n} row_len={row_len}: {chunks} × {per} does not cover the rows exactly");
            if chunks > 1 {
                assert!(per >= min_rows, "n={n} row_len={row_len}: chunks of {per} rows, under {min_rows}");
            }
            if n * row_len <= MIN_CHUNK_ELEMS {
                assert_eq!(chunks, 1, "n={n} row_len={row_len}: a small op split");
            }
        }
        // without a minimum, as before: up to `max` chunks of the rows
        assert_eq!(chunk_split(8, 1, 8), (8, 1));
        assert_eq!(chunk_split(100, 1, 8), (8, 13));
    }
}

#[cfg(test)]
pub mod testkit {
    //! tensors from plain vectors, in contiguous and non-contiguous layouts, and a pool to run on
    use super::*;
    use crate::block::AlignedBytes;
    use crate::ops::{MAX_SRC, Node, OP_PARAMS, Op};
    use crate::pool::ThreadPool;
    use crate::rng::XorShift;

    /// how a test tensor is laid out in memory
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Layout {
        /// packed
        Contig,
        /// rows padded: each dimension's stride a few elements more than packed
        Padded,
        /// dims 1 and 2 stored in swapped order (a permuted view), rows packed
        Permuted,
    }

    pub const LAYOUTS: [Layout; 3] = [Layout::Contig, Layout::Padded, Layout::Permuted];

    pub struct Tensor {
        /// owns the memory `view` points into
        #[allow(dead_code)]
        pub buf: AlignedBytes,
        pub view: View,
    }

    impl Tensor {
        /// a tensor of type `ty` and shape `ne`, zeroed
        pub fn new(ty: i32, ne: [i64; 4], layout: Layout) -> Tensor {
            let ts = elem_size(ty).expect("testkit: element type");
            let mut nb = [ts, 0, 0, 0];
            let pad = if layout == Layout::Padded { 3 * ts } else { 0 };
            let order: [usize; 3] = if layout == Layout::Permuted { [2, 1, 3] } else { [1, 2, 3] };
            let mut s = ts * ne[0] as usize + pad;
            for &k in &order {
                nb[k] = s;
                s = s * ne[k] as usize + pad;
            }
            let mut buf = AlignedBytes::zeroed(s + 64);
            let data = buf.as_mut_ptr();
            Tensor { buf, view: View { ty, ne, nb, data } }
        }

        /// filled from `vals` in logical order (i0 fastest)
        pub fn from_f32(ty: i32, ne: [i64; 4], layout: Layout, vals: &[f32]) -> Tensor {
            let t = Tensor::new(ty, ne, layout);
            assert_eq!(vals.len() as i64, t.view.nelements());
            let mut k = 0;
            for i3 in 0..ne[3] {
                for i2 in 0..ne[2] {
                    for i1 in 0..ne[1] {
                        for i0 in 0..ne[0] {
                            if ty == raw_type::I32 {
                                set_i32(&t.view, i0, i1, i2, i3, vals[k] as i32);
                            } else {
                                set(&t.view, i0, i1, i2, i3, vals[k]);
                            }
                            k += 1;
                        }
                    }
                }
            }
            t
        }

        /// random values in [lo, hi)
        pub fn random(ty: i32, ne: [i64; 4], layout: Layout, rng: &mut XorShift, lo: f32, hi: f32) -> Tensor {
            let n: i64 = ne.iter().product();
            let vals: Vec<f32> = (0..n).map(|_| rng.f32_in(lo, hi)).collect();
            Tensor::from_f32(ty, ne, layout, &vals)
        }

        /// the values in logical order, as f32
        pub fn to_f32(&self) -> Vec<f32> {
            let ne = self.view.ne;
            let mut out = Vec::with_capacity(self.view.nelements() as usize);
            for i3 in 0..ne[3] {
                for i2 in 0..ne[2] {
                    for i1 in 0..ne[1] {
                        for i0 in 0..ne[0] {
                            out.push(if self.view.ty == raw_type::I32 { get_i32(&self.view, i0, i1, i2, i3) as f32 } else { get(&self.view, i0, i1, i2, i3) });
                        }
                    }
                }
            }
            out
        }
    }

    /// a node of `op` into `dst` from `src`, with `params`
    pub fn node<'a>(op: Op, dst: &Tensor, src: &[Option<&Tensor>], params: &[i32]) -> Node<'a> {
        let mut s = [None; MAX_SRC];
        for (i, t) in src.iter().enumerate() {
            s[i] = t.map(|t| t.view);
        }
        let mut p = [0i32; OP_PARAMS];
        p[..params.len()].copy_from_slice(params);
        Node { op, dst: dst.view, src: s, params: p, name: "test", packed: None }
    }

    pub fn f(x: f32) -> i32 {
        x.to_bits() as i32
    }

    /// computes `node` on a pool of `threads`
    pub fn run(node: &Node, threads: usize) -> Result<(), crate::ops::OpError> {
        let mut pool = ThreadPool::new(threads);
        let mut scratch = AlignedBytes::default();
        let mut exec = Exec::new(&mut pool, &mut scratch);
        crate::ops::compute(node, &mut exec)
    }

    /// computes `node` on a pool of `threads` with the kernels of `level` (the scalar reference
    /// or a SIMD form, at most the detected level)
    pub fn run_at(node: &Node, threads: usize, level: crate::simd::Level) -> Result<(), crate::ops::OpError> {
        let mut pool = ThreadPool::new(threads);
        let mut scratch = AlignedBytes::default();
        let mut exec = Exec::with_level(&mut pool, &mut scratch, level.min(crate::simd::detected()));
        crate::ops::compute(node, &mut exec)
    }

    /// asserts |a - b| <= tol · max(1, |b|) element-wise
    pub fn assert_close(what: &str, a: &[f32], b: &[f32], tol: f32) {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            let ok = (x - y).abs() <= tol * y.abs().max(1.0) || (x.is_nan() && y.is_nan()) || x == y;
            assert!(ok, "{what}: element {i}: {x} vs {y}");
        }
    }
}
