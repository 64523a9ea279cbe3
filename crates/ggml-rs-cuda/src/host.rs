//! The pinned host buffer type (`CUDA_Host`): page-locked host memory (`cuMemHostAlloc`,
//! portable), which the CPU reads as plain memory and the GPU copies from without staging.
//! Allocated and freed with the first device's context current (the driver calls need one,
//! and a thread of ggml's may have none bound).

use std::ffi::{c_char, c_void};

use cudarc::driver::{result, sys};
use ggml_abi::abi_alloc::{ggml_backend_buffer_t, ggml_backend_buffer_type_t};
use ggml_abi::abi_impl::{ggml_backend_buffer_i, ggml_backend_buffer_type_i};
use ggml_abi::rust_backend::guard;
use ggml_abi::sys::ggml_tensor;

use crate::backend::{buffer_init, st};
use crate::runtime::Gpu;

/// the device whose context pins (and frees) host memory: the first
fn pinning_gpu() -> Option<&'static Gpu> {
    st().gpus.first()
}

pub(crate) fn host_buft_i() -> ggml_backend_buffer_type_i {
    ggml_backend_buffer_type_i {
        get_name: Some(host_buft_get_name),
        alloc_buffer: Some(host_buft_alloc_buffer),
        get_alignment: Some(host_buft_get_alignment),
        get_max_size: None,
        get_alloc_size: None,
        is_host: Some(host_buft_is_host),
    }
}

unsafe extern "C" fn host_buft_get_name(_buft: ggml_backend_buffer_type_t) -> *const c_char {
    c"CUDA_Host".as_ptr()
}

unsafe extern "C" fn host_buft_get_alignment(_buft: ggml_backend_buffer_type_t) -> usize {
    // ggml's TENSOR_ALIGNMENT: the CPU backend reads these tensors
    32
}

unsafe extern "C" fn host_buft_is_host(_buft: ggml_backend_buffer_type_t) -> bool {
    true
}

unsafe extern "C" fn host_buft_alloc_buffer(buft: ggml_backend_buffer_type_t, size: usize) -> ggml_backend_buffer_t {
    guard("cuda host buft.alloc_buffer", std::ptr::null_mut(), || {
        let Some(gpu) = pinning_gpu() else {
            ggml_abi::log_error!("CUDA_Host: no CUDA device, no pinned memory\n");
            return std::ptr::null_mut();
        };
        if gpu.bind().is_err() {
            return std::ptr::null_mut();
        }
        // SAFETY: page-locked host allocation, portable across contexts.
        match unsafe { result::malloc_host(size.max(1), sys::CU_MEMHOSTALLOC_PORTABLE) } {
            Ok(p) => buffer_init(buft, host_buf_i(), p, size),
            Err(e) => {
                ggml_abi::log_warn!("CUDA_Host: pinning {:.2} MiB failed ({e:?})\n", size as f64 / (1 << 20) as f64);
                std::ptr::null_mut()
            }
        }
    })
}

fn host_buf_i() -> ggml_backend_buffer_i {
    ggml_backend_buffer_i {
        free_buffer: Some(host_buf_free),
        get_base: Some(host_buf_get_base),
        init_tensor: None,
        memset_tensor: Some(host_buf_memset_tensor),
        set_tensor: Some(host_buf_set_tensor),
        get_tensor: Some(host_buf_get_tensor),
        set_tensor_2d: None,
        get_tensor_2d: None,
        cpy_tensor: None,
        clear: Some(host_buf_clear),
        reset: None,
    }
}

unsafe extern "C" fn host_buf_free(b: ggml_backend_buffer_t) {
    guard("cuda host buffer.free", (), || {
        // cuMemFreeHost needs a current context (the calling thread may have none): the one
        // host_buft_alloc_buffer pinned the memory in
        let Some(gpu) = pinning_gpu() else { return };
        if let Err(e) = gpu.bind() {
            ggml_abi::log_error!("CUDA_Host: freeing pinned memory: {e}\n");
            return;
        }
        // SAFETY: context is the cuMemHostAlloc pointer, freed once.
        if let Err(e) = unsafe { result::free_host((*b).context) } {
            ggml_abi::log_error!("CUDA_Host: cuMemFreeHost failed: {e:?}\n");
        }
    })
}

unsafe extern "C" fn host_buf_get_base(b: ggml_backend_buffer_t) -> *mut c_void {
    // SAFETY: our buffer.
    unsafe { (*b).context }
}

unsafe extern "C" fn host_buf_memset_tensor(_b: ggml_backend_buffer_t, t: *mut ggml_tensor, value: u8, offset: usize, size: usize) {
    // SAFETY: host memory of a live tensor; ggml checked the range.
    unsafe { std::ptr::write_bytes(((*t).data as *mut u8).add(offset), value, size) }
}

unsafe extern "C" fn host_buf_set_tensor(_b: ggml_backend_buffer_t, t: *mut ggml_tensor, data: *const c_void, offset: usize, size: usize) {
    // SAFETY: as above.
    unsafe { std::ptr::copy_nonoverlapping(data as *const u8, ((*t).data as *mut u8).add(offset), size) }
}

unsafe extern "C" fn host_buf_get_tensor(_b: ggml_backend_buffer_t, t: *const ggml_tensor, data: *mut c_void, offset: usize, size: usize) {
    // SAFETY: as above.
    unsafe { std::ptr::copy_nonoverlapping(((*t).data as *const u8).add(offset), data as *mut u8, size) }
}

unsafe extern "C" fn host_buf_clear(b: ggml_backend_buffer_t, value: u8) {
    // SAFETY: the buffer's whole allocation.
    unsafe { std::ptr::write_bytes((*b).context as *mut u8, value, (*b).size) }
}
