//! What the kernels of the `copy`, `binary`, `norm` and `mat` families share: type sizes of the raw
//! types, element loads and stores through f32 (as upstream's `type_conversion_table`), row
//! (de)quantization into memory of any alignment, ggml's layout predicates, and the split of
//! rows into chunks for [`Exec::parallel`](crate::ops::Exec::parallel).
//!
//! Memory is reached through raw pointers: a kernel's destination may be one of its sources
//! (ggml's in-place ops), so `&mut` slices over it would alias, and views may sit at offsets
//! that are not aligned for their type, so loads and stores are unaligned.

use half::{bf16, f16};

use crate::GgmlType;
use crate::ops::{View, raw_type};

/// (elements per block, bytes per block) of upstream's type `ty`, for the types this crate
/// knows (block formats and the plain ones graphs carry)
pub fn type_size(ty: i32) -> Option<(usize, usize)> {
    if let Some(t) = GgmlType::from_raw(ty) {
        return Some((t.block_size(), t.type_size()));
    }
    match ty {
        raw_type::I8 => Some((1, 1)),
        raw_type::I16 => Some((1, 2)),
        raw_type::I32 => Some((1, 4)),
        raw_type::I64 | raw_type::F64 => Some((1, 8)),
        _ => None,
    }
}

/// A type read and written element by element through f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    F32,
    F16,
    Bf16,
    I32,
}

impl Scalar {
    pub fn of(ty: i32) -> Option<Scalar> {
        match ty {
            raw_type::F32 => Some(Scalar::F32),
            raw_type::F16 => Some(Scalar::F16),
            raw_type::BF16 => Some(Scalar::Bf16),
            raw_type::I32 => Some(Scalar::I32),
            _ => None,
        }
    }

    /// F32, F16 or BF16 (the float types the element-wise ops take)
    pub fn float(ty: i32) -> Option<Scalar> {
        Scalar::of(ty).filter(|s| *s != Scalar::I32)
    }

    pub fn size(self) -> usize {
        match self {
            Scalar::F32 | Scalar::I32 => 4,
            Scalar::F16 | Scalar::Bf16 => 2,
        }
    }

    /// the element at `p` as f32 (I32 converted as C converts int to float)
    ///
    /// # Safety
    /// `p` is valid for reading `self.size()` bytes.
    #[inline(always)]
    pub unsafe fn load(self, p: *const u8) -> f32 {
        // SAFETY: the caller guarantees `size()` readable bytes; unaligned reads need no alignment.
        unsafe {
            match self {
                Scalar::F32 => p.cast::<f32>().read_unaligned(),
                Scalar::F16 => f16::from_bits(p.cast::<u16>().read_unaligned()).to_f32(),
                Scalar::Bf16 => bf16::from_bits(p.cast::<u16>().read_unaligned()).to_f32(),
                Scalar::I32 => p.cast::<i32>().read_unaligned() as f32,
            }
        }
    }

    /// stores `v` at `p`: f16 / bf16 rounded to nearest even (ggml's conversions), I32 truncated
    /// toward zero (C's float-to-int; out of range saturates here where C is undefined)
    ///
    /// # Safety
    /// `p` is valid for writing `self.size()` bytes.
    #[inline(always)]
    pub unsafe fn store(self, p: *mut u8, v: f32) {
        // SAFETY: the caller guarantees `size()` writable bytes; unaligned writes need no alignment.
        unsafe {
            match self {
                Scalar::F32 => p.cast::<f32>().write_unaligned(v),
                Scalar::F16 => p.cast::<u16>().write_unaligned(f16::from_f32(v).to_bits()),
                Scalar::Bf16 => p.cast::<u16>().write_unaligned(bf16::from_f32(v).to_bits()),
                Scalar::I32 => p.cast::<i32>().write_unaligned(v as i32),
            }
        }
    }
}

/// ggml_is_contiguous: the elements (blocks) densely in order; dimensions of size 1 may have
/// any stride
pub fn is_contiguous(v: &View) -> bool {
    let Some((blck, size)) = type_size(v.ty) else { return false };
    if v.ne[0] != blck as i64 && v.nb[0] != size {
        return false;
    }
    let mut next = size * (v.ne[0] as usize / blck);
    for i in 1..4 {
        if v.ne[i] != 1 {
            if v.nb[i] != next {
                return false;
            }
            next *= v.ne[i] as usize;
        }
    }
    true
}

/// the first dimension is dense (ggml_is_contiguous_rows for the plain types)
pub fn rows_dense(v: &View) -> bool {
    type_size(v.ty).is_some_and(|(_, size)| v.nb[0] == size)
}

pub fn same_shape(a: &View, b: &View) -> bool {
    a.ne == b.ne
}

/// ggml_can_repeat(b, a): every dimension of `a` a multiple of `b`'s
pub fn can_repeat(b: &View, a: &View) -> bool {
    (0..4).all(|i| b.ne[i] > 0 && a.ne[i] % b.ne[i] == 0) || a.nelements() == 0
}

/// the shape is not negative anywhere (the backend passes ggml's tensors, but a node built by
/// hand could say anything)
pub fn sane(v: &View) -> bool {
    v.ne.iter().all(|n| *n >= 0)
}

/// row `r` of a tensor with `ne1` × `ne2` rows per 3-d slab as (i1, i2, i3)
#[inline]
pub fn unravel(r: usize, ne1: usize, ne2: usize) -> (usize, usize, usize) {
    let i3 = r / (ne1 * ne2);
    let i2 = (r - i3 * ne1 * ne2) / ne1;
    (r - i3 * ne1 * ne2 - i2 * ne1, i2, i3)
}

/// byte offset of element (i0, i1, i2, i3)
#[inline]
pub fn offset(v: &View, i0: usize, i1: usize, i2: usize, i3: usize) -> usize {
    i0 * v.nb[0] + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3]
}

/// `(chunks, items per chunk)` for `n` items: about 4 chunks per thread (the pool balances
/// them), none smaller than `min` items
pub fn split(n: usize, threads: usize, min: usize) -> (usize, usize) {
    if n == 0 {
        return (0, 0);
    }
    let chunks = n.div_ceil(min.max(1)).clamp(1, threads.max(1) * 4);
    let per = n.div_ceil(chunks);
    (n.div_ceil(per), per)
}

/// the item range of chunk `c`
#[inline]
pub fn chunk_range(c: usize, per: usize, n: usize) -> std::ops::Range<usize> {
    (c * per).min(n)..((c + 1) * per).min(n)
}

/// Dequantizes (or converts) `n` elements of a row of `ty` at `src` into f32s at `dst`.
///
/// # Safety
/// `src` is valid for reading `ty.row_size(n)` bytes, `dst` for writing `4 n` bytes, and they
/// do not overlap; `n` is a multiple of the block size.
pub unsafe fn dequantize_to(ty: GgmlType, src: *const u8, n: usize, dst: *mut u8) {
    if n == 0 {
        // nothing to read: the pointers of an empty tensor may be null
        return;
    }
    let rs = ty.row_size(n);
    let mut tmp_in = Vec::new();
    // SAFETY: `rs` readable bytes (caller); a copy when the address is not aligned for the blocks
    let bytes = unsafe { aligned_bytes(src, rs, block_align(ty), &mut tmp_in) };
    if (dst as usize).is_multiple_of(align_of::<f32>()) {
        // SAFETY: 4n writable, aligned bytes that alias nothing else (caller)
        let out = unsafe { std::slice::from_raw_parts_mut(dst.cast::<f32>(), n) };
        crate::quants::dequantize_row(ty, bytes, out);
    } else {
        let mut out = vec![0f32; n];
        crate::quants::dequantize_row(ty, bytes, &mut out);
        // SAFETY: 4n writable bytes (caller), byte copy needs no alignment
        unsafe { std::ptr::copy_nonoverlapping(out.as_ptr().cast::<u8>(), dst, 4 * n) };
    }
}

/// Quantizes (or converts) the f32 row `x` into `ty` at `dst` as upstream's CPU backend does
/// (its `from_float`: Q8_0 by this architecture's variant, the other formats by their reference).
///
/// # Safety
/// `dst` is valid for writing `ty.row_size(x.len())` bytes and overlaps nothing `x` borrows.
pub unsafe fn quantize_from(ty: GgmlType, x: &[f32], dst: *mut u8) {
    // SAFETY: the caller's contract
    unsafe { quantize_from_as(ty, x, dst, false) }
}

/// [`quantize_from`]; with `four_row` and `ty` Q8_K, as upstream's 4-row quantizer writes the
/// row ([`crate::quants::quantize_row_q8_k_4x8`]: a MUL_MAT's GEMM rows where upstream repacks
/// the weights, [`crate::dot::Order`])
///
/// # Safety
/// as [`quantize_from`]
pub unsafe fn quantize_from_as(ty: GgmlType, x: &[f32], dst: *mut u8, four_row: bool) {
    if x.is_empty() {
        // nothing to write: the pointer of an empty tensor may be null
        return;
    }
    let rs = ty.row_size(x.len());
    let write = |out: &mut [u8]| {
        if ty == GgmlType::Q8_0 {
            crate::quants::quantize_row_q8_0_cpu(x, crate::block::as_blocks_mut(out, "q8_0 row"));
        } else if ty == GgmlType::Q8_1 && cfg!(target_arch = "x86_64") {
            // Q4_1 / Q5_1 activations: upstream's CPU quantizes them its x86 way (ties to even)
            crate::quants::quantize_row_q8_1_x86(x, crate::block::as_blocks_mut(out, "q8_1 row"));
        } else if ty == GgmlType::Q8K && four_row {
            crate::quants::quantize_row_q8_k_4x8(x, crate::block::as_blocks_mut(out, "q8_K row"));
        } else {
            crate::quants::quantize_row(ty, x, out);
        }
    };
    if (dst as usize).is_multiple_of(block_align(ty)) {
        // SAFETY: `rs` writable, aligned bytes that alias nothing else (caller)
        write(unsafe { std::slice::from_raw_parts_mut(dst, rs) });
    } else {
        let mut tmp = crate::block::AlignedBytes::zeroed(rs);
        write(&mut tmp);
        // SAFETY: `rs` writable bytes (caller)
        unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, rs) };
    }
}

/// alignment the block view of `ty` needs
pub fn block_align(ty: GgmlType) -> usize {
    match ty {
        GgmlType::F32 | GgmlType::Q8K => 4,
        _ => 2,
    }
}

/// `len` bytes at `p` as a slice aligned to `align`: in place when `p` is, else copied into `tmp`
///
/// # Safety
/// `p` is valid for reading `len` bytes while the result is borrowed, and nothing writes them meanwhile.
pub unsafe fn aligned_bytes(p: *const u8, len: usize, align: usize, tmp: &mut Vec<u64>) -> &[u8] {
    if len == 0 {
        // the pointer of an empty row may be null, which no slice may have
        return &[];
    }
    if (p as usize).is_multiple_of(align) {
        // SAFETY: readable and unchanged while borrowed (caller)
        unsafe { std::slice::from_raw_parts(p, len) }
    } else {
        tmp.clear();
        tmp.resize(len.div_ceil(8), 0);
        let dst = tmp.as_mut_ptr().cast::<u8>();
        // SAFETY: `len` readable bytes (caller) into a buffer of at least `len` bytes
        unsafe {
            std::ptr::copy_nonoverlapping(p, dst, len);
            std::slice::from_raw_parts(dst, len)
        }
    }
}

/// Test support: tensors in owned memory with ggml's layout, and views of them.
#[cfg(test)]
pub mod testing {
    use super::*;
    use crate::block::AlignedBytes;
    use crate::ops::{Exec, MAX_SRC, Node, OP_PARAMS, Op};
    use crate::pool::ThreadPool;
    use crate::rng::XorShift;

    /// an owned tensor: `ne`, byte strides `nb` (any layout: padded rows, permuted dims), its memory
    pub struct T {
        pub ty: i32,
        pub ne: [i64; 4],
        pub nb: [usize; 4],
        pub buf: AlignedBytes,
        /// byte offset of element 0 in `buf` (to test unaligned views)
        pub off: usize,
    }

    impl T {
        /// contiguous
        pub fn new(ty: i32, ne: [i64; 4]) -> T {
            T::padded(ty, ne, 0)
        }

        /// rows padded by `pad` bytes after each row (not contiguous when `pad > 0`)
        pub fn padded(ty: i32, ne: [i64; 4], pad: usize) -> T {
            let (blck, size) = type_size(ty).expect("known type");
            let row = ne[0] as usize / blck * size + pad;
            let nb = [size, row, row * ne[1] as usize, row * (ne[1] * ne[2]) as usize];
            let len = nb[3] * ne[3] as usize;
            T { ty, ne, nb, buf: AlignedBytes::zeroed(len + 16), off: 0 }
        }

        /// contiguous in memory in the dimension order `order` (order[0] the innermost), so
        /// a permutation of it is what the view shows: ggml's PERMUTE of a contiguous tensor
        pub fn permuted(ty: i32, ne: [i64; 4], order: [usize; 4]) -> T {
            let (blck, size) = type_size(ty).expect("known type");
            assert_eq!(order[0], 0, "the first dimension stays innermost for block types");
            let mut nb = [0usize; 4];
            let mut next = size;
            for (k, &d) in order.iter().enumerate() {
                nb[d] = next;
                next *= if k == 0 { ne[d] as usize / blck } else { ne[d] as usize };
            }
            T { ty, ne, nb, buf: AlignedBytes::zeroed(next + 16), off: 0 }
        }

        /// the tensor placed `off` bytes into its buffer (unaligned views); call before writing values
        pub fn shifted(mut self, off: usize) -> T {
            let len = self.buf.len();
            self.buf.resize(len + off);
            self.off = off;
            self
        }

        pub fn view(&self) -> View {
            View { ty: self.ty, ne: self.ne, nb: self.nb, data: self.buf.as_ptr().wrapping_add(self.off).cast_mut() }
        }

        pub fn nelements(&self) -> usize {
            self.ne.iter().product::<i64>() as usize
        }

        fn at(&self, i: [usize; 4]) -> usize {
            self.off + i[0] * self.nb[0] + i[1] * self.nb[1] + i[2] * self.nb[2] + i[3] * self.nb[3]
        }

        /// every element index in ggml's logical order (i0 fastest)
        pub fn indices(&self) -> Vec<[usize; 4]> {
            let ne = self.ne.map(|n| n as usize);
            let mut v = Vec::with_capacity(self.nelements());
            for i3 in 0..ne[3] {
                for i2 in 0..ne[2] {
                    for i1 in 0..ne[1] {
                        for i0 in 0..ne[0] {
                            v.push([i0, i1, i2, i3]);
                        }
                    }
                }
            }
            v
        }

        pub fn get(&self, i: [usize; 4]) -> f32 {
            let s = Scalar::of(self.ty).expect("element access on a plain type");
            assert!(self.at(i) + s.size() <= self.buf.len());
            // SAFETY: in bounds (asserted)
            unsafe { s.load(self.buf.as_ptr().add(self.at(i))) }
        }

        pub fn set(&mut self, i: [usize; 4], v: f32) {
            let s = Scalar::of(self.ty).expect("element access on a plain type");
            let at = self.at(i);
            assert!(at + s.size() <= self.buf.len());
            // SAFETY: in bounds (asserted)
            unsafe { s.store(self.buf.as_mut_ptr().add(at), v) }
        }

        pub fn set_i64(&mut self, i: [usize; 4], v: i64) {
            let at = self.at(i);
            self.buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }

        /// every element in logical order, as f32
        pub fn values(&self) -> Vec<f32> {
            self.indices().into_iter().map(|i| self.get(i)).collect()
        }

        /// fills with values in [-1, 1) (rounded to the type)
        pub fn random(mut self, r: &mut XorShift) -> T {
            self.fill(r, -1.0, 1.0);
            self
        }

        pub fn fill(&mut self, r: &mut XorShift, lo: f32, hi: f32) {
            for i in self.indices() {
                let v = r.f32_in(lo, hi);
                self.set(i, v);
            }
        }

        /// rows of a block type quantized from `x` (contiguous rows of `ne[0]` values each)
        pub fn quantized(ty: GgmlType, ne: [i64; 4], x: &[f32], pad: usize) -> T {
            let mut t = T::padded(ty as i32, ne, pad);
            let n = ne[0] as usize;
            let rs = ty.row_size(n);
            for (r, row) in x.chunks(n).enumerate() {
                let (i1, i2, i3) = unravel(r, ne[1] as usize, ne[2] as usize);
                let at = t.at([0, i1, i2, i3]);
                crate::quants::quantize_row(ty, row, &mut t.buf[at..at + rs]);
            }
            t
        }
    }

    pub fn node<'a>(op: Op, dst: &T, src: &[&T], params: &[i32]) -> Node<'a> {
        let mut s: [Option<View>; MAX_SRC] = [None; MAX_SRC];
        for (k, t) in src.iter().enumerate() {
            s[k] = Some(t.view());
        }
        let mut p = [0i32; OP_PARAMS];
        p[..params.len()].copy_from_slice(params);
        Node { op, dst: dst.view(), src: s, params: p, name: "test", packed: None }
    }

    pub fn f(v: f32) -> i32 {
        v.to_bits() as i32
    }

    /// runs `node` on a pool of `threads`, panicking with the kernel's error if it fails
    pub fn run(node: &Node, threads: usize) {
        let mut pool = ThreadPool::new(threads);
        let mut scratch = AlignedBytes::default();
        let mut exec = Exec::new(&mut pool, &mut scratch);
        assert!(crate::ops::supports(node), "{:?} is not supported by its family", node.op);
        crate::ops::compute(node, &mut exec).unwrap_or_else(|e| panic!("{e}"));
    }

    /// |a - b| within `tol` relative to max(1, |b|), NaN only where NaN is expected
    pub fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: lengths");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            if w.is_nan() {
                assert!(g.is_nan(), "{what}[{i}]: {g}, want NaN");
                continue;
            }
            if w.is_infinite() {
                assert_eq!(g, w, "{what}[{i}]");
                continue;
            }
            assert!((g - w).abs() <= tol * w.abs().max(1.0), "{what}[{i}]: {g}, want {w}");
        }
    }
}
