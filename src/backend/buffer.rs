//! Buffer types and buffers: creation, the defaults of optional interface entries, usage flags,
//! and the multi-buffer (several buffers of one type seen as one).
//!
//! `struct ggml_backend_buffer` objects are created only by [`buffer_init`] and destroyed only by
//! [`buffer_free`]; backends fill them in and may rewrite `iface`/`buft` afterwards, so every
//! operation reads the fields at call time.

use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

use crate::ggml::abi_impl::{ggml_backend_buffer, ggml_backend_buffer_i, ggml_backend_buffer_type};
use crate::ggml::handles::{Buffer, BufferType};
use crate::ggml::sys::{self, BufferUsage, GGML_STATUS_SUCCESS, USAGE_ANY, ggml_status};
use crate::ggml::tensor::TensorRef;

/// The interface of a zero-sized buffer: nothing to free, no memory to reach.
pub const EMPTY_BUFFER_I: ggml_backend_buffer_i = ggml_backend_buffer_i {
    free_buffer: None,
    get_base: None,
    init_tensor: None,
    memset_tensor: None,
    set_tensor: None,
    get_tensor: None,
    #[cfg(not(feature = "abi-0-9-8"))]
    set_tensor_2d: None,
    #[cfg(not(feature = "abi-0-9-8"))]
    get_tensor_2d: None,
    cpy_tensor: None,
    clear: None,
    reset: None,
};

pub fn buffer_init(buft: *mut ggml_backend_buffer_type, iface: ggml_backend_buffer_i, context: *mut c_void, size: usize) -> Buffer {
    let raw = Box::into_raw(Box::new(ggml_backend_buffer { iface, buft, context, size, usage: USAGE_ANY }));
    // SAFETY: a fresh, non-null Box allocation; it lives until buffer_free.
    unsafe { Buffer::from_raw(raw) }.expect("Box::into_raw is never NULL")
}

/// Calls the buffer's `free_buffer` (if any), then releases the struct.
///
/// # Safety
/// `buffer` was created by [`buffer_init`] and is not used afterwards.
pub unsafe fn buffer_free(buffer: Buffer) {
    if let Some(free) = buffer.free_buffer_fn() {
        // SAFETY: the buffer's own destructor, called once.
        unsafe { free(buffer.as_ptr()) };
    }
    // SAFETY: the struct was allocated by buffer_init with Box (the function's contract).
    drop(unsafe { Box::from_raw(buffer.as_ptr()) });
}

pub fn buft_alloc_buffer(buft: BufferType, size: usize) -> Option<Buffer> {
    if size == 0 {
        // zero-sized allocations get a dummy buffer that never reaches the backend
        return Some(buffer_init(buft.as_ptr(), EMPTY_BUFFER_I, std::ptr::null_mut(), 0));
    }
    // SAFETY: alloc_buffer returns NULL or a buffer made by buffer_init.
    unsafe { Buffer::from_raw(buft.alloc_buffer_raw(size)) }
}

/// A buffer of buffer type `buft` owned by the caller: freed when dropped (see [`OwnedBuffer`]).
pub fn buft_alloc_owned(buft: BufferType, size: usize) -> Option<OwnedBuffer> {
    buft_alloc_buffer(buft, size).map(OwnedBuffer)
}

/// A buffer this library made and nobody else holds (the allocator's compute buffers): freed when
/// dropped. Reads as the [`Buffer`] it is.
pub struct OwnedBuffer(Buffer);

impl std::ops::Deref for OwnedBuffer {
    type Target = Buffer;
    fn deref(&self) -> &Buffer {
        &self.0
    }
}

impl OwnedBuffer {
    /// Hands the buffer on (to C, or into a multi-buffer): it is not freed here any more.
    pub fn release(self) -> Buffer {
        let b = self.0;
        std::mem::forget(self);
        b
    }
}

impl Drop for OwnedBuffer {
    fn drop(&mut self) {
        // SAFETY: made by buffer_init (through buft_alloc_owned) and owned by this value alone;
        // nothing uses it after the drop.
        unsafe { buffer_free(self.0) };
    }
}

pub fn buft_max_size(buft: BufferType) -> usize {
    buft.max_size().unwrap_or(usize::MAX)
}

pub fn buft_is_host(buft: BufferType) -> bool {
    buft.is_host().unwrap_or(false)
}

/// Bytes a tensor takes in this buffer type: the type's own answer, else `ggml_nbytes`. A size
/// above `ggml_nbytes` is only legal for the ops upstream lists (see `op_alloc_size_may_expand`).
pub fn buft_alloc_size(buft: BufferType, tensor: TensorRef) -> usize {
    match buft.alloc_size(tensor) {
        Some(size) => {
            // ggml 0.9.8 lets any op grow (its list of ops that may is newer)
            #[cfg(not(feature = "abi-0-9-8"))]
            if size > tensor.nbytes() {
                let op = tensor.op();
                // SAFETY: ggml_is_quantized reads a type table.
                let quantized = unsafe { sys::ggml_is_quantized(tensor.type_()) };
                crate::ensure!(
                    sys::op::is_empty(op) || quantized || op_alloc_size_may_expand(op),
                    "buffer type '{}' wants {} bytes for tensor {} ({} bytes, op {}): only some ops may grow \
                     (update ggml_op_alloc_size_may_expand)",
                    buft.name(),
                    size,
                    tensor,
                    tensor.nbytes(),
                    tensor.op_name()
                );
            }
            size
        }
        None => tensor.nbytes(),
    }
}

/// Ops whose destination may need more than `ggml_nbytes` on some backends (scratch data).
#[cfg(not(feature = "abi-0-9-8"))]
pub fn op_alloc_size_may_expand(op: sys::ggml_op) -> bool {
    use sys::op::*;
    matches!(op, FLASH_ATTN_EXT | MUL_MAT | MUL_MAT_ID | CUMSUM | ARGSORT | TOP_K)
}

pub fn buffer_base(buffer: Buffer) -> *mut c_void {
    // SAFETY: ggml_backend_buffer_is_meta (meta.cpp) inspects a valid buffer.
    let meta = unsafe { sys::ggml_backend_buffer_is_meta(buffer.as_ptr()) };
    if !meta && buffer.size() == 0 {
        return std::ptr::null_mut();
    }
    match buffer.get_base() {
        None => std::ptr::null_mut(),
        Some(base) => {
            crate::ensure!(!base.is_null(), "backend buffer base cannot be NULL (buffer of type '{}')", buffer_name(buffer));
            base
        }
    }
}

pub fn buffer_name(buffer: Buffer) -> String {
    buffer.buft().map(|b| b.name()).unwrap_or_else(|| "(no type)".to_string())
}

pub fn buffer_init_tensor(buffer: Buffer, tensor: TensorRef) -> ggml_status {
    buffer.init_tensor(tensor).unwrap_or(GGML_STATUS_SUCCESS)
}

pub fn buffer_clear(buffer: Buffer, value: u8) {
    if buffer.size() == 0 {
        return;
    }
    buffer.clear(value);
}

pub fn buffer_is_host(buffer: Buffer) -> bool {
    match buffer.buft() {
        Some(buft) => buft_is_host(buft),
        None => crate::fatal!("buffer has no buffer type"),
    }
}

pub fn buffer_set_usage(buffer: Buffer, usage: BufferUsage) {
    buffer.set_usage_field(usage);
    if is_multi_buffer(buffer) {
        for part in multi_buffer_parts(buffer) {
            buffer_set_usage(*part, usage);
        }
    // SAFETY: meta.cpp's predicate on a valid buffer.
    } else if unsafe { sys::ggml_backend_buffer_is_meta(buffer.as_ptr()) } {
        // SAFETY: the meta buffer propagates the usage to its parts.
        unsafe { sys::ggml_backend_meta_buffer_set_usage(buffer.as_ptr(), usage) };
    }
}

//
// multi-buffer
//

struct MultiBuffer {
    parts: Vec<Buffer>,
}

/// Addresses of the live multi-buffers. Upstream recognises them by comparing function
/// pointers, which Rust does not guarantee to be unique; a registry is exact.
fn multi_buffers() -> &'static Mutex<HashSet<usize>> {
    static SET: OnceLock<Mutex<HashSet<usize>>> = OnceLock::new();
    SET.get_or_init(|| Mutex::new(HashSet::new()))
}

unsafe extern "C" fn multi_buffer_free(buffer: *mut ggml_backend_buffer) {
    crate::ffi_boundary!({
        multi_buffers().lock().expect("multi-buffer registry").remove(&(buffer as usize));
        // SAFETY: called by buffer_free on a multi-buffer, whose context is a Box<MultiBuffer>.
        let ctx = unsafe { Box::from_raw((*buffer).context as *mut MultiBuffer) };
        for part in ctx.parts {
            // SAFETY: the multi-buffer owns its parts, which were created by buffer_init.
            unsafe { buffer_free(part) };
        }
    })
}

unsafe extern "C" fn multi_buffer_clear(buffer: *mut ggml_backend_buffer, value: u8) {
    crate::ffi_boundary!({
        // SAFETY: called through the multi-buffer's own interface.
        let buffer = unsafe { Buffer::from_raw(buffer) }.expect("called by the buffer itself");
        for part in multi_buffer_parts(buffer) {
            buffer_clear(*part, value);
        }
    })
}

/// A buffer owning `parts` (all of one type), sized as their sum. Freeing it frees the parts.
pub fn multi_buffer_alloc(parts: Vec<Buffer>) -> Buffer {
    crate::ensure!(!parts.is_empty(), "ggml_backend_multi_buffer_alloc_buffer: no buffers given");
    let size = parts.iter().map(|b| b.size()).sum();
    let buft = parts[0].buft_ptr();
    let iface = ggml_backend_buffer_i { free_buffer: Some(multi_buffer_free), clear: Some(multi_buffer_clear), ..EMPTY_BUFFER_I };
    let ctx = Box::into_raw(Box::new(MultiBuffer { parts }));
    let buffer = buffer_init(buft, iface, ctx as *mut c_void, size);
    multi_buffers().lock().expect("multi-buffer registry").insert(buffer.as_ptr() as usize);
    buffer
}

/// Whether `buffer` was made by `multi_buffer_alloc` (meta.cpp relies on this).
pub fn is_multi_buffer(buffer: Buffer) -> bool {
    multi_buffers().lock().expect("multi-buffer registry").contains(&(buffer.as_ptr() as usize))
}

fn multi_buffer_parts<'a>(buffer: Buffer) -> &'a [Buffer] {
    crate::ensure!(is_multi_buffer(buffer), "buffer of type '{}' is not a multi-buffer", buffer_name(buffer));
    // SAFETY: a multi-buffer's context is the Box<MultiBuffer> made in multi_buffer_alloc; it
    // lives as long as the buffer, which the caller holds.
    unsafe { &(*(buffer.context() as *const MultiBuffer)).parts }
}

pub fn multi_buffer_set_usage(buffer: Buffer, usage: BufferUsage) {
    for part in multi_buffer_parts(buffer) {
        buffer_set_usage(*part, usage);
    }
}
