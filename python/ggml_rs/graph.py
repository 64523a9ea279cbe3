"""Contexts, tensors and graphs: building a computation, setting and reading its tensors.

Shapes are numpy's: `(rows, cols)` here is ggml's `ne = [cols, rows, 1, 1]` (ggml lists the
fastest-varying dimension first). Every op checks upstream's asserts before it calls ggml, so a
wrong shape raises `ValueError` instead of aborting the process.
"""

import ctypes

import numpy as np

from ._lib import (FLAG_COMPUTE, GGML_MAX_DIMS, ClosedError, GgmlError, NotAllocatedError,
                   cgraph_struct, clear_messages, failure, init_params, lib, tensor_struct)
from ._owner import (Owner, buffer_owner, context_of, lifecycle, locked, register_context,
                     unregister_context)
from .ops import Ops, _op

# ggml type <-> numpy dtype, for the types a numpy array can hold
_DTYPES = {0: np.float32, 1: np.float16, 24: np.int8, 25: np.int16, 26: np.int32, 27: np.int64, 28: np.float64}
_TYPES = {np.dtype(v): k for k, v in _DTYPES.items()}


def _ggml_type(dtype):
    try:
        return _TYPES[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"dtype {dtype!r} has no ggml type here (supported: {sorted(str(np.dtype(d)) for d in _TYPES)})") from None


def _ne(shape):
    """numpy shape -> ggml ne (4 entries, fastest first)."""
    shape = tuple(int(d) for d in shape)
    if not 1 <= len(shape) <= GGML_MAX_DIMS or any(d < 1 for d in shape):
        raise ValueError(f"shape {shape}: 1 to {GGML_MAX_DIMS} dimensions, each at least 1")
    return list(reversed(shape)) + [1] * (GGML_MAX_DIMS - len(shape))


class Context(Owner, Ops):
    """A ggml context with `no_alloc`: it holds tensor and graph headers, never tensor data.

    max_tensors and max_graphs size its memory; creating more raises instead of overflowing.
    graph_size is the node capacity of the graphs it makes.
    """

    kind = "context"
    rank = 3

    def __init__(self, max_tensors=256, max_graphs=4, graph_size=2048):
        L = lib()
        self.graph_size = int(graph_size)
        mem = max_tensors * L.tensor_overhead + max_graphs * L.ggml_graph_overhead_custom(self.graph_size, False)
        with lifecycle.using():
            clear_messages()
            ptr = L.ggml_init(init_params(mem, None, True))
            if not ptr:
                raise failure("ggml_init", f"could not make a context of {mem} bytes")
            start = L.ggml_get_mem_buffer(ptr)
            end = start + L.ggml_get_mem_size(ptr)
        super().__init__(ptr, L.ggml_free, unregister=lambda: unregister_context(start))
        register_context(start, end, self)

    # ---- tensors ---------------------------------------------------------------------------

    def _room(self, nbytes, what):
        L = lib()
        ptr = self.ptr  # raises once closed
        used, size = L.ggml_used_mem(ptr), L.ggml_get_mem_size(ptr)
        if used + nbytes > size:
            raise GgmlError(f"{what}: the context is full ({used} of {size} bytes used); make it with a larger max_tensors/max_graphs")

    def _new(self, what, fn, *args, ndim=None, name=None):
        """Runs the ggml constructor `fn(ctx, *args)` for one new tensor; Tensors in args are checked."""
        L = lib()
        with lifecycle.using(), locked(self):
            cargs = [a.ptr if isinstance(a, Tensor) else a for a in args]
            self._room(L.tensor_overhead, what)
            clear_messages()
            t = fn(self.ptr, *cargs)
            if not t:
                raise failure(what, "ggml returned NULL")
            if name is not None:
                L.ggml_set_name(t, name.encode())
        return Tensor(self, t, ndim)

    def tensor(self, shape, dtype=np.float32, name=None):
        """A new tensor of numpy `shape` and `dtype` (no memory until an allocator gives it some)."""
        ne = _ne(shape)
        arr = (ctypes.c_int64 * GGML_MAX_DIMS)(*ne)
        return self._new("tensor", lib().ggml_new_tensor, _ggml_type(dtype), GGML_MAX_DIMS, arr, ndim=len(tuple(shape)), name=name)

    @_op
    def add(self, a, b, name=None):
        """a + b, b broadcast over a (ggml_add)."""
        _need_repeat("add", b, a)
        return self._new("add", lib().ggml_add, a, b, ndim=a.ndim, name=name)

    @_op
    def mul(self, a, b, name=None):
        """a * b elementwise, b broadcast over a (ggml_mul)."""
        _need_repeat("mul", b, a)
        return self._new("mul", lib().ggml_mul, a, b, ndim=a.ndim, name=name)

    @_op
    def scale(self, a, s, name=None):
        """a * s for a number s (ggml_scale)."""
        ne, nb = a.ne, a.nb
        if not (nb[0] == a.itemsize and nb[2] == nb[1] * ne[1] and nb[3] == nb[2] * ne[2]):
            raise ValueError(f"scale: tensor '{a.name}' must have contiguous rows (use cont())")
        return self._new("scale", lib().ggml_scale, a, float(s), ndim=a.ndim, name=name)

    @_op
    def sqr(self, a, name=None):
        """a * a (ggml_sqr)."""
        return self._new("sqr", lib().ggml_sqr, a, ndim=a.ndim, name=name)

    @_op
    def sum(self, a, name=None):
        """The sum of all elements, a one-element tensor (ggml_sum)."""
        return self._new("sum", lib().ggml_sum, a, ndim=1, name=name)

    @_op
    def repeat(self, a, like, name=None):
        """a tiled to the shape of `like` (ggml_repeat)."""
        _need_repeat("repeat", a, like)
        return self._new("repeat", lib().ggml_repeat, a, like, ndim=like.ndim, name=name)

    @_op
    def mul_mat(self, a, b, name=None):
        """ggml_mul_mat: for 2-D a (n, k) and b (m, k), the (m, n) result b @ a.T."""
        ae, be = a.ne, b.ne
        if ae[0] != be[0] or be[2] % ae[2] or be[3] % ae[3]:
            raise ValueError(f"mul_mat: shapes {a.shape} and {b.shape}: the last dimensions must agree (b @ a.T)")
        if lib().ggml_is_transposed(a.ptr):
            raise ValueError(f"mul_mat: tensor '{a.name}' is transposed (use cont())")
        return self._new("mul_mat", lib().ggml_mul_mat, a, b, ndim=max(a.ndim, b.ndim), name=name)

    @_op
    def cpy(self, a, b, name=None):
        """Copies a into b (ggml_cpy; converts the type): the result is a view of b."""
        if a.nelements != b.nelements:
            raise ValueError(f"cpy: {a.nelements} elements into {b.nelements}")
        return self._new("cpy", lib().ggml_cpy, a, b, ndim=b.ndim, name=name)

    @_op
    def cont(self, a, name=None):
        """A contiguous copy of a (ggml_cont)."""
        return self._new("cont", lib().ggml_cont, a, ndim=a.ndim, name=name)

    @_op
    def transpose(self, a, name=None):
        """a with its last two (numpy) axes swapped, as a view (ggml_transpose)."""
        return self._new("transpose", lib().ggml_transpose, a, ndim=max(a.ndim, 2), name=name)

    @_op
    def reshape(self, a, shape, name=None):
        """A view of the contiguous tensor a with another shape (ggml_reshape_4d)."""
        ne = _ne(shape)
        if ne[0] * ne[1] * ne[2] * ne[3] != a.nelements:
            raise ValueError(f"reshape: {a.nelements} elements into shape {tuple(shape)}")
        if not lib().ggml_is_contiguous(a.ptr):
            raise ValueError(f"reshape: tensor '{a.name}' is not contiguous (use cont())")
        return self._new("reshape", lib().ggml_reshape_4d, a, *ne, ndim=len(tuple(shape)), name=name)

    @_op
    def view(self, a, shape, offset=0, strides=None, name=None):
        """A view of a: numpy `shape`, byte `offset`, byte `strides` (numpy order; default: packed)."""
        ne = _ne(shape)
        nd = len(tuple(shape))
        if strides is None:
            nb = [a.itemsize]
            for i in range(1, GGML_MAX_DIMS):
                nb.append(nb[-1] * ne[i - 1])
        else:
            if len(strides) != nd:
                raise ValueError(f"view: {len(strides)} strides for {nd} dimensions")
            nb = list(reversed([int(s) for s in strides]))
            if nb[0] != a.itemsize:
                raise ValueError(f"view: the innermost stride must be the element size ({a.itemsize})")
            for i in range(nd, GGML_MAX_DIMS):
                nb.append(nb[-1] * ne[i - 1])
        extent = offset + sum((ne[i] - 1) * nb[i] for i in range(GGML_MAX_DIMS)) + a.itemsize
        if offset < 0 or extent > a.nbytes:
            raise ValueError(f"view: bytes {offset}..{extent} outside tensor '{a.name}' ({a.nbytes} bytes)")
        return self._new("view", lib().ggml_view_4d, a, *ne, nb[1], nb[2], nb[3], int(offset), ndim=nd, name=name)

    # ---- graphs ----------------------------------------------------------------------------

    def _new_graph(self):
        L = lib()
        self._room(L.ggml_graph_overhead_custom(self.graph_size, False), "graph")
        g = L.ggml_new_graph_custom(self.ptr, self.graph_size, False)
        if not g:
            raise failure("graph", "ggml returned NULL")
        return g

    def graph(self, *outputs):
        """The graph computing `outputs` (ggml_build_forward_expand of each, in order)."""
        L = lib()
        with lifecycle.using(), locked(self):
            reach = _reachable([o.ptr for o in outputs])
            if len(reach) > self.graph_size:
                raise ValueError(f"graph: {len(reach)} tensors, more than graph_size={self.graph_size}")
            g = self._new_graph()
            for o in outputs:
                L.ggml_build_forward_expand(g, o.ptr)
            return Graph(self, g)

    def graph_of(self, nodes):
        """A graph of exactly `nodes`, in this order (each flagged for compute); the other
        tensors they read are listed as its leafs, not recomputed: for results carried over
        from an earlier graph. (The scheduler places a tensor by its buffer only when it is a
        node or a leaf; ggml_graph_add_node alone lists no leafs.)"""
        L = lib()
        with lifecycle.using(), locked(self):
            nodes = list(nodes)
            if len(nodes) > self.graph_size:
                raise ValueError(f"graph_of: {len(nodes)} nodes, more than graph_size={self.graph_size}")
            ptrs = [n.ptr for n in nodes]
            in_graph = set(ptrs)
            leafs = []
            for p in ptrs:
                for q in _header(p).src:
                    if q and q not in in_graph:
                        in_graph.add(q)
                        leafs.append(q)
            if len(leafs) > self.graph_size:
                raise ValueError(f"graph_of: {len(leafs)} leafs, more than graph_size={self.graph_size}")
            g = self._new_graph()
            for p in ptrs:
                tensor_struct.from_address(p).flags |= FLAG_COMPUTE
                L.ggml_graph_add_node(g, p)
            cg = cgraph_struct.from_address(g)
            for q in leafs:
                cg.leafs[cg.n_leafs] = q
                cg.n_leafs += 1
            return Graph(self, g)

    def alloc_tensors(self, target):
        """Gives every tensor of this context without memory a place in one new buffer of
        `target` (a Backend or a BufferType): weights, or inputs kept across graphs."""
        from .backend import Backend, Buffer
        L = lib()
        backend = target if isinstance(target, Backend) else None
        with lifecycle.using(), locked(self):
            buft = target.buffer_type.ptr if backend is not None else target.ptr
            clear_messages()
            buf = L.ggml_backend_alloc_ctx_tensors_from_buft(self.ptr, buft)
            if not buf:
                raise failure("alloc_tensors", "nothing allocated: every tensor of the context has memory already, or the buffer could not be made")
            return Buffer(buf, [p for p in (backend, self) if p is not None])

    def describe(self):
        return "context"


def _need_repeat(what, small, big):
    if not lib().ggml_can_repeat(small.ptr, big.ptr):
        raise ValueError(f"{what}: shape {small.shape} does not broadcast to {big.shape}")


class Tensor:
    """A tensor of a Context. Equal to another Tensor of the same ggml tensor.

    Its header lives in the context (closing that makes the tensor unusable); its data lives in
    whatever buffer an allocator placed it in, and `set`/`get` check that buffer is still alive.
    """

    __slots__ = ("ctx", "_ptr", "_ndim")

    def __init__(self, ctx, ptr, ndim=None):
        self.ctx, self._ptr, self._ndim = ctx, ptr, ndim

    @property
    def ptr(self):
        """The `struct ggml_tensor *`; raises ClosedError once its context is closed."""
        if self.ctx.closed:
            raise ClosedError("tensor of a closed context")
        return self._ptr

    def _s(self):
        return tensor_struct.from_address(self.ptr)

    def _read(self, f):
        with lifecycle.using():
            return f(self._s())

    @property
    def name(self):
        return self._read(lambda s: s.name.decode("utf-8", "replace"))

    @name.setter
    def name(self, value):
        with lifecycle.using():
            lib().ggml_set_name(self.ptr, value.encode())

    @property
    def ne(self):
        """ggml's dimensions, fastest first (4 entries)."""
        return self._read(lambda s: tuple(s.ne))

    @property
    def nb(self):
        """ggml's byte strides, fastest first (4 entries)."""
        return self._read(lambda s: tuple(s.nb))

    @property
    def ndim(self):
        if self._ndim is not None:
            return self._ndim
        with lifecycle.using():
            return lib().ggml_n_dims(self.ptr)

    @property
    def shape(self):
        """The numpy shape: ne reversed, with `ndim` dimensions."""
        ne = self.ne
        return tuple(reversed(ne[: self.ndim]))

    @property
    def type_name(self):
        return self._read(lambda s: lib().ggml_type_name(s.type).decode())

    @property
    def dtype(self):
        """The numpy dtype, or None for a ggml type numpy has not (quantized, bf16)."""
        t = self._read(lambda s: s.type)
        return np.dtype(_DTYPES[t]) if t in _DTYPES else None

    @property
    def itemsize(self):
        return self._read(lambda s: lib().ggml_type_size(s.type))

    @property
    def nelements(self):
        with lifecycle.using():
            return lib().ggml_nelements(self.ptr)

    @property
    def nbytes(self):
        with lifecycle.using():
            return lib().ggml_nbytes(self.ptr)

    @property
    def op(self):
        """The op's name (`NONE` for a tensor made by `Context.tensor`)."""
        with lifecycle.using():
            return lib().ggml_op_desc(self.ptr).decode()

    @property
    def flags(self):
        return self._read(lambda s: s.flags)

    @property
    def data_ptr(self):
        """The address of its data (in its buffer's address space), or None."""
        return self._read(lambda s: s.data or None)

    @property
    def buffer_name(self):
        """The name of the buffer its data is in, or None when it has no live memory."""
        with lifecycle.using():
            s = self._s()
            if _memory_problem(s) is not None:
                return None
            return lib().ggml_backend_buffer_name(s.buffer).decode()

    def set_input(self):
        """Flags the tensor as a graph input (ggml_set_input): allocated first, never overwritten."""
        with lifecycle.using():
            lib().ggml_set_input(self.ptr)
        return self

    def set_output(self):
        """Flags the tensor as a graph output (ggml_set_output): its memory is not reused."""
        with lifecycle.using():
            lib().ggml_set_output(self.ptr)
        return self

    def _io_check(self, s, arr, what):
        t = s.type
        if t not in _DTYPES:
            raise TypeError(f"{what}: tensor '{s.name.decode()}' is {lib().ggml_type_name(t).decode()}, which numpy cannot hold")
        want = np.dtype(_DTYPES[t])
        if arr.dtype != want:
            raise TypeError(f"{what}: tensor '{s.name.decode()}' is {want}, the array is {arr.dtype}")
        padded = (1,) * (GGML_MAX_DIMS - arr.ndim) + tuple(arr.shape)
        if arr.ndim > GGML_MAX_DIMS or padded != tuple(reversed(tuple(s.ne))):
            raise ValueError(f"{what}: tensor '{s.name.decode()}' has shape {self.shape}, the array {arr.shape}")
        if not lib().ggml_is_contiguous(self._ptr):
            raise ValueError(f"{what}: tensor '{s.name.decode()}' is not contiguous (read cont() of it)")
        problem = _memory_problem(s)
        if problem is not None:
            raise NotAllocatedError(f"{what}: tensor '{s.name.decode()}' {problem}")

    def set(self, array):
        """Copies a numpy array of the tensor's dtype and shape into its memory."""
        arr = np.ascontiguousarray(array)
        with lifecycle.using():
            s = self._s()
            self._io_check(s, arr, "set")
            lib().ggml_backend_tensor_set(self._ptr, arr.ctypes.data, 0, arr.nbytes)
        return self

    def get(self, out=None):
        """The tensor's data as a new numpy array, or read into `out` (same shape and dtype)."""
        with lifecycle.using():
            s = self._s()
            if out is None:
                if s.type not in _DTYPES:
                    self._io_check(s, np.empty(0), "get")
                out = np.empty(self.shape, dtype=_DTYPES[s.type])
            elif not (out.flags.c_contiguous and out.flags.writeable):
                raise ValueError("get: `out` must be a writable C-contiguous array")
            self._io_check(s, out, "get")
            lib().ggml_backend_tensor_get(self._ptr, out.ctypes.data, 0, out.nbytes)
        return out

    def __add__(self, other):
        return self.ctx.add(self, other)

    def __mul__(self, other):
        return self.ctx.mul(self, other) if isinstance(other, Tensor) else self.ctx.scale(self, other)

    __rmul__ = __mul__

    def __eq__(self, other):
        return isinstance(other, Tensor) and other._ptr == self._ptr

    def __hash__(self):
        return hash(self._ptr)

    def __repr__(self):
        if self.ctx.closed:
            return "<Tensor of a closed context>"
        return f"<Tensor '{self.name}' {self.shape} {self.type_name} {self.op}>"


def _memory_problem(s):
    """Why tensor header `s` has no readable memory, or None when it has."""
    if not s.buffer or not s.data:
        return "has no memory: allocate a graph with it first"
    if buffer_owner(s.buffer) is None:
        return "has no memory any more: its buffer was freed (its allocator was closed or reallocated it)"
    L = lib()
    base, size = L.ggml_backend_buffer_get_base(s.buffer) or 0, L.ggml_backend_buffer_get_size(s.buffer)
    if not base <= s.data <= base + size:
        return "points outside its buffer (its memory was reallocated)"
    return None


def _header(p):
    if context_of(p) is None:
        raise ClosedError(f"the graph reads a tensor (at {p:#x}) of no live context: its context was closed "
                          "(or the library rewrote the graph's sources to tensors of its own)")
    return tensor_struct.from_address(p)


def _reachable(roots):
    """Every tensor ggml_build_forward_expand visits from `roots` (through src): {pointer: header}."""
    seen, stack = {}, list(roots)
    while stack:
        p = stack.pop()
        if p not in seen:
            seen[p] = s = _header(p)
            stack.extend(q for q in s.src if q)
    return seen


def _walk(nodes):
    """What computing the graph of `nodes` touches: the nodes, their sources, and the tensors
    these are views of, each checked to belong to a live context: {pointer: header}. Call inside
    `lifecycle.using()`."""
    seen = {}

    def add(p):
        while p and p not in seen:
            seen[p] = s = _header(p)
            p = s.view_src

    for n in nodes:
        add(n)
        for q in seen[n].src:
            add(q)
    return seen


class Graph:
    """A computation graph (`struct ggml_cgraph`) in a Context's memory."""

    def __init__(self, ctx, ptr):
        self.ctx, self._ptr = ctx, ptr
        self._checked = {}  # mode -> lifecycle generation of the last passing check
        tensors = _walk(self._node_ptrs())
        # keep every context the graph reads alive for as long as the graph is
        self._contexts = {id(c): c for c in (context_of(p) for p in tensors)}

    @property
    def ptr(self):
        if self.ctx.closed:
            raise ClosedError("graph of a closed context")
        return self._ptr

    def _node_ptrs(self):
        L = lib()
        g = self.ptr
        return [L.ggml_graph_node(g, i) for i in range(L.ggml_graph_n_nodes(g))]

    @property
    def n_nodes(self):
        with lifecycle.using():
            return lib().ggml_graph_n_nodes(self.ptr)

    @property
    def nodes(self):
        """The nodes, in compute order."""
        with lifecycle.using():
            return [Tensor(context_of(p), p) for p in self._node_ptrs()]

    def check(self, mode, backends=(), tolerate=()):
        """Raises unless the graph can go to the library: every tensor's context is alive and
        (mode "compute") every tensor has live memory, or (mode "alloc") every tensor that has
        memory has live memory, or memory in a buffer of `tolerate`: an allocator's own old
        buffers, which it tracks itself). With `backends`, every node must be supported by one.
        Call inside `lifecycle.using()`; the result is cached until something is freed."""
        key = (mode, tuple(b.serial for b in backends), frozenset(tolerate))
        if self._checked.get(key) == lifecycle.generation:
            return
        tensors = _walk(self._node_ptrs())
        for p, s in tensors.items():
            if mode == "compute" or s.buffer:
                problem = _memory_problem(s)
                if problem is not None and not (mode == "alloc" and s.buffer in tolerate):
                    raise NotAllocatedError(f"{mode}: tensor '{s.name.decode()}' {problem}")
        if backends:
            L = lib()
            for p in self._node_ptrs():
                if not any(L.ggml_backend_supports_op(b.ptr, p) for b in backends):
                    s = tensor_struct.from_address(p)
                    raise GgmlError(f"{mode}: no backend of {[b.name for b in backends]} supports node "
                                    f"'{s.name.decode()}' (op {L.ggml_op_desc(p).decode()}, {L.ggml_type_name(s.type).decode()})")
        self._checked[key] = lifecycle.generation

    def __repr__(self):
        return f"<Graph of {self.n_nodes} nodes>" if not self.ctx.closed else "<Graph of a closed context>"
