//! The graph allocator (`ggml_gallocr`) and the graph it allocated.

use std::ffi::CString;
use std::fmt;
use std::marker::PhantomData;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::owners::{self, OwnerId};
use crate::sys::{Api, RawBuft, RawGallocr};
use crate::{Backend, BufferType, Element, Error, Graph, Result, Tensor};

/// ggml-rs's statistics of the allocator's last plan (`ggml_rs_gallocr_plan_stats`).
/// See [`GraphAllocator`]'s example.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanStats {
    /// bytes the plan needs
    pub planned: usize,
    /// the most bytes live at once: no plan can need less
    pub lower_bound: usize,
}

/// A graph allocator (`ggml_gallocr`) over one buffer type: places a graph's tensors in its
/// compute buffer, reusing memory of tensors no longer needed. Freed on drop.
///
/// [`alloc`](GraphAllocator::alloc) borrows it mutably for as long as the returned
/// [`AllocatedGraph`] lives: the next allocation, which may move every tensor, cannot happen
/// while the previous one is still being read.
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// use ggml_rs_api::{Backend, Context, GraphAllocator};
/// let cpu = Backend::cpu()?;
/// let ctx = Context::new()?;
/// let a = ctx.new_f32(&[1024])?.input();
/// let b = ctx.sqr(ctx.sqr(ctx.sqr(a)?)?)?.output();
/// let graph = ctx.graph(&[b])?;
/// let buft = cpu.default_buffer_type();
/// let mut galloc = GraphAllocator::new(&buft)?;
/// galloc.reserve(&graph)?;
/// for round in 1..=3 {
///     let allocated = galloc.alloc(&graph)?;
///     allocated.set(a, &vec![2.0f32; 1024])?;
///     allocated.compute(&cpu)?;
///     assert_eq!(allocated.to_vec::<f32>(b)?[0], 256.0, "round {round}");
/// }
/// // ggml-rs: the plan, its lower bound, and the same plan replayed for the same graph
/// let stats = galloc.plan_stats()?.unwrap();
/// assert!(stats.planned >= stats.lower_bound && stats.lower_bound >= 4096, "{stats:?}");
/// assert!(galloc.buffer_size() >= stats.planned);
/// let (plans, replays) = galloc.counters()?;
/// assert!(plans >= 1 && replays >= 2);
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
pub struct GraphAllocator<'b> {
    raw: RawGallocr,
    buft: RawBuft,
    owner: OwnerId,
    api: &'static Api,
    _backend: PhantomData<&'b Backend>,
}

impl<'b> GraphAllocator<'b> {
    pub fn new(buft: &BufferType<'b>) -> Result<GraphAllocator<'b>> {
        let api = buft.api;
        let raw = crate::logged(|| api.gallocr_new(buft.raw)).ok_or_else(|| crate::failed("ggml_gallocr_new", "returned NULL"))?;
        Ok(GraphAllocator { raw, buft: buft.raw, owner: owners::new_owner(false), api, _backend: PhantomData })
    }

    /// Sizes the compute buffer for `graph` (a worst case) without placing its tensors.
    pub fn reserve(&mut self, graph: &Graph<'_>) -> Result<()> {
        owners::prepare(self.api, self.owner, &graph.tensors);
        if !crate::logged(|| self.api.gallocr_reserve(self.raw, graph.raw)) {
            return Err(crate::failed("ggml_gallocr_reserve", "cannot reserve the graph"));
        }
        Ok(())
    }

    /// Places every tensor of `graph` that has no memory (the previous allocation's tensors
    /// included: it ended when its `AllocatedGraph` was dropped).
    pub fn alloc<'s>(&'s mut self, graph: &'s Graph<'s>) -> Result<AllocatedGraph<'s>> {
        let api = self.api;
        let empty = owners::prepare(api, self.owner, &graph.tensors);
        if !crate::logged(|| api.gallocr_alloc(self.raw, graph.raw)) {
            return Err(crate::failed("ggml_gallocr_alloc_graph", "cannot allocate the graph"));
        }
        owners::record(api, self.owner, &graph.tensors, &empty);
        let epoch = owners::check(api, self.owner, &graph.tensors, u64::MAX)?;
        // the shared borrow keeps the mutable one (of 's) alive: no other allocation meanwhile
        let galloc: &'s GraphAllocator<'s> = self;
        Ok(AllocatedGraph { galloc, graph, epoch: std::cell::Cell::new(epoch) })
    }

    /// The size of the compute buffer.
    pub fn buffer_size(&self) -> usize {
        self.api.gallocr_buffer_size(self.raw)
    }

    /// ggml-rs: the last plan's bytes and lower bound (`None` before the first plan).
    pub fn plan_stats(&self) -> Result<Option<PlanStats>> {
        let s = self.api.gallocr_plan_stats(self.raw).ok_or_else(ext_missing)?;
        Ok(s.map(|(planned, lower_bound)| PlanStats { planned, lower_bound }))
    }

    /// ggml-rs: (plans made, plans replayed for the same graph).
    pub fn counters(&self) -> Result<(u64, u64)> {
        self.api.gallocr_counters(self.raw).ok_or_else(ext_missing)
    }
}

pub(crate) fn ext_missing() -> Error {
    Error::Unsupported("a ggml-rs extension: the loaded libraries are upstream's ggml without libggml_rs".into())
}

impl Drop for GraphAllocator<'_> {
    fn drop(&mut self) {
        owners::drop_owner(self.owner);
        self.api.gallocr_free(self.raw);
    }
}

impl fmt::Debug for GraphAllocator<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GraphAllocator({}, {} bytes)", self.api.buft_name(self.buft), self.buffer_size())
    }
}

/// A graph as a [`GraphAllocator`] placed it: inputs are set, the graph computed and outputs
/// read through it. It borrows the allocator (no other allocation meanwhile) and the graph.
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// use ggml_rs_api::{Backend, Context, GraphAllocator};
/// let cpu = Backend::cpu()?;
/// let ctx = Context::new()?;
/// let x = ctx.new_f32(&[2])?.named("x").input();
/// let y = ctx.add(x, x)?.output();
/// let other = ctx.new_f32(&[2])?;
/// let graph = ctx.graph(&[y])?;
/// let buft = cpu.default_buffer_type();
/// let mut galloc = GraphAllocator::new(&buft)?;
/// let allocated = galloc.alloc(&graph)?;
/// allocated.set(x, &[1.5f32, -1.0])?;
/// allocated.compute(&cpu)?;
/// let mut out = [0.0f32; 2];
/// allocated.get(y, &mut out)?;
/// assert_eq!(out, [3.0, -2.0]);
/// // a tensor of no graph, a wrong length: errors
/// assert!(allocated.set(other, &[0.0f32; 2]).is_err());
/// assert!(allocated.get(y, &mut [0.0f32; 3]).is_err());
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
pub struct AllocatedGraph<'s> {
    galloc: &'s GraphAllocator<'s>,
    graph: &'s Graph<'s>,
    epoch: std::cell::Cell<u64>,
}

impl<'s> AllocatedGraph<'s> {
    fn check(&self, t: Option<Tensor<'_>>, what: &str) -> Result<()> {
        if let Some(t) = t {
            self.graph.check_member(t, what)?;
        }
        let e = owners::check(self.galloc.api, self.galloc.owner, &self.graph.tensors, self.epoch.get())?;
        self.epoch.set(e);
        Ok(())
    }

    /// Copies `data` into `t` (a tensor of the graph; `T` its type, `data` its length).
    pub fn set<T: Element>(&self, t: Tensor<'_>, data: &[T]) -> Result<()> {
        self.check(Some(t), "AllocatedGraph::set")?;
        t.copy_in(data)
    }

    /// Copies `t` into `out`.
    pub fn get<T: Element>(&self, t: Tensor<'_>, out: &mut [T]) -> Result<()> {
        self.check(Some(t), "AllocatedGraph::get")?;
        t.copy_out(out)
    }

    /// `t`'s elements.
    pub fn to_vec<T: Element>(&self, t: Tensor<'_>) -> Result<Vec<T>> {
        let mut v = vec![T::default(); usize::try_from(t.nelements()).unwrap_or(0)];
        self.get(t, &mut v)?;
        Ok(v)
    }

    /// Copies raw bytes (any type) into `t`.
    pub fn set_bytes(&self, t: Tensor<'_>, data: &[u8]) -> Result<()> {
        self.check(Some(t), "AllocatedGraph::set_bytes")?;
        t.copy_in_bytes(data)
    }

    /// Copies `t`'s raw bytes into `out`.
    pub fn get_bytes(&self, t: Tensor<'_>, out: &mut [u8]) -> Result<()> {
        self.check(Some(t), "AllocatedGraph::get_bytes")?;
        t.copy_out_bytes(out)
    }

    /// Computes the graph on `backend`, which must use the allocator's buffer type and support
    /// every op of the graph.
    pub fn compute(&self, backend: &Backend) -> Result<()> {
        let api = self.galloc.api;
        self.check(None, "AllocatedGraph::compute")?;
        // the compute buffer, and every buffer the graph's other tensors (weights) are in: a
        // backend given memory it cannot address would take it for its own (the CPU reading an
        // rpc-server's addresses crashes)
        let mut bufts = vec![self.galloc.buft];
        for &t in &self.graph.tensors {
            if let Some(b) = api.tensor_buft(t).filter(|b| !bufts.contains(b)) {
                bufts.push(b);
            }
        }
        if let Some(&b) = bufts.iter().find(|&&b| !api.supports_buft(backend.raw, b)) {
            return Err(Error::Invalid(format!("AllocatedGraph::compute: {} cannot use {} memory", backend.name(), api.buft_name(b))));
        }
        if let Err(n) = self.graph.check_supported(backend.id, |n| backend.supports(n)) {
            return Err(Error::Invalid(format!("AllocatedGraph::compute: {} does not support {} of '{}'", backend.name(), n.op(), n.name())));
        }
        let status = crate::logged(|| api.backend_compute(backend.raw, self.graph.raw));
        if status != 0 {
            return Err(crate::failed("ggml_backend_graph_compute", &format!("status {status}")));
        }
        Ok(())
    }

    /// The graph.
    pub fn graph(&self) -> &Graph<'s> {
        self.graph
    }

    /// ggml-rs: writes the memory plan report of this allocation (every tensor's buffer,
    /// offset, size and node steps; docs/memory-report.md) to `path`, as JSON or SVG.
    /// An allocation, not the allocator, writes it: the report reads the planned graph's
    /// tensors, which the allocation keeps alive.
    pub fn write_report(&self, path: &Path, format: ReportFormat) -> Result<()> {
        let c = report_path(path)?;
        let ok = crate::logged(|| self.galloc.api.gallocr_write_report(self.galloc.raw, &c, format == ReportFormat::Svg)).ok_or_else(ext_missing)?;
        if !ok {
            return Err(crate::failed("ggml_rs_gallocr_write_report", &format!("could not write {}", path.display())));
        }
        Ok(())
    }
}

/// The format of a memory plan report ([`AllocatedGraph::write_report`],
/// [`SchedAllocation::write_report`](crate::SchedAllocation::write_report)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReportFormat {
    Json,
    Svg,
}

/// `path` as a C string: an error for a path with a NUL byte.
pub(crate) fn report_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::Invalid(format!("write_report: the path {} has a NUL byte", path.display())))
}

impl fmt::Debug for AllocatedGraph<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AllocatedGraph({:?}, {:?})", self.graph, self.galloc)
    }
}
