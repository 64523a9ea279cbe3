//! Checked handles over the interface structs of `ggml-backend-impl.h`: buffer types, buffers,
//! backends, devices, events, registries. Each method calls through the struct's `iface` field at
//! call time (backends rewrite them after creation), and a required entry that is NULL is a named
//! abort instead of a jump to address 0. Defaults for optional entries live in `crate::backend`,
//! not here: a handle method returns `None` when an optional entry is absent.

use std::ffi::{CStr, c_char, c_void};
use std::ptr::NonNull;

use crate::abi_backend::ggml_backend_dev_props;
use crate::abi_impl::{
    ggml_backend, ggml_backend_buffer, ggml_backend_buffer_type, ggml_backend_device, ggml_backend_event, ggml_backend_graph_optimize_params, ggml_backend_reg,
};
use crate::sys::{BufferUsage, DevType, ggml_cgraph, ggml_status, ggml_tensor};
use crate::tensor::TensorRef;

/// Reads `iface.$entry` of the handle's struct, aborting with a message naming the object and
/// the entry when a required entry is NULL.
macro_rules! required {
    ($self:expr, $entry:ident, $what:expr) => {{
        // SAFETY: handles are only built from valid pointers (their `from_raw` contracts).
        let f = unsafe { (*$self.0.as_ptr()).iface.$entry };
        match f {
            Some(f) => f,
            None => crate::fatal!("{}: interface entry `{}` is NULL", $what, stringify!($entry)),
        }
    }};
}

macro_rules! optional {
    ($self:expr, $entry:ident) => {
        // SAFETY: handles are only built from valid pointers (their `from_raw` contracts).
        unsafe { (*$self.0.as_ptr()).iface.$entry }
    };
}

fn c_str_or(p: *const c_char, fallback: &str) -> String {
    if p.is_null() {
        return fallback.to_string();
    }
    // SAFETY: interface name getters return NUL-terminated strings that outlive the call.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

macro_rules! handle {
    ($name:ident, $raw:ty) => {
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
        pub struct $name(NonNull<$raw>);

        impl $name {
            /// # Safety
            /// `ptr` is NULL or points to a live object of this kind that stays valid while the
            /// returned handle is used.
            #[inline]
            pub unsafe fn from_raw(ptr: *mut $raw) -> Option<$name> {
                NonNull::new(ptr).map($name)
            }

            #[inline]
            pub fn as_ptr(self) -> *mut $raw {
                self.0.as_ptr()
            }
        }
    };
}

handle!(BufferType, ggml_backend_buffer_type);
handle!(Buffer, ggml_backend_buffer);
handle!(Backend, ggml_backend);
handle!(Device, ggml_backend_device);
handle!(Event, ggml_backend_event);
handle!(Reg, ggml_backend_reg);

impl BufferType {
    /// whether this is ggml-backend-meta's buffer type (tensors split over devices; it places
    /// a context's tensors itself)
    pub fn is_meta(self) -> bool {
        // SAFETY: meta.cpp's predicate inspects a valid buffer type (false when meta.cpp is absent).
        unsafe { crate::sys::ggml_backend_buft_is_meta(self.as_ptr()) }
    }

    #[inline]
    pub fn name_ptr(self) -> *const c_char {
        let f = required!(self, get_name, "buffer type");
        // SAFETY: calling the buffer type's own interface with itself.
        unsafe { f(self.as_ptr()) }
    }

    #[inline]
    pub fn name(self) -> String {
        c_str_or(self.name_ptr(), "(null)")
    }

    /// The raw `alloc_buffer` call: NULL when the backend could not allocate.
    #[inline]
    pub fn alloc_buffer_raw(self, size: usize) -> *mut ggml_backend_buffer {
        let f = required!(self, alloc_buffer, format!("buffer type '{}'", self.name()));
        // SAFETY: as in name_ptr.
        unsafe { f(self.as_ptr(), size) }
    }

    #[inline]
    pub fn alignment(self) -> usize {
        let f = required!(self, get_alignment, format!("buffer type '{}'", self.name()));
        // SAFETY: as in name_ptr.
        unsafe { f(self.as_ptr()) }
    }

    #[inline]
    pub fn max_size(self) -> Option<usize> {
        // SAFETY: as in name_ptr.
        optional!(self, get_max_size).map(|f| unsafe { f(self.as_ptr()) })
    }

    #[inline]
    pub fn alloc_size(self, tensor: TensorRef) -> Option<usize> {
        // SAFETY: as in name_ptr; the tensor is valid (TensorRef).
        optional!(self, get_alloc_size).map(|f| unsafe { f(self.as_ptr(), tensor.as_ptr()) })
    }

    #[inline]
    pub fn has_alloc_size(self) -> bool {
        optional!(self, get_alloc_size).is_some()
    }

    /// The buffer type's own `alloc_buffer_n` on `tensors` (ggml 0.26.0), or None when it has
    /// none (then the caller runs the default plan). Some(NULL): it could not allocate.
    #[cfg(feature = "abi-0-26-0")]
    #[inline]
    pub fn alloc_buffer_n_raw(self, tensors: &mut [*mut crate::sys::ggml_tensor]) -> Option<*mut ggml_backend_buffer> {
        let n = std::ffi::c_int::try_from(tensors.len()).unwrap_or_else(|_| crate::fatal!("alloc_buffer_n: {} tensors do not fit an int", tensors.len()));
        // SAFETY: as in name_ptr; `tensors` holds `n` valid tensors for the duration of the call.
        optional!(self, alloc_buffer_n).map(|f| unsafe { f(self.as_ptr(), tensors.as_mut_ptr(), n) })
    }

    /// The buffer type's own `get_alloc_size_n` on `tensors` (ggml 0.26.0), or None when it has
    /// none (then the caller sums the default plan).
    #[cfg(feature = "abi-0-26-0")]
    #[inline]
    pub fn alloc_size_n(self, tensors: &mut [*mut crate::sys::ggml_tensor]) -> Option<usize> {
        let n = std::ffi::c_int::try_from(tensors.len()).unwrap_or_else(|_| crate::fatal!("get_alloc_size_n: {} tensors do not fit an int", tensors.len()));
        // SAFETY: as in alloc_buffer_n_raw.
        optional!(self, get_alloc_size_n).map(|f| unsafe { f(self.as_ptr(), tensors.as_mut_ptr(), n) })
    }

    #[inline]
    pub fn is_host(self) -> Option<bool> {
        // SAFETY: as in name_ptr.
        optional!(self, is_host).map(|f| unsafe { f(self.as_ptr()) })
    }

    #[inline]
    pub fn device_ptr(self) -> *mut ggml_backend_device {
        // SAFETY: plain field read of a valid buffer type.
        unsafe { (*self.as_ptr()).device }
    }
}

impl Buffer {
    #[inline]
    pub fn buft_ptr(self) -> *mut ggml_backend_buffer_type {
        // SAFETY: plain field read of a valid buffer.
        unsafe { (*self.as_ptr()).buft }
    }

    #[inline]
    pub fn buft(self) -> Option<BufferType> {
        // SAFETY: a buffer's type outlives the buffer.
        unsafe { BufferType::from_raw(self.buft_ptr()) }
    }

    #[inline]
    pub fn context(self) -> *mut c_void {
        // SAFETY: plain field read.
        unsafe { (*self.as_ptr()).context }
    }

    #[inline]
    pub fn size(self) -> usize {
        // SAFETY: plain field read.
        unsafe { (*self.as_ptr()).size }
    }

    #[inline]
    pub fn usage(self) -> BufferUsage {
        // SAFETY: plain field read.
        unsafe { (*self.as_ptr()).usage }
    }

    #[inline]
    pub fn set_usage_field(self, usage: BufferUsage) {
        // SAFETY: plain field write on a valid buffer.
        unsafe { (*self.as_ptr()).usage = usage }
    }

    #[inline]
    pub fn free_buffer_fn(self) -> Option<unsafe extern "C" fn(*mut ggml_backend_buffer)> {
        optional!(self, free_buffer)
    }

    #[inline]
    pub fn get_base(self) -> Option<*mut c_void> {
        // SAFETY: calling the buffer's own interface with itself.
        optional!(self, get_base).map(|f| unsafe { f(self.as_ptr()) })
    }

    #[inline]
    pub fn init_tensor(self, tensor: TensorRef) -> Option<ggml_status> {
        // SAFETY: as in get_base; the tensor is valid.
        optional!(self, init_tensor).map(|f| unsafe { f(self.as_ptr(), tensor.as_ptr()) })
    }

    #[inline]
    pub fn has_memset_tensor(self) -> bool {
        optional!(self, memset_tensor).is_some()
    }

    #[inline]
    pub fn memset_tensor(self, tensor: TensorRef, value: u8, offset: usize, size: usize) {
        let f = required!(self, memset_tensor, self.describe());
        // SAFETY: as in get_base; bounds were checked by the caller (backend::tensor_io).
        unsafe { f(self.as_ptr(), tensor.as_ptr(), value, offset, size) }
    }

    #[inline]
    pub fn set_tensor(self, tensor: TensorRef, data: *const c_void, offset: usize, size: usize) {
        let f = required!(self, set_tensor, self.describe());
        // SAFETY: as in memset_tensor.
        unsafe { f(self.as_ptr(), tensor.as_ptr(), data, offset, size) }
    }

    #[inline]
    pub fn get_tensor(self, tensor: TensorRef, data: *mut c_void, offset: usize, size: usize) {
        let f = required!(self, get_tensor, self.describe());
        // SAFETY: as in memset_tensor.
        unsafe { f(self.as_ptr(), tensor.as_ptr(), data, offset, size) }
    }

    #[cfg(not(feature = "abi-0-9-8"))]
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn set_tensor_2d(self, tensor: TensorRef, data: *const c_void, offset: usize, size: usize, n: usize, st: usize, sd: usize) -> bool {
        match optional!(self, set_tensor_2d) {
            // SAFETY: as in memset_tensor.
            Some(f) => unsafe {
                f(self.as_ptr(), tensor.as_ptr(), data, offset, size, n, st, sd);
                true
            },
            None => false,
        }
    }

    #[cfg(not(feature = "abi-0-9-8"))]
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn get_tensor_2d(self, tensor: TensorRef, data: *mut c_void, offset: usize, size: usize, n: usize, st: usize, sd: usize) -> bool {
        match optional!(self, get_tensor_2d) {
            // SAFETY: as in memset_tensor.
            Some(f) => unsafe {
                f(self.as_ptr(), tensor.as_ptr(), data, offset, size, n, st, sd);
                true
            },
            None => false,
        }
    }

    /// (the 2-D entries are newer than ggml 0.9.8)
    #[cfg(not(feature = "abi-0-9-8"))]
    #[inline]
    pub fn has_tensor_2d(self) -> (bool, bool) {
        (optional!(self, set_tensor_2d).is_some(), optional!(self, get_tensor_2d).is_some())
    }

    #[inline]
    pub fn cpy_tensor(self, src: TensorRef, dst: TensorRef) -> Option<bool> {
        // SAFETY: as in get_base; both tensors are valid.
        optional!(self, cpy_tensor).map(|f| unsafe { f(self.as_ptr(), src.as_ptr(), dst.as_ptr()) })
    }

    #[inline]
    pub fn clear(self, value: u8) {
        let f = required!(self, clear, self.describe());
        // SAFETY: as in get_base.
        unsafe { f(self.as_ptr(), value) }
    }

    #[inline]
    pub fn reset(self) {
        if let Some(f) = optional!(self, reset) {
            // SAFETY: as in get_base.
            unsafe { f(self.as_ptr()) }
        }
    }

    fn describe(self) -> String {
        match self.buft() {
            Some(b) => format!("buffer of type '{}'", b.name()),
            None => "buffer".to_string(),
        }
    }
}

impl Backend {
    #[inline]
    pub fn name_ptr(self) -> *const c_char {
        let f = required!(self, get_name, "backend");
        // SAFETY: calling the backend's own interface with itself.
        unsafe { f(self.as_ptr()) }
    }

    #[inline]
    pub fn name(self) -> String {
        c_str_or(self.name_ptr(), "(null)")
    }

    #[inline]
    pub fn device_ptr(self) -> *mut ggml_backend_device {
        // SAFETY: plain field read.
        unsafe { (*self.as_ptr()).device }
    }

    #[inline]
    pub fn device(self) -> Device {
        // SAFETY: a backend's device outlives it.
        unsafe { Device::from_raw(self.device_ptr()) }.unwrap_or_else(|| crate::fatal!("backend '{}' has no device", self.name()))
    }

    #[inline]
    pub fn guid(self) -> crate::sys::ggml_guid_t {
        // SAFETY: plain field read.
        unsafe { (*self.as_ptr()).guid }
    }

    #[inline]
    pub fn free(self) {
        let f = required!(self, free, format!("backend '{}'", self.name()));
        // SAFETY: the backend frees itself; the handle is not used afterwards.
        unsafe { f(self.as_ptr()) }
    }

    #[inline]
    pub fn set_tensor_async(self, t: TensorRef, data: *const c_void, offset: usize, size: usize) -> bool {
        match optional!(self, set_tensor_async) {
            // SAFETY: calling the backend's interface; bounds checked by the caller.
            Some(f) => unsafe {
                f(self.as_ptr(), t.as_ptr(), data, offset, size);
                true
            },
            None => false,
        }
    }

    #[inline]
    pub fn get_tensor_async(self, t: TensorRef, data: *mut c_void, offset: usize, size: usize) -> bool {
        match optional!(self, get_tensor_async) {
            // SAFETY: as in set_tensor_async.
            Some(f) => unsafe {
                f(self.as_ptr(), t.as_ptr(), data, offset, size);
                true
            },
            None => false,
        }
    }

    #[cfg(not(feature = "abi-0-9-8"))]
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn set_tensor_2d_async(self, t: TensorRef, data: *const c_void, offset: usize, size: usize, n: usize, st: usize, sd: usize) -> bool {
        match optional!(self, set_tensor_2d_async) {
            // SAFETY: as in set_tensor_async.
            Some(f) => unsafe {
                f(self.as_ptr(), t.as_ptr(), data, offset, size, n, st, sd);
                true
            },
            None => false,
        }
    }

    #[cfg(not(feature = "abi-0-9-8"))]
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn get_tensor_2d_async(self, t: TensorRef, data: *mut c_void, offset: usize, size: usize, n: usize, st: usize, sd: usize) -> bool {
        match optional!(self, get_tensor_2d_async) {
            // SAFETY: as in set_tensor_async.
            Some(f) => unsafe {
                f(self.as_ptr(), t.as_ptr(), data, offset, size, n, st, sd);
                true
            },
            None => false,
        }
    }

    /// (the 2-D entries are newer than ggml 0.9.8)
    #[cfg(not(feature = "abi-0-9-8"))]
    #[inline]
    pub fn has_2d_async(self) -> (bool, bool) {
        (optional!(self, set_tensor_2d_async).is_some(), optional!(self, get_tensor_2d_async).is_some())
    }

    /// `cpy_tensor_async` of this (destination) backend: Some(done) when the entry exists.
    #[inline]
    pub fn cpy_tensor_async(self, backend_src: *mut ggml_backend, src: TensorRef, dst: TensorRef) -> Option<bool> {
        // SAFETY: calling the backend's interface with valid tensors; backend_src may be any
        // backend pointer the caller passed (the entry checks it).
        optional!(self, cpy_tensor_async).map(|f| unsafe { f(backend_src, self.as_ptr(), src.as_ptr(), dst.as_ptr()) })
    }

    #[inline]
    pub fn synchronize(self) {
        if let Some(f) = optional!(self, synchronize) {
            // SAFETY: calling the backend's own interface.
            unsafe { f(self.as_ptr()) }
        }
    }

    #[inline]
    pub fn graph_plan_create(self, graph: *mut ggml_cgraph) -> *mut c_void {
        let f = required!(self, graph_plan_create, format!("backend '{}'", self.name()));
        // SAFETY: calling the backend's interface with the caller's graph.
        unsafe { f(self.as_ptr(), graph) }
    }

    #[inline]
    pub fn graph_plan_free(self, plan: *mut c_void) {
        let f = required!(self, graph_plan_free, format!("backend '{}'", self.name()));
        // SAFETY: as in graph_plan_create.
        unsafe { f(self.as_ptr(), plan) }
    }

    #[inline]
    pub fn graph_plan_compute(self, plan: *mut c_void) -> ggml_status {
        let f = required!(self, graph_plan_compute, format!("backend '{}'", self.name()));
        // SAFETY: as in graph_plan_create.
        unsafe { f(self.as_ptr(), plan) }
    }

    #[inline]
    pub fn graph_compute(self, graph: *mut ggml_cgraph) -> ggml_status {
        let f = required!(self, graph_compute, format!("backend '{}'", self.name()));
        // SAFETY: as in graph_plan_create.
        unsafe { f(self.as_ptr(), graph) }
    }

    #[inline]
    pub fn event_record(self, event: Event) {
        let f = required!(self, event_record, format!("backend '{}'", self.name()));
        // SAFETY: calling the backend's interface with a valid event.
        unsafe { f(self.as_ptr(), event.as_ptr()) }
    }

    #[inline]
    pub fn event_wait(self, event: Event) {
        let f = required!(self, event_wait, format!("backend '{}'", self.name()));
        // SAFETY: as in event_record.
        unsafe { f(self.as_ptr(), event.as_ptr()) }
    }

    #[inline]
    pub fn has_events(self) -> bool {
        optional!(self, event_record).is_some() && optional!(self, event_wait).is_some()
    }

    /// `graph_optimize`; ggml 0.9.8's takes no `params` (its backends add no allocation
    /// dependencies), so there `params` is not passed on.
    #[inline]
    pub fn graph_optimize(self, graph: *mut ggml_cgraph, params: *mut ggml_backend_graph_optimize_params) {
        if let Some(f) = optional!(self, graph_optimize) {
            // SAFETY: calling the backend's interface with a graph view the library owns.
            #[cfg(not(feature = "abi-0-9-8"))]
            unsafe {
                f(self.as_ptr(), graph, params)
            }
            #[cfg(feature = "abi-0-9-8")]
            {
                let _ = params;
                // SAFETY: as above.
                unsafe { f(self.as_ptr(), graph) }
            }
        }
    }
}

impl Device {
    fn label(self) -> String {
        match optional!(self, get_name) {
            // SAFETY: calling the device's own interface.
            Some(f) => format!("device '{}'", c_str_or(unsafe { f(self.as_ptr()) }, "(null)")),
            None => "device".to_string(),
        }
    }

    #[inline]
    pub fn name_ptr(self) -> *const c_char {
        let f = required!(self, get_name, "device");
        // SAFETY: calling the device's own interface.
        unsafe { f(self.as_ptr()) }
    }

    #[inline]
    pub fn description_ptr(self) -> *const c_char {
        let f = required!(self, get_description, self.label());
        // SAFETY: as in name_ptr.
        unsafe { f(self.as_ptr()) }
    }

    #[inline]
    pub fn memory(self, free: *mut usize, total: *mut usize) {
        let f = required!(self, get_memory, self.label());
        // SAFETY: as in name_ptr; the out-pointers come from the caller.
        unsafe { f(self.as_ptr(), free, total) }
    }

    #[inline]
    pub fn dev_type(self) -> DevType {
        let f = required!(self, get_type, self.label());
        // SAFETY: as in name_ptr.
        unsafe { f(self.as_ptr()) }
    }

    #[inline]
    pub fn props(self, props: *mut ggml_backend_dev_props) {
        let f = required!(self, get_props, self.label());
        // SAFETY: as in name_ptr; props points to a zeroed struct of the caller.
        unsafe { f(self.as_ptr(), props) }
    }

    #[inline]
    pub fn reg_ptr(self) -> *mut ggml_backend_reg {
        // SAFETY: plain field read.
        unsafe { (*self.as_ptr()).reg }
    }

    #[inline]
    pub fn init_backend(self, params: *const c_char) -> *mut ggml_backend {
        let f = required!(self, init_backend, self.label());
        // SAFETY: as in name_ptr.
        unsafe { f(self.as_ptr(), params) }
    }

    #[inline]
    pub fn buffer_type(self) -> *mut ggml_backend_buffer_type {
        let f = required!(self, get_buffer_type, self.label());
        // SAFETY: as in name_ptr.
        unsafe { f(self.as_ptr()) }
    }

    #[inline]
    pub fn host_buffer_type(self) -> Option<*mut ggml_backend_buffer_type> {
        // SAFETY: as in name_ptr.
        optional!(self, get_host_buffer_type).map(|f| unsafe { f(self.as_ptr()) })
    }

    #[inline]
    pub fn buffer_from_host_ptr(self, ptr: *mut c_void, size: usize, max_tensor_size: usize) -> *mut ggml_backend_buffer {
        let f = required!(self, buffer_from_host_ptr, self.label());
        // SAFETY: as in name_ptr; the memory is the caller's.
        unsafe { f(self.as_ptr(), ptr, size, max_tensor_size) }
    }

    #[inline]
    pub fn supports_op(self, op: TensorRef) -> bool {
        let f = required!(self, supports_op, self.label());
        // SAFETY: as in name_ptr.
        unsafe { f(self.as_ptr(), op.as_ptr()) }
    }

    #[inline]
    pub fn supports_op_raw(self, op: *const ggml_tensor) -> bool {
        let f = required!(self, supports_op, self.label());
        // SAFETY: as in name_ptr; op comes from the caller.
        unsafe { f(self.as_ptr(), op) }
    }

    #[inline]
    pub fn supports_buft(self, buft: *mut ggml_backend_buffer_type) -> bool {
        let f = required!(self, supports_buft, self.label());
        // SAFETY: as in name_ptr.
        unsafe { f(self.as_ptr(), buft) }
    }

    #[inline]
    pub fn offload_op(self, op: *const ggml_tensor) -> Option<bool> {
        // SAFETY: as in name_ptr.
        optional!(self, offload_op).map(|f| unsafe { f(self.as_ptr(), op) })
    }

    #[inline]
    pub fn event_new(self) -> Option<*mut ggml_backend_event> {
        // SAFETY: as in name_ptr.
        optional!(self, event_new).map(|f| unsafe { f(self.as_ptr()) })
    }

    #[inline]
    pub fn event_free(self, event: Event) {
        let f = required!(self, event_free, self.label());
        // SAFETY: the event belongs to this device; it is not used afterwards.
        unsafe { f(self.as_ptr(), event.as_ptr()) }
    }

    #[inline]
    pub fn event_synchronize(self, event: Event) {
        let f = required!(self, event_synchronize, self.label());
        // SAFETY: the event belongs to this device.
        unsafe { f(self.as_ptr(), event.as_ptr()) }
    }
}

impl Event {
    #[inline]
    pub fn device(self) -> Device {
        // SAFETY: an event's device outlives it.
        unsafe { Device::from_raw((*self.as_ptr()).device) }.unwrap_or_else(|| crate::fatal!("event has no device"))
    }
}

impl Reg {
    #[inline]
    pub fn name_ptr(self) -> *const c_char {
        let f = required!(self, get_name, "backend registry");
        // SAFETY: calling the registry's own interface.
        unsafe { f(self.as_ptr()) }
    }

    #[inline]
    pub fn device_count(self) -> usize {
        let f = required!(self, get_device_count, "backend registry");
        // SAFETY: as in name_ptr.
        unsafe { f(self.as_ptr()) }
    }

    #[inline]
    pub fn device(self, index: usize) -> *mut ggml_backend_device {
        let f = required!(self, get_device, "backend registry");
        // SAFETY: as in name_ptr.
        unsafe { f(self.as_ptr(), index) }
    }

    #[inline]
    pub fn proc_address(self, name: *const c_char) -> *mut c_void {
        match optional!(self, get_proc_address) {
            // SAFETY: as in name_ptr; name is the caller's C string.
            Some(f) => unsafe { f(self.as_ptr(), name) },
            None => std::ptr::null_mut(),
        }
    }
}
