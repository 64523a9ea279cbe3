//! The types of `ggml-backend.h`, as C sees them. The header generator reads this file.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

use crate::abi_alloc::{ggml_backend_buffer_t, ggml_backend_buffer_type_t, ggml_backend_t};
use crate::abi_impl::{ggml_backend_device, ggml_backend_event, ggml_backend_reg};
use crate::sys::{DevType, ggml_cgraph, ggml_context, ggml_tensor};

pub type ggml_backend_event_t = *mut ggml_backend_event;
pub type ggml_backend_graph_plan_t = *mut c_void;
pub type ggml_backend_reg_t = *mut ggml_backend_reg;
pub type ggml_backend_dev_t = *mut ggml_backend_device;

/// What a buffer holds; the scheduler keeps ops next to their WEIGHTS.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ggml_backend_buffer_usage {
    GGML_BACKEND_BUFFER_USAGE_ANY = 0,
    GGML_BACKEND_BUFFER_USAGE_WEIGHTS = 1,
    GGML_BACKEND_BUFFER_USAGE_COMPUTE = 2,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ggml_backend_dev_type {
    /// CPU device using system memory
    GGML_BACKEND_DEVICE_TYPE_CPU = 0,
    /// GPU device using dedicated memory
    GGML_BACKEND_DEVICE_TYPE_GPU = 1,
    /// integrated GPU device using host memory
    GGML_BACKEND_DEVICE_TYPE_IGPU = 2,
    /// accelerator devices intended to be used together with the CPU backend (e.g. BLAS or AMX)
    GGML_BACKEND_DEVICE_TYPE_ACCEL = 3,
    /// "meta" device wrapping multiple other devices for tensor parallelism (not in ggml 0.9.8)
    #[cfg(not(feature = "abi-0-9-8"))]
    GGML_BACKEND_DEVICE_TYPE_META = 4,
}

/// Functionality supported by the device.
/// cbindgen:field-names=[async, host_buffer, buffer_from_host_ptr, events, mmap_support]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ggml_backend_dev_caps {
    /// asynchronous operations
    pub async_: bool,
    /// pinned host buffer
    pub host_buffer: bool,
    /// creating buffers from host ptr
    pub buffer_from_host_ptr: bool,
    /// event synchronization
    pub events: bool,
    /// mmap is supported for loading (not in ggml 0.9.8)
    #[cfg(not(feature = "abi-0-9-8"))]
    pub mmap_support: bool,
}

/// All the device properties.
/// cbindgen:field-names=[name, description, memory_free, memory_total, type, device_id, caps]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ggml_backend_dev_props {
    pub name: *const c_char,
    pub description: *const c_char,
    pub memory_free: usize,
    pub memory_total: usize,
    pub type_: DevType,
    /// lower-case PCI bus id ("0000:c1:00.0") or NULL
    pub device_id: *const c_char,
    pub caps: ggml_backend_dev_caps,
}

/// A feature flag reported through `ggml_backend_get_features_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ggml_backend_feature {
    pub name: *const c_char,
    pub value: *const c_char,
}

#[cfg(not(feature = "abi-0-9-8"))]
pub type ggml_backend_comm_init_t = Option<unsafe extern "C" fn(backends: *mut ggml_backend_t, n_backends: usize) -> *mut c_void>;
#[cfg(not(feature = "abi-0-9-8"))]
pub type ggml_backend_comm_free_t = Option<unsafe extern "C" fn(comm_ctx: *mut c_void)>;
#[cfg(not(feature = "abi-0-9-8"))]
pub type ggml_backend_comm_allreduce_tensor_t = Option<unsafe extern "C" fn(comm_ctx: *mut c_void, tensors: *mut *mut ggml_tensor) -> bool>;
pub type ggml_backend_split_buffer_type_t = Option<unsafe extern "C" fn(main_device: c_int, tensor_split: *const f32) -> ggml_backend_buffer_type_t>;
pub type ggml_backend_set_n_threads_t = Option<unsafe extern "C" fn(backend: ggml_backend_t, n_threads: c_int)>;
pub type ggml_backend_dev_get_extra_bufts_t = Option<unsafe extern "C" fn(device: ggml_backend_dev_t) -> *mut ggml_backend_buffer_type_t>;
pub type ggml_abort_callback = Option<unsafe extern "C" fn(data: *mut c_void) -> bool>;
pub type ggml_backend_set_abort_callback_t =
    Option<unsafe extern "C" fn(backend: ggml_backend_t, abort_callback: ggml_abort_callback, abort_callback_data: *mut c_void)>;
pub type ggml_backend_get_features_t = Option<unsafe extern "C" fn(reg: ggml_backend_reg_t) -> *mut ggml_backend_feature>;

/// Backend scheduler (opaque).
pub struct ggml_backend_sched {
    _opaque: [u8; 0],
}

pub type ggml_backend_sched_t = *mut ggml_backend_sched;

/// Called for each node during `ggml_backend_sched_graph_compute`: with `ask == true` the scheduler
/// asks whether the caller wants to observe `t`; with `ask == false` it hands `t` over, computed.
/// Returning false then cancels the rest of the compute.
pub type ggml_backend_sched_eval_callback = Option<unsafe extern "C" fn(t: *mut ggml_tensor, ask: bool, user_data: *mut c_void) -> bool>;

// the meta device (newer than ggml 0.9.8)
#[cfg(not(feature = "abi-0-9-8"))]
pub const GGML_BACKEND_META_MAX_DEVICES: c_int = 16;

#[cfg(not(feature = "abi-0-9-8"))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ggml_backend_meta_split_axis {
    GGML_BACKEND_SPLIT_AXIS_0 = 0,
    GGML_BACKEND_SPLIT_AXIS_1 = 1,
    GGML_BACKEND_SPLIT_AXIS_2 = 2,
    GGML_BACKEND_SPLIT_AXIS_3 = 3,
    /// all values on all backends
    GGML_BACKEND_SPLIT_AXIS_MIRRORED = 10,
    /// each backend has a partial sum
    GGML_BACKEND_SPLIT_AXIS_PARTIAL = 11,
    GGML_BACKEND_SPLIT_AXIS_NONE = 98,
    GGML_BACKEND_SPLIT_AXIS_UNKNOWN = 99,
}

/// How the meta device splits one tensor across its devices (see upstream's ggml-backend.h).
#[cfg(not(feature = "abi-0-9-8"))]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ggml_backend_meta_split_state {
    pub axis: ggml_backend_meta_split_axis,
    pub ne: [i64; 256],
    pub nr: [u32; 16],
    pub n_segments: u32,
}

#[cfg(not(feature = "abi-0-9-8"))]
pub type ggml_backend_meta_get_split_state_t = Option<unsafe extern "C" fn(tensor: *const ggml_tensor, userdata: *mut c_void) -> ggml_backend_meta_split_state>;

/// A graph copied to another backend by `ggml_backend_graph_copy`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ggml_backend_graph_copy {
    pub buffer: ggml_backend_buffer_t,
    pub ctx_allocated: *mut ggml_context,
    pub ctx_unallocated: *mut ggml_context,
    pub graph: *mut ggml_cgraph,
}

/// Called by `ggml_backend_compare_graph_backend` with the same node computed on both backends.
pub type ggml_backend_eval_callback =
    Option<unsafe extern "C" fn(node_index: c_int, t1: *mut ggml_tensor, t2: *mut ggml_tensor, user_data: *mut c_void) -> bool>;
