//! A backend written in Rust implements three traits ([`Registry`], [`Device`], [`Stream`]); this
//! module is the one adapter that turns them into ggml's C tables (`ggml_backend_reg_i`,
//! `ggml_backend_device_i`, `ggml_backend_i`), so no backend writes a vtable by hand.
//!
//! Ownership: a registry is leaked once ([`register`]) and lives as long as the process (ggml's
//! registry keeps its pointer forever, and devices are compared by address). Its C structs sit in
//! the same allocation, so `reg->context` leads back to the Rust registry and a device's
//! `context` is its index. A backend (stream) is a `Box<ggml_backend>` whose `context` is a
//! `Box<S>`; `free` drops both.
//!
//! Panics never cross into C: every `extern "C"` function here runs its body in [`guard`], which
//! catches a panic, logs it naming the function, and returns the function's error value (NULL,
//! false, `GGML_STATUS_FAILED`). In a build with `panic = "abort"` (the workspace's release
//! profile) there is nothing to catch: the panic message is printed and the process aborts, which
//! also never unwinds into C.
//!
//! Buffer types are not adapted here: a backend whose tensors live in host memory hands out
//! ggml's CPU buffer type (as upstream's CPU backend does); one with memory of its own will get a
//! buffer trait the same way when it comes (issue 15, CUDA).

use std::cell::UnsafeCell;
use std::ffi::{CStr, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::abi_alloc::{ggml_backend_buffer_t, ggml_backend_buffer_type_t, ggml_backend_t};
use crate::abi_backend::{ggml_backend_dev_caps, ggml_backend_dev_props, ggml_backend_dev_t, ggml_backend_reg_t};
use crate::abi_impl::{
    GGML_BACKEND_API_VERSION, ggml_backend, ggml_backend_device, ggml_backend_device_i, ggml_backend_i, ggml_backend_reg, ggml_backend_reg_i,
};
use crate::graph::GraphRef;
use crate::sys::{DevType, GGML_STATUS_FAILED, ggml_cgraph, ggml_status, ggml_tensor};
use crate::tensor::TensorRef;

/// A backend's registry: a name, its devices, and functions it hands out by name.
pub trait Registry: Send + Sync + Sized + 'static {
    type Device: Device;
    fn name(&self) -> &CStr;
    fn devices(&self) -> &[Self::Device];
    /// `get_proc_address`: a function of this backend by name (NULL: none)
    fn proc_address(&self, _name: &CStr) -> *mut c_void {
        std::ptr::null_mut()
    }
}

/// One device of a registry.
pub trait Device: Send + Sync + Sized + 'static {
    type Stream: Stream;
    fn name(&self) -> &CStr;
    fn description(&self) -> &CStr;
    /// (free, total) bytes
    fn memory(&self) -> (usize, usize);
    fn dev_type(&self) -> DevType;
    fn caps(&self) -> ggml_backend_dev_caps;
    /// the guid of this device's backends (`ggml_backend_t.guid`): what `ggml_backend_is_xxx`
    /// compares, and what [`Adapter::stream`] checks before it hands a stream out
    fn guid(&self) -> &'static [u8; 16];
    /// a new stream; Err(why) is logged and NULL returned
    fn init_backend(&self, params: Option<&CStr>) -> Result<Self::Stream, String>;
    /// the buffer type of this device's memory
    fn buffer_type(&self) -> ggml_backend_buffer_type_t;
    /// a buffer over memory the caller owns (used when `caps().buffer_from_host_ptr`)
    fn buffer_from_host_ptr(&self, _ptr: *mut c_void, _size: usize, _max_tensor_size: usize) -> ggml_backend_buffer_t {
        std::ptr::null_mut()
    }
    fn supports_op(&self, op: TensorRef) -> bool;
    fn supports_buft(&self, buft: ggml_backend_buffer_type_t) -> bool;
    fn offload_op(&self, _op: TensorRef) -> bool {
        false
    }
}

/// A backend (stream) of a device: computes graphs.
pub trait Stream: Send + 'static {
    fn graph_compute(&mut self, graph: GraphRef) -> ggml_status;
}

/// A registry adapted to C: the Rust registry and the C structs that point at it.
pub struct Adapter<R: Registry> {
    reg: UnsafeCell<ggml_backend_reg>,
    devices: Box<[UnsafeCell<ggml_backend_device>]>,
    inner: R,
}

// SAFETY: the C structs are written only in `register`, before the adapter is shared; afterwards
// C reads them (and ggml's registry stores their addresses). The Rust registry is Sync.
unsafe impl<R: Registry> Sync for Adapter<R> {}
// SAFETY: as above.
unsafe impl<R: Registry> Send for Adapter<R> {}

/// Leaks `registry` with its C tables and returns it; call once per registry (keep the result in
/// a `OnceLock`: ggml compares registries and devices by address).
pub fn register<R: Registry>(registry: R) -> &'static Adapter<R> {
    let n = registry.devices().len();
    let adapter: &'static mut Adapter<R> = Box::leak(Box::new(Adapter {
        reg: UnsafeCell::new(ggml_backend_reg { api_version: GGML_BACKEND_API_VERSION, iface: reg_i::<R>(), context: std::ptr::null_mut() }),
        devices: (0..n)
            .map(|i| UnsafeCell::new(ggml_backend_device { iface: device_i::<R>(), reg: std::ptr::null_mut(), context: i as *mut c_void }))
            .collect(),
        inner: registry,
    }));
    let this = adapter as *mut Adapter<R> as *mut c_void;
    adapter.reg.get_mut().context = this;
    let reg = adapter.reg.get();
    for d in adapter.devices.iter_mut() {
        d.get_mut().reg = reg;
    }
    adapter
}

impl<R: Registry> Adapter<R> {
    pub fn reg(&self) -> ggml_backend_reg_t {
        self.reg.get()
    }

    pub fn registry(&self) -> &R {
        &self.inner
    }

    /// the C device of device `index`
    pub fn device(&self, index: usize) -> Option<ggml_backend_dev_t> {
        self.devices.get(index).map(UnsafeCell::get)
    }

    /// a new backend of device `index`: `stream` wrapped in a `ggml_backend` that C frees with
    /// `ggml_backend_free`
    pub fn new_backend(&self, index: usize, stream: <R::Device as Device>::Stream) -> ggml_backend_t {
        let (Some(dev), Some(d)) = (self.device(index), self.inner.devices().get(index)) else {
            crate::log_error!("{}: no device {index}\n", self.inner.name().to_string_lossy());
            return std::ptr::null_mut();
        };
        let context = Box::into_raw(Box::new(stream)) as *mut c_void;
        Box::into_raw(Box::new(ggml_backend {
            // C only compares the guid's bytes, never writes them
            guid: d.guid() as *const [u8; 16] as *mut [u8; 16],
            iface: backend_i::<R>(),
            device: dev,
            context,
        }))
    }

    /// The stream of `backend` when it is a backend of this registry (its device is one of ours
    /// and its guid that device's), else None.
    ///
    /// # Safety
    /// `backend` is NULL or a live `ggml_backend`, and no other reference to its stream is used
    /// while the returned one is.
    pub unsafe fn stream<'a>(&self, backend: ggml_backend_t) -> Option<&'a mut <R::Device as Device>::Stream> {
        if backend.is_null() {
            return None;
        }
        // SAFETY: the caller's contract: a live backend.
        let (dev, guid, context) = unsafe { ((*backend).device, (*backend).guid, (*backend).context) };
        let index = self.devices.iter().position(|d| d.get() == dev)?;
        let ours = self.inner.devices()[index].guid();
        // SAFETY: a backend's guid points to 16 bytes (ggml's contract); compared by value, as
        // ggml_guid_matches does.
        if guid.is_null() || unsafe { *guid } != *ours || context.is_null() {
            return None;
        }
        // SAFETY: a backend with our device and guid was made by `new_backend`, whose context is a
        // Box of the stream; exclusivity is the caller's contract.
        Some(unsafe { &mut *(context as *mut <R::Device as Device>::Stream) })
    }
}

/// Runs `f`, turning a panic into a logged error naming `what` and the value `on_panic`.
pub fn guard<T>(what: &str, on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(payload) => {
            let msg = payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned()).unwrap_or_default();
            let text = format!("{what}: internal error (panic): {msg}\n");
            // the logger is ggml-base's; a process without it (a unit test) gets stderr
            if crate::imports::lookup(c"ggml_log_internal").is_some() {
                crate::log::log(crate::log::Level::Error, &text);
            } else {
                eprint!("{text}");
            }
            on_panic
        }
    }
}

/// the adapter behind a C registry made by `register::<R>`
///
/// # Safety
/// `reg` is a registry `register::<R>` returned (C calls these functions only through its tables).
unsafe fn adapter<'a, R: Registry>(reg: ggml_backend_reg_t) -> &'a Adapter<R> {
    // SAFETY: the context of our registry is its leaked adapter.
    unsafe { &*((*reg).context as *const Adapter<R>) }
}

/// the adapter and the Rust device behind a C device of `register::<R>`
///
/// # Safety
/// `dev` is a device of such a registry.
unsafe fn device<'a, R: Registry>(dev: ggml_backend_dev_t) -> (&'a Adapter<R>, usize, &'a R::Device) {
    // SAFETY: our devices point to our registry, and their context is their index.
    unsafe {
        let a = adapter::<R>((*dev).reg);
        let i = (*dev).context as usize;
        (a, i, &a.inner.devices()[i])
    }
}

fn reg_i<R: Registry>() -> ggml_backend_reg_i {
    ggml_backend_reg_i {
        get_name: Some(reg_get_name::<R>),
        get_device_count: Some(reg_get_device_count::<R>),
        get_device: Some(reg_get_device::<R>),
        get_proc_address: Some(reg_get_proc_address::<R>),
    }
}

unsafe extern "C" fn reg_get_name<R: Registry>(reg: ggml_backend_reg_t) -> *const c_char {
    // SAFETY: called through our registry's table.
    guard("reg.get_name", std::ptr::null(), || unsafe { adapter::<R>(reg) }.inner.name().as_ptr())
}

unsafe extern "C" fn reg_get_device_count<R: Registry>(reg: ggml_backend_reg_t) -> usize {
    // SAFETY: as above.
    guard("reg.get_device_count", 0, || unsafe { adapter::<R>(reg) }.devices.len())
}

unsafe extern "C" fn reg_get_device<R: Registry>(reg: ggml_backend_reg_t, index: usize) -> ggml_backend_dev_t {
    guard("reg.get_device", std::ptr::null_mut(), || {
        // SAFETY: as above.
        let a = unsafe { adapter::<R>(reg) };
        a.device(index).unwrap_or_else(|| {
            crate::log_error!("{}: no device {index} (it has {})\n", a.inner.name().to_string_lossy(), a.devices.len());
            std::ptr::null_mut()
        })
    })
}

unsafe extern "C" fn reg_get_proc_address<R: Registry>(reg: ggml_backend_reg_t, name: *const c_char) -> *mut c_void {
    guard("reg.get_proc_address", std::ptr::null_mut(), || {
        if name.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: as above; `name` is a C string (the caller's contract).
        unsafe { adapter::<R>(reg).inner.proc_address(CStr::from_ptr(name)) }
    })
}

fn device_i<R: Registry>() -> ggml_backend_device_i {
    ggml_backend_device_i {
        get_name: Some(dev_get_name::<R>),
        get_description: Some(dev_get_description::<R>),
        get_memory: Some(dev_get_memory::<R>),
        get_type: Some(dev_get_type::<R>),
        get_props: Some(dev_get_props::<R>),
        init_backend: Some(dev_init_backend::<R>),
        get_buffer_type: Some(dev_get_buffer_type::<R>),
        get_host_buffer_type: None,
        buffer_from_host_ptr: Some(dev_buffer_from_host_ptr::<R>),
        supports_op: Some(dev_supports_op::<R>),
        supports_buft: Some(dev_supports_buft::<R>),
        offload_op: Some(dev_offload_op::<R>),
        event_new: None,
        event_free: None,
        event_synchronize: None,
    }
}

unsafe extern "C" fn dev_get_name<R: Registry>(dev: ggml_backend_dev_t) -> *const c_char {
    // SAFETY: called through our device's table.
    guard("device.get_name", std::ptr::null(), || unsafe { device::<R>(dev) }.2.name().as_ptr())
}

unsafe extern "C" fn dev_get_description<R: Registry>(dev: ggml_backend_dev_t) -> *const c_char {
    // SAFETY: as above.
    guard("device.get_description", std::ptr::null(), || unsafe { device::<R>(dev) }.2.description().as_ptr())
}

unsafe extern "C" fn dev_get_memory<R: Registry>(dev: ggml_backend_dev_t, free: *mut usize, total: *mut usize) {
    guard("device.get_memory", (), || {
        // SAFETY: as above.
        let (f, t) = unsafe { device::<R>(dev) }.2.memory();
        // SAFETY: ggml passes pointers to two size_t (NULL tolerated).
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

unsafe extern "C" fn dev_get_type<R: Registry>(dev: ggml_backend_dev_t) -> DevType {
    // SAFETY: as above. A panic answers CPU, the one type every program accepts.
    guard("device.get_type", 0, || unsafe { device::<R>(dev) }.2.dev_type())
}

unsafe extern "C" fn dev_get_props<R: Registry>(dev: ggml_backend_dev_t, props: *mut ggml_backend_dev_props) {
    guard("device.get_props", (), || {
        // SAFETY: as above.
        let d = unsafe { device::<R>(dev) }.2;
        let (memory_free, memory_total) = d.memory();
        if props.is_null() {
            return;
        }
        // SAFETY: ggml passes a props struct to fill.
        unsafe {
            *props = ggml_backend_dev_props {
                name: d.name().as_ptr(),
                description: d.description().as_ptr(),
                memory_free,
                memory_total,
                type_: d.dev_type(),
                device_id: std::ptr::null(),
                caps: d.caps(),
            }
        }
    })
}

unsafe extern "C" fn dev_init_backend<R: Registry>(dev: ggml_backend_dev_t, params: *const c_char) -> ggml_backend_t {
    guard("device.init_backend", std::ptr::null_mut(), || {
        // SAFETY: as above; params is NULL or a C string.
        let (a, i, d) = unsafe { device::<R>(dev) };
        let params = (!params.is_null()).then(|| unsafe { CStr::from_ptr(params) });
        match d.init_backend(params) {
            Ok(s) => a.new_backend(i, s),
            Err(why) => {
                crate::log_error!("{}: cannot start a backend: {why}\n", d.name().to_string_lossy());
                std::ptr::null_mut()
            }
        }
    })
}

unsafe extern "C" fn dev_get_buffer_type<R: Registry>(dev: ggml_backend_dev_t) -> ggml_backend_buffer_type_t {
    // SAFETY: as above.
    guard("device.get_buffer_type", std::ptr::null_mut(), || unsafe { device::<R>(dev) }.2.buffer_type())
}

unsafe extern "C" fn dev_buffer_from_host_ptr<R: Registry>(
    dev: ggml_backend_dev_t,
    ptr: *mut c_void,
    size: usize,
    max_tensor_size: usize,
) -> ggml_backend_buffer_t {
    // SAFETY: as above.
    guard("device.buffer_from_host_ptr", std::ptr::null_mut(), || unsafe { device::<R>(dev) }.2.buffer_from_host_ptr(ptr, size, max_tensor_size))
}

unsafe extern "C" fn dev_supports_op<R: Registry>(dev: ggml_backend_dev_t, op: *const ggml_tensor) -> bool {
    guard("device.supports_op", false, || {
        // SAFETY: as above; ggml passes a live tensor.
        let (_, _, d) = unsafe { device::<R>(dev) };
        unsafe { TensorRef::from_raw(op) }.is_some_and(|t| d.supports_op(t))
    })
}

unsafe extern "C" fn dev_supports_buft<R: Registry>(dev: ggml_backend_dev_t, buft: ggml_backend_buffer_type_t) -> bool {
    // SAFETY: as above.
    guard("device.supports_buft", false, || !buft.is_null() && unsafe { device::<R>(dev) }.2.supports_buft(buft))
}

unsafe extern "C" fn dev_offload_op<R: Registry>(dev: ggml_backend_dev_t, op: *const ggml_tensor) -> bool {
    guard("device.offload_op", false, || {
        // SAFETY: as above.
        let (_, _, d) = unsafe { device::<R>(dev) };
        unsafe { TensorRef::from_raw(op) }.is_some_and(|t| d.offload_op(t))
    })
}

fn backend_i<R: Registry>() -> ggml_backend_i {
    ggml_backend_i {
        get_name: Some(backend_get_name::<R>),
        free: Some(backend_free::<R>),
        set_tensor_async: None,
        get_tensor_async: None,
        #[cfg(not(feature = "abi-0-9-8"))]
        set_tensor_2d_async: None,
        #[cfg(not(feature = "abi-0-9-8"))]
        get_tensor_2d_async: None,
        cpy_tensor_async: None,
        synchronize: None,
        graph_plan_create: None,
        graph_plan_free: None,
        graph_plan_update: None,
        graph_plan_compute: None,
        graph_compute: Some(backend_graph_compute::<R>),
        event_record: None,
        event_wait: None,
        graph_optimize: None,
    }
}

unsafe extern "C" fn backend_get_name<R: Registry>(backend: ggml_backend_t) -> *const c_char {
    // SAFETY: called through our backend's table: its device is ours.
    guard("backend.get_name", std::ptr::null(), || unsafe { device::<R>((*backend).device) }.2.name().as_ptr())
}

unsafe extern "C" fn backend_free<R: Registry>(backend: ggml_backend_t) {
    guard("backend.free", (), || {
        // SAFETY: made by `new_backend`: two boxes, each freed once here (ggml frees a backend once).
        unsafe {
            let b = Box::from_raw(backend);
            drop(Box::from_raw(b.context as *mut <R::Device as Device>::Stream));
        }
    })
}

unsafe extern "C" fn backend_graph_compute<R: Registry>(backend: ggml_backend_t, graph: *mut ggml_cgraph) -> ggml_status {
    guard("backend.graph_compute", GGML_STATUS_FAILED, || {
        // SAFETY: our backend's context is its stream (made by `new_backend`); ggml computes on one
        // backend from one thread at a time (a backend is not thread-safe, upstream's contract).
        let stream = unsafe { &mut *((*backend).context as *mut <R::Device as Device>::Stream) };
        // SAFETY: ggml passes a live graph.
        match unsafe { GraphRef::from_raw(graph) } {
            Some(g) => stream.graph_compute(g),
            None => {
                crate::log_error!("graph_compute: the graph is NULL\n");
                GGML_STATUS_FAILED
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::{DEV_TYPE_CPU, GGML_STATUS_SUCCESS, ggml_hash_set};

    static GUID: [u8; 16] = [7; 16];

    struct ToyReg([ToyDev; 2]);
    struct ToyDev(&'static CStr);
    struct ToyStream {
        graphs: usize,
    }

    impl Registry for ToyReg {
        type Device = ToyDev;
        fn name(&self) -> &CStr {
            c"TOY"
        }
        fn devices(&self) -> &[ToyDev] {
            &self.0
        }
        fn proc_address(&self, name: &CStr) -> *mut c_void {
            if name == c"toy_fn" { 42usize as *mut c_void } else { std::ptr::null_mut() }
        }
    }

    impl Device for ToyDev {
        type Stream = ToyStream;
        fn name(&self) -> &CStr {
            self.0
        }
        fn description(&self) -> &CStr {
            c"a toy"
        }
        fn memory(&self) -> (usize, usize) {
            (1, 2)
        }
        fn dev_type(&self) -> DevType {
            DEV_TYPE_CPU
        }
        fn caps(&self) -> ggml_backend_dev_caps {
            ggml_backend_dev_caps { buffer_from_host_ptr: true, ..Default::default() }
        }
        fn guid(&self) -> &'static [u8; 16] {
            &GUID
        }
        fn init_backend(&self, _params: Option<&CStr>) -> Result<ToyStream, String> {
            Ok(ToyStream { graphs: 0 })
        }
        fn buffer_type(&self) -> ggml_backend_buffer_type_t {
            std::ptr::null_mut()
        }
        fn supports_op(&self, _op: TensorRef) -> bool {
            panic!("supports_op of the toy panics")
        }
        fn supports_buft(&self, _buft: ggml_backend_buffer_type_t) -> bool {
            true
        }
    }

    impl Stream for ToyStream {
        fn graph_compute(&mut self, graph: GraphRef) -> ggml_status {
            self.graphs += 1 + graph.n_nodes();
            GGML_STATUS_SUCCESS
        }
    }

    fn empty_graph() -> ggml_cgraph {
        ggml_cgraph {
            size: 0,
            n_nodes: 0,
            n_leafs: 0,
            nodes: std::ptr::null_mut(),
            grads: std::ptr::null_mut(),
            grad_accs: std::ptr::null_mut(),
            leafs: std::ptr::null_mut(),
            use_counts: std::ptr::null_mut(),
            visited_hash_set: ggml_hash_set { size: 0, used: std::ptr::null_mut(), keys: std::ptr::null_mut() },
            order: 0,
            #[cfg(not(feature = "abi-0-9-8"))]
            uid: 0,
        }
    }

    #[test]
    fn the_c_tables_reach_the_rust_registry_devices_and_streams() {
        let a = register(ToyReg([ToyDev(c"TOY0"), ToyDev(c"TOY1")]));
        let reg = a.reg();
        // SAFETY: everything below calls the tables `register` filled, as ggml does.
        unsafe {
            assert_eq!((*reg).api_version, GGML_BACKEND_API_VERSION);
            let ri = (*reg).iface;
            assert_eq!(CStr::from_ptr(ri.get_name.unwrap()(reg)), c"TOY");
            assert_eq!(ri.get_device_count.unwrap()(reg), 2);
            assert_eq!(ri.get_proc_address.unwrap()(reg, c"toy_fn".as_ptr()) as usize, 42);
            assert!(ri.get_proc_address.unwrap()(reg, c"other".as_ptr()).is_null());
            let d1 = ri.get_device.unwrap()(reg, 1);
            assert_eq!((*d1).reg, reg);
            let di = (*d1).iface;
            assert_eq!(CStr::from_ptr(di.get_name.unwrap()(d1)), c"TOY1");
            let mut props: ggml_backend_dev_props = std::mem::zeroed();
            di.get_props.unwrap()(d1, &mut props);
            assert_eq!(CStr::from_ptr(props.name), c"TOY1");
            assert_eq!((props.memory_free, props.memory_total), (1, 2));
            assert!(props.caps.buffer_from_host_ptr && !props.caps.async_);
            // a panic of the Rust side is an answer of false, not an unwind into C
            let mut t: ggml_tensor = std::mem::zeroed();
            assert!(!di.supports_op.unwrap()(d1, &mut t));

            let b = di.init_backend.unwrap()(d1, std::ptr::null());
            assert!(!b.is_null());
            assert_eq!((*b).device, d1);
            assert_eq!(CStr::from_ptr((*b).iface.get_name.unwrap()(b)), c"TOY1");
            let mut g = empty_graph();
            assert_eq!((*b).iface.graph_compute.unwrap()(b, &mut g), GGML_STATUS_SUCCESS);
            assert_eq!((*b).iface.graph_compute.unwrap()(b, &mut g), GGML_STATUS_SUCCESS);
            assert_eq!(a.stream(b).map(|s| s.graphs), Some(2));

            // a backend with another guid, or another registry's device, is not ours
            let other_guid = [8u8; 16];
            let mut fake = ggml_backend { guid: &other_guid as *const _ as *mut _, iface: (*b).iface, device: d1, context: (*b).context };
            assert!(a.stream(&mut fake).is_none());
            fake.guid = (*b).guid;
            fake.device = std::ptr::null_mut();
            assert!(a.stream(&mut fake).is_none());
            assert!(a.stream(std::ptr::null_mut()).is_none());
            (*b).iface.free.unwrap()(b);
        }
    }
}
