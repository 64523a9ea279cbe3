//! The backend scheduler (`ggml_backend_sched`) and its allocation.

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::path::Path;

use crate::alloc::{ReportFormat, ext_missing, report_path};
use crate::owners::{self, OwnerId};
use crate::sys::{self, Api, RawBackend, RawSched};
use crate::{Backend, Element, Error, Graph, Result, Tensor};

/// Options of [`Scheduler::with_options`].
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// use ggml_rs_api::{Backend, Scheduler, SchedulerOptions};
/// let (a, cpu) = (Backend::cpu()?, Backend::cpu()?);
/// let sched = Scheduler::with_options(&[&a, &cpu], SchedulerOptions { parallel: true, ..Default::default() })?;
/// assert_eq!((sched.n_backends(), sched.n_copies()), (2, 4));
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SchedulerOptions {
    /// nodes (and leafs) of the largest graph (upstream's limit; ggml-rs grows past it)
    pub graph_size: usize,
    /// pipeline parallelism: 4 copies of the inputs of each split, computed asynchronously
    pub parallel: bool,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions { graph_size: sys::DEFAULT_GRAPH_SIZE, parallel: false }
    }
}

/// ggml-rs's counters of a scheduler (`ggml_rs_sched_counters`).
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// use ggml_rs_api::{Backend, Context, Scheduler, SchedCounters};
/// let cpu = Backend::cpu()?;
/// let ctx = Context::new()?;
/// let x = ctx.new_f32(&[8])?.input();
/// let graph = ctx.graph(&[ctx.sqr(x)?.output()])?;
/// let mut sched = Scheduler::new(&[&cpu])?;
/// for _ in 0..3 {
///     sched.alloc(&graph)?.compute()?;
/// }
/// // the same graph allocated again after each reset: split once, the allocation repeated twice
/// assert_eq!(sched.counters()?, SchedCounters { splits: 1, repeats: 2 });
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedCounters {
    /// graphs assigned to backends and split
    pub splits: u64,
    /// allocations that repeated the previous one because nothing had changed
    pub repeats: u64,
}

/// A backend scheduler over several backends (the last one a CPU): it assigns each node to a
/// backend, splits the graph where the backend changes, copies what a split reads from
/// another backend, and allocates each backend's compute buffer. Borrows its backends; freed
/// on drop.
///
/// [`alloc`](Scheduler::alloc) returns a [`SchedAllocation`] that borrows the scheduler until
/// it is reset (its `reset`, or its drop): nothing else can allocate, reserve or reset it
/// meanwhile, and it cannot be used after.
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// use ggml_rs_api::{Backend, Context, Scheduler};
/// let (a, b) = (Backend::cpu()?, Backend::cpu()?);
/// let ctx = Context::new()?;
/// let x = ctx.new_f32(&[4])?.input();
/// let n1 = ctx.scale(x, 2.0)?;
/// let n2 = ctx.sqr(n1)?.output();
/// let graph = ctx.graph(&[n2])?;
/// let mut sched = Scheduler::new(&[&a, &b])?;
/// for round in 1..=3 {
///     sched.set_tensor_backend(n1, &a)?;
///     let allocation = sched.alloc(&graph)?;
///     allocation.set(x, &[round as f32; 4])?;
///     allocation.compute()?;
///     assert_eq!(allocation.to_vec::<f32>(n2)?, [(2.0 * round as f32).powi(2); 4]);
/// } // each allocation resets the scheduler when dropped
/// assert_eq!(sched.tensor_backend(n1), None); // reset forgets the assignments
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
pub struct Scheduler<'b> {
    raw: RawSched,
    backends: Vec<RawBackend>,
    names: Vec<String>,
    owner: OwnerId,
    graph_size: usize,
    api: &'static Api,
    _backends: PhantomData<&'b Backend>,
}

impl<'b> Scheduler<'b> {
    /// A scheduler over `backends` (1 to 16, distinct, the last one on a CPU device).
    pub fn new(backends: &[&'b Backend]) -> Result<Scheduler<'b>> {
        Scheduler::with_options(backends, SchedulerOptions::default())
    }

    pub fn with_options(backends: &[&'b Backend], options: SchedulerOptions) -> Result<Scheduler<'b>> {
        let what = "Scheduler::new";
        let Some(last) = backends.last() else {
            return Err(Error::Invalid(format!("{what}: no backend")));
        };
        if backends.len() > 16 {
            return Err(Error::Invalid(format!("{what}: {} backends, at most 16", backends.len())));
        }
        if !last.is_cpu_device() {
            return Err(Error::Invalid(format!("{what}: the last backend ({}) must be a CPU backend", last.name())));
        }
        let raws: Vec<RawBackend> = backends.iter().map(|b| b.raw).collect();
        if (1..raws.len()).any(|i| raws[..i].contains(&raws[i])) {
            return Err(Error::Invalid(format!("{what}: a backend is given twice")));
        }
        let api = last.api;
        let size = options.graph_size.max(1);
        let raw = crate::logged(|| api.sched_new(&raws, size, options.parallel)).ok_or_else(|| crate::failed("ggml_backend_sched_new", "returned NULL"))?;
        Ok(Scheduler {
            raw,
            backends: raws,
            names: backends.iter().map(|b| b.name()).collect(),
            owner: owners::new_owner(false),
            graph_size: size,
            api,
            _backends: PhantomData,
        })
    }

    fn index(&self, b: &Backend, what: &str) -> Result<usize> {
        self.backends.iter().position(|&r| r == b.raw).ok_or_else(|| Error::Invalid(format!("{what}: {} is not a backend of this scheduler", b.name())))
    }

    fn check_graph(&self, graph: &Graph<'_>, what: &str) -> Result<()> {
        // upstream's scheduler sizes its hash set once and asserts that every graph fits;
        // ggml-rs's grows
        if self.api.ext.is_none() && graph.tensors.len() > self.graph_size {
            return Err(Error::Invalid(format!(
                "{what}: the graph has {} tensors, the scheduler was made for {} (SchedulerOptions::graph_size)",
                graph.tensors.len(),
                self.graph_size
            )));
        }
        if let Err(n) = graph.check_supported(self.owner.0, |n| self.backends.iter().any(|&b| self.api.supports_op(b, n.raw))) {
            return Err(Error::Invalid(format!("{what}: no backend of the scheduler supports {} of '{}'", n.op(), n.name())));
        }
        Ok(())
    }

    /// Runs `t` on `backend` in the next allocation (assignments last until the reset).
    pub fn set_tensor_backend(&mut self, t: Tensor<'_>, backend: &Backend) -> Result<()> {
        let i = self.index(backend, "Scheduler::set_tensor_backend")?;
        self.api.sched_set_backend(self.raw, t.raw, self.backends[i]);
        Ok(())
    }

    /// The index (in the order given to `new`) of the backend `t` is assigned to, if any.
    pub fn tensor_backend(&self, t: Tensor<'_>) -> Option<usize> {
        let b = self.api.sched_get_backend(self.raw, t.raw)?;
        self.backends.iter().position(|&r| r == b)
    }

    /// Sizes the compute buffers for `graph` (a worst case) without allocating it.
    pub fn reserve(&mut self, graph: &Graph<'_>) -> Result<()> {
        self.check_graph(graph, "Scheduler::reserve")?;
        owners::prepare(self.api, self.owner, &graph.tensors);
        if !crate::logged(|| self.api.sched_reserve(self.raw, graph.raw)) {
            return Err(crate::failed("ggml_backend_sched_reserve", "cannot reserve the graph"));
        }
        Ok(())
    }

    /// Assigns, splits and allocates `graph`. The allocation lives until it is reset.
    pub fn alloc<'s>(&'s mut self, graph: &'s Graph<'s>) -> Result<SchedAllocation<'s>> {
        let api = self.api;
        self.check_graph(graph, "Scheduler::alloc")?;
        let empty = owners::prepare(api, self.owner, &graph.tensors);
        // a tensor already in a buffer (a weight) runs on a backend that can use that buffer
        // and its op; with none, ggml aborts ("pre-allocated tensor in a buffer that cannot run
        // the operation")
        for t in owners::in_buffers(&graph.tensors) {
            let buft = api.tensor_buft(t);
            if !self.backends.iter().any(|&b| buft.is_some_and(|buft| api.supports_buft(b, buft)) && api.supports_op(b, t)) {
                let t = graph.tensors().into_iter().find(|g| g.raw == t).expect("a tensor of the graph");
                let where_ = buft.map(|b| api.buft_name(b)).unwrap_or_default();
                return Err(Error::Invalid(format!(
                    "Scheduler::alloc: tensor '{}' is in a {where_} buffer, which no backend of the scheduler can use for {}",
                    t.name(),
                    t.op()
                )));
            }
        }
        if !crate::logged(|| api.sched_alloc(self.raw, graph.raw)) {
            let e = crate::failed("ggml_backend_sched_alloc_graph", "cannot allocate the graph");
            api.sched_reset(self.raw);
            return Err(e);
        }
        owners::record(api, self.owner, &graph.tensors, &empty);
        let epoch = match owners::check(api, self.owner, &graph.tensors, u64::MAX) {
            Ok(e) => e,
            Err(e) => {
                api.sched_reset(self.raw);
                return Err(e);
            }
        };
        // the shared borrow keeps the mutable one (of 's) alive until the allocation ends
        let sched: &'s Scheduler<'s> = self;
        Ok(SchedAllocation { sched, graph, epoch: Cell::new(epoch) })
    }

    /// Resets the scheduler (forgets assignments; the compute buffers stay).
    pub fn reset(&mut self) {
        self.api.sched_reset(self.raw);
    }

    pub fn n_backends(&self) -> usize {
        self.backends.len()
    }

    /// The names of the backends, in order.
    pub fn backend_names(&self) -> &[String] {
        &self.names
    }

    /// Splits of the last allocation.
    pub fn n_splits(&self) -> usize {
        self.api.sched_n_splits(self.raw).max(0) as usize
    }

    /// Copies of each split's inputs (1, or 4 with pipeline parallelism).
    pub fn n_copies(&self) -> usize {
        self.api.sched_n_copies(self.raw).max(0) as usize
    }

    /// The size of `backend`'s compute buffer.
    pub fn buffer_size(&self, backend: &Backend) -> Result<usize> {
        let i = self.index(backend, "Scheduler::buffer_size")?;
        Ok(self.api.sched_buffer_size(self.raw, self.backends[i]))
    }

    /// ggml-rs: how many graphs were assigned and split, how many allocations repeated.
    pub fn counters(&self) -> Result<SchedCounters> {
        let (splits, repeats) = self.api.sched_counters(self.raw).ok_or_else(ext_missing)?;
        Ok(SchedCounters { splits, repeats })
    }

    /// ggml-rs: the current split plan as JSON (`graph`: the graph it is for, if known).
    pub fn plan_json(&self, graph: Option<&Graph<'_>>) -> Result<String> {
        self.api.sched_dump_plan(self.raw, graph.map(|g| g.raw), false).ok_or_else(ext_missing)
    }

    /// ggml-rs: the current split plan as Graphviz DOT.
    pub fn plan_dot(&self, graph: Option<&Graph<'_>>) -> Result<String> {
        self.api.sched_dump_plan(self.raw, graph.map(|g| g.raw), true).ok_or_else(ext_missing)
    }
}

impl Drop for Scheduler<'_> {
    fn drop(&mut self) {
        owners::drop_owner(self.owner);
        self.api.sched_free(self.raw);
    }
}

impl fmt::Debug for Scheduler<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scheduler({:?}, {} copies)", self.names, self.n_copies())
    }
}

/// A graph as a [`Scheduler`] allocated it: inputs set, computed, outputs read through it.
/// Ends with [`reset`](SchedAllocation::reset) or when dropped (which resets the scheduler).
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// use ggml_rs_api::{Backend, Context, Scheduler};
/// let cpu = Backend::cpu()?;
/// let ctx = Context::new()?;
/// let x = ctx.new_f32(&[3])?.input();
/// let y = ctx.soft_max(x)?.output();
/// let graph = ctx.graph(&[y])?;
/// let mut sched = Scheduler::new(&[&cpu])?;
/// let allocation = sched.alloc(&graph)?;
/// allocation.set(x, &[0.0f32, 0.0, 0.0])?;
/// allocation.compute()?;
/// assert!(allocation.to_vec::<f32>(y)?.iter().all(|&p| (p - 1.0 / 3.0).abs() < 1e-6));
/// assert_eq!(allocation.n_splits(), 1);
/// // ggml-rs: the split plan as JSON
/// assert!(allocation.plan_json()?.contains("\"splits\""));
/// allocation.reset();
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
pub struct SchedAllocation<'s> {
    sched: &'s Scheduler<'s>,
    graph: &'s Graph<'s>,
    epoch: Cell<u64>,
}

impl<'s> SchedAllocation<'s> {
    fn check(&self, t: Option<Tensor<'_>>, what: &str) -> Result<()> {
        if let Some(t) = t {
            self.graph.check_member(t, what)?;
        }
        let e = owners::check(self.sched.api, self.sched.owner, &self.graph.tensors, self.epoch.get())?;
        self.epoch.set(e);
        Ok(())
    }

    /// Copies `data` into `t` (a tensor of the graph; `T` its type, `data` its length).
    pub fn set<T: Element>(&self, t: Tensor<'_>, data: &[T]) -> Result<()> {
        self.check(Some(t), "SchedAllocation::set")?;
        t.copy_in(data)
    }

    /// Copies `t` into `out`.
    pub fn get<T: Element>(&self, t: Tensor<'_>, out: &mut [T]) -> Result<()> {
        self.check(Some(t), "SchedAllocation::get")?;
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
        self.check(Some(t), "SchedAllocation::set_bytes")?;
        t.copy_in_bytes(data)
    }

    /// Computes the graph (every split on its backend, with the copies between them).
    pub fn compute(&self) -> Result<()> {
        self.check(None, "SchedAllocation::compute")?;
        let status = crate::logged(|| self.sched.api.sched_compute(self.sched.raw, self.graph.raw));
        if status != 0 {
            return Err(crate::failed("ggml_backend_sched_graph_compute", &format!("status {status}")));
        }
        Ok(())
    }

    /// The backend index `t` was assigned to.
    pub fn tensor_backend(&self, t: Tensor<'_>) -> Option<usize> {
        self.sched.tensor_backend(t)
    }

    pub fn n_splits(&self) -> usize {
        self.sched.n_splits()
    }

    /// ggml-rs: this allocation's split plan as JSON.
    pub fn plan_json(&self) -> Result<String> {
        self.sched.plan_json(Some(self.graph))
    }

    /// ggml-rs: this allocation's split plan as Graphviz DOT.
    pub fn plan_dot(&self) -> Result<String> {
        self.sched.plan_dot(Some(self.graph))
    }

    /// ggml-rs: writes the memory plan report of this allocation, with the scheduler's splits,
    /// to `path` (see [`AllocatedGraph::write_report`](crate::AllocatedGraph::write_report)).
    pub fn write_report(&self, path: &Path, format: ReportFormat) -> Result<()> {
        let c = report_path(path)?;
        let api = self.sched.api;
        let ok = crate::logged(|| api.sched_write_report(self.sched.raw, &c, format == ReportFormat::Svg)).ok_or_else(ext_missing)?;
        if !ok {
            return Err(crate::failed("ggml_rs_sched_write_report", &format!("could not write {}", path.display())));
        }
        Ok(())
    }

    /// Ends the allocation and resets the scheduler (as dropping it does).
    pub fn reset(self) {}
}

impl Drop for SchedAllocation<'_> {
    fn drop(&mut self) {
        self.sched.api.sched_reset(self.sched.raw);
    }
}

impl fmt::Debug for SchedAllocation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SchedAllocation({:?}, {:?})", self.graph, self.sched)
    }
}
