//! The CPU backend: ggml's backend registry, device and stream for the kernels of `ops`, through
//! the ABI crate's adapter (`ggml_abi::rust_backend`), and the C API of upstream's `libggml-cpu`
//! (`exports`, in the cdylib `libggml_rs_cpu.so`).
//!
//! Tensors live in ggml's CPU buffer type (`ggml_backend_cpu_buffer_type` of ggml-base, or of
//! ggml-rs, which reimplements it), so buffers, weights and mmap'ed models are shared with every
//! other host backend exactly as with upstream's CPU backend.
//!
//! **Name.** The registry, device and backend are called `CPU`, the name upstream's programs look
//! for, unless upstream's CPU backend is in the same process (another definition of
//! `ggml_backend_cpu_reg` than ours, found in any loaded object when the registry is first asked
//! for): then they are `RSCPU`, so both can be told apart (`test-backend-ops -b RSCPU` compares
//! ours with upstream's, which it takes as the reference because it registered first).
//! `GGML_RS_CPU_NAME` sets the name outright. The device type is CPU either way.
//!
//! `unsafe` here is the C boundary's: reading C structs (tensors, graphs, buffer types) through
//! ggml-abi's views, and the exported functions' raw-pointer arguments.
// The exports take C's raw pointers by the C API's contract (valid for what the header says),
// checked where they enter; marking each `unsafe` in Rust would only restate that contract. The
// same reasoning as ggml-abi's and ggml-rs's export layers.
#![allow(clippy::not_unsafe_ptr_arg_deref, clippy::missing_safety_doc)]

pub mod abi;
pub mod compute;
pub mod exports;
pub mod features;
pub mod profile;
pub mod repack;

use std::ffi::{CStr, CString, c_void};
use std::sync::OnceLock;

use ggml_abi::abi_alloc::{ggml_backend_buffer_t, ggml_backend_buffer_type_t};
use ggml_abi::abi_backend::ggml_backend_dev_caps;
use ggml_abi::graph::GraphRef;
use ggml_abi::imports::Import;
use ggml_abi::rust_backend::{self, Adapter, Device, Registry, Stream};
use ggml_abi::sys::{DEV_TYPE_CPU, DevType, ggml_status};
use ggml_abi::tensor::TensorRef;

use crate::ops;
use compute::{AbortCallback, Engine};

/// upstream's `GGML_DEFAULT_N_THREADS`
pub const DEFAULT_N_THREADS: usize = 4;

/// the guid of our backends: not upstream's CPU guid, so `ggml_backend_is_cpu` of either library
/// answers only for its own backends (their contexts differ)
static GUID: [u8; 16] = *b"ggml-rs-cpu\0\x01\x00\x00\x00";

pub struct CpuRegistry {
    name: &'static CStr,
    devices: [CpuDevice; 1],
}

pub struct CpuDevice {
    name: &'static CStr,
    description: CString,
}

/// One CPU backend (stream): its threads and scratch, and what the application set.
pub struct CpuStream {
    n_threads: usize,
    engine: Option<Engine>,
    /// a pool of `ggml_threadpool_new` to run on instead of our own (`set_threadpool`)
    threadpool: *mut exports::ggml_threadpool,
    abort: AbortCallback,
    abort_data: *mut c_void,
    /// `ggml_backend_cpu_set_use_ref`: this backend's graphs run the scalar reference of every
    /// row kernel (`GGML_RS_CPU_SIMD=scalar` does it for the whole process)
    pub use_ref: bool,
}

// SAFETY: the raw pointers are the application's abort data and threadpool, which upstream's
// contract lets a backend use from whichever thread computes on it.
unsafe impl Send for CpuStream {}

impl CpuStream {
    fn new() -> CpuStream {
        CpuStream {
            n_threads: DEFAULT_N_THREADS,
            engine: None,
            threadpool: std::ptr::null_mut(),
            abort: None,
            abort_data: std::ptr::null_mut(),
            use_ref: false,
        }
    }

    pub fn set_n_threads(&mut self, n: usize) {
        self.n_threads = n.max(1);
    }

    pub fn set_threadpool(&mut self, tp: *mut exports::ggml_threadpool) {
        self.threadpool = tp;
    }

    pub fn set_abort_callback(&mut self, cb: AbortCallback, data: *mut c_void) {
        self.abort = cb;
        self.abort_data = data;
    }
}

impl Stream for CpuStream {
    fn graph_compute(&mut self, graph: GraphRef) -> ggml_status {
        // SAFETY: a threadpool set by the application stays alive while it is set (upstream's
        // contract: ggml_backend_cpu_set_threadpool before freeing it).
        if let Some(tp) = unsafe { exports::threadpool_engine(self.threadpool) } {
            return tp.compute(graph, self.abort, self.abort_data, self.use_ref);
        }
        let n = self.n_threads;
        let engine = self.engine.get_or_insert_with(|| Engine::new(n));
        engine.set_n_threads(n);
        engine.compute(graph, self.abort, self.abort_data, self.use_ref)
    }
}

impl Registry for CpuRegistry {
    type Device = CpuDevice;
    fn name(&self) -> &CStr {
        self.name
    }
    fn devices(&self) -> &[CpuDevice] {
        &self.devices
    }
    fn proc_address(&self, name: &CStr) -> *mut c_void {
        exports::proc_address(name)
    }
}

impl Device for CpuDevice {
    type Stream = CpuStream;
    fn name(&self) -> &CStr {
        self.name
    }
    fn description(&self) -> &CStr {
        &self.description
    }
    fn memory(&self) -> (usize, usize) {
        // as upstream: all physical memory, all of it taken as free
        // SAFETY: sysconf reads system constants.
        let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGE_SIZE)) };
        let total = (pages.max(0) as usize).saturating_mul(page.max(0) as usize);
        (total, total)
    }
    fn dev_type(&self) -> DevType {
        DEV_TYPE_CPU
    }
    fn caps(&self) -> ggml_backend_dev_caps {
        ggml_backend_dev_caps { async_: false, host_buffer: false, buffer_from_host_ptr: true, events: false, mmap_support: true }
    }
    fn guid(&self) -> &'static [u8; 16] {
        &GUID
    }
    fn init_backend(&self, _params: Option<&CStr>) -> Result<CpuStream, String> {
        Ok(CpuStream::new())
    }
    fn buffer_type(&self) -> ggml_backend_buffer_type_t {
        cpu_buffer_type()
    }
    fn buffer_from_host_ptr(&self, ptr: *mut c_void, size: usize, _max_tensor_size: usize) -> ggml_backend_buffer_t {
        static FROM_PTR: Import = Import::new(c"ggml_backend_cpu_buffer_from_ptr");
        // SAFETY: ggml-base's `ggml_backend_buffer_t ggml_backend_cpu_buffer_from_ptr(void *, size_t)`.
        unsafe {
            let f: unsafe extern "C" fn(*mut c_void, usize) -> ggml_backend_buffer_t = std::mem::transmute(FROM_PTR.get());
            f(ptr, size)
        }
    }
    fn supports_op(&self, op: TensorRef) -> bool {
        supports_op(op)
    }
    fn supports_buft(&self, buft: ggml_backend_buffer_type_t) -> bool {
        // host memory, or our repacked weights (upstream's CPU: host or one of its extra types)
        buft_is_host(buft) || repack::is_repack(buft)
    }
}

/// ggml's CPU buffer type (ggml-base's, looked up on first use)
pub fn cpu_buffer_type() -> ggml_backend_buffer_type_t {
    static BUFT: Import = Import::new(c"ggml_backend_cpu_buffer_type");
    // SAFETY: ggml-base's `ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void)`.
    unsafe {
        let f: unsafe extern "C" fn() -> ggml_backend_buffer_type_t = std::mem::transmute(BUFT.get());
        f()
    }
}

/// `ggml_backend_buft_is_host`, read from the type's own table
pub(crate) fn buft_is_host(buft: ggml_backend_buffer_type_t) -> bool {
    // SAFETY: a live buffer type (ggml's contract); its table is read, is_host called if present.
    !buft.is_null() && unsafe { (*buft).iface.is_host.is_some_and(|f| f(buft)) }
}

/// Whether this backend computes `t`: views and NONE always (nothing to compute), else what the
/// kernels say for its op, types and layout, provided every source is in host memory.
pub fn supports_op(t: TensorRef) -> bool {
    if ggml_abi::sys::op::is_empty(t.op()) {
        return true;
    }
    // a source in the repack buffer type: only what that type allows (MUL_MAT on repacked
    // weights), as upstream asks its extra buffer types first
    if t.srcs().iter().flatten().any(|s| repack::in_buffer(*s)) {
        return repack::supports_op(t) && compute::node_of(&t).is_ok_and(|n| ops::supports(&n));
    }
    let hosted = t.srcs().iter().flatten().all(|s| {
        let b = s.buffer_ptr();
        // SAFETY: a tensor's buffer is NULL or a live buffer.
        b.is_null() || buft_is_host(unsafe { (*b).buft })
    });
    hosted && compute::node_of(&t).is_ok_and(|n| ops::supports(&n))
}

/// The name of this backend in this process (see the module docs).
fn choose_name() -> &'static CStr {
    if let Some(n) = &crate::config::get().name
        && let Ok(c) = CString::new(n.as_str())
    {
        return Box::leak(c.into_boxed_c_str());
    }
    if upstream_cpu_is_loaded() { c"RSCPU" } else { c"CPU" }
}

/// whether a `ggml_backend_cpu_reg` of another object than this library is loaded
fn upstream_cpu_is_loaded() -> bool {
    let ours = object_of(choose_name as *const c_void);
    ggml_abi::imports::lookup_all(c"ggml_backend_cpu_reg").into_iter().any(|p| object_of(p) != ours)
}

/// the base address of the loaded object holding `addr`
fn object_of(addr: *const c_void) -> usize {
    // SAFETY: dladdr only reads the loader's tables; info is written on success.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr, &mut info) == 0 { 0 } else { info.dli_fbase as usize }
    }
}

/// The CPU model, as upstream's description (`model name` of /proc/cpuinfo; "CPU" elsewhere).
fn description() -> CString {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = text.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim()).unwrap_or("CPU");
    CString::new(model).unwrap_or_else(|_| c"CPU".to_owned())
}

/// the registry (made, and its name chosen, on first use)
pub fn adapter() -> &'static Adapter<CpuRegistry> {
    static ADAPTER: OnceLock<&'static Adapter<CpuRegistry>> = OnceLock::new();
    ADAPTER.get_or_init(|| {
        let name = choose_name();
        rust_backend::register(CpuRegistry { name, devices: [CpuDevice { name, description: description() }] })
    })
}
