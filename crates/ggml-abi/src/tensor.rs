//! A typed view over `struct ggml_tensor`, the one place that reads and writes its fields.
//!
//! Tensors belong to ggml contexts the caller owns; a [`TensorRef`] is a checked, copyable
//! pointer to one. The C API contract is that tensor pointers handed to us stay valid while we
//! use them. We never hold a Rust reference into a tensor across calls: every access is a single
//! field read or write through the raw pointer, because C code (backends, the caller) may write
//! the same struct between our accesses.

use std::ffi::{CStr, c_char, c_void};
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::abi_impl::ggml_backend_buffer;
use crate::handles::Buffer;
use crate::sys::{self, GGML_MAX_DIMS, GGML_MAX_NAME, GGML_MAX_SRC, ggml_op, ggml_tensor, ggml_type};

/// transparent: a slice of non-NULL tensor pointers can be viewed as a slice of these
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct TensorRef(NonNull<ggml_tensor>);

/// What decides the size and in-place compatibility of a tensor: type, shape and strides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    pub type_: ggml_type,
    pub ne: [i64; GGML_MAX_DIMS],
    pub nb: [usize; GGML_MAX_DIMS],
}

impl Layout {
    /// `ggml_nbytes` of a tensor with this layout, without a call into ggml (the planner asks
    /// for thousands of sizes).
    #[inline]
    pub fn nbytes(&self) -> usize {
        if self.ne.iter().any(|&n| n <= 0) {
            return 0;
        }
        let (type_size, blck_size) = type_traits(self.type_);
        // the same unsigned arithmetic as ggml_nbytes
        let tail = |from: usize| (from..GGML_MAX_DIMS).fold(0usize, |n, i| n.wrapping_add((self.ne[i] as usize - 1).wrapping_mul(self.nb[i])));
        if blck_size == 1 { type_size.wrapping_add(tail(0)) } else { (self.ne[0] as usize).wrapping_mul(self.nb[0]) / blck_size.max(1) + tail(1) }
    }
}

/// (size << 32 | block size) per type, 0 until asked
static TYPE_TRAITS: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

/// (`ggml_type_size`, `ggml_blck_size`) of a type, asked once per type.
#[inline]
fn type_traits(t: ggml_type) -> (usize, usize) {
    let v = TYPE_TRAITS.get(t as usize).map_or(0, |c| c.load(Ordering::Relaxed));
    if v != 0 {
        return ((v >> 32) as usize, (v & 0xffff_ffff) as usize);
    }
    type_traits_from_ggml(t)
}

#[cold]
fn type_traits_from_ggml(t: ggml_type) -> (usize, usize) {
    let slot = TYPE_TRAITS.get(t as usize);
    // SAFETY: type tables of ggml-base, for any type id.
    let (size, blck) = unsafe { (sys::ggml_type_size(t), sys::ggml_blck_size(t).max(0) as usize) };
    if let Some(c) = slot.filter(|_| size < 1 << 32 && blck < 1 << 32 && blck > 0) {
        c.store(((size as u64) << 32) | blck as u64, Ordering::Relaxed);
    }
    (size, blck)
}

/// Every field of a tensor's header from `buffer` to `extra` (offsets 8 to 328 of
/// `struct ggml_tensor` with GGML_MAX_NAME 64, 392 with 128; no padding in between) as words; `type` is kept apart because the four
/// bytes after it are padding, which C leaves undefined.
pub const HEADER_WORDS: usize = (std::mem::offset_of!(ggml_tensor, extra) + std::mem::size_of::<*mut c_void>() - std::mem::offset_of!(ggml_tensor, buffer)) / 8;
const _: () = assert!(std::mem::offset_of!(ggml_tensor, buffer) == 8 && std::mem::offset_of!(ggml_tensor, extra) == 256 + sys::GGML_MAX_NAME);

/// A copy of a tensor's header (see [`HEADER_WORDS`]): what it is, where it lives, what it reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Header {
    type_: ggml_type,
    words: [u64; HEADER_WORDS],
}

macro_rules! read_field {
    ($t:expr, $field:ident) => {
        // SAFETY: a TensorRef is only built from a valid tensor pointer (see `from_raw`); this
        // is a plain read of one field through that pointer, no reference is created.
        unsafe { (*$t.0.as_ptr()).$field }
    };
}

macro_rules! write_field {
    ($t:expr, $field:ident, $value:expr) => {
        // SAFETY: as for `read_field!`; the caller's contract lets the library write the allocation
        // fields (`data`, `buffer`) and the fields of tensors the library created itself.
        unsafe { (*$t.0.as_ptr()).$field = $value }
    };
}

impl TensorRef {
    /// # Safety
    /// `ptr` is NULL or points to a live `ggml_tensor` that stays valid while the returned
    /// value is used.
    #[inline]
    pub unsafe fn from_raw(ptr: *const ggml_tensor) -> Option<TensorRef> {
        NonNull::new(ptr as *mut ggml_tensor).map(TensorRef)
    }

    #[inline]
    pub fn as_ptr(self) -> *mut ggml_tensor {
        self.0.as_ptr()
    }

    /// The pointers as tensors, or None when one is NULL.
    ///
    /// # Safety
    /// Every non-NULL pointer of `ptrs` points to a live `ggml_tensor` while the slice is used.
    #[inline]
    pub unsafe fn slice_from_raw(ptrs: &[*mut ggml_tensor]) -> Option<&[TensorRef]> {
        if ptrs.iter().any(|p| p.is_null()) {
            return None;
        }
        // SAFETY: TensorRef is a transparent NonNull<ggml_tensor>, which has the layout of
        // *mut ggml_tensor; none of the pointers is NULL (checked above).
        Some(unsafe { std::slice::from_raw_parts(ptrs.as_ptr() as *const TensorRef, ptrs.len()) })
    }

    #[inline]
    pub fn addr(self) -> usize {
        self.0.as_ptr() as usize
    }

    #[inline]
    pub fn type_(self) -> ggml_type {
        read_field!(self, type_)
    }

    #[inline]
    pub fn op(self) -> ggml_op {
        read_field!(self, op)
    }

    #[inline]
    pub fn flags(self) -> i32 {
        read_field!(self, flags)
    }

    #[inline]
    pub fn set_flags(self, flags: i32) {
        write_field!(self, flags, flags)
    }

    #[inline]
    pub fn is_input(self) -> bool {
        self.flags() & sys::GGML_TENSOR_FLAG_INPUT != 0
    }

    #[inline]
    pub fn is_output(self) -> bool {
        self.flags() & sys::GGML_TENSOR_FLAG_OUTPUT != 0
    }

    #[inline]
    pub fn ne(self) -> [i64; GGML_MAX_DIMS] {
        read_field!(self, ne)
    }

    #[inline]
    pub fn nb(self) -> [usize; GGML_MAX_DIMS] {
        read_field!(self, nb)
    }

    #[inline]
    pub fn layout(self) -> Layout {
        Layout { type_: self.type_(), ne: self.ne(), nb: self.nb() }
    }

    /// A copy of the header (every field but the padding).
    #[inline]
    pub fn header(self) -> Header {
        // SAFETY: as for `read_field!`; bytes 8..328 of a tensor are initialised fields (pointers,
        // sizes, ints, the name), read as words without creating a reference.
        let words = unsafe { std::ptr::read((self.0.as_ptr() as *const u8).add(8) as *const [u64; HEADER_WORDS]) };
        Header { type_: self.type_(), words }
    }

    /// Whether the header is still `h`, compared in place.
    #[inline]
    pub fn has_header(self, h: &Header) -> bool {
        // SAFETY: as in `header`; the slice lives only for this comparison.
        let bytes = unsafe { std::slice::from_raw_parts((self.0.as_ptr() as *const u8).add(8), HEADER_WORDS * 8) };
        // as bytes: one memcmp instead of a loop over words
        // SAFETY: reading the words of `h` as bytes (u64 has no padding).
        let expected = unsafe { std::slice::from_raw_parts(h.words.as_ptr() as *const u8, HEADER_WORDS * 8) };
        self.type_() == h.type_ && bytes == expected
    }

    /// Whether the tensor has `layout` (compared in place, without copying it out).
    #[inline]
    pub fn has_layout(self, layout: &Layout) -> bool {
        read_field!(self, ne) == layout.ne && read_field!(self, nb) == layout.nb && self.type_() == layout.type_
    }

    /// `ggml_are_same_layout`: same type, shape and strides.
    #[inline]
    pub fn same_layout(self, other: TensorRef) -> bool {
        self.layout() == other.layout()
    }

    #[inline]
    pub fn src(self, i: usize) -> Option<TensorRef> {
        // SAFETY: sources of a valid tensor are NULL or valid tensors (ggml's graph contract).
        unsafe { TensorRef::from_raw(self.src_ptr(i)) }
    }

    /// Source slot `i` (may be NULL), read on its own: hot loops must not copy the whole array.
    #[inline]
    pub fn src_ptr(self, i: usize) -> *mut ggml_tensor {
        assert!(i < GGML_MAX_SRC);
        // SAFETY: as for `read_field!`; a plain read of one array element, no reference made.
        unsafe { (*self.0.as_ptr()).src[i] }
    }

    #[inline]
    pub fn srcs(self) -> [Option<TensorRef>; GGML_MAX_SRC] {
        let srcs = read_field!(self, src);
        // SAFETY: as in `src`.
        srcs.map(|p| unsafe { TensorRef::from_raw(p) })
    }

    /// Replaces source `i`. The scheduler uses this only for the duration of one backend call
    /// and puts the caller's pointer back right after (see `sched::compute`).
    #[inline]
    pub fn set_src(self, i: usize, src: *mut ggml_tensor) {
        // SAFETY: as for `write!`; `src` is a single array element.
        unsafe { (*self.0.as_ptr()).src[i] = src }
    }

    #[inline]
    pub fn view_src_ptr(self) -> *mut ggml_tensor {
        read_field!(self, view_src)
    }

    #[inline]
    pub fn view_src(self) -> Option<TensorRef> {
        let v = read_field!(self, view_src);
        // SAFETY: view_src of a valid tensor is NULL or a valid tensor.
        unsafe { TensorRef::from_raw(v) }
    }

    #[inline]
    pub fn is_view(self) -> bool {
        !read_field!(self, view_src).is_null()
    }

    #[inline]
    pub fn view_offs(self) -> usize {
        read_field!(self, view_offs)
    }

    /// Asks the CPU to bring the header into the cache ahead of use (a hint: nothing is read).
    /// A graph's headers are read once per pass, each on lines of its own; a pass that knows
    /// which tensor comes next saves the wait for its first reads.
    #[inline]
    pub fn prefetch_header(self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let p = self.0.as_ptr() as *const i8;
            // every line of offsets 0 to 256 (all but the name and extra): at most five, as the
            // header is 16-byte aligned
            for off in [0usize, 64, 128, 192, 255] {
                // SAFETY: SSE is part of x86_64; a prefetch reads nothing and cannot fault.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off)) };
            }
        }
    }

    #[inline]
    pub fn data(self) -> *mut c_void {
        read_field!(self, data)
    }

    #[inline]
    pub fn set_data(self, data: *mut c_void) {
        write_field!(self, data, data)
    }

    #[inline]
    pub fn buffer_ptr(self) -> *mut ggml_backend_buffer {
        read_field!(self, buffer)
    }

    #[inline]
    pub fn buffer(self) -> Option<Buffer> {
        // SAFETY: the buffer of a live tensor is NULL or a live buffer (ggml's contract: a
        // buffer outlives the tensors placed in it).
        unsafe { Buffer::from_raw(self.buffer_ptr()) }
    }

    #[inline]
    pub fn set_buffer(self, buffer: *mut ggml_backend_buffer) {
        write_field!(self, buffer, buffer)
    }

    /// The backend's per-tensor data (set by a buffer's `init_tensor`).
    #[inline]
    pub fn extra(self) -> *mut c_void {
        read_field!(self, extra)
    }

    #[inline]
    pub fn set_extra(self, extra: *mut c_void) {
        write_field!(self, extra, extra)
    }

    /// The buffer that holds the bytes: the view source's for views.
    #[inline]
    pub fn storage_buffer(self) -> Option<Buffer> {
        match self.view_src() {
            Some(v) => v.buffer(),
            None => self.buffer(),
        }
    }

    #[inline]
    pub fn nbytes(self) -> usize {
        // SAFETY: ggml_nbytes reads type/ne/nb of a valid tensor.
        unsafe { sys::ggml_nbytes(self.as_ptr()) }
    }

    #[inline]
    pub fn nelements(self) -> i64 {
        // SAFETY: ggml_nelements reads ne of a valid tensor.
        unsafe { sys::ggml_nelements(self.as_ptr()) }
    }

    #[inline]
    pub fn name_cstr(&self) -> &CStr {
        // SAFETY: ggml keeps `name` NUL-terminated (ggml_set_name truncates and terminates);
        // the bound below protects against a tensor that was never named properly.
        let bytes = unsafe { &(*self.0.as_ptr()).name };
        // (c_char is u8 on aarch64: the cast is a no-op there)
        #[allow(clippy::unnecessary_cast)]
        let bytes: &[u8; GGML_MAX_NAME] = unsafe { &*(bytes as *const [c_char; GGML_MAX_NAME] as *const [u8; GGML_MAX_NAME]) };
        match CStr::from_bytes_until_nul(bytes) {
            Ok(s) => s,
            Err(_) => c"<unterminated name>",
        }
    }

    #[inline]
    pub fn name(self) -> String {
        self.name_cstr().to_string_lossy().into_owned()
    }

    /// The raw name bytes (cheap to keep: no allocation).
    #[inline]
    pub fn name_bytes(self) -> [u8; GGML_MAX_NAME] {
        let raw = read_field!(self, name);
        #[allow(clippy::unnecessary_cast)]
        raw.map(|c| c as u8)
    }

    #[inline]
    pub fn set_name(self, name: &str) {
        let mut bytes = [0 as c_char; GGML_MAX_NAME];
        for (dst, src) in bytes.iter_mut().zip(name.bytes().take(GGML_MAX_NAME - 1)) {
            *dst = src as c_char;
        }
        write_field!(self, name, bytes)
    }

    /// Copies what describes the computation (strides, op, op params, flags, name) from `src`,
    /// for tensors the library created (graph copies).
    #[inline]
    pub fn copy_description_from(self, src: TensorRef) {
        write_field!(self, nb, src.nb());
        write_field!(self, op, src.op());
        let (op_params, name) = (read_field!(src, op_params), read_field!(src, name));
        write_field!(self, op_params, op_params);
        write_field!(self, flags, src.flags());
        write_field!(self, name, name);
    }

    /// Makes this (library-created) tensor a view of `view_src` at `offs`.
    #[inline]
    pub fn set_view(self, view_src: TensorRef, offs: usize) {
        write_field!(self, view_src, view_src.as_ptr());
        write_field!(self, view_offs, offs);
    }

    /// Sets the op of a tensor the library created.
    #[inline]
    pub fn set_op(self, op: ggml_op) {
        write_field!(self, op, op)
    }

    #[inline]
    pub fn op_name(self) -> String {
        // SAFETY: ggml_op_desc returns a static string for any tensor.
        unsafe { CStr::from_ptr(sys::ggml_op_desc(self.as_ptr())) }.to_string_lossy().into_owned()
    }
}

impl fmt::Debug for TensorRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tensor '{}'", self.name())
    }
}

impl fmt::Display for TensorRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}'", self.name())
    }
}

/// A tensor struct the library creates and owns (the scheduler's split-input copies). It lives
/// in a `Box`, so its address is stable while it exists; backends see it as any other tensor.
pub struct OwnedTensor(Box<ggml_tensor>);

impl OwnedTensor {
    /// A tensor with the same type, shape and strides as `like` and no data
    /// (upstream's `ggml_dup_tensor_layout`).
    #[inline]
    pub fn with_layout_of(like: TensorRef, name: &str) -> OwnedTensor {
        // SAFETY: ggml_tensor is plain old data; all-zero is its "fresh tensor" state
        // (op NONE, no sources, no data, no buffer, empty name).
        let mut t: Box<ggml_tensor> = Box::new(unsafe { std::mem::zeroed() });
        let l = like.layout();
        t.type_ = l.type_;
        t.ne = l.ne;
        t.nb = l.nb;
        let owned = OwnedTensor(t);
        owned.tensor().set_name(name);
        owned
    }

    #[inline]
    pub fn tensor(&self) -> TensorRef {
        TensorRef(NonNull::from(&*self.0))
    }

    /// Makes this tensor a fresh copy of `like`'s layout again (pooled tensors are reused from
    /// one allocation to the next, so their addresses stay the same). Its place is forgotten:
    /// like upstream's freshly made copies, it is placed and initialised by the backend again
    /// after the compute buffer's reset.
    #[inline]
    /// Puts back a header taken of this tensor earlier ([`TensorRef::header`]): the tensor is
    /// byte for byte what it was then (the scheduler's copies, reused for a graph of the same
    /// structure, as a new split would make them).
    pub fn restore(&mut self, h: &Header) {
        self.0.type_ = h.type_;
        // SAFETY: bytes 8..8 + HEADER_WORDS * 8 of the boxed tensor are the fields `header` read
        // (pointers, sizes, ints, the name: any bit pattern a header held is one they held);
        // the box is ours and nothing else borrows it now.
        unsafe { std::ptr::write((&mut *self.0 as *mut ggml_tensor as *mut u8).add(8) as *mut [u64; HEADER_WORDS], h.words) };
    }

    pub fn reinit(&mut self, like: TensorRef, name: &str) {
        // SAFETY: ggml_tensor is plain old data; all-zero is its fresh state.
        *self.0 = unsafe { std::mem::zeroed() };
        let l = like.layout();
        self.0.type_ = l.type_;
        self.0.ne = l.ne;
        self.0.nb = l.nb;
        self.tensor().set_name(name);
    }
}

// SAFETY: an OwnedTensor is plain data behind a Box; the library only touches it from the thread
// that drives the scheduler owning it.
unsafe impl Send for OwnedTensor {}
