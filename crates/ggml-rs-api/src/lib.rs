//! A safe Rust API over ggml-rs and the ggml core it sits on: contexts and tensors, graphs,
//! backends, buffer types and buffers, the graph allocator and the backend scheduler, plus
//! ggml-rs's plan statistics, counters, split-plan dump and memory plan report. The ops are
//! methods of [`Context`] (arithmetic here, the rest in `ops.rs`: [`Unary`], [`Glu`],
//! soft_max, norms, rows, [`Rope`], layout).
//!
//! The C contract's mistakes are compile errors here:
//! - a [`Tensor`] cannot outlive its [`Context`] (`Tensor<'ctx>`);
//! - a [`Graph`] cannot be computed before it is allocated: only the [`AllocatedGraph`] that
//!   [`GraphAllocator::alloc`] returns, and the [`SchedAllocation`] that [`Scheduler::alloc`]
//!   returns, have `compute`;
//! - a scheduler's allocation borrows the scheduler and ends at reset (its `reset(self)`, or
//!   its drop): nothing can allocate, reset or reserve the scheduler while it lives;
//! - a [`Buffer`] and a [`BufferType`] cannot outlive the [`Backend`] they come from;
//! - every C object is freed exactly once, by `Drop`.
//!
//! What lifetimes cannot express is checked at run time and comes back as an [`Error`] (with
//! the library's own message where it logged one): shapes of operations, a full context,
//! element types and sizes of the slices copied in and out, tensors whose memory is gone
//! (their buffer or allocator dropped, or placed by another allocator since), backends that
//! are not the scheduler's, operations no backend supports.
//!
//! The libraries are opened at run time from `GGML_RS_LIB_DIR` (see [`load_from`] and the
//! README's "Rust API" section).
//!
//! ```
//! use ggml_rs_api::{Backend, Context, GraphAllocator};
//! # fn main() -> Result<(), ggml_rs_api::Error> {
//! # if ggml_rs_api::doctest_skip() { return Ok(()); }
//! let cpu = Backend::cpu()?;
//! let ctx = Context::new()?;
//! let x = ctx.new_f32(&[3])?.named("x").input();
//! let y = ctx.scale(ctx.sqr(x)?, 0.5)?.output();
//! let graph = ctx.graph(&[y])?;
//!
//! let buft = cpu.default_buffer_type();
//! let mut galloc = GraphAllocator::new(&buft)?;
//! let allocated = galloc.alloc(&graph)?;
//! allocated.set(x, &[1.0f32, 2.0, 3.0])?;
//! allocated.compute(&cpu)?;
//! assert_eq!(allocated.to_vec::<f32>(y)?, [0.5, 2.0, 4.5]);
//! # Ok(())
//! # }
//! ```
//!
//! The lifetime rules, as code that must not compile. A tensor outliving its context:
//!
//! ```compile_fail,E0597
//! # use ggml_rs_api::Context;
//! # fn main() -> Result<(), ggml_rs_api::Error> {
//! let t = {
//!     let ctx = Context::new()?;
//!     ctx.new_f32(&[4])?
//! };
//! println!("{}", t.name());
//! # Ok(())
//! # }
//! ```
//!
//! A graph computed before it is allocated (only an allocation has `compute`):
//!
//! ```compile_fail,E0599
//! # use ggml_rs_api::{Backend, Context};
//! # fn main() -> Result<(), ggml_rs_api::Error> {
//! let cpu = Backend::cpu()?;
//! let ctx = Context::new()?;
//! let graph = ctx.graph(&[ctx.new_f32(&[4])?])?;
//! graph.compute(&cpu)?;
//! # Ok(())
//! # }
//! ```
//!
//! An allocation used after its scheduler was reset:
//!
//! ```compile_fail,E0499
//! # use ggml_rs_api::{Backend, Context, Scheduler};
//! # fn main() -> Result<(), ggml_rs_api::Error> {
//! let cpu = Backend::cpu()?;
//! let ctx = Context::new()?;
//! let graph = ctx.graph(&[ctx.new_f32(&[4])?])?;
//! let mut sched = Scheduler::new(&[&cpu])?;
//! let allocation = sched.alloc(&graph)?;
//! sched.reset();
//! allocation.compute()?;
//! # Ok(())
//! # }
//! ```
//!
//! ... or after the allocation's own `reset`:
//!
//! ```compile_fail,E0382
//! # use ggml_rs_api::{Backend, Context, Scheduler};
//! # fn main() -> Result<(), ggml_rs_api::Error> {
//! let cpu = Backend::cpu()?;
//! let ctx = Context::new()?;
//! let graph = ctx.graph(&[ctx.new_f32(&[4])?])?;
//! let mut sched = Scheduler::new(&[&cpu])?;
//! let allocation = sched.alloc(&graph)?;
//! allocation.reset();
//! allocation.compute()?;
//! # Ok(())
//! # }
//! ```
//!
//! A second allocation of a graph allocator while the first is in use:
//!
//! ```compile_fail,E0499
//! # use ggml_rs_api::{Backend, Context, GraphAllocator};
//! # fn main() -> Result<(), ggml_rs_api::Error> {
//! let cpu = Backend::cpu()?;
//! let ctx = Context::new()?;
//! let graph = ctx.graph(&[ctx.new_f32(&[4])?])?;
//! let buft = cpu.default_buffer_type();
//! let mut galloc = GraphAllocator::new(&buft)?;
//! let first = galloc.alloc(&graph)?;
//! let second = galloc.alloc(&graph)?;
//! first.compute(&cpu)?;
//! # Ok(())
//! # }
//! ```
//!
//! A buffer outliving the backend whose buffer type made it:
//!
//! ```compile_fail,E0597
//! # use ggml_rs_api::{Backend, Context};
//! # fn main() -> Result<(), ggml_rs_api::Error> {
//! let ctx = Context::new()?;
//! let w = ctx.new_f32(&[4])?;
//! let buffer = {
//!     let cpu = Backend::cpu()?;
//!     let buft = cpu.default_buffer_type();
//!     buft.alloc_ctx_tensors(&ctx)?
//! };
//! buffer.set(w, &[1.0f32; 4])?;
//! # Ok(())
//! # }
//! ```

#![deny(unsafe_code)]

mod alloc;
mod backend;
mod context;
mod ops;
mod owners;
mod sched;
mod sys;

use std::fmt;
use std::path::PathBuf;

pub use alloc::{AllocatedGraph, GraphAllocator, PlanStats, ReportFormat};
pub use backend::{Backend, Buffer, BufferType};
pub use context::{Context, Graph, Tensor, Type};
pub use ops::{Glu, Rope, RopeMode, Unary};
pub use sched::{SchedAllocation, SchedCounters, Scheduler, SchedulerOptions};

/// What went wrong. Failures of the library carry its own last error line (ggml's log is
/// captured per thread while the call runs) and every warning and error it logged.
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return; }
/// use ggml_rs_api::{Context, Error};
/// let ctx = Context::new().unwrap();
/// let (a, b) = (ctx.new_f32(&[4]).unwrap().named("a"), ctx.new_f32(&[5]).unwrap().named("b"));
/// match ctx.add(a, b) {
///     // ggml would abort (GGML_ASSERT(ggml_can_repeat(b, a))); here it is an error naming both
///     Err(Error::Invalid(m)) => assert!(m.contains("'b'") && m.contains("'a'"), "{m}"),
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The libraries could not be opened (or are not the ggml this crate was made for).
    Load(String),
    /// An argument the library would abort on, or that does not fit (shape, type, size).
    Invalid(String),
    /// A tensor has no memory: its graph is not allocated, or the memory is gone.
    NotAllocated(String),
    /// A function the loaded libraries do not have (an extension over upstream's libraries,
    /// the RPC backend or the registry not loaded).
    Unsupported(String),
    /// The library refused: `call` is the C function, `message` its last logged error.
    Library { call: &'static str, message: String, log: Vec<String> },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Load(m) => write!(f, "ggml-rs-api: cannot load the ggml libraries: {m}"),
            Error::Invalid(m) | Error::NotAllocated(m) | Error::Unsupported(m) => f.write_str(m),
            Error::Library { call, message, .. } => write!(f, "{call}: {message}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error of a failed call: the library's last logged error on this thread, else `fallback`.
pub(crate) fn failed(call: &'static str, fallback: &str) -> Error {
    let (last, log) = sys::last_log();
    Error::Library { call, message: last.unwrap_or_else(|| fallback.to_string()), log }
}

/// Runs `f` with this thread's captured log cleared first.
pub(crate) fn logged<R>(f: impl FnOnce() -> R) -> R {
    sys::clear_log();
    f()
}

/// Opens the libraries from the environment, once per process: `GGML_RS_LIB_DIR` is the folder
/// of `libggml-base.so`, `libggml-cpu.so` (and `libggml.so`, `libggml-rpc.so` when there);
/// unset, the dynamic linker's search path. `GGML_RS_LIBRARY` is the `libggml_rs.so` to use
/// (default: one already in the process, else the one in that folder, else the one
/// libggml-base needs). Every constructor calls this; call it to see the error early.
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return; }
/// let version = ggml_rs_api::load().unwrap();
/// assert!(version.unwrap().starts_with("ggml-rs"));
/// ```
///
/// Returns ggml-rs's version string, or `None` over upstream's own libraries (which work,
/// without the extensions).
pub fn load() -> Result<Option<String>> {
    sys::api().map(|a| a.version())
}

/// As [`load`], from the given folder and library instead of the environment. The first call
/// in a process decides; later ones return what it loaded.
pub fn load_from(lib_dir: Option<PathBuf>, library: Option<PathBuf>) -> Result<Option<String>> {
    sys::api_from(lib_dir, library).map(|a| a.version())
}

/// The paths of the libraries that were opened.
pub fn loaded_paths() -> Result<Vec<String>> {
    sys::api().map(|a| a.paths.clone())
}

/// For doc-tests and tests: true (skip) when the libraries cannot be loaded, printing a
/// `SKIPPED <test>` line with the reason on stderr (every call, past the harness's capture);
/// with `GGML_RS_API_REQUIRED=1` a missing library is a panic instead.
#[doc(hidden)]
pub fn doctest_skip() -> bool {
    match load() {
        Ok(_) => false,
        Err(e) => {
            if std::env::var("GGML_RS_API_REQUIRED").is_ok_and(|v| v == "1") {
                panic!("GGML_RS_API_REQUIRED=1 but {e}");
            }
            skipped(&format!("needs the ggml libraries; set GGML_RS_API_REQUIRED=1 to fail instead: {e}"));
            true
        }
    }
}

/// For tests: prints `SKIPPED <test>: <why>` straight to stderr, past the test harness's
/// capture (which hides `eprintln!` of a passing test), so a skipped test never reads as a
/// plain "ok". The harness names each test's thread after the test.
#[doc(hidden)]
pub fn skipped(why: &str) {
    use std::io::Write;
    let test = std::thread::current().name().filter(|n| *n != "main").map_or(String::new(), |n| format!(" {n}"));
    let _ = std::io::stderr().write_all(format!("SKIPPED{test}: {why}\n").as_bytes());
}

/// An element type of tensors: `f32`, `half::f16`, `half::bf16`, `i8`, `i16`, `i32`. Copies in
/// and out are checked against the tensor's type.
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// use ggml_rs_api::{Backend, Context, Element, Type};
/// use half::f16;
/// assert_eq!(<f16 as Element>::TYPE, Type::F16);
/// let cpu = Backend::cpu()?;
/// let ctx = Context::new()?;
/// let h = ctx.new_tensor(Type::F16, &[2])?;
/// let buffer = cpu.default_buffer_type().alloc_ctx_tensors(&ctx)?;
/// buffer.set(h, &[f16::from_f32(1.5), f16::from_f32(-2.0)])?;
/// assert_eq!(buffer.to_vec::<f16>(h)?[1].to_f32(), -2.0);
/// assert!(buffer.to_vec::<f32>(h).is_err()); // typed by the tensor
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
pub trait Element: Copy + Default + private::Sealed + 'static {
    /// The ggml type of this element.
    const TYPE: Type;
}

mod private {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $c:ident),* $(,)?) => {
        $(
            impl private::Sealed for $t {}
            impl Element for $t {
                const TYPE: Type = Type::$c;
            }
        )*
    };
}
element!(f32 => F32, half::f16 => F16, half::bf16 => BF16, i8 => I8, i16 => I16, i32 => I32);
