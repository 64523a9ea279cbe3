//! The CUDA side: finding the driver and the devices (no driver: zero devices and one log line),
//! loading the kernels of `kernels/` per device (NVRTC, through the [`KernelCache`]), and a
//! stream that runs the plans of `dispatch` on the GPU. Everything goes through cudarc's
//! dynamically loaded driver API, NVRTC and cuBLAS; cudarc panics when a library it needs is
//! missing, so each library's presence is asked first (`is_culib_present`).

use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::sync::{Mutex, OnceLock};

use cudarc::cublas::{result as blas, sys as blas_sys};
use cudarc::driver::{result, sys};

use crate::dispatch::{self, NodeDesc, Plan, T_F16, T_F32, type_size};
use crate::kernels::{CacheKey, KernelCache, Module, Origin, default_cache_dir, nvrtc};
use crate::launch::{self, Shape};

/// One CUDA device as the backend found it.
pub struct Gpu {
    pub ordinal: i32,
    pub dev: sys::CUdevice,
    /// the device's primary context (retained for the process's life)
    pub ctx: sys::CUcontext,
    /// the ggml device name ("CUDA0", ...)
    pub name: CString,
    /// the device's own name ("NVIDIA H200")
    pub description: CString,
    /// compute capability (major, minor)
    pub cc: (i32, i32),
    pub sm_count: i32,
    pub total_mem: usize,
    modules: Mutex<HashMap<Module, LoadedModule>>,
}

struct LoadedModule {
    _module: sys::CUmodule,
    functions: HashMap<&'static str, sys::CUfunction>,
}

// SAFETY: CUDA handles (device, context, module, function) are process-wide and usable from any
// thread once the context is current there; the module map is behind a Mutex.
unsafe impl Send for Gpu {}
// SAFETY: as above.
unsafe impl Sync for Gpu {}

/// driver error as text
fn de(what: &str, e: result::DriverError) -> String {
    let name = e.error_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    format!("{what}: {name}")
}

/// the prefix of the device names: `GGML_RS_CUDA_NAME`, else "CUDA" (upstream's, which programs
/// and scripts look for)
pub fn name_prefix() -> String {
    std::env::var("GGML_RS_CUDA_NAME").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "CUDA".to_string())
}

/// Finds the devices. Without a driver (no libcuda, cuInit failing, no device, no libnvrtc to
/// compile the kernels with, or `GGML_RS_CUDA_DISABLE` set) the answer is empty and `log` gets
/// exactly one line saying why; with devices, one line listing them.
pub fn probe(log: &mut dyn FnMut(String)) -> Vec<Gpu> {
    if std::env::var_os("GGML_RS_CUDA_DISABLE").is_some_and(|v| !v.is_empty() && v != "0") {
        log("ggml-rs-cuda: GGML_RS_CUDA_DISABLE is set: no CUDA devices\n".into());
        return Vec::new();
    }
    // SAFETY: only tries dlopen on cudarc's candidate names of libcuda.
    if !unsafe { sys::is_culib_present() } {
        log("ggml-rs-cuda: no CUDA driver (libcuda.so not found on the loader's path): no CUDA devices\n".into());
        return Vec::new();
    }
    if let Err(e) = result::init() {
        log(format!("ggml-rs-cuda: {}: no CUDA devices\n", de("cuInit failed", e)));
        return Vec::new();
    }
    let n = match result::device::get_count() {
        Ok(n) => n,
        Err(e) => {
            log(format!("ggml-rs-cuda: {}: no CUDA devices\n", de("cuDeviceGetCount failed", e)));
            return Vec::new();
        }
    };
    // without NVRTC no kernel can be compiled: the devices would accept graphs they cannot run
    if n > 0 && !nvrtc::available() {
        log(format!("ggml-rs-cuda: {n} CUDA device(s) but no libnvrtc on the loader's path (the kernels are compiled at run time): no CUDA devices\n"));
        return Vec::new();
    }
    let prefix = name_prefix();
    let mut gpus = Vec::new();
    let mut errors = Vec::new();
    for i in 0..n {
        match open_device(i, &prefix) {
            Ok(g) => gpus.push(g),
            Err(e) => errors.push(format!("device {i}: {e}")),
        }
    }
    // a real compile now (NVRTC's builtins library found, the device's architecture known to
    // this NVRTC), not at the first graph
    let target = match gpus.first().map(|g| (g.arch(), nvrtc::self_check(g.arch()))) {
        Some((_, Err(e))) => {
            log(format!("ggml-rs-cuda: {} CUDA device(s) but {e}: no CUDA devices\n", gpus.len()));
            return Vec::new();
        }
        Some((arch, Ok(t))) => format!("; kernels as {} for sm_{arch}", if t == nvrtc::Target::Cubin { "CUBIN" } else { "PTX (CUBIN failed)" }),
        None => String::new(),
    };
    let list: Vec<String> = gpus
        .iter()
        .map(|g| format!("{} = {} (sm_{}{}, {} MiB)", g.name.to_string_lossy(), g.description.to_string_lossy(), g.cc.0, g.cc.1, g.total_mem >> 20))
        .collect();
    let mut line = format!("ggml-rs-cuda: {} CUDA device(s)", gpus.len());
    if !list.is_empty() {
        line += &format!(": {}", list.join(", "));
    }
    line += &target;
    if !errors.is_empty() {
        line += &format!("; skipped {}", errors.join("; "));
    }
    log(line + "\n");
    gpus
}

fn open_device(i: i32, prefix: &str) -> Result<Gpu, String> {
    let dev = result::device::get(i).map_err(|e| de("cuDeviceGet", e))?;
    // SAFETY: dev is a valid device handle of this process's driver.
    unsafe {
        let ctx = result::primary_ctx::retain(dev).map_err(|e| de("cuDevicePrimaryCtxRetain", e))?;
        let attr = |a| result::device::get_attribute(dev, a).unwrap_or(0);
        use sys::CUdevice_attribute::*;
        let cc = (attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
        Ok(Gpu {
            ordinal: i,
            dev,
            ctx,
            name: CString::new(format!("{prefix}{i}")).map_err(|_| "bad GGML_RS_CUDA_NAME".to_string())?,
            description: CString::new(result::device::get_name(dev).unwrap_or_else(|_| "CUDA device".into()).replace('\0', "")).unwrap_or_default(),
            cc,
            sm_count: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            total_mem: result::device::total_mem(dev).unwrap_or(0),
            modules: Mutex::new(HashMap::new()),
        })
    }
}

/// the process's kernel image cache (memory + disk)
pub fn kernel_cache() -> &'static KernelCache {
    static CACHE: OnceLock<KernelCache> = OnceLock::new();
    CACHE.get_or_init(|| KernelCache::new(default_cache_dir()))
}

/// whether cuBLAS can be loaded (the GEMM path needs it; supports_op says no without it)
pub fn cublas_available() -> bool {
    static HAVE: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries dlopen on cudarc's candidate names of libcublas.
    *HAVE.get_or_init(|| unsafe { blas_sys::is_culib_present() })
}

impl Gpu {
    /// makes this device's context the calling thread's
    pub fn bind(&self) -> Result<(), String> {
        // SAFETY: ctx is this device's retained primary context.
        unsafe { result::ctx::set_current(self.ctx) }.map_err(|e| de("cuCtxSetCurrent", e))
    }

    pub fn arch(&self) -> u32 {
        (self.cc.0 * 10 + self.cc.1) as u32
    }

    /// (free, total) bytes
    pub fn memory(&self) -> (usize, usize) {
        if self.bind().is_err() {
            return (0, self.total_mem);
        }
        result::mem_get_info().unwrap_or((0, self.total_mem))
    }

    /// a kernel of `m`, compiling and loading the module on first use
    pub fn function(&self, m: Module, name: &'static str) -> Result<sys::CUfunction, String> {
        let mut mods = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = mods.get(&m) {
            return l.functions.get(name).copied().ok_or_else(|| format!("kernel {name} not in module {}", m.name()));
        }
        let arch = self.arch();
        let ver = nvrtc::version()?;
        let key = CacheKey::new(m, arch, ver);
        let (image, origin) = kernel_cache().get_or_compile(&key, || nvrtc::compile(m.name(), &m.source(), arch))?;
        if origin != Origin::Memory && std::env::var_os("GGML_RS_CUDA_DEBUG").is_some() {
            crate::log_line(ggml_abi::log::Level::Debug, &format!("ggml-rs-cuda: module {} for sm_{arch}: {:?} ({origin:?})\n", m.name(), image.target));
        }
        self.bind()?;
        let bytes = image.load_bytes();
        // SAFETY: a CUBIN image or NUL-terminated PTX text (Image::load_bytes); the context is current.
        let module = unsafe { result::module::load_data(bytes.as_ptr() as *const c_void) }
            .map_err(|e| de(&format!("cuModuleLoadData({}, {:?} for sm_{arch})", m.name(), image.target), e))?;
        let mut functions = HashMap::new();
        for &k in m.kernels() {
            let cname = CString::new(k).expect("kernel names have no NUL");
            // SAFETY: module was loaded above.
            let f = unsafe { result::module::get_function(module, cname) }.map_err(|e| de(&format!("cuModuleGetFunction({k})"), e))?;
            functions.insert(k, f);
        }
        let f = functions.get(name).copied().ok_or_else(|| format!("kernel {name} not in module {}", m.name()));
        mods.insert(m, LoadedModule { _module: module, functions });
        f
    }
}

/// ggml's tensor descriptor as the kernels take it (`struct TD` of kernels/common.cuh)
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Td {
    pub ne: [i64; 4],
    pub nb: [i64; 4],
}

impl Td {
    pub fn of(t: &dispatch::TDesc) -> Td {
        Td { ne: t.ne, nb: t.nb.map(|b| b as i64) }
    }
}

/// Kernel arguments: each value kept in its own heap slot (which does not move when the list
/// grows) and the array of pointers to them that cuLaunchKernel reads.
#[derive(Default)]
pub struct Args {
    store: Vec<Box<[u64]>>,
    ptrs: Vec<*mut c_void>,
}

impl Args {
    pub fn push<T: Copy>(&mut self, v: T) -> &mut Args {
        let mut slot = vec![0u64; std::mem::size_of::<T>().div_ceil(8).max(1)].into_boxed_slice();
        // SAFETY: the slot holds at least size_of::<T>() bytes, 8-aligned (>= T's alignment for
        // the scalars and Td pushed here).
        unsafe { std::ptr::write(slot.as_mut_ptr() as *mut T, v) };
        self.ptrs.push(slot.as_mut_ptr() as *mut c_void);
        self.store.push(slot);
        self
    }
    pub fn len(&self) -> usize {
        self.ptrs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ptrs.is_empty()
    }
}

/// The arguments of `rope_op` (kernels/rope.cu), in its parameter order: src, positions (src1),
/// frequency factors (src2: 0, NULL to the kernel, without one), dst, then the plan's numbers.
pub fn rope_args(a: &dispatch::TDesc, d: &dispatch::TDesc, data: &[u64; 6], plan: &Plan) -> Args {
    let mut args = Args::default();
    if let Plan::Rope { n_dims, n_offs, neox, theta_scale, freq_scale, ext_factor, attn_factor, corr } = *plan {
        args.push(data[1]).push(Td::of(a)).push(a.ty).push(data[2]).push(data[3]).push(data[0]).push(Td::of(d)).push(d.ty);
        args.push(n_dims).push(n_offs).push(neox as i32).push(theta_scale).push(freq_scale).push(ext_factor).push(attn_factor).push(corr[0]).push(corr[1]);
    }
    args
}

/// A backend's stream on one device, with its cuBLAS handle.
pub struct Stream {
    pub gpu: &'static Gpu,
    pub stream: sys::CUstream,
    cublas: Option<blas_sys::cublasHandle_t>,
}

// SAFETY: the stream and handle belong to this backend; ggml uses a backend from one
// thread at a time.
unsafe impl Send for Stream {}

impl Stream {
    pub fn new(gpu: &'static Gpu) -> Result<Stream, String> {
        gpu.bind()?;
        // a blocking stream: the synchronous copies of the buffers (legacy default stream) are
        // ordered with it
        let stream = result::stream::create(result::stream::StreamKind::Default).map_err(|e| de("cuStreamCreate", e))?;
        Ok(Stream { gpu, stream, cublas: None })
    }

    pub fn synchronize(&self) -> Result<(), String> {
        self.gpu.bind()?;
        // SAFETY: our stream.
        unsafe { result::stream::synchronize(self.stream) }.map_err(|e| de("cuStreamSynchronize", e))
    }

    fn cublas(&mut self) -> Result<blas_sys::cublasHandle_t, String> {
        if let Some(h) = self.cublas {
            return Ok(h);
        }
        if !cublas_available() {
            return Err("libcublas not found on the loader's path".into());
        }
        let h = blas::create_handle().map_err(|e| format!("cublasCreate: {e:?}"))?;
        // SAFETY: h was just created; our stream is a CUstream (cudaStream_t is the same handle).
        unsafe { blas::set_stream(h, self.stream as blas_sys::cudaStream_t) }.map_err(|e| format!("cublasSetStream: {e:?}"))?;
        self.cublas = Some(h);
        Ok(h)
    }

    pub fn launch(&self, m: Module, kernel: &'static str, shape: Shape, args: &mut Args) -> Result<(), String> {
        let f = self.gpu.function(m, kernel)?;
        // SAFETY: f takes exactly the arguments pushed (the kernel signatures of kernels/, kept
        // in step with the `run_*` functions below); each pointer points to a live slot.
        unsafe { result::launch_kernel(f, shape.grid, shape.block, 0, self.stream, &mut args.ptrs) }.map_err(|e| de(&format!("launch {kernel}"), e))
    }

    /// Computes one node of the graph (its plan decided by `dispatch::plan`).
    pub fn run(&mut self, n: &NodeDesc, data: &[u64; 6]) -> Result<(), String> {
        let plan = dispatch::plan(n)?;
        // the shape supports_op checked (launch::for_plan): each arm launches its kernel with it
        let shape = launch::for_plan(&plan, n)?;
        let d = n.dst;
        let td = Td::of(&d);
        let s = |i: usize| n.src[i].expect("the plan checked the sources");
        match plan {
            Plan::Nop => Ok(()),
            Plan::Binary { op } => {
                let (a, b) = (s(0), s(1));
                let bin: i32 = match op {
                    ggml_abi::sys::op::ADD => 0,
                    ggml_abi::sys::op::SUB => 1,
                    ggml_abi::sys::op::MUL => 2,
                    _ => 3,
                };
                let mut args = Args::default();
                args.push(data[1]).push(Td::of(&a)).push(a.ty).push(data[2]).push(Td::of(&b)).push(b.ty).push(data[0]).push(td).push(d.ty).push(bin);
                self.launch(Module::Elementwise, "binary_op", shape, &mut args)
            }
            Plan::Scale { s: sc, b } => {
                let a = s(0);
                let mut args = Args::default();
                args.push(data[1]).push(Td::of(&a)).push(data[0]).push(td).push(sc).push(b);
                self.launch(Module::Elementwise, "scale_f32", shape, &mut args)
            }
            Plan::Unary { op } => {
                let a = s(0);
                let mut args = Args::default();
                args.push(data[1]).push(Td::of(&a)).push(a.ty).push(data[0]).push(td).push(d.ty).push(op);
                self.launch(Module::Elementwise, "unary_op", shape, &mut args)
            }
            Plan::Glu { op, swapped } => {
                let a = s(0);
                let tb = n.src[1].map(|b| Td::of(&b)).unwrap_or(Td::of(&a));
                let mut args = Args::default();
                args.push(data[1]).push(Td::of(&a)).push(data[2]).push(tb).push(a.ty).push(data[0]).push(td).push(d.ty).push(op).push(swapped as i32);
                self.launch(Module::Elementwise, "glu_op", shape, &mut args)
            }
            Plan::Cpy => {
                let a = s(0);
                let mut args = Args::default();
                args.push(data[1]).push(Td::of(&a)).push(a.ty).push(data[0]).push(td).push(d.ty);
                self.launch(Module::Elementwise, "cpy_f", shape, &mut args)
            }
            Plan::GetRows => {
                let (a, i) = (s(0), s(1));
                let mut args = Args::default();
                args.push(data[1]).push(Td::of(&a)).push(a.ty).push(data[2]).push(Td::of(&i)).push(i.ty).push(data[0]).push(td).push(d.ty);
                self.launch(Module::Rows, "get_rows", shape, &mut args)
            }
            Plan::SetRows { quant } => {
                let (a, i) = (s(0), s(1));
                let mut args = Args::default();
                args.push(data[1]).push(Td::of(&a)).push(data[2]).push(Td::of(&i)).push(i.ty).push(data[0]).push(td);
                if quant {
                    self.launch(Module::Rows, "set_rows_q8_0", shape, &mut args)
                } else {
                    args.push(d.ty);
                    self.launch(Module::Rows, "set_rows_f", shape, &mut args)
                }
            }
            Plan::RmsNorm { eps } | Plan::Norm { eps } => {
                let a = s(0);
                let k = if matches!(plan, Plan::RmsNorm { .. }) { "rms_norm_f32" } else { "norm_f32" };
                let mut args = Args::default();
                args.push(data[1]).push(Td::of(&a)).push(data[0]).push(td).push(eps);
                self.launch(Module::Norm, k, shape, &mut args)
            }
            Plan::Rope { .. } => self.launch(Module::Rope, "rope_op", shape, &mut rope_args(&s(0), &d, data, &plan)),
            Plan::SoftMax { scale, max_bias } => {
                let a = s(0);
                let tm = n.src[1].map(|m| (Td::of(&m), m.ty)).unwrap_or((Td::of(&a), T_F32));
                let mut args = Args::default();
                args.push(data[1]).push(Td::of(&a)).push(data[2]).push(tm.0).push(tm.1).push(data[3]).push(data[0]).push(td).push(scale).push(max_bias);
                self.launch(Module::Softmax, "soft_max_f32", shape, &mut args)
            }
            Plan::MulMatVec => {
                let (a, b) = (s(0), s(1));
                let mut args = Args::default();
                args.push(data[1]).push(Td::of(&a)).push(a.ty).push(data[2]).push(Td::of(&b)).push(data[0]).push(td);
                self.launch(Module::Matmul, "mul_mat_vec", shape, &mut args)
            }
            Plan::MulMatGemm { gemm_ty, dequant } => self.gemm(n, data, gemm_ty, dequant),
            Plan::FlashAttn { scale, max_bias, softcap, n_split } => {
                let (q, k, v) = (s(0), s(1), s(2));
                let tm = n.src[3].map(|m| Td::of(&m)).unwrap_or(Td::of(&q));
                // split: the partial results go past dst's bytes (the buffer type reserved them)
                let partial = if n_split > 1 { data[0] + dispatch::fa_partial(n, n_split).0 as u64 } else { 0 };
                let mut args = Args::default();
                args.push(data[1]).push(Td::of(&q)).push(data[2]).push(Td::of(&k)).push(k.ty).push(data[3]).push(Td::of(&v)).push(v.ty);
                args.push(data[4]).push(tm).push(data[5]).push(data[0]).push(td).push(scale).push(max_bias).push(softcap).push(n_split).push(partial);
                self.launch(Module::FlashAttn, "flash_attn_ext", shape, &mut args)?;
                if n_split <= 1 {
                    return Ok(());
                }
                let mut args = Args::default();
                args.push(partial).push(data[5]).push(data[0]).push(td).push(n_split);
                self.launch(Module::FlashAttn, "flash_attn_reduce", launch::flash_attn(q.ne[1] as u64, q.ne[2] as u64, q.ne[3] as u64)?, &mut args)
            }
        }
    }

    /// MUL_MAT through cuBLAS: dst (M x N per plane, column-major = ggml's row-major transposed)
    /// = src0^T (K x M) x src1 (K x N). src1 is converted to the GEMM type, a quantized src0
    /// dequantized to f16, into the scratch past dst's bytes in dst's allocation
    /// (`dispatch::gemm_scratch`; the buffer type's get_alloc_size reserved it).
    fn gemm(&mut self, n: &NodeDesc, data: &[u64; 6], gemm_ty: i32, dequant: bool) -> Result<(), String> {
        let (a, b, d) = (n.src[0].unwrap(), n.src[1].unwrap(), n.dst);
        let (k, m, cols) = (a.ne[0], a.ne[1], b.ne[1]);
        let esz = type_size(gemm_ty);
        let sc = dispatch::gemm_scratch(n, gemm_ty, dequant);
        // src0 as GEMM operand: (pointer, lda in elements, plane strides in bytes)
        let (a_ptr, lda, a_nb2, a_nb3) = if dequant {
            let p = data[0] + sc.a_off as u64;
            let mut args = Args::default();
            args.push(data[1]).push(Td::of(&a)).push(a.ty).push(p);
            self.launch(Module::Elementwise, "dequant_to_f16", launch::elementwise(a.nelements() as u64), &mut args)?;
            (p, k, (k * m) as usize * 2, (k * m * a.ne[2]) as usize * 2)
        } else {
            (data[1], (a.nb[1] / esz) as i64, a.nb[2], a.nb[3])
        };
        let b_ptr = data[0] + sc.b_off as u64;
        let mut args = Args::default();
        args.push(data[2]).push(Td::of(&b)).push(b.ty).push(b_ptr).push(gemm_ty);
        self.launch(Module::Elementwise, "to_contiguous", launch::elementwise(b.nelements() as u64), &mut args)?;
        let h = self.cublas()?;
        let dt = match gemm_ty {
            T_F32 => blas_sys::cudaDataType::CUDA_R_32F,
            T_F16 => blas_sys::cudaDataType::CUDA_R_16F,
            _ => blas_sys::cudaDataType::CUDA_R_16BF,
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
        for i13 in 0..b.ne[3] {
            for i12 in 0..b.ne[2] {
                let ap = a_ptr + (i12 / r2) as u64 * a_nb2 as u64 + (i13 / r3) as u64 * a_nb3 as u64;
                let bp = b_ptr + ((i12 + i13 * b.ne[2]) * k * cols) as u64 * esz as u64;
                let cp = data[0] + i12 as u64 * d.nb[2] as u64 + i13 as u64 * d.nb[3] as u64;
                // SAFETY: the pointers are device addresses of the operands (sizes checked by the
                // plan: shapes agree, rows packed); alpha and beta are host floats (host pointer
                // mode, cuBLAS's default).
                unsafe {
                    blas::gemm_ex(
                        h,
                        blas_sys::cublasOperation_t::CUBLAS_OP_T,
                        blas_sys::cublasOperation_t::CUBLAS_OP_N,
                        m as i32,
                        cols as i32,
                        k as i32,
                        &alpha as *const f32 as *const c_void,
                        ap as *const c_void,
                        dt,
                        lda as i32,
                        bp as *const c_void,
                        dt,
                        k as i32,
                        &beta as *const f32 as *const c_void,
                        cp as *mut c_void,
                        blas_sys::cudaDataType::CUDA_R_32F,
                        (d.nb[1] / 4) as i32,
                        blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                        blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                    )
                }
                .map_err(|e| format!("cublasGemmEx {m}x{cols}x{k}: {e:?}"))?;
            }
        }
        Ok(())
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.gpu.bind().is_err() {
            return;
        }
        // SAFETY: everything here was created by this stream and is released once.
        unsafe {
            let _ = result::stream::synchronize(self.stream);
            if let Some(h) = self.cublas.take() {
                let _ = blas::destroy_handle(h);
            }
            let _ = result::stream::destroy(self.stream);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::TDesc;

    #[test]
    fn kernel_arguments_keep_their_values_and_layout() {
        let mut a = Args::default();
        let td = Td { ne: [1, 2, 3, 4], nb: [4, 8, 16, 48] };
        a.push(7u64).push(td).push(-3i32).push(0.5f32);
        assert_eq!(a.len(), 4);
        // SAFETY: each pointer points to the slot of the value pushed, in order.
        unsafe {
            assert_eq!(*(a.ptrs[0] as *const u64), 7);
            assert_eq!(*(a.ptrs[1] as *const Td), td);
            assert_eq!(*(a.ptrs[2] as *const i32), -3);
            assert_eq!(*(a.ptrs[3] as *const f32), 0.5);
        }
        // the kernels' struct TD: eight 64-bit words
        assert_eq!(std::mem::size_of::<Td>(), 64);
    }

    #[test]
    fn rope_arguments_carry_the_frequency_factors_and_the_offset() {
        let slot = |a: &Args, i: usize| -> u64 {
            // SAFETY: every slot holds at least 8 bytes (zero-filled past the value).
            unsafe { *(a.ptrs[i] as *const u64) }
        };
        let data = [0xd0, 0xa0, 0xb0, 0xf0, 0, 0];
        let mut n = crate::dispatch::tests::rope_node(crate::dispatch::ROPE_NEOX, 32, Some(TDesc::contiguous(T_F32, [16, 1, 1, 1])));
        n.params[15] = 8;
        let plan = dispatch::plan(&n).unwrap();
        let a = rope_args(&n.src[0].unwrap(), &n.dst, &data, &plan);
        // as many as rope_op's parameters in kernels/rope.cu
        let src = Module::Rope.source();
        let sig = &src[src.find("void rope_op(").expect("rope_op in rope.cu")..];
        let params = sig[..sig.find(')').unwrap()].split(',').count();
        assert_eq!(a.len(), params);
        assert!(sig[..sig.find(')').unwrap()].contains("int n_offs"));
        assert_eq!([slot(&a, 0), slot(&a, 3), slot(&a, 4), slot(&a, 5)], [0xa0, 0xb0, 0xf0, 0xd0], "src, pos, freq_factors, dst");
        // SAFETY: the slots hold the Td / i32 / f32 values pushed there.
        unsafe {
            assert_eq!(*(a.ptrs[1] as *const Td), Td::of(&n.src[0].unwrap()));
            assert_eq!(*(a.ptrs[6] as *const Td), Td::of(&n.dst));
            assert_eq!(*(a.ptrs[8] as *const i32), 32, "n_dims");
            assert_eq!(*(a.ptrs[9] as *const i32), 8, "n_offs");
            assert_eq!(*(a.ptrs[10] as *const i32), 1, "neox");
            assert_eq!(*(a.ptrs[11] as *const f32), 10000f32.powf(-2.0 / 32.0), "theta_scale");
            assert_eq!(*(a.ptrs[14] as *const f32), 1.0, "attn_factor");
        }
        // no frequency factors: a NULL pointer
        let n = crate::dispatch::tests::rope_node(0, 32, None);
        let a = rope_args(&n.src[0].unwrap(), &n.dst, &[0xd0, 0xa0, 0xb0, 0, 0, 0], &dispatch::plan(&n).unwrap());
        assert_eq!(slot(&a, 4), 0);
        // SAFETY: as above.
        unsafe { assert_eq!(*(a.ptrs[9] as *const i32), 0, "n_offs") };
    }

    #[test]
    fn without_a_driver_probe_finds_no_device_and_says_so_once() {
        // SAFETY: dlopen attempts only.
        if unsafe { sys::is_culib_present() } && std::env::var_os("GGML_RS_CUDA_DISABLE").is_none() {
            eprintln!("SKIP without_a_driver_probe_finds_no_device_and_says_so_once: a libcuda is present here (the GPU tests cover this machine)");
            return;
        }
        let mut lines = Vec::new();
        let gpus = probe(&mut |l| lines.push(l));
        assert!(gpus.is_empty());
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("no CUDA devices"), "{}", lines[0]);
    }
}
