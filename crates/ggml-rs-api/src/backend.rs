//! Backends, buffer types and buffers.

use std::ffi::CString;
use std::fmt;
use std::marker::PhantomData;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use crate::owners::{self, OwnerId};
use crate::sys::{self, Api, RawBackend, RawBuffer, RawBuft};
use crate::{Context, Element, Error, Result, Tensor};

/// A backend (`ggml_backend_t`): the CPU, a device of the registry, or an rpc-server. Freed on
/// drop; its buffer types, buffers, and the schedulers using it borrow it.
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// use ggml_rs_api::Backend;
/// let cpu = Backend::cpu_with_threads(2)?;
/// assert!(cpu.is_cpu());
/// assert_eq!(cpu.name(), "CPU");
/// // a name the registry does not know is an error, not a NULL
/// assert!(Backend::by_name("NO-SUCH-DEVICE", None).is_err());
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
pub struct Backend {
    pub(crate) raw: RawBackend,
    /// never reused (a freed backend's address may be)
    pub(crate) id: u64,
    pub(crate) api: &'static Api,
}

impl Backend {
    fn made(api: &'static Api, raw: Option<RawBackend>, call: &'static str, fallback: &str) -> Result<Backend> {
        raw.map(|raw| Backend { raw, id: owners::unique_id(), api }).ok_or_else(|| crate::failed(call, fallback))
    }

    /// ggml's CPU backend (libggml-cpu), with ggml's default number of threads.
    pub fn cpu() -> Result<Backend> {
        let api = sys::api()?;
        Backend::made(api, crate::logged(|| api.cpu_init()), "ggml_backend_cpu_init", "no CPU backend")
    }

    /// The CPU backend with `n_threads` threads.
    pub fn cpu_with_threads(n_threads: usize) -> Result<Backend> {
        if n_threads == 0 || n_threads > 512 {
            return Err(Error::Invalid(format!("Backend::cpu_with_threads({n_threads}): 1 to 512 threads")));
        }
        let b = Backend::cpu()?;
        b.api.cpu_set_threads(b.raw, n_threads as i32);
        Ok(b)
    }

    /// A backend on the rpc-server at `endpoint` (`host:port`), device 0, through libggml-rpc.
    /// ggml-rpc aborts the process when it cannot connect, so the endpoint is tried first: one
    /// that does not accept a connection within 5 s is an error.
    pub fn rpc(endpoint: &str) -> Result<Backend> {
        let api = sys::api()?;
        if !api.has_rpc() {
            return Err(Error::Unsupported("Backend::rpc: libggml-rpc is not loaded (not in GGML_RS_LIB_DIR)".into()));
        }
        let addr = endpoint
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| Error::Invalid(format!("Backend::rpc: '{endpoint}' is not a host:port")))?;
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| Error::Invalid(format!("Backend::rpc: cannot connect to {endpoint}: {e}")))?;
        let c = CString::new(endpoint).map_err(|_| Error::Invalid("Backend::rpc: endpoint contains NUL".into()))?;
        Backend::made(api, crate::logged(|| api.rpc_init(&c, 0)), "ggml_backend_rpc_init", "no backend")
    }

    /// A backend of the registry (libggml) by device name (`"CPU"`, `"RPC0"`, or a backend
    /// module's, once loaded with [`Backend::load_module`]), `params` passed to its init.
    pub fn by_name(name: &str, params: Option<&str>) -> Result<Backend> {
        let api = sys::api()?;
        if !api.has_registry() {
            return Err(Error::Unsupported("Backend::by_name: libggml (the registry) is not loaded".into()));
        }
        let n = CString::new(name).map_err(|_| Error::Invalid("Backend::by_name: name contains NUL".into()))?;
        let p = params.map(CString::new).transpose().map_err(|_| Error::Invalid("Backend::by_name: params contain NUL".into()))?;
        Backend::made(api, crate::logged(|| api.init_by_name(&n, p.as_deref())), "ggml_backend_init_by_name", &format!("no device named '{name}'"))
    }

    /// Registers the backends of a backend module (`ggml_backend_load`), after which their
    /// devices are found by [`Backend::by_name`].
    pub fn load_module(path: &Path) -> Result<()> {
        let api = sys::api()?;
        if !api.has_registry() {
            return Err(Error::Unsupported("Backend::load_module: libggml (the registry) is not loaded".into()));
        }
        let p = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| Error::Invalid("Backend::load_module: path contains NUL".into()))?;
        if !crate::logged(|| api.load_module(&p)) {
            return Err(crate::failed("ggml_backend_load", &format!("cannot load {}", path.display())));
        }
        Ok(())
    }

    /// The Rust CPU backend of ggml-rs (`crates/ggml-rs-cpu`, device `RSCPU`): the hook for it.
    /// Until it is built as a backend module, this is an error saying so; once it is, load its
    /// module with [`Backend::load_module`] (or `GGML_BACKEND_PATH`) first.
    pub fn rust_cpu() -> Result<Backend> {
        Backend::by_name("RSCPU", None).map_err(|e| {
            Error::Unsupported(format!("Backend::rust_cpu: no RSCPU device is registered (the Rust CPU backend is not a loadable backend module yet): {e}"))
        })
    }

    pub fn name(&self) -> String {
        self.api.backend_name(self.raw)
    }

    /// Whether this is ggml's CPU backend.
    pub fn is_cpu(&self) -> bool {
        self.api.backend_is_cpu(self.raw)
    }

    /// Whether its device is a CPU (a scheduler's last backend must be).
    pub fn is_cpu_device(&self) -> bool {
        self.api.backend_is_cpu_device(self.raw)
    }

    /// The buffer type the backend allocates in by default.
    pub fn default_buffer_type(&self) -> BufferType<'_> {
        // every ggml backend has one (ggml_backend_get_default_buffer_type asks its device);
        // NULL would be a broken backend module
        let raw = self.api.default_buft(self.raw).expect("a backend without a default buffer type");
        BufferType { raw, api: self.api, _backend: PhantomData }
    }

    /// Whether the backend can compute the op of `t` (with its sources' types and buffers).
    pub fn supports(&self, t: Tensor<'_>) -> bool {
        self.api.supports_op(self.raw, t.raw)
    }

    /// Whether the backend can read and write memory of `buft`.
    pub fn supports_buffer_type(&self, buft: &BufferType<'_>) -> bool {
        self.api.supports_buft(self.raw, buft.raw)
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.api.backend_free(self.raw);
    }
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Backend({})", self.name())
    }
}

/// A buffer type (`ggml_backend_buffer_type_t`): where a backend's memory comes from. Borrows
/// its backend (`'b`); the CPU's is `'static`.
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// use ggml_rs_api::{Backend, BufferType};
/// let cpu = Backend::cpu()?;
/// assert_eq!(cpu.default_buffer_type().name(), "CPU");
/// assert!(cpu.supports_buffer_type(&BufferType::cpu()?));
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct BufferType<'b> {
    pub(crate) raw: RawBuft,
    pub(crate) api: &'static Api,
    _backend: PhantomData<&'b Backend>,
}

impl<'b> BufferType<'b> {
    /// Host memory (ggml-cpu's buffer type, which lives as long as the process).
    pub fn cpu() -> Result<BufferType<'static>> {
        let api = sys::api()?;
        let raw = api.cpu_buft().ok_or_else(|| crate::failed("ggml_backend_cpu_buffer_type", "returned NULL"))?;
        Ok(BufferType { raw, api, _backend: PhantomData })
    }

    pub fn name(&self) -> String {
        self.api.buft_name(self.raw)
    }

    /// Allocates every tensor of `ctx` that has no memory yet in one buffer of this type
    /// (`ggml_backend_alloc_ctx_tensors_from_buft`): weights, inputs kept across graphs. The
    /// tensors are read and written through the returned [`Buffer`], and by the graphs that
    /// use them while it lives.
    pub fn alloc_ctx_tensors(&self, ctx: &Context) -> Result<Buffer<'b>> {
        let api = self.api;
        let tensors = api.ctx_tensors(ctx.raw());
        let empty: Vec<bool> = tensors.iter().map(|&t| api.info(t).data == 0).collect();
        if !empty.iter().any(|&e| e) {
            return Err(Error::Invalid("alloc_ctx_tensors: every tensor of the context has memory already".into()));
        }
        let raw = crate::logged(|| api.alloc_ctx_tensors(ctx.raw(), self.raw))
            .ok_or_else(|| crate::failed("ggml_backend_alloc_ctx_tensors_from_buft", &format!("cannot allocate a {} buffer", self.name())))?;
        let owner = owners::new_owner(true);
        owners::record(api, owner, &tensors, &empty);
        Ok(Buffer { raw, owner, api, _backend: PhantomData })
    }
}

impl fmt::Debug for BufferType<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BufferType({})", self.name())
    }
}

/// A backend buffer holding tensors of a context (from [`BufferType::alloc_ctx_tensors`]),
/// freed once, on drop. Its tensors are then without memory: graphs that use them must be
/// allocated again (an allocation made before says so instead of reading freed memory).
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// use ggml_rs_api::{Backend, Context};
/// let cpu = Backend::cpu()?;
/// let ctx = Context::new()?;
/// let w = ctx.new_f32(&[2, 2])?.named("w");
/// let buffer = cpu.default_buffer_type().alloc_ctx_tensors(&ctx)?;
/// buffer.set(w, &[1.0f32, 2.0, 3.0, 4.0])?;
/// assert_eq!(buffer.to_vec::<f32>(w)?, [1.0, 2.0, 3.0, 4.0]);
/// // sizes and element types are checked
/// assert!(buffer.set(w, &[1.0f32; 3]).is_err());
/// assert!(buffer.set(w, &[1i32; 4]).is_err());
/// assert!(buffer.size() >= 16);
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
pub struct Buffer<'b> {
    raw: RawBuffer,
    owner: OwnerId,
    api: &'static Api,
    _backend: PhantomData<&'b Backend>,
}

impl Buffer<'_> {
    fn check(&self, t: Tensor<'_>, what: &str) -> Result<()> {
        if !owners::owned_by(t.raw, self.owner) {
            return Err(Error::Invalid(format!("{what}: tensor '{}' is not in this buffer", t.name())));
        }
        Ok(())
    }

    /// Copies `data` into `t` (a tensor of this buffer; `T` its type, `data` its length).
    pub fn set<T: Element>(&self, t: Tensor<'_>, data: &[T]) -> Result<()> {
        self.check(t, "Buffer::set")?;
        t.copy_in(data)
    }

    /// Copies `t` into `out`.
    pub fn get<T: Element>(&self, t: Tensor<'_>, out: &mut [T]) -> Result<()> {
        self.check(t, "Buffer::get")?;
        t.copy_out(out)
    }

    /// `t`'s elements.
    pub fn to_vec<T: Element>(&self, t: Tensor<'_>) -> Result<Vec<T>> {
        let mut v = vec![T::default(); usize::try_from(t.nelements()).unwrap_or(0)];
        self.get(t, &mut v)?;
        Ok(v)
    }

    /// Copies raw bytes (any type, e.g. quantized blocks) into `t`.
    pub fn set_bytes(&self, t: Tensor<'_>, data: &[u8]) -> Result<()> {
        self.check(t, "Buffer::set_bytes")?;
        t.copy_in_bytes(data)
    }

    /// The buffer's size in bytes.
    pub fn size(&self) -> usize {
        self.api.buffer_size(self.raw)
    }
}

impl Drop for Buffer<'_> {
    fn drop(&mut self) {
        owners::drop_owner(self.owner);
        self.api.buffer_free(self.raw);
    }
}

impl fmt::Debug for Buffer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Buffer({} bytes)", self.size())
    }
}
