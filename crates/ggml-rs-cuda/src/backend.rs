//! ggml's C tables for the CUDA backend: the registry ("CUDA"), one device per GPU, each with
//! its device buffer type, the pinned host buffer type, backends (streams) with async copies,
//! events and graph_compute. Written directly against ggml-backend-impl.h's structs (through
//! ggml-abi's mirrors) because the Rust adapter (`ggml_abi::rust_backend`) has no buffers,
//! async copies or events yet.
//!
//! Everything lives in one leaked [`State`], made on first use (ggml keeps the registry's,
//! devices' and buffer types' addresses for the process's life). Every `extern "C"` function
//! runs its body in `guard`, so a panic is a logged error and the function's failure value,
//! never an unwind into C.

use std::cell::UnsafeCell;
use std::ffi::{CStr, c_char, c_void};
use std::sync::OnceLock;

use cudarc::driver::{result, sys};
use ggml_abi::abi_alloc::{ggml_backend_buffer_t, ggml_backend_buffer_type_t, ggml_backend_t};
use ggml_abi::abi_backend::{ggml_backend_dev_caps, ggml_backend_dev_props, ggml_backend_dev_t, ggml_backend_event_t, ggml_backend_reg_t};
use ggml_abi::abi_impl::{
    GGML_BACKEND_API_VERSION, ggml_backend, ggml_backend_buffer_i, ggml_backend_buffer_type, ggml_backend_buffer_type_i, ggml_backend_device,
    ggml_backend_device_i, ggml_backend_event, ggml_backend_i, ggml_backend_reg, ggml_backend_reg_i,
};
use ggml_abi::graph::GraphRef;
use ggml_abi::imports::Import;
use ggml_abi::rust_backend::guard;
use ggml_abi::sys::{DevType, GGML_STATUS_FAILED, GGML_STATUS_SUCCESS, ggml_cgraph, ggml_status, ggml_tensor};
use ggml_abi::tensor::TensorRef;

use crate::dispatch::{self, NodeDesc, Plan};
use crate::log_line;
use crate::runtime::{Gpu, Stream, cublas_available, probe};

/// ggml's GGML_BACKEND_DEVICE_TYPE_GPU
const DEV_TYPE_GPU: DevType = 1;
/// tensor alignment of the device buffers (upstream's CUDA buffers align to 128 bytes)
pub const ALIGNMENT: usize = 128;
/// the guid of our backends (`ggml_backend_is_cuda` compares it)
pub static GUID: [u8; 16] = *b"ggml-rs-cuda\0\x01\x00\x00";

/// The registry, its devices and buffer types, at fixed addresses.
pub struct State {
    pub gpus: Vec<Gpu>,
    reg: UnsafeCell<ggml_backend_reg>,
    devices: Box<[UnsafeCell<ggml_backend_device>]>,
    bufts: Box<[UnsafeCell<ggml_backend_buffer_type>]>,
    host_buft: UnsafeCell<ggml_backend_buffer_type>,
    buft_names: Vec<std::ffi::CString>,
}

// SAFETY: the C structs are written only while the state is built, before it is shared; after,
// C only reads them. Gpu is Sync.
unsafe impl Sync for State {}
// SAFETY: as above.
unsafe impl Send for State {}

/// The process's CUDA state: probed on first use (one log line when there is no device).
pub fn state() -> &'static State {
    static STATE: OnceLock<&'static State> = OnceLock::new();
    STATE.get_or_init(|| {
        let gpus = probe(&mut |line| log_line(ggml_abi::log::Level::Info, &line));
        build_state(gpus)
    })
}

fn build_state(gpus: Vec<Gpu>) -> &'static State {
    let n = gpus.len();
    let st: &'static mut State = Box::leak(Box::new(State {
        buft_names: gpus.iter().map(|g| std::ffi::CString::new(format!("{}", g.name.to_string_lossy())).unwrap_or_default()).collect(),
        gpus,
        reg: UnsafeCell::new(ggml_backend_reg { api_version: GGML_BACKEND_API_VERSION, iface: reg_i(), context: std::ptr::null_mut() }),
        devices: (0..n).map(|i| UnsafeCell::new(ggml_backend_device { iface: device_i(), reg: std::ptr::null_mut(), context: i as *mut c_void })).collect(),
        bufts: (0..n).map(|i| UnsafeCell::new(ggml_backend_buffer_type { iface: buft_i(), device: std::ptr::null_mut(), context: i as *mut c_void })).collect(),
        host_buft: UnsafeCell::new(ggml_backend_buffer_type { iface: crate::host::host_buft_i(), device: std::ptr::null_mut(), context: std::ptr::null_mut() }),
    }));
    let reg = st.reg.get();
    for i in 0..n {
        st.devices[i].get_mut().reg = reg;
        let dev = st.devices[i].get();
        st.bufts[i].get_mut().device = dev;
    }
    if n > 0 {
        st.host_buft.get_mut().device = st.devices[0].get();
    }
    st
}

impl State {
    pub fn reg(&self) -> ggml_backend_reg_t {
        self.reg.get()
    }
    pub fn device(&self, i: usize) -> Option<ggml_backend_dev_t> {
        self.devices.get(i).map(UnsafeCell::get)
    }
    pub fn buft(&self, i: usize) -> Option<ggml_backend_buffer_type_t> {
        self.bufts.get(i).map(UnsafeCell::get)
    }
    pub fn host_buft(&self) -> ggml_backend_buffer_type_t {
        self.host_buft.get()
    }
    /// the device index of one of our device buffer types
    pub fn buft_index(&self, buft: ggml_backend_buffer_type_t) -> Option<usize> {
        self.bufts.iter().position(|b| b.get() == buft)
    }
    fn device_index(&self, dev: ggml_backend_dev_t) -> Option<usize> {
        self.devices.iter().position(|d| d.get() == dev)
    }

    /// a new backend (stream) on device `i`
    pub fn new_backend(&'static self, i: usize) -> Result<ggml_backend_t, String> {
        let gpu = self.gpus.get(i).ok_or_else(|| format!("no CUDA device {i} (there are {})", self.gpus.len()))?;
        let stream = Stream::new(gpu)?;
        let context = Box::into_raw(Box::new(stream)) as *mut c_void;
        Ok(Box::into_raw(Box::new(ggml_backend {
            guid: &GUID as *const [u8; 16] as *mut [u8; 16],
            iface: backend_i(),
            device: self.device(i).expect("index checked above"),
            context,
        })))
    }

    /// the stream of `backend` if it is one of ours
    ///
    /// # Safety
    /// `backend` is NULL or a live backend; no other reference to its stream is in use.
    pub unsafe fn stream<'a>(&self, backend: ggml_backend_t) -> Option<&'a mut Stream> {
        if backend.is_null() {
            return None;
        }
        // SAFETY: the caller's contract.
        let (dev, guid, ctx) = unsafe { ((*backend).device, (*backend).guid, (*backend).context) };
        // SAFETY: a backend's guid points to 16 bytes.
        if self.device_index(dev).is_none() || guid.is_null() || unsafe { *guid } != GUID || ctx.is_null() {
            return None;
        }
        // SAFETY: our backends' context is a Box<Stream> (new_backend).
        Some(unsafe { &mut *(ctx as *mut Stream) })
    }
}

pub(crate) fn st() -> &'static State {
    state()
}

/// the index of a device of ours (its context)
///
/// # Safety
/// `dev` is one of our devices.
unsafe fn dev_index(dev: ggml_backend_dev_t) -> usize {
    // SAFETY: our devices' context is their index.
    unsafe { (*dev).context as usize }
}

//
// registry
//

fn reg_i() -> ggml_backend_reg_i {
    ggml_backend_reg_i {
        get_name: Some(reg_get_name),
        get_device_count: Some(reg_get_device_count),
        get_device: Some(reg_get_device),
        get_proc_address: Some(reg_get_proc_address),
    }
}

unsafe extern "C" fn reg_get_name(_reg: ggml_backend_reg_t) -> *const c_char {
    c"CUDA".as_ptr()
}

unsafe extern "C" fn reg_get_device_count(_reg: ggml_backend_reg_t) -> usize {
    guard("cuda reg.get_device_count", 0, || st().gpus.len())
}

unsafe extern "C" fn reg_get_device(_reg: ggml_backend_reg_t, index: usize) -> ggml_backend_dev_t {
    guard("cuda reg.get_device", std::ptr::null_mut(), || {
        st().device(index).unwrap_or_else(|| {
            ggml_abi::log_error!("CUDA: no device {index} (there are {})\n", st().gpus.len());
            std::ptr::null_mut()
        })
    })
}

unsafe extern "C" fn reg_get_proc_address(_reg: ggml_backend_reg_t, name: *const c_char) -> *mut c_void {
    guard("cuda reg.get_proc_address", std::ptr::null_mut(), || {
        if name.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: a C string (the caller's contract).
        crate::exports::proc_address(unsafe { CStr::from_ptr(name) })
    })
}

//
// device
//

fn device_i() -> ggml_backend_device_i {
    ggml_backend_device_i {
        get_name: Some(dev_get_name),
        get_description: Some(dev_get_description),
        get_memory: Some(dev_get_memory),
        get_type: Some(dev_get_type),
        get_props: Some(dev_get_props),
        init_backend: Some(dev_init_backend),
        get_buffer_type: Some(dev_get_buffer_type),
        get_host_buffer_type: Some(dev_get_host_buffer_type),
        buffer_from_host_ptr: None,
        supports_op: Some(dev_supports_op),
        supports_buft: Some(dev_supports_buft),
        offload_op: Some(dev_offload_op),
        event_new: Some(dev_event_new),
        event_free: Some(dev_event_free),
        event_synchronize: Some(dev_event_synchronize),
    }
}

fn gpu_of(dev: ggml_backend_dev_t) -> &'static Gpu {
    // SAFETY: called through our devices' table only.
    &st().gpus[unsafe { dev_index(dev) }]
}

unsafe extern "C" fn dev_get_name(dev: ggml_backend_dev_t) -> *const c_char {
    guard("cuda device.get_name", std::ptr::null(), || gpu_of(dev).name.as_ptr())
}

unsafe extern "C" fn dev_get_description(dev: ggml_backend_dev_t) -> *const c_char {
    guard("cuda device.get_description", std::ptr::null(), || gpu_of(dev).description.as_ptr())
}

unsafe extern "C" fn dev_get_memory(dev: ggml_backend_dev_t, free: *mut usize, total: *mut usize) {
    guard("cuda device.get_memory", (), || {
        let (f, t) = gpu_of(dev).memory();
        // SAFETY: NULL or pointers to size_t (ggml's contract).
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

unsafe extern "C" fn dev_get_type(_dev: ggml_backend_dev_t) -> DevType {
    DEV_TYPE_GPU
}

unsafe extern "C" fn dev_get_props(dev: ggml_backend_dev_t, props: *mut ggml_backend_dev_props) {
    guard("cuda device.get_props", (), || {
        if props.is_null() {
            return;
        }
        let g = gpu_of(dev);
        let (memory_free, memory_total) = g.memory();
        // SAFETY: ggml passes a props struct to fill.
        unsafe {
            *props = ggml_backend_dev_props {
                name: g.name.as_ptr(),
                description: g.description.as_ptr(),
                memory_free,
                memory_total,
                type_: DEV_TYPE_GPU,
                device_id: std::ptr::null(),
                caps: ggml_backend_dev_caps { async_: true, host_buffer: true, buffer_from_host_ptr: false, events: true, ..Default::default() },
            }
        }
    })
}

unsafe extern "C" fn dev_init_backend(dev: ggml_backend_dev_t, _params: *const c_char) -> ggml_backend_t {
    guard("cuda device.init_backend", std::ptr::null_mut(), || {
        // SAFETY: our device.
        let i = unsafe { dev_index(dev) };
        st().new_backend(i).unwrap_or_else(|e| {
            ggml_abi::log_error!("{}: cannot start a backend: {e}\n", gpu_of(dev).name.to_string_lossy());
            std::ptr::null_mut()
        })
    })
}

unsafe extern "C" fn dev_get_buffer_type(dev: ggml_backend_dev_t) -> ggml_backend_buffer_type_t {
    // SAFETY: our device.
    guard("cuda device.get_buffer_type", std::ptr::null_mut(), || st().buft(unsafe { dev_index(dev) }).unwrap_or(std::ptr::null_mut()))
}

unsafe extern "C" fn dev_get_host_buffer_type(_dev: ggml_backend_dev_t) -> ggml_backend_buffer_type_t {
    guard("cuda device.get_host_buffer_type", std::ptr::null_mut(), || st().host_buft())
}

/// Whether a node is computed here: its plan exists (dispatch) and, for GEMM, cuBLAS is there.
pub fn supports(t: TensorRef) -> bool {
    match dispatch::plan(&NodeDesc::from_tensor(t)) {
        Ok(Plan::MulMatGemm { .. }) => cublas_available(),
        Ok(_) => true,
        Err(_) => false,
    }
}

unsafe extern "C" fn dev_supports_op(_dev: ggml_backend_dev_t, op: *const ggml_tensor) -> bool {
    // SAFETY: ggml passes a live tensor.
    guard("cuda device.supports_op", false, || unsafe { TensorRef::from_raw(op) }.is_some_and(supports))
}

unsafe extern "C" fn dev_supports_buft(dev: ggml_backend_dev_t, buft: ggml_backend_buffer_type_t) -> bool {
    // SAFETY: our device.
    guard("cuda device.supports_buft", false, || st().buft_index(buft) == Some(unsafe { dev_index(dev) }))
}

/// upstream's rule: a batch of at least 32 rows is worth taking to the GPU even when its weights
/// sit in host memory (GET_ROWS excepted: it reads a few rows of a large table)
pub fn offload(t: TensorRef) -> bool {
    const MIN_BATCH: i64 = 32;
    t.op() != 40 && t.ne()[1] >= MIN_BATCH
}

unsafe extern "C" fn dev_offload_op(_dev: ggml_backend_dev_t, op: *const ggml_tensor) -> bool {
    // SAFETY: ggml passes a live tensor.
    guard("cuda device.offload_op", false, || unsafe { TensorRef::from_raw(op) }.is_some_and(offload))
}

unsafe extern "C" fn dev_event_new(dev: ggml_backend_dev_t) -> ggml_backend_event_t {
    guard("cuda device.event_new", std::ptr::null_mut(), || {
        let g = gpu_of(dev);
        if g.bind().is_err() {
            return std::ptr::null_mut();
        }
        match result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING) {
            Ok(ev) => Box::into_raw(Box::new(ggml_backend_event { device: dev, context: ev as *mut c_void })),
            Err(e) => {
                ggml_abi::log_error!("{}: cuEventCreate: {e:?}\n", g.name.to_string_lossy());
                std::ptr::null_mut()
            }
        }
    })
}

unsafe extern "C" fn dev_event_free(dev: ggml_backend_dev_t, event: ggml_backend_event_t) {
    guard("cuda device.event_free", (), || {
        if event.is_null() {
            return;
        }
        let _ = gpu_of(dev).bind();
        // SAFETY: made by dev_event_new (a Box holding a CUevent), freed once.
        unsafe {
            let e = Box::from_raw(event);
            let _ = result::event::destroy(e.context as sys::CUevent);
        }
    })
}

unsafe extern "C" fn dev_event_synchronize(dev: ggml_backend_dev_t, event: ggml_backend_event_t) {
    guard("cuda device.event_synchronize", (), || {
        let _ = gpu_of(dev).bind();
        // SAFETY: one of our events.
        if let Err(e) = unsafe { result::event::synchronize((*event).context as sys::CUevent) } {
            ggml_abi::log_error!("cuEventSynchronize: {e:?}\n");
        }
    })
}

//
// device buffers
//

fn buft_i() -> ggml_backend_buffer_type_i {
    ggml_backend_buffer_type_i {
        get_name: Some(buft_get_name),
        alloc_buffer: Some(buft_alloc_buffer),
        get_alignment: Some(buft_get_alignment),
        get_max_size: None,
        get_alloc_size: Some(buft_get_alloc_size),
        is_host: None,
    }
}

unsafe extern "C" fn buft_get_name(buft: ggml_backend_buffer_type_t) -> *const c_char {
    // SAFETY: our buffer types' context is the device index.
    guard("cuda buft.get_name", std::ptr::null(), || st().buft_names[unsafe { (*buft).context as usize }].as_ptr())
}

unsafe extern "C" fn buft_get_alignment(_buft: ggml_backend_buffer_type_t) -> usize {
    ALIGNMENT
}

/// ggml_nbytes, and past it the cuBLAS path's scratch for a MUL_MAT (`dispatch::alloc_size`)
unsafe extern "C" fn buft_get_alloc_size(_buft: ggml_backend_buffer_type_t, t: *const ggml_tensor) -> usize {
    // SAFETY: ggml passes a live tensor.
    guard("cuda buft.get_alloc_size", 0, || unsafe { TensorRef::from_raw(t) }.map_or(0, |t| dispatch::alloc_size(&NodeDesc::from_tensor(t))))
}

/// one device allocation, the context of a device buffer
struct DevBuf {
    gpu: &'static Gpu,
    ptr: sys::CUdeviceptr,
    size: usize,
}

pub(crate) fn buffer_init(buft: ggml_backend_buffer_type_t, iface: ggml_backend_buffer_i, context: *mut c_void, size: usize) -> ggml_backend_buffer_t {
    static INIT: Import = Import::new(c"ggml_backend_buffer_init");
    // SAFETY: ggml-base's `ggml_backend_buffer_t ggml_backend_buffer_init(buft, struct
    // ggml_backend_buffer_i iface, void * context, size_t size)` (iface passed by value).
    unsafe {
        let f: unsafe extern "C" fn(ggml_backend_buffer_type_t, ggml_backend_buffer_i, *mut c_void, usize) -> ggml_backend_buffer_t =
            std::mem::transmute(INIT.get());
        f(buft, iface, context, size)
    }
}

unsafe extern "C" fn buft_alloc_buffer(buft: ggml_backend_buffer_type_t, size: usize) -> ggml_backend_buffer_t {
    guard("cuda buft.alloc_buffer", std::ptr::null_mut(), || {
        // SAFETY: our buffer type.
        let gpu = &st().gpus[unsafe { (*buft).context as usize }];
        if let Err(e) = gpu.bind() {
            ggml_abi::log_error!("{}: {e}\n", gpu.name.to_string_lossy());
            return std::ptr::null_mut();
        }
        // cuMemAlloc refuses 0 bytes; ggml asks for empty buffers now and then
        // SAFETY: a plain device allocation on the bound context.
        match unsafe { result::malloc_sync(size.max(1)) } {
            Ok(ptr) => {
                let ctx = Box::into_raw(Box::new(DevBuf { gpu, ptr, size })) as *mut c_void;
                buffer_init(buft, buf_i(), ctx, size)
            }
            Err(e) => {
                ggml_abi::log_error!("{}: allocating {:.2} MiB of device memory failed: {e:?}\n", gpu.name.to_string_lossy(), size as f64 / (1 << 20) as f64);
                std::ptr::null_mut()
            }
        }
    })
}

fn buf_i() -> ggml_backend_buffer_i {
    ggml_backend_buffer_i {
        free_buffer: Some(buf_free),
        get_base: Some(buf_get_base),
        init_tensor: None,
        memset_tensor: Some(buf_memset_tensor),
        set_tensor: Some(buf_set_tensor),
        get_tensor: Some(buf_get_tensor),
        set_tensor_2d: None,
        get_tensor_2d: None,
        cpy_tensor: Some(buf_cpy_tensor),
        clear: Some(buf_clear),
        reset: None,
    }
}

/// # Safety
/// `b` is one of our device buffers.
unsafe fn devbuf<'a>(b: ggml_backend_buffer_t) -> &'a DevBuf {
    // SAFETY: our device buffers' context is a Box<DevBuf>.
    unsafe { &*((*b).context as *const DevBuf) }
}

fn check(what: &str, r: sys::CUresult) {
    if r != sys::CUresult::CUDA_SUCCESS {
        ggml_abi::fatal!("ggml-rs-cuda: {what} failed: {r:?}");
    }
}

unsafe extern "C" fn buf_free(b: ggml_backend_buffer_t) {
    guard("cuda buffer.free", (), || {
        // SAFETY: made by buft_alloc_buffer; ggml frees a buffer once.
        let d = unsafe { Box::from_raw((*b).context as *mut DevBuf) };
        let _ = d.gpu.bind();
        // SAFETY: our allocation.
        let _ = unsafe { result::free_sync(d.ptr) };
    })
}

unsafe extern "C" fn buf_get_base(b: ggml_backend_buffer_t) -> *mut c_void {
    // SAFETY: our buffer.
    guard("cuda buffer.get_base", std::ptr::null_mut(), || unsafe { devbuf(b) }.ptr as *mut c_void)
}

unsafe extern "C" fn buf_memset_tensor(b: ggml_backend_buffer_t, t: *mut ggml_tensor, value: u8, offset: usize, size: usize) {
    guard("cuda buffer.memset_tensor", (), || {
        // SAFETY: our buffer; t a live tensor in it; ggml checked offset + size against it.
        unsafe {
            let _ = devbuf(b).gpu.bind();
            check("cuMemsetD8", sys::cuMemsetD8_v2((*t).data as u64 + offset as u64, value, size));
        }
    })
}

unsafe extern "C" fn buf_set_tensor(b: ggml_backend_buffer_t, t: *mut ggml_tensor, data: *const c_void, offset: usize, size: usize) {
    guard("cuda buffer.set_tensor", (), || {
        // SAFETY: as above; data holds size bytes (ggml's contract).
        unsafe {
            let _ = devbuf(b).gpu.bind();
            check("cuMemcpyHtoD", sys::cuMemcpyHtoD_v2((*t).data as u64 + offset as u64, data, size));
        }
    })
}

unsafe extern "C" fn buf_get_tensor(b: ggml_backend_buffer_t, t: *const ggml_tensor, data: *mut c_void, offset: usize, size: usize) {
    guard("cuda buffer.get_tensor", (), || {
        // SAFETY: as above.
        unsafe {
            let _ = devbuf(b).gpu.bind();
            check("cuMemcpyDtoH", sys::cuMemcpyDtoH_v2(data, (*t).data as u64 + offset as u64, size));
        }
    })
}

/// whether a tensor's data is in one of our device buffers
fn in_device_buffer(t: *const ggml_tensor) -> bool {
    // SAFETY: a live tensor; its buffer NULL or live.
    unsafe {
        let b = (*t).buffer;
        !b.is_null() && st().buft_index((*b).buft).is_some()
    }
}

unsafe extern "C" fn buf_cpy_tensor(b: ggml_backend_buffer_t, src: *const ggml_tensor, dst: *mut ggml_tensor) -> bool {
    guard("cuda buffer.cpy_tensor", false, || {
        if !in_device_buffer(src) {
            return false;
        }
        // SAFETY: both tensors live, both in device memory of this process (unified addressing:
        // cuMemcpy finds the devices from the addresses).
        unsafe {
            let _ = devbuf(b).gpu.bind();
            let n = ggml_abi::sys::ggml_nbytes(src);
            check("cuMemcpy", sys::cuMemcpy((*dst).data as u64, (*src).data as u64, n));
            check("cuCtxSynchronize", sys::cuCtxSynchronize());
        }
        true
    })
}

unsafe extern "C" fn buf_clear(b: ggml_backend_buffer_t, value: u8) {
    guard("cuda buffer.clear", (), || {
        // SAFETY: our buffer.
        unsafe {
            let d = devbuf(b);
            let _ = d.gpu.bind();
            check("cuMemsetD8", sys::cuMemsetD8_v2(d.ptr, value, d.size));
            check("cuCtxSynchronize", sys::cuCtxSynchronize());
        }
    })
}

//
// backend (stream)
//

fn backend_i() -> ggml_backend_i {
    ggml_backend_i {
        get_name: Some(backend_get_name),
        free: Some(backend_free),
        set_tensor_async: Some(backend_set_tensor_async),
        get_tensor_async: Some(backend_get_tensor_async),
        set_tensor_2d_async: None,
        get_tensor_2d_async: None,
        cpy_tensor_async: Some(backend_cpy_tensor_async),
        synchronize: Some(backend_synchronize),
        graph_plan_create: None,
        graph_plan_free: None,
        graph_plan_update: None,
        graph_plan_compute: None,
        graph_compute: Some(backend_graph_compute),
        event_record: Some(backend_event_record),
        event_wait: Some(backend_event_wait),
        graph_optimize: None,
    }
}

/// our stream behind a backend of our table
fn stream_of<'a>(backend: ggml_backend_t) -> &'a mut Stream {
    // SAFETY: called through our backends' table only: the context is a Box<Stream>.
    unsafe { &mut *((*backend).context as *mut Stream) }
}

unsafe extern "C" fn backend_get_name(backend: ggml_backend_t) -> *const c_char {
    guard("cuda backend.get_name", std::ptr::null(), || stream_of(backend).gpu.name.as_ptr())
}

unsafe extern "C" fn backend_free(backend: ggml_backend_t) {
    guard("cuda backend.free", (), || {
        // SAFETY: made by new_backend: two boxes, freed once.
        unsafe {
            let b = Box::from_raw(backend);
            drop(Box::from_raw(b.context as *mut Stream));
        }
    })
}

unsafe extern "C" fn backend_set_tensor_async(backend: ggml_backend_t, t: *mut ggml_tensor, data: *const c_void, offset: usize, size: usize) {
    guard("cuda backend.set_tensor_async", (), || {
        let s = stream_of(backend);
        let _ = s.gpu.bind();
        // SAFETY: a live tensor in device memory; the caller keeps data alive until synchronize.
        unsafe { check("cuMemcpyHtoDAsync", sys::cuMemcpyHtoDAsync_v2((*t).data as u64 + offset as u64, data, size, s.stream)) }
    })
}

unsafe extern "C" fn backend_get_tensor_async(backend: ggml_backend_t, t: *const ggml_tensor, data: *mut c_void, offset: usize, size: usize) {
    guard("cuda backend.get_tensor_async", (), || {
        let s = stream_of(backend);
        let _ = s.gpu.bind();
        // SAFETY: as above.
        unsafe { check("cuMemcpyDtoHAsync", sys::cuMemcpyDtoHAsync_v2(data, (*t).data as u64 + offset as u64, size, s.stream)) }
    })
}

unsafe extern "C" fn backend_cpy_tensor_async(src_b: ggml_backend_t, dst_b: ggml_backend_t, src: *const ggml_tensor, dst: *mut ggml_tensor) -> bool {
    guard("cuda backend.cpy_tensor_async", false, || {
        // SAFETY: NULL or live backends.
        let (Some(s_src), Some(s_dst)) = (unsafe { st().stream(src_b) }, unsafe { st().stream(dst_b) }) else {
            return false;
        };
        if !in_device_buffer(src) || !in_device_buffer(dst) {
            return false;
        }
        // the source's work must be done before the copy reads it: its stream is waited for
        // (a device-side event would keep the host free; kept simple until measured)
        if s_src.stream != s_dst.stream && s_src.synchronize().is_err() {
            return false;
        }
        let _ = s_dst.gpu.bind();
        // SAFETY: both tensors in device memory of this process (unified addressing).
        unsafe {
            let n = ggml_abi::sys::ggml_nbytes(src);
            check("cuMemcpyAsync", sys::cuMemcpyAsync((*dst).data as u64, (*src).data as u64, n, s_dst.stream));
        }
        true
    })
}

unsafe extern "C" fn backend_synchronize(backend: ggml_backend_t) {
    guard("cuda backend.synchronize", (), || {
        if let Err(e) = stream_of(backend).synchronize() {
            ggml_abi::fatal!("ggml-rs-cuda: {e}");
        }
    })
}

unsafe extern "C" fn backend_event_record(backend: ggml_backend_t, event: ggml_backend_event_t) {
    guard("cuda backend.event_record", (), || {
        let s = stream_of(backend);
        let _ = s.gpu.bind();
        // SAFETY: one of our events (made by dev_event_new).
        unsafe { check("cuEventRecord", sys::cuEventRecord((*event).context as sys::CUevent, s.stream)) }
    })
}

unsafe extern "C" fn backend_event_wait(backend: ggml_backend_t, event: ggml_backend_event_t) {
    guard("cuda backend.event_wait", (), || {
        let s = stream_of(backend);
        let _ = s.gpu.bind();
        // SAFETY: as above.
        unsafe { check("cuStreamWaitEvent", sys::cuStreamWaitEvent(s.stream, (*event).context as sys::CUevent, 0)) }
    })
}

/// whether a node is computed at all: not a view/NONE, marked COMPUTE by ggml (a node built
/// without it, e.g. by ggml_graph_add_node of a caller that did not set it, is skipped as ggml's
/// own backends skip it), and not empty
pub fn computes(t: TensorRef) -> bool {
    !ggml_abi::sys::op::is_empty(t.op()) && t.flags() & ggml_abi::sys::GGML_TENSOR_FLAG_COMPUTE != 0 && t.ne().iter().all(|&n| n != 0)
}

/// Runs every node of `graph` on the stream (asynchronously: ggml synchronizes when it reads).
pub fn compute(s: &mut Stream, graph: GraphRef) -> ggml_status {
    if let Err(e) = s.gpu.bind() {
        ggml_abi::log_error!("ggml-rs-cuda: {e}\n");
        return GGML_STATUS_FAILED;
    }
    for t in graph.nodes() {
        if !computes(t) {
            continue;
        }
        let n = NodeDesc::from_tensor(t);
        let mut data = [0u64; 6];
        data[0] = t.data() as u64;
        for (i, d) in data.iter_mut().enumerate().skip(1) {
            *d = t.src(i - 1).map(|s| s.data() as u64).unwrap_or(0);
        }
        if let Err(e) = s.run(&n, &data) {
            ggml_abi::log_error!("ggml-rs-cuda: node '{}' ({}): {e}\n", t.name(), t.op_name());
            return GGML_STATUS_FAILED;
        }
    }
    if std::env::var_os("GGML_RS_CUDA_SYNC").is_some()
        && let Err(e) = s.synchronize()
    {
        ggml_abi::log_error!("ggml-rs-cuda: {e}\n");
        return GGML_STATUS_FAILED;
    }
    GGML_STATUS_SUCCESS
}

unsafe extern "C" fn backend_graph_compute(backend: ggml_backend_t, graph: *mut ggml_cgraph) -> ggml_status {
    guard("cuda backend.graph_compute", GGML_STATUS_FAILED, || {
        // SAFETY: ggml passes a live graph.
        match unsafe { GraphRef::from_raw(graph) } {
            Some(g) => compute(stream_of(backend), g),
            None => GGML_STATUS_FAILED,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_without_compute_flag_views_and_empty_ones_are_skipped() {
        // SAFETY: a zeroed ggml_tensor is a valid value of the struct (NULL pointers, zero sizes).
        let mut t: Box<ggml_tensor> = Box::new(unsafe { std::mem::zeroed() });
        t.op = ggml_abi::sys::op::ADD;
        t.ne = [4, 1, 1, 1];
        t.flags = ggml_abi::sys::GGML_TENSOR_FLAG_COMPUTE;
        let r = |t: &mut ggml_tensor| unsafe { TensorRef::from_raw(t) }.unwrap();
        assert!(computes(r(&mut t)));
        t.flags = 0;
        assert!(!computes(r(&mut t)));
        t.flags = ggml_abi::sys::GGML_TENSOR_FLAG_COMPUTE;
        t.op = ggml_abi::sys::op::VIEW;
        assert!(!computes(r(&mut t)));
        t.op = ggml_abi::sys::op::ADD;
        t.ne = [4, 0, 1, 1];
        assert!(!computes(r(&mut t)));
    }

    #[test]
    fn the_device_buffer_type_reserves_the_gemm_scratch_after_a_mul_mat() {
        let tensor = |ty: i32, ne: [i64; 4]| {
            // SAFETY: a zeroed ggml_tensor is a valid value of the struct.
            let mut t: Box<ggml_tensor> = Box::new(unsafe { std::mem::zeroed() });
            let d = dispatch::TDesc::contiguous(ty, ne);
            (t.type_, t.ne, t.nb) = (ty as _, d.ne, d.nb);
            t
        };
        let (mut w, mut x) = (tensor(dispatch::T_Q8_0, [4096, 1024, 1, 1]), tensor(dispatch::T_F32, [4096, 512, 1, 1]));
        let mut mm = tensor(dispatch::T_F32, [1024, 512, 1, 1]);
        mm.op = ggml_abi::sys::op::MUL_MAT;
        (mm.src[0], mm.src[1]) = (&mut *w as *mut ggml_tensor, &mut *x as *mut ggml_tensor);
        let size = buft_i().get_alloc_size.unwrap();
        // SAFETY: live tensors, as ggml passes them; the buffer type is not read.
        let got = unsafe { size(std::ptr::null_mut(), &*mm) };
        let want = dispatch::gemm_scratch(&NodeDesc::from_tensor(unsafe { TensorRef::from_raw(&*mm) }.unwrap()), dispatch::T_F16, true).end;
        assert_eq!(got, want);
        assert!(got >= 1024 * 512 * 4 + 4096 * 1024 * 2 + 4096 * 512 * 2);
        // one column (mat-vec) or any other op: ggml_nbytes
        let (mut x1, mut v) = (tensor(dispatch::T_F32, [4096, 1, 1, 1]), tensor(dispatch::T_F32, [1024, 1, 1, 1]));
        v.op = ggml_abi::sys::op::MUL_MAT;
        (v.src[0], v.src[1]) = (&mut *w as *mut ggml_tensor, &mut *x1 as *mut ggml_tensor);
        // SAFETY: as above.
        assert_eq!(unsafe { size(std::ptr::null_mut(), &*v) }, 4096);
        // SAFETY: as above (a weight: op NONE).
        assert_eq!(unsafe { size(std::ptr::null_mut(), &*w) }, 1024 * 4352);
    }

    #[test]
    fn a_registry_with_zero_devices_answers_every_question_without_a_device() {
        let st = build_state(Vec::new());
        let reg = st.reg();
        // SAFETY: calls through the tables build_state filled, as ggml does.
        unsafe {
            assert_eq!((*reg).api_version, GGML_BACKEND_API_VERSION);
            let ri = (*reg).iface;
            assert_eq!(CStr::from_ptr(ri.get_name.unwrap()(reg)), c"CUDA");
            assert!(st.device(0).is_none());
            assert!(st.buft(0).is_none());
            assert!(st.new_backend(0).unwrap_err().contains("no CUDA device 0"));
            assert!(st.stream(std::ptr::null_mut()).is_none());
            // the host buffer type exists (ggml_backend_cuda_host_buffer_type never returns NULL)
            let hb = st.host_buft();
            assert!((*hb).iface.is_host.unwrap()(hb));
            assert_eq!(CStr::from_ptr((*hb).iface.get_name.unwrap()(hb)), c"CUDA_Host");
            // a buffer type that is not ours is not one of our devices'
            assert!(st.buft_index(hb).is_none());
        }
    }
}
