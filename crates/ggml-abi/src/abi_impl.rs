//! The interface structs of `ggml-backend-impl.h`: what every backend fills in and reads. The
//! header generator reads this file.
//!
//! Backends (ggml-cpu, ggml-rpc, ggml-cuda, ...) create and mutate these structs directly, and
//! some rewrite `buffer->iface` or `buffer->buft` after creation, so this library always calls
//! through the fields at call time and never keeps a copy of a table.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

use crate::abi_alloc::{ggml_backend_buffer_t, ggml_backend_buffer_type_t, ggml_backend_t};
use crate::abi_backend::{ggml_backend_dev_props, ggml_backend_dev_t, ggml_backend_event_t, ggml_backend_graph_plan_t, ggml_backend_reg_t};
use crate::sys::{BufferUsage, DevType, ggml_cgraph, ggml_guid_t, ggml_status, ggml_tensor};

/// The interface version backends put in `ggml_backend_reg.api_version`.
#[cfg(not(feature = "abi-0-26-0"))]
pub const GGML_BACKEND_API_VERSION: c_int = 2;
/// The interface version backends put in `ggml_backend_reg.api_version` (ggml 0.26.0: 3, the
/// buffer type gained `alloc_buffer_n` and `get_alloc_size_n`).
#[cfg(feature = "abi-0-26-0")]
pub const GGML_BACKEND_API_VERSION: c_int = 3;

//
// Backend buffer type
//

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ggml_backend_buffer_type_i {
    pub get_name: Option<unsafe extern "C" fn(buft: ggml_backend_buffer_type_t) -> *const c_char>,
    /// allocate a buffer of this type
    pub alloc_buffer: Option<unsafe extern "C" fn(buft: ggml_backend_buffer_type_t, size: usize) -> ggml_backend_buffer_t>,
    /// (optional) allocate tensors from a list into a buffer of this type (defaults to
    /// alloc_buffer + linear allocator) (ggml 0.26.0)
    #[cfg(feature = "abi-0-26-0")]
    pub alloc_buffer_n:
        Option<unsafe extern "C" fn(buft: ggml_backend_buffer_type_t, tensors: *mut *mut ggml_tensor, n_tensors: c_int) -> ggml_backend_buffer_t>,
    /// tensor alignment
    pub get_alignment: Option<unsafe extern "C" fn(buft: ggml_backend_buffer_type_t) -> usize>,
    /// (optional) max buffer size that can be allocated (defaults to SIZE_MAX)
    pub get_max_size: Option<unsafe extern "C" fn(buft: ggml_backend_buffer_type_t) -> usize>,
    /// (optional) data size needed to allocate the tensor, including padding (defaults to ggml_nbytes)
    pub get_alloc_size: Option<unsafe extern "C" fn(buft: ggml_backend_buffer_type_t, tensor: *const ggml_tensor) -> usize>,
    /// (optional) total data size needed to allocate the given tensors, including padding and
    /// splitting (defaults to per-tensor get_alloc_size) (ggml 0.26.0)
    #[cfg(feature = "abi-0-26-0")]
    pub get_alloc_size_n: Option<unsafe extern "C" fn(buft: ggml_backend_buffer_type_t, tensors: *mut *mut ggml_tensor, n_tensors: c_int) -> usize>,
    /// (optional) check if tensor data is in host memory and uses standard ggml tensor layout (defaults to false)
    pub is_host: Option<unsafe extern "C" fn(buft: ggml_backend_buffer_type_t) -> bool>,
}

#[repr(C)]
pub struct ggml_backend_buffer_type {
    pub iface: ggml_backend_buffer_type_i,
    pub device: ggml_backend_dev_t,
    pub context: *mut c_void,
}

//
// Backend buffer
//

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ggml_backend_buffer_i {
    /// (optional) free the buffer
    pub free_buffer: Option<unsafe extern "C" fn(buffer: ggml_backend_buffer_t)>,
    /// base address of the buffer
    pub get_base: Option<unsafe extern "C" fn(buffer: ggml_backend_buffer_t) -> *mut c_void>,
    /// (optional) initialize a tensor in the buffer (eg. add tensor extras)
    pub init_tensor: Option<unsafe extern "C" fn(buffer: ggml_backend_buffer_t, tensor: *mut ggml_tensor) -> ggml_status>,
    /// tensor data access
    pub memset_tensor: Option<unsafe extern "C" fn(buffer: ggml_backend_buffer_t, tensor: *mut ggml_tensor, value: u8, offset: usize, size: usize)>,
    pub set_tensor: Option<unsafe extern "C" fn(buffer: ggml_backend_buffer_t, tensor: *mut ggml_tensor, data: *const c_void, offset: usize, size: usize)>,
    pub get_tensor: Option<unsafe extern "C" fn(buffer: ggml_backend_buffer_t, tensor: *const ggml_tensor, data: *mut c_void, offset: usize, size: usize)>,
    /// (optional) 2d data copies (not in ggml 0.9.8)
    #[cfg(not(feature = "abi-0-9-8"))]
    pub set_tensor_2d: Option<
        unsafe extern "C" fn(
            buffer: ggml_backend_buffer_t,
            tensor: *mut ggml_tensor,
            data: *const c_void,
            offset: usize,
            size: usize,
            n_copies: usize,
            stride_tensor: usize,
            stride_data: usize,
        ),
    >,
    #[cfg(not(feature = "abi-0-9-8"))]
    pub get_tensor_2d: Option<
        unsafe extern "C" fn(
            buffer: ggml_backend_buffer_t,
            tensor: *const ggml_tensor,
            data: *mut c_void,
            offset: usize,
            size: usize,
            n_copies: usize,
            stride_tensor: usize,
            stride_data: usize,
        ),
    >,
    /// (optional) tensor copy: dst is in the buffer, src may be in any buffer, including buffers from a different backend (return false if not supported)
    pub cpy_tensor: Option<unsafe extern "C" fn(buffer: ggml_backend_buffer_t, src: *const ggml_tensor, dst: *mut ggml_tensor) -> bool>,
    /// clear the entire buffer
    pub clear: Option<unsafe extern "C" fn(buffer: ggml_backend_buffer_t, value: u8)>,
    /// (optional) reset any internal state due to tensor initialization, such as tensor extras
    pub reset: Option<unsafe extern "C" fn(buffer: ggml_backend_buffer_t)>,
}

#[repr(C)]
pub struct ggml_backend_buffer {
    pub iface: ggml_backend_buffer_i,
    pub buft: ggml_backend_buffer_type_t,
    pub context: *mut c_void,
    pub size: usize,
    pub usage: BufferUsage,
}

//
// Backend (stream)
//

/// Passed to `graph_optimize` so the backend can add allocation dependencies: if it executes
/// parts of the graph out of order, it must keep the affected tensors allocated until a node
/// where execution is known to have joined. (Not in ggml 0.9.8, whose `graph_optimize` takes
/// none: there the struct is this library's own, and not in its headers.)
#[repr(C)]
pub struct ggml_backend_graph_optimize_params {
    /// keep `tensor` allocated at least until `until` (a node of the same graph) has been computed
    pub add_alloc_dep: Option<unsafe extern "C" fn(user_data: *mut c_void, tensor: *mut ggml_tensor, until: *mut ggml_tensor)>,
    pub user_data: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ggml_backend_i {
    pub get_name: Option<unsafe extern "C" fn(backend: ggml_backend_t) -> *const c_char>,
    pub free: Option<unsafe extern "C" fn(backend: ggml_backend_t)>,
    /// (optional) asynchronous tensor data access
    pub set_tensor_async: Option<unsafe extern "C" fn(backend: ggml_backend_t, tensor: *mut ggml_tensor, data: *const c_void, offset: usize, size: usize)>,
    pub get_tensor_async: Option<unsafe extern "C" fn(backend: ggml_backend_t, tensor: *const ggml_tensor, data: *mut c_void, offset: usize, size: usize)>,
    /// (not in ggml 0.9.8)
    #[cfg(not(feature = "abi-0-9-8"))]
    pub set_tensor_2d_async: Option<
        unsafe extern "C" fn(
            backend: ggml_backend_t,
            tensor: *mut ggml_tensor,
            data: *const c_void,
            offset: usize,
            size: usize,
            n_copies: usize,
            stride_tensor: usize,
            stride_data: usize,
        ),
    >,
    #[cfg(not(feature = "abi-0-9-8"))]
    pub get_tensor_2d_async: Option<
        unsafe extern "C" fn(
            backend: ggml_backend_t,
            tensor: *const ggml_tensor,
            data: *mut c_void,
            offset: usize,
            size: usize,
            n_copies: usize,
            stride_tensor: usize,
            stride_data: usize,
        ),
    >,
    pub cpy_tensor_async:
        Option<unsafe extern "C" fn(backend_src: ggml_backend_t, backend_dst: ggml_backend_t, src: *const ggml_tensor, dst: *mut ggml_tensor) -> bool>,
    /// (optional) complete all pending operations (required if the backend supports async operations)
    pub synchronize: Option<unsafe extern "C" fn(backend: ggml_backend_t)>,
    /// (optional) graph plans
    pub graph_plan_create: Option<unsafe extern "C" fn(backend: ggml_backend_t, cgraph: *const ggml_cgraph) -> ggml_backend_graph_plan_t>,
    pub graph_plan_free: Option<unsafe extern "C" fn(backend: ggml_backend_t, plan: ggml_backend_graph_plan_t)>,
    /// update the plan with a new graph - this should be faster than creating a new plan when the graph has the same topology
    pub graph_plan_update: Option<unsafe extern "C" fn(backend: ggml_backend_t, plan: ggml_backend_graph_plan_t, cgraph: *const ggml_cgraph)>,
    /// compute the graph with the plan
    pub graph_plan_compute: Option<unsafe extern "C" fn(backend: ggml_backend_t, plan: ggml_backend_graph_plan_t) -> ggml_status>,
    /// compute graph (always async if supported by the backend)
    pub graph_compute: Option<unsafe extern "C" fn(backend: ggml_backend_t, cgraph: *mut ggml_cgraph) -> ggml_status>,
    /// (optional) record an event on this stream
    pub event_record: Option<unsafe extern "C" fn(backend: ggml_backend_t, event: ggml_backend_event_t)>,
    /// (optional) wait for an event on on a different stream
    pub event_wait: Option<unsafe extern "C" fn(backend: ggml_backend_t, event: ggml_backend_event_t)>,
    /// (optional) sort/optimize the nodes in the graph
    #[cfg(not(feature = "abi-0-9-8"))]
    pub graph_optimize: Option<unsafe extern "C" fn(backend: ggml_backend_t, cgraph: *mut ggml_cgraph, params: *mut ggml_backend_graph_optimize_params)>,
    /// (optional) sort/optimize the nodes in the graph (ggml 0.9.8: no allocation dependencies)
    #[cfg(feature = "abi-0-9-8")]
    pub graph_optimize: Option<unsafe extern "C" fn(backend: ggml_backend_t, cgraph: *mut ggml_cgraph)>,
}

#[repr(C)]
pub struct ggml_backend {
    pub guid: ggml_guid_t,
    pub iface: ggml_backend_i,
    pub device: ggml_backend_dev_t,
    pub context: *mut c_void,
}

#[repr(C)]
pub struct ggml_backend_event {
    pub device: *mut ggml_backend_device,
    pub context: *mut c_void,
}

//
// Backend device
//

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ggml_backend_device_i {
    /// device name: short identifier for this device, such as "CPU" or "CUDA0"
    pub get_name: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t) -> *const c_char>,
    /// device description: short informative description of the device, could be the model name
    pub get_description: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t) -> *const c_char>,
    /// device memory in bytes: 0 bytes to indicate no memory to report
    pub get_memory: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t, free: *mut usize, total: *mut usize)>,
    /// device type
    pub get_type: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t) -> DevType>,
    /// device properties
    pub get_props: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t, props: *mut ggml_backend_dev_props)>,
    /// backend (stream) initialization
    pub init_backend: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t, params: *const c_char) -> ggml_backend_t>,
    /// preferred buffer type
    pub get_buffer_type: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t) -> ggml_backend_buffer_type_t>,
    /// (optional) host buffer type (in system memory, typically this is a pinned memory buffer for faster transfers between host and device)
    pub get_host_buffer_type: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t) -> ggml_backend_buffer_type_t>,
    /// (optional) buffer from pointer: create a buffer from a host pointer (useful for memory mapped models and importing data from other libraries)
    pub buffer_from_host_ptr:
        Option<unsafe extern "C" fn(dev: ggml_backend_dev_t, ptr: *mut c_void, size: usize, max_tensor_size: usize) -> ggml_backend_buffer_t>,
    /// check if the backend can compute an operation
    pub supports_op: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t, op: *const ggml_tensor) -> bool>,
    /// check if the backend can use tensors allocated in a buffer type
    pub supports_buft: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t, buft: ggml_backend_buffer_type_t) -> bool>,
    /// (optional) check if the backend wants to run an operation, even if the weights are allocated in an incompatible buffer
    pub offload_op: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t, op: *const ggml_tensor) -> bool>,
    /// (optional) event synchronization
    pub event_new: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t) -> ggml_backend_event_t>,
    pub event_free: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t, event: ggml_backend_event_t)>,
    pub event_synchronize: Option<unsafe extern "C" fn(dev: ggml_backend_dev_t, event: ggml_backend_event_t)>,
}

#[repr(C)]
pub struct ggml_backend_device {
    pub iface: ggml_backend_device_i,
    pub reg: ggml_backend_reg_t,
    pub context: *mut c_void,
}

//
// Backend (reg)
//

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ggml_backend_reg_i {
    pub get_name: Option<unsafe extern "C" fn(reg: ggml_backend_reg_t) -> *const c_char>,
    /// enumerate available devices
    pub get_device_count: Option<unsafe extern "C" fn(reg: ggml_backend_reg_t) -> usize>,
    pub get_device: Option<unsafe extern "C" fn(reg: ggml_backend_reg_t, index: usize) -> ggml_backend_dev_t>,
    /// (optional) get a pointer to a function in the backend
    pub get_proc_address: Option<unsafe extern "C" fn(reg: ggml_backend_reg_t, name: *const c_char) -> *mut c_void>,
}

#[repr(C)]
pub struct ggml_backend_reg {
    /// initialize to GGML_BACKEND_API_VERSION
    pub api_version: c_int,
    pub iface: ggml_backend_reg_i,
    pub context: *mut c_void,
}

/// Entry point of a dynamically loaded backend.
pub type ggml_backend_init_t = Option<unsafe extern "C" fn() -> ggml_backend_reg_t>;
/// Optional: score of a dynamically loaded backend for this system (0 = not supported).
pub type ggml_backend_score_t = Option<unsafe extern "C" fn() -> c_int>;
