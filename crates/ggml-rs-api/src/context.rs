//! Contexts, tensors and graphs.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::marker::PhantomData;

use crate::sys::{self, Api, Op1, Op2, RawCtx, RawGraph, RawTensor, ggml_type};
use crate::{Element, Error, Result, owners};

/// A ggml type (`ggml_type`).
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return; }
/// use ggml_rs_api::Type;
/// assert_eq!((Type::F32.to_string(), Type::Q8_0.to_string()), ("f32".to_string(), "q8_0".to_string()));
/// assert_eq!(Type::from_raw(Type::I32.raw()), Type::I32);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Type(pub(crate) u32);

impl Type {
    pub const F32: Type = Type(ggml_type::GGML_TYPE_F32);
    pub const F16: Type = Type(ggml_type::GGML_TYPE_F16);
    pub const BF16: Type = Type(ggml_type::GGML_TYPE_BF16);
    pub const I8: Type = Type(ggml_type::GGML_TYPE_I8);
    pub const I16: Type = Type(ggml_type::GGML_TYPE_I16);
    pub const I32: Type = Type(ggml_type::GGML_TYPE_I32);
    pub const I64: Type = Type(ggml_type::GGML_TYPE_I64);
    pub const Q8_0: Type = Type(ggml_type::GGML_TYPE_Q8_0);
    pub const Q4_0: Type = Type(ggml_type::GGML_TYPE_Q4_0);
    pub const Q4_K: Type = Type(ggml_type::GGML_TYPE_Q4_K);
    pub const Q6_K: Type = Type(ggml_type::GGML_TYPE_Q6_K);

    /// The type with ggml's number `n` (checked when a tensor is made).
    pub fn from_raw(n: u32) -> Type {
        Type(n)
    }

    /// ggml's number of the type.
    pub fn raw(self) -> u32 {
        self.0
    }
}

impl fmt::Debug for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match sys::api() {
            Ok(api) => f.write_str(&api.type_name(self.0)),
            Err(_) => write!(f, "Type({})", self.0),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A ggml context: the memory tensors and graphs are described in (never their data, which
/// lives in a [`Buffer`](crate::Buffer) or an allocator's compute buffers). Freed on drop;
/// every [`Tensor`] and [`Graph`] of it borrows it.
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// use ggml_rs_api::{Context, Type};
/// let ctx = Context::with_capacity(4, 0)?;
/// let a = ctx.new_tensor(Type::F16, &[8, 2])?;
/// assert_eq!((a.ty(), a.shape()), (Type::F16, [8, 2, 1, 1]));
/// for _ in 0..3 {
///     ctx.new_f32(&[1])?;
/// }
/// // room for 4 tensors: the fifth is an error, not ggml's abort
/// assert!(ctx.new_f32(&[1]).is_err());
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
pub struct Context {
    pub(crate) raw: RawCtx,
    pub(crate) api: &'static Api,
}

impl Context {
    /// A context with room for 1024 tensors and 4 graphs of 2048 nodes.
    pub fn new() -> Result<Context> {
        Context::with_capacity(1024, 4)
    }

    /// A context with room for `tensors` tensors and `graphs` graphs of 2048 nodes (a bigger
    /// graph takes the room of several).
    pub fn with_capacity(tensors: usize, graphs: usize) -> Result<Context> {
        let api = sys::api()?;
        let size = tensors
            .checked_mul(api.tensor_overhead())
            .and_then(|t| graphs.checked_mul(api.graph_overhead(sys::DEFAULT_GRAPH_SIZE)).and_then(|g| g.checked_add(t)))
            .ok_or_else(|| Error::Invalid(format!("Context::with_capacity({tensors}, {graphs}): too large")))?;
        let raw = crate::logged(|| api.ctx_new(size.max(1))).ok_or_else(|| crate::failed("ggml_init", "out of memory"))?;
        Ok(Context { raw, api })
    }

    pub(crate) fn room(&self, bytes: usize, what: &str) -> Result<()> {
        let (used, size) = self.api.ctx_mem(self.raw);
        if used + bytes > size {
            return Err(Error::Invalid(format!("{what}: the context is full ({used} of {size} bytes used, {bytes} more needed)")));
        }
        Ok(())
    }

    pub(crate) fn wrap(&self, raw: Option<RawTensor>, what: &'static str) -> Result<Tensor<'_>> {
        raw.map(|raw| Tensor { raw, api: self.api, _ctx: PhantomData }).ok_or_else(|| crate::failed(what, "returned NULL"))
    }

    /// A new tensor of `ty` with `ne` (1 to 4 dimensions, ggml's order: `ne[0]` is the row).
    pub fn new_tensor(&self, ty: Type, ne: &[i64]) -> Result<Tensor<'_>> {
        let what = "ggml_new_tensor";
        if ne.is_empty() || ne.len() > sys::MAX_DIMS || ne.iter().any(|&n| n < 0) {
            return Err(Error::Invalid(format!("{what}: shape {ne:?}: 1 to 4 dimensions, none negative")));
        }
        if ty.0 >= ggml_type::GGML_TYPE_COUNT || self.api.type_size(ty.0).1 == 0 {
            return Err(Error::Invalid(format!("{what}: {ty} is not a type of this ggml")));
        }
        let block = self.api.type_size(ty.0).1;
        if ne[0] % block != 0 {
            return Err(Error::Invalid(format!("{what}: a row of {ty} is a multiple of {block} elements, not {}", ne[0])));
        }
        self.room(self.api.tensor_overhead(), what)?;
        self.wrap(crate::logged(|| self.api.new_tensor(self.raw, ty.0, ne)), what)
    }

    /// A new F32 tensor.
    pub fn new_f32(&self, ne: &[i64]) -> Result<Tensor<'_>> {
        self.new_tensor(Type::F32, ne)
    }

    fn op2<'a>(&'a self, op: Op2, what: &'static str, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        self.room(self.api.tensor_overhead(), what)?;
        self.wrap(crate::logged(|| self.api.op2(self.raw, op, a.raw, b.raw)), what)
    }

    fn op1<'a>(&'a self, op: Op1, what: &'static str, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.room(self.api.tensor_overhead(), what)?;
        self.wrap(crate::logged(|| self.api.op1(self.raw, op, a.raw)), what)
    }

    /// `a + b`, `b` repeated over `a`'s shape.
    pub fn add<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        self.check_repeat("ggml_add", a, b)?;
        self.op2(Op2::Add, "ggml_add", a, b)
    }

    /// `a * b` element-wise, `b` repeated over `a`'s shape.
    pub fn mul<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        self.check_repeat("ggml_mul", a, b)?;
        self.op2(Op2::Mul, "ggml_mul", a, b)
    }

    fn check_repeat(&self, what: &str, a: Tensor<'_>, b: Tensor<'_>) -> Result<()> {
        if !self.api.can_repeat(b.raw, a.raw) {
            return Err(Error::Invalid(format!("{what}: '{}' {:?} cannot be repeated to '{}' {:?}", b.name(), b.shape(), a.name(), a.shape())));
        }
        Ok(())
    }

    /// ggml's `mul_mat`: `a` is `[k, m, ..]`, `b` is `[k, n, ..]`, the result `[m, n, ..]` is
    /// `b · aᵀ` (each row of the result is the dot products of a row of `b` with the rows of `a`).
    pub fn mul_mat<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        let (sa, sb) = (a.shape(), b.shape());
        if sa[0] != sb[0] || sb[2] % sa[2].max(1) != 0 || sb[3] % sa[3].max(1) != 0 {
            return Err(Error::Invalid(format!(
                "ggml_mul_mat: '{}' {sa:?} and '{}' {sb:?}: rows of different lengths or batches that do not repeat",
                a.name(),
                b.name()
            )));
        }
        if self.api.is_transposed(a.raw) {
            return Err(Error::Invalid(format!("ggml_mul_mat: '{}' is transposed (make it contiguous first)", a.name())));
        }
        self.op2(Op2::MulMat, "ggml_mul_mat", a, b)
    }

    /// `a * s`.
    pub fn scale<'a>(&'a self, a: Tensor<'a>, s: f32) -> Result<Tensor<'a>> {
        self.check_contiguous("ggml_scale", a)?;
        self.op1(Op1::Scale(s), "ggml_scale", a)
    }

    /// `a²` element-wise.
    pub fn sqr<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.op1(Op1::Sqr, "ggml_sqr", a)
    }

    /// Softmax over each row.
    pub fn soft_max<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.check_contiguous("ggml_soft_max", a)?;
        self.op1(Op1::SoftMax, "ggml_soft_max", a)
    }

    /// A contiguous copy.
    pub fn cont<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.op1(Op1::Cont, "ggml_cont", a)
    }

    /// A view with the first two dimensions swapped.
    pub fn transpose<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.op1(Op1::Transpose, "ggml_transpose", a)
    }

    pub(crate) fn check_contiguous(&self, what: &str, a: Tensor<'_>) -> Result<()> {
        if !self.api.is_contiguous(a.raw) {
            return Err(Error::Invalid(format!("{what}: '{}' is not contiguous (use cont)", a.name())));
        }
        Ok(())
    }

    /// The graph computing `outputs` (and everything they read), room for 2048 nodes.
    pub fn graph<'a>(&'a self, outputs: &[Tensor<'a>]) -> Result<Graph<'a>> {
        self.graph_with_size(outputs, sys::DEFAULT_GRAPH_SIZE)
    }

    /// The graph computing `outputs`, with room for `size` nodes and as many leafs.
    pub fn graph_with_size<'a>(&'a self, outputs: &[Tensor<'a>], size: usize) -> Result<Graph<'a>> {
        let what = "ggml_new_graph_custom";
        // every tensor the outputs reach, in an order where sources come first
        let mut seen = HashSet::new();
        let mut order = Vec::new();
        let mut stack: Vec<(RawTensor, bool)> = outputs.iter().rev().map(|t| (t.raw, false)).collect();
        while let Some((t, done)) = stack.pop() {
            if done {
                order.push(t);
                continue;
            }
            if !seen.insert(t.addr()) {
                continue;
            }
            stack.push((t, true));
            stack.extend(self.api.sources(t).filter(|s| !seen.contains(&s.addr())).map(|s| (s, false)));
        }
        if order.len() > size {
            return Err(Error::Invalid(format!("{what}: the outputs reach {} tensors, more than the graph's size {size}", order.len())));
        }
        self.room(self.api.graph_overhead(size), what)?;
        let raw = crate::logged(|| self.api.new_graph(self.raw, size)).ok_or_else(|| crate::failed(what, "returned NULL"))?;
        for t in outputs {
            self.api.build_forward(raw, t.raw);
        }
        let set = seen;
        Ok(Graph { raw, tensors: order, set, supported_by: RefCell::new(Vec::new()), api: self.api, _ctx: PhantomData })
    }

    /// Every tensor made in this context.
    pub fn tensors(&self) -> Vec<Tensor<'_>> {
        self.api.ctx_tensors(self.raw).into_iter().map(|raw| Tensor { raw, api: self.api, _ctx: PhantomData }).collect()
    }

    pub(crate) fn raw(&self) -> RawCtx {
        self.raw
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        owners::forget(&self.api.ctx_tensors(self.raw));
        self.api.ctx_free(self.raw);
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (used, size) = self.api.ctx_mem(self.raw);
        write!(f, "Context({used} of {size} bytes used)")
    }
}

/// A tensor of a [`Context`]: a copyable handle that cannot outlive it. Its data is reached
/// through what allocated it ([`Buffer`](crate::Buffer), [`AllocatedGraph`](crate::AllocatedGraph),
/// [`SchedAllocation`](crate::SchedAllocation)).
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// let ctx = ggml_rs_api::Context::new()?;
/// let w = ctx.new_f32(&[3, 2])?.named("w");
/// let t = ctx.transpose(w)?;
/// assert_eq!((w.name(), w.shape(), t.shape()), ("w".to_string(), [3, 2, 1, 1], [2, 3, 1, 1]));
/// assert_eq!((w.nelements(), w.nbytes(), t.op()), (6, 24, "TRANSPOSE".to_string()));
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct Tensor<'ctx> {
    pub(crate) raw: RawTensor,
    pub(crate) api: &'static Api,
    _ctx: PhantomData<&'ctx Context>,
}

impl<'ctx> Tensor<'ctx> {
    /// Sets the name (ggml keeps 63 bytes) and returns the tensor.
    pub fn named(self, name: &str) -> Self {
        self.api.set_name(self.raw, name);
        self
    }

    /// Marks the tensor as a graph input (allocated first, never overwritten by the graph).
    pub fn input(self) -> Self {
        self.api.set_input(self.raw);
        self
    }

    /// Marks the tensor as a graph output (its memory is not reused within the graph).
    pub fn output(self) -> Self {
        self.api.set_output(self.raw);
        self
    }

    pub fn name(&self) -> String {
        self.api.name(self.raw)
    }

    pub fn ty(&self) -> Type {
        Type(self.api.info(self.raw).ty)
    }

    /// `ne`: elements per dimension, ggml's order.
    pub fn shape(&self) -> [i64; 4] {
        self.api.info(self.raw).ne
    }

    pub fn nelements(&self) -> i64 {
        self.api.nelements(self.raw)
    }

    pub fn nbytes(&self) -> usize {
        self.api.nbytes(self.raw)
    }

    pub fn is_input(&self) -> bool {
        self.api.info(self.raw).flags & sys::FLAG_INPUT != 0
    }

    pub fn is_output(&self) -> bool {
        self.api.info(self.raw).flags & sys::FLAG_OUTPUT != 0
    }

    /// The operation (`"NONE"` for a tensor no op computes).
    pub fn op(&self) -> String {
        self.api.op_desc(self.raw)
    }

    /// Whether it has memory now (and so may be read through what allocated it).
    pub fn is_allocated(&self) -> bool {
        self.api.info(self.raw).data != 0
    }

    /// Copies `data` into the tensor: `T` must be its type, `data` as long as it (contiguous).
    pub(crate) fn copy_in<T: Element>(self, data: &[T]) -> Result<()> {
        self.check_io::<T>(data.len(), "set")?;
        self.api.tensor_set(self.raw, sys::as_bytes(data));
        Ok(())
    }

    /// Copies the tensor into `out` (same checks).
    pub(crate) fn copy_out<T: Element>(self, out: &mut [T]) -> Result<()> {
        self.check_io::<T>(out.len(), "get")?;
        self.api.tensor_get(self.raw, sys::as_bytes_mut(out));
        Ok(())
    }

    pub(crate) fn copy_in_bytes(self, data: &[u8]) -> Result<()> {
        self.check_bytes(data.len(), "set_bytes")?;
        self.api.tensor_set(self.raw, data);
        Ok(())
    }

    pub(crate) fn copy_out_bytes(self, out: &mut [u8]) -> Result<()> {
        self.check_bytes(out.len(), "get_bytes")?;
        self.api.tensor_get(self.raw, out);
        Ok(())
    }

    fn check_io<T: Element>(self, len: usize, what: &str) -> Result<()> {
        if self.ty() != T::TYPE {
            return Err(Error::Invalid(format!("{what} '{}': the tensor is {}, the slice {}", self.name(), self.ty(), T::TYPE)));
        }
        let n = self.nelements();
        if len as i64 != n {
            return Err(Error::Invalid(format!("{what} '{}': the tensor has {n} elements, the slice {len}", self.name())));
        }
        self.check_bytes(self.nbytes(), what)
    }

    fn check_bytes(self, len: usize, what: &str) -> Result<()> {
        if !self.api.is_contiguous(self.raw) {
            return Err(Error::Invalid(format!("{what} '{}': not contiguous (copy it with cont in the graph)", self.name())));
        }
        if len != self.nbytes() {
            return Err(Error::Invalid(format!("{what} '{}': the tensor has {} bytes, the slice {len}", self.name(), self.nbytes())));
        }
        if !self.is_allocated() {
            return Err(Error::NotAllocated(format!("{what} '{}': the tensor has no memory", self.name())));
        }
        Ok(())
    }
}

impl fmt::Debug for Tensor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor('{}', {}, {:?}, {})", self.name(), self.ty(), self.shape(), self.op())
    }
}

impl PartialEq for Tensor<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl Eq for Tensor<'_> {}

/// A computation graph: the outputs given to [`Context::graph`] and every tensor they read.
/// It cannot be computed as it is: allocate it with a [`GraphAllocator`](crate::GraphAllocator)
/// or a [`Scheduler`](crate::Scheduler) first.
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// let ctx = ggml_rs_api::Context::new()?;
/// let (a, b) = (ctx.new_f32(&[4])?, ctx.new_f32(&[4])?);
/// let sum = ctx.add(a, b)?;
/// let graph = ctx.graph(&[ctx.sqr(sum)?])?;
/// assert_eq!((graph.n_nodes(), graph.tensors().len()), (2, 4));
/// assert!(graph.contains(a));
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
pub struct Graph<'ctx> {
    pub(crate) raw: RawGraph,
    /// every tensor of the graph (nodes, leafs, view sources), sources first
    pub(crate) tensors: Vec<RawTensor>,
    set: HashSet<usize>,
    /// ids of the schedulers and backends found to support every node (the nodes and their
    /// sources never change, so the answer does not either)
    supported_by: RefCell<Vec<u64>>,
    pub(crate) api: &'static Api,
    _ctx: PhantomData<&'ctx Context>,
}

impl<'ctx> Graph<'ctx> {
    /// Whether `supported(node)` holds for every node, asked once per `id` (a scheduler or a
    /// backend: ids are never reused); `Err` names the first node that is not supported.
    pub(crate) fn check_supported(&self, id: u64, supported: impl Fn(Tensor<'_>) -> bool) -> std::result::Result<(), Tensor<'ctx>> {
        if self.supported_by.borrow().contains(&id) {
            return Ok(());
        }
        if let Some(n) = self.nodes().into_iter().find(|&n| !supported(n)) {
            return Err(n);
        }
        self.supported_by.borrow_mut().push(id);
        Ok(())
    }

    /// The nodes (the tensors an op computes), in compute order.
    pub fn nodes(&self) -> Vec<Tensor<'ctx>> {
        self.api.graph_nodes(self.raw).into_iter().map(|raw| Tensor { raw, api: self.api, _ctx: PhantomData }).collect()
    }

    pub fn n_nodes(&self) -> usize {
        self.api.graph_nodes(self.raw).len()
    }

    /// Every tensor of the graph: nodes and leafs.
    pub fn tensors(&self) -> Vec<Tensor<'ctx>> {
        self.tensors.iter().map(|&raw| Tensor { raw, api: self.api, _ctx: PhantomData }).collect()
    }

    pub fn contains(&self, t: Tensor<'_>) -> bool {
        self.set.contains(&t.raw.addr())
    }

    pub(crate) fn check_member(&self, t: Tensor<'_>, what: &str) -> Result<()> {
        if !self.contains(t) {
            return Err(Error::Invalid(format!("{what}: tensor '{}' is not in the allocated graph", t.name())));
        }
        Ok(())
    }
}

impl fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Graph({} nodes, {} tensors)", self.n_nodes(), self.tensors.len())
    }
}
