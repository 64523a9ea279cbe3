//! The C API of upstream's `ggml-cuda.h` (measured at the pin: the ten functions below plus
//! `ggml_backend_cuda_reg`), the loadable-module entry points, and what the registry hands out
//! by name (`get_proc_address`: the names llama.cpp and upstream's CUDA registry use).

use std::ffi::{CStr, c_char, c_int, c_void};

use cudarc::driver::{result, sys};
use ggml_abi::abi_alloc::{ggml_backend_buffer_type_t, ggml_backend_t};
use ggml_abi::abi_backend::{ggml_backend_feature, ggml_backend_reg_t};
use ggml_abi::rust_backend::guard;
use ggml_abi::sys::ggml_tensor;

use crate::backend::state;

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cuda_reg() -> ggml_backend_reg_t {
    guard("ggml_backend_cuda_reg", std::ptr::null_mut(), || state().reg())
}

/// The loadable-module entry (`GGML_BACKEND_DL_IMPL`): ggml's registry calls it after `dlopen`.
#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_init() -> ggml_backend_reg_t {
    guard("ggml_backend_init", std::ptr::null_mut(), || state().reg())
}

/// The module's score: 1, with or without a device. ggml_backend_load refuses a module that scores
/// 0 outright, and a registry with zero devices (and its one log line saying why) is the answer
/// this backend gives on a machine without a GPU; ggml_backend_load_best never looks for this
/// file name, so the score ranks nothing.
#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_score() -> c_int {
    1
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cuda_init(device: c_int) -> ggml_backend_t {
    guard("ggml_backend_cuda_init", std::ptr::null_mut(), || {
        let st = state();
        if device < 0 {
            ggml_abi::log_error!("ggml_backend_cuda_init: invalid device {device}\n");
            return std::ptr::null_mut();
        }
        st.new_backend(device as usize).unwrap_or_else(|e| {
            ggml_abi::log_error!("ggml_backend_cuda_init: {e}\n");
            std::ptr::null_mut()
        })
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_is_cuda(backend: ggml_backend_t) -> bool {
    // SAFETY: NULL or a live backend; only read.
    guard("ggml_backend_is_cuda", false, || unsafe { state().stream(backend) }.is_some())
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cuda_buffer_type(device: c_int) -> ggml_backend_buffer_type_t {
    guard("ggml_backend_cuda_buffer_type", std::ptr::null_mut(), || {
        let b = if device >= 0 { state().buft(device as usize) } else { None };
        b.unwrap_or_else(|| {
            ggml_abi::log_error!("ggml_backend_cuda_buffer_type: no CUDA device {device} (there are {})\n", state().gpus.len());
            std::ptr::null_mut()
        })
    })
}

/// Not implemented (one device per process is what is tested): false, which callers take as
/// "do it another way".
#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cuda_allreduce_tensor(_backends: *mut ggml_backend_t, _tensors: *mut *mut ggml_tensor, _n: usize) -> bool {
    false
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cuda_host_buffer_type() -> ggml_backend_buffer_type_t {
    guard("ggml_backend_cuda_host_buffer_type", std::ptr::null_mut(), || state().host_buft())
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cuda_get_device_count() -> c_int {
    guard("ggml_backend_cuda_get_device_count", 0, || state().gpus.len() as c_int)
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cuda_get_device_description(device: c_int, description: *mut c_char, description_size: usize) {
    guard("ggml_backend_cuda_get_device_description", (), || {
        if description.is_null() || description_size == 0 {
            return;
        }
        let text: &[u8] = match usize::try_from(device).ok().and_then(|d| state().gpus.get(d)) {
            Some(g) => g.description.as_bytes(),
            None => b"",
        };
        let n = text.len().min(description_size - 1);
        // SAFETY: the caller's buffer holds description_size bytes (snprintf's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), description as *mut u8, n);
            *description.add(n) = 0;
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cuda_get_device_memory(device: c_int, free: *mut usize, total: *mut usize) {
    guard("ggml_backend_cuda_get_device_memory", (), || {
        let (f, t) = usize::try_from(device).ok().and_then(|d| state().gpus.get(d)).map(|g| g.memory()).unwrap_or((0, 0));
        // SAFETY: NULL or pointers to size_t.
        unsafe {
            if !free.is_null() {
                *free = f;
            }
            if !total.is_null() {
                *total = t;
            }
        }
    })
}

/// Page-locks a host range for faster copies (`GGML_CUDA_REGISTER_HOST` of upstream); false
/// without a device or when the driver refuses.
#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cuda_register_host_buffer(buffer: *mut c_void, size: usize) -> bool {
    guard("ggml_backend_cuda_register_host_buffer", false, || {
        let Some(g) = state().gpus.first() else { return false };
        if buffer.is_null() || g.bind().is_err() {
            return false;
        }
        // SAFETY: the caller's range (its contract); portable + read-only as upstream.
        let r = unsafe { sys::cuMemHostRegister_v2(buffer, size, sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_READ_ONLY) };
        r == sys::CUresult::CUDA_SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cuda_unregister_host_buffer(buffer: *mut c_void) {
    guard("ggml_backend_cuda_unregister_host_buffer", (), || {
        let Some(g) = state().gpus.first() else { return };
        if buffer.is_null() || g.bind().is_err() {
            return;
        }
        // SAFETY: a range registered above (the caller's contract).
        let _ = unsafe { sys::cuMemHostUnregister(buffer) };
        let _ = result::ctx::synchronize();
    })
}

/// `ggml_backend_get_features`: name/value pairs, NULL-terminated
extern "C" fn get_features(_reg: ggml_backend_reg_t) -> *const ggml_backend_feature {
    struct Features([ggml_backend_feature; 4]);
    // SAFETY: static C strings only.
    unsafe impl Sync for Features {}
    static F: Features = Features([
        ggml_backend_feature { name: c"RUST".as_ptr(), value: c"1".as_ptr() },
        ggml_backend_feature { name: c"NVRTC".as_ptr(), value: c"1".as_ptr() },
        ggml_backend_feature { name: c"CUBLAS".as_ptr(), value: c"1".as_ptr() },
        ggml_backend_feature { name: std::ptr::null(), value: std::ptr::null() },
    ]);
    F.0.as_ptr()
}

/// `get_proc_address` of the registry
pub fn proc_address(name: &CStr) -> *mut c_void {
    match name.to_bytes() {
        b"ggml_backend_register_host_buffer" => ggml_backend_cuda_register_host_buffer as *mut c_void,
        b"ggml_backend_unregister_host_buffer" => ggml_backend_cuda_unregister_host_buffer as *mut c_void,
        b"ggml_backend_get_features" => get_features as *mut c_void,
        // not here: ggml_backend_split_buffer_type (llama.cpp checks for NULL) and the comm_*
        // functions of multi-GPU all-reduce
        _ => std::ptr::null_mut(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_hands_out_what_llama_cpp_looks_up_and_nothing_else() {
        assert!(!proc_address(c"ggml_backend_get_features").is_null());
        assert!(!proc_address(c"ggml_backend_register_host_buffer").is_null());
        assert!(!proc_address(c"ggml_backend_unregister_host_buffer").is_null());
        assert!(proc_address(c"ggml_backend_split_buffer_type").is_null());
        assert!(proc_address(c"ggml_backend_cpu_numa_init").is_null());
        let f = get_features(std::ptr::null_mut());
        // SAFETY: a NULL-terminated static array.
        unsafe {
            assert_eq!(CStr::from_ptr((*f).name), c"RUST");
            assert!((*f.add(3)).name.is_null());
        }
    }

    #[test]
    fn description_is_cut_to_the_callers_buffer() {
        let mut buf = [b'x' as c_char; 4];
        // device 99 does not exist: an empty string, not garbage
        ggml_backend_cuda_get_device_description(99, buf.as_mut_ptr(), buf.len());
        assert_eq!(buf[0], 0);
    }
}
