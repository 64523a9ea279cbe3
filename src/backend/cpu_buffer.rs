//! The CPU buffer types every backend can use: "CPU" (host memory from `ggml_aligned_malloc`) and
//! "CPU_Mapped" (memory the caller owns, e.g. an mmap'ed model).
//!
//! Contracts kept from upstream, because other code depends on them:
//! - `ggml_backend_cpu_buffer_type()` returns the same pointer forever (llama and ggml-cpu compare
//!   buffer types by identity);
//! - a CPU buffer's `context` is the raw pointer of its memory (ggml-cpu's extra buffer types
//!   reuse it after rewriting `buffer->iface`);
//! - the type's `device` is NULL (upstream leaves it unset; ggml-cpu reports this type itself).

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_void};

use crate::backend::buffer::{buffer_init, buffer_is_host};
use crate::ggml::abi_impl::{ggml_backend_buffer, ggml_backend_buffer_i, ggml_backend_buffer_type, ggml_backend_buffer_type_i};
use crate::ggml::handles::Buffer;
use crate::ggml::sys::{self, TENSOR_ALIGNMENT, ggml_tensor};
use crate::ggml::tensor::TensorRef;

/// A buffer type with a fixed address that C may read but never frees.
struct StaticBufferType(UnsafeCell<ggml_backend_buffer_type>);

// SAFETY: the struct is never written after initialisation; C only reads it.
unsafe impl Sync for StaticBufferType {}

impl StaticBufferType {
    const fn new(get_name: unsafe extern "C" fn(*mut ggml_backend_buffer_type) -> *const c_char) -> StaticBufferType {
        StaticBufferType(UnsafeCell::new(ggml_backend_buffer_type {
            iface: ggml_backend_buffer_type_i {
                get_name: Some(get_name),
                alloc_buffer: Some(cpu_buft_alloc_buffer),
                // the default: ggml_backend_buft_alloc_buffer_n plans the list itself
                #[cfg(feature = "abi-0-26-0")]
                alloc_buffer_n: None,
                get_alignment: Some(cpu_buft_get_alignment),
                get_max_size: None,
                get_alloc_size: None,
                #[cfg(feature = "abi-0-26-0")]
                get_alloc_size_n: None,
                is_host: Some(cpu_buft_is_host),
            },
            device: std::ptr::null_mut(),
            context: std::ptr::null_mut(),
        }))
    }

    fn as_ptr(&self) -> *mut ggml_backend_buffer_type {
        self.0.get()
    }
}

static CPU_BUFFER_TYPE: StaticBufferType = StaticBufferType::new(cpu_buft_get_name);
static CPU_MAPPED_BUFFER_TYPE: StaticBufferType = StaticBufferType::new(cpu_mapped_buft_get_name);

pub fn cpu_buffer_type() -> *mut ggml_backend_buffer_type {
    CPU_BUFFER_TYPE.as_ptr()
}

const CPU_BUFFER_I: ggml_backend_buffer_i = ggml_backend_buffer_i {
    free_buffer: Some(cpu_buffer_free_buffer),
    get_base: Some(cpu_buffer_get_base),
    init_tensor: None,
    memset_tensor: Some(cpu_buffer_memset_tensor),
    set_tensor: Some(cpu_buffer_set_tensor),
    get_tensor: Some(cpu_buffer_get_tensor),
    #[cfg(not(feature = "abi-0-9-8"))]
    set_tensor_2d: None,
    #[cfg(not(feature = "abi-0-9-8"))]
    get_tensor_2d: None,
    cpy_tensor: Some(cpu_buffer_cpy_tensor),
    clear: Some(cpu_buffer_clear),
    reset: None,
};

/// The caller owns the memory of a mapped buffer: nothing to free.
const CPU_MAPPED_BUFFER_I: ggml_backend_buffer_i = ggml_backend_buffer_i { free_buffer: None, ..CPU_BUFFER_I };

/// A buffer over memory the caller owns (`ptr` must be 32-byte aligned).
pub fn cpu_buffer_from_ptr(ptr: *mut c_void, size: usize) -> Buffer {
    crate::ensure!(
        (ptr as usize) % TENSOR_ALIGNMENT == 0,
        "ggml_backend_cpu_buffer_from_ptr: buffer pointer {ptr:p} must be aligned to {TENSOR_ALIGNMENT} bytes"
    );
    buffer_init(CPU_MAPPED_BUFFER_TYPE.as_ptr(), CPU_MAPPED_BUFFER_I, ptr, size)
}

unsafe extern "C" fn cpu_buft_get_name(_buft: *mut ggml_backend_buffer_type) -> *const c_char {
    c"CPU".as_ptr()
}

unsafe extern "C" fn cpu_mapped_buft_get_name(_buft: *mut ggml_backend_buffer_type) -> *const c_char {
    c"CPU_Mapped".as_ptr()
}

unsafe extern "C" fn cpu_buft_get_alignment(_buft: *mut ggml_backend_buffer_type) -> usize {
    TENSOR_ALIGNMENT
}

unsafe extern "C" fn cpu_buft_is_host(_buft: *mut ggml_backend_buffer_type) -> bool {
    true
}

unsafe extern "C" fn cpu_buft_alloc_buffer(buft: *mut ggml_backend_buffer_type, size: usize) -> *mut ggml_backend_buffer {
    crate::ffi_boundary!({
        // SAFETY: ggml's aligned allocator; NULL on failure.
        let data = unsafe { sys::ggml_aligned_malloc(size) };
        if data.is_null() {
            crate::log_error!("cpu_buft_alloc_buffer: failed to allocate buffer of size {size}\n");
            return std::ptr::null_mut();
        }
        buffer_init(buft, CPU_BUFFER_I, data, size).as_ptr()
    })
}

/// The memory of a CPU buffer, aligned to TENSOR_ALIGNMENT.
unsafe extern "C" fn cpu_buffer_get_base(buffer: *mut ggml_backend_buffer) -> *mut c_void {
    // SAFETY: called through the buffer's own interface with a valid buffer.
    let data = unsafe { (*buffer).context } as usize;
    data.next_multiple_of(TENSOR_ALIGNMENT) as *mut c_void
}

unsafe extern "C" fn cpu_buffer_free_buffer(buffer: *mut ggml_backend_buffer) {
    // SAFETY: the context is the pointer ggml_aligned_malloc returned for `size` bytes.
    unsafe { sys::ggml_aligned_free((*buffer).context, (*buffer).size) }
}

unsafe extern "C" fn cpu_buffer_memset_tensor(_buffer: *mut ggml_backend_buffer, tensor: *mut ggml_tensor, value: u8, offset: usize, size: usize) {
    // SAFETY: the public entry checked offset + size against the tensor (backend::tensor_io).
    unsafe { std::ptr::write_bytes(((*tensor).data as *mut u8).add(offset), value, size) }
}

unsafe extern "C" fn cpu_buffer_set_tensor(_buffer: *mut ggml_backend_buffer, tensor: *mut ggml_tensor, data: *const c_void, offset: usize, size: usize) {
    // SAFETY: as in memset; `data` holds `size` bytes (the caller's contract). ptr::copy
    // tolerates overlap (a caller may set a tensor from its own memory).
    unsafe { std::ptr::copy(data as *const u8, ((*tensor).data as *mut u8).add(offset), size) }
}

unsafe extern "C" fn cpu_buffer_get_tensor(_buffer: *mut ggml_backend_buffer, tensor: *const ggml_tensor, data: *mut c_void, offset: usize, size: usize) {
    // SAFETY: as in set_tensor.
    unsafe { std::ptr::copy(((*tensor).data as *const u8).add(offset), data as *mut u8, size) }
}

unsafe extern "C" fn cpu_buffer_cpy_tensor(_buffer: *mut ggml_backend_buffer, src: *const ggml_tensor, dst: *mut ggml_tensor) -> bool {
    crate::ffi_boundary!({
        // SAFETY: backends call cpy_tensor with valid, allocated tensors of the same layout.
        let src_t = unsafe { TensorRef::from_raw(src) }.expect("cpy_tensor: src is NULL");
        match src_t.storage_buffer() {
            Some(b) if buffer_is_host(b) => {
                let n = src_t.nbytes();
                // SAFETY: both tensors are allocated with nbytes bytes (same layout).
                unsafe { std::ptr::copy((*src).data as *const u8, (*dst).data as *mut u8, n) };
                true
            }
            _ => false,
        }
    })
}

unsafe extern "C" fn cpu_buffer_clear(buffer: *mut ggml_backend_buffer, value: u8) {
    // SAFETY: the context is the start of `size` bytes this buffer owns (or maps).
    unsafe { std::ptr::write_bytes((*buffer).context as *mut u8, value, (*buffer).size) }
}
