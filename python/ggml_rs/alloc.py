"""Allocating graphs: the graph allocator (ggml_gallocr) and the backend scheduler."""

import ctypes
import json
import os
import tempfile
from collections import namedtuple

from . import report

from ._lib import STATUS, GgmlError, NotAllocatedError, clear_messages, failure, lib
from ._owner import Owner, buffer_owner, lifecycle, locked, register_buffer, unregister_buffer
from .backend import Backend, BufferType
from .graph import _walk

PlanStats = namedtuple("PlanStats", "planned lower_bound")
PlanStats.__doc__ = "Bytes the last plan of a buffer needs, and the most bytes live at once (ggml-rs)."
AllocatorCounters = namedtuple("AllocatorCounters", "plans replays")
AllocatorCounters.__doc__ = "Plans made, and allocations that replayed the plan of the same graph (ggml-rs)."
SchedulerCounters = namedtuple("SchedulerCounters", "splits repeats")
SchedulerCounters.__doc__ = "Graphs assigned and split, and allocations that repeated the last one unchanged (ggml-rs)."


class _ComputeBuffers:
    """The compute buffers an allocator owns, learnt from the tensors it places (the C API has
    no way to list them): one per buffer type, replaced when the allocator reallocates."""

    def __init__(self):
        self.current = {}   # buffer type -> buffer
        self.retired = set()  # buffers it replaced: its tensors there are its own business

    def adopt(self, owner, tensors):
        L = lib()
        for s in tensors.values():
            if s.buffer and buffer_owner(s.buffer) is None:
                buft = L.ggml_backend_buffer_get_type(s.buffer)
                old = self.current.get(buft)
                if old is not None and old != s.buffer:
                    unregister_buffer(old)
                    self.retired.add(old)
                self.current[buft] = s.buffer
                self.retired.discard(s.buffer)
                register_buffer(s.buffer, owner)

    def own(self):
        """Every buffer these are or were: a tensor of the graph pointing into one is the
        allocator's business (placed anew, or refused by name when a result there is gone),
        even where the buffer was freed or its address taken by a new one."""
        return self.retired | set(self.current.values())

    def forget(self):
        for b in self.current.values():
            unregister_buffer(b)


def _write_report(owner, fn_name, path, format, use):
    """Writes the memory plan report of `owner`'s last plan to `path` ("json" or "svg")."""
    if format not in ("json", "svg"):
        raise ValueError(f"write_report: format {format!r} is not 'json' or 'svg'")
    f = lib().require(fn_name, "write_report")
    with lifecycle.using(), use():
        clear_messages()
        if not f(owner.ptr, os.fsencode(path), 0 if format == "json" else 1):
            raise failure(fn_name, "failed (no message logged)")


def _report(owner, write):
    """The memory plan report of the last plan, as `ggml_rs.report.Report`."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "report.json")
        write(path, "json")
        return report.load(path)


class GraphAllocator(Owner):
    """ggml_gallocr: places the tensors of a graph in one compute buffer of a buffer type.

    `target` is a Backend (its default buffer type; closing the backend closes this first) or a
    BufferType. Compute the allocated graph with `Backend.compute`.
    """

    kind = "graph allocator"
    rank = 0

    def __init__(self, target):
        L = lib()
        backend = target if isinstance(target, Backend) else None
        buft = target.buffer_type if backend is not None else target
        if not isinstance(buft, BufferType):
            raise TypeError("GraphAllocator: target must be a Backend or a BufferType")
        bufs = _ComputeBuffers()
        with lifecycle.using():
            clear_messages()
            arr = (ctypes.c_void_p * 1)(buft.ptr)
            ptr = L.ggml_gallocr_new_n(arr, 1)
            if not ptr:
                raise failure("ggml_gallocr_new", "could not make a graph allocator")
        super().__init__(ptr, L.ggml_gallocr_free, [backend] if backend else [], unregister=bufs.forget)
        self._bufs = bufs
        self._graph = None

    def reserve(self, graph):
        """Sizes the compute buffer for `graph` (ggml_gallocr_reserve) without placing it."""
        self._call("ggml_gallocr_reserve", graph)

    def alloc(self, graph):
        """Places every tensor of `graph` without memory (ggml_gallocr_alloc_graph)."""
        self._call("ggml_gallocr_alloc_graph", graph)
        self._graph = graph  # keeps the contexts it reads alive at least as long as this

    def _call(self, name, graph):
        L = lib()
        with lifecycle.using(), locked(self):
            ptr = self.ptr
            graph.check("alloc", tolerate=self._bufs.own())
            clear_messages()
            if not getattr(L, name)(ptr, graph.ptr):
                raise failure(name, "failed (no message logged)")
            self._bufs.adopt(self, _walk(graph._node_ptrs()))

    def buffer_size(self):
        """The size of its compute buffer (ggml_gallocr_get_buffer_size)."""
        with lifecycle.using(), locked(self):
            return lib().ggml_gallocr_get_buffer_size(self.ptr, 0)

    def plan_stats(self):
        """PlanStats of the last plan, or None before the first (ggml_rs_gallocr_plan_stats)."""
        f = lib().require("ggml_rs_gallocr_plan_stats", "plan_stats")
        planned, lower = ctypes.c_size_t(), ctypes.c_size_t()
        with lifecycle.using(), locked(self):
            if not f(self.ptr, 0, ctypes.byref(planned), ctypes.byref(lower)):
                return None
        return PlanStats(planned.value, lower.value)

    def counters(self):
        """AllocatorCounters (ggml_rs_gallocr_counters)."""
        f = lib().require("ggml_rs_gallocr_counters", "counters")
        plans, replays = ctypes.c_uint64(), ctypes.c_uint64()
        with lifecycle.using(), locked(self):
            f(self.ptr, ctypes.byref(plans), ctypes.byref(replays))
        return AllocatorCounters(plans.value, replays.value)

    def write_report(self, path, format="json"):
        """Writes the memory plan report of the last plan (reserve or alloc) to `path`, as "json"
        or "svg" (ggml_rs_gallocr_write_report); the graph's tensors must still exist."""
        _write_report(self, "ggml_rs_gallocr_write_report", path, format, lambda: locked(self))

    def report(self):
        """The memory plan report of the last plan (`ggml_rs.report.Report`)."""
        return _report(self, self.write_report)


class Scheduler(Owner):
    """ggml_backend_sched over `backends` (first has priority; the last must be a CPU).

    The cycle is upstream's: `reset()`, optionally `set_tensor_backend()`, `alloc(graph)`, set
    the inputs, `compute(graph)`, read the outputs. `alloc` of a second graph without `reset`,
    and `compute` without `alloc`, raise.
    """

    kind = "scheduler"
    rank = 0
    MAX_BACKENDS = 16

    def __init__(self, backends, buffer_types=None, graph_size=2048, parallel=False, op_offload=True):
        L = lib()
        backends = list(backends)
        if not 1 <= len(backends) <= self.MAX_BACKENDS or not all(isinstance(b, Backend) for b in backends):
            raise ValueError(f"Scheduler: 1 to {self.MAX_BACKENDS} Backends, got {backends!r}")
        if len({id(b) for b in backends}) != len(backends):
            raise ValueError("Scheduler: a backend is given twice")
        bufts = list(buffer_types) if buffer_types is not None else [b.buffer_type for b in backends]
        if len(bufts) != len(backends):
            raise ValueError(f"Scheduler: {len(bufts)} buffer types for {len(backends)} backends")
        with lifecycle.using():
            if not backends[-1].is_cpu:
                raise ValueError(f"Scheduler: the last backend must be a CPU backend ({backends[-1].name} is not)")
            for b, t in zip(backends, bufts):
                if not L.ggml_backend_supports_buft(b.ptr, t.ptr):
                    raise ValueError(f"Scheduler: backend {b.name} cannot use buffer type {t.name}")
            n = len(backends)
            clear_messages()
            ptr = L.ggml_backend_sched_new((ctypes.c_void_p * n)(*[b.ptr for b in backends]),
                                           (ctypes.c_void_p * n)(*[t.ptr for t in bufts]), n, graph_size, parallel, op_offload)
            if not ptr:
                raise failure("ggml_backend_sched_new", "could not make a scheduler")
        bufs = _ComputeBuffers()
        super().__init__(ptr, L.ggml_backend_sched_free, backends, unregister=bufs.forget)
        self._bufs = bufs
        self.backends = tuple(backends)
        self._allocated = None  # the graph allocated since the last reset
        self._last = None       # keeps the contexts of the last graph alive

    def _use(self):
        return locked(self, *self.backends)

    def reset(self):
        """Forgets the allocation (ggml_backend_sched_reset): assign and allocate anew."""
        with lifecycle.using(), self._use():
            lib().ggml_backend_sched_reset(self.ptr)
            self._allocated = None

    def _index(self, backend, what):
        for b in self.backends:
            if b is backend:
                return b
        raise ValueError(f"{what}: {backend!r} is not one of the scheduler's backends")

    def set_tensor_backend(self, tensor, backend):
        """Runs (or places) `tensor` on `backend` in the next allocation."""
        with lifecycle.using(), self._use():
            b = self._index(backend, "set_tensor_backend")
            lib().ggml_backend_sched_set_tensor_backend(self.ptr, tensor.ptr, b.ptr)

    def tensor_backend(self, tensor):
        """The backend `tensor` was assigned to, or None."""
        with lifecycle.using(), self._use():
            p = lib().ggml_backend_sched_get_tensor_backend(self.ptr, tensor.ptr)
        return next((b for b in self.backends if b._ptr == p), None)

    def reserve(self, graph):
        """Sizes the compute buffers for a worst-case `graph` (ggml_backend_sched_reserve)."""
        L = lib()
        with lifecycle.using(), self._use():
            ptr = self.ptr
            graph.check("alloc", self.backends, tolerate=self._bufs.own())
            clear_messages()
            if not L.ggml_backend_sched_reserve(ptr, graph.ptr):
                raise failure("ggml_backend_sched_reserve", "failed (no message logged)")
            self._allocated = None

    def alloc(self, graph):
        """Assigns, splits and allocates `graph` (ggml_backend_sched_alloc_graph)."""
        L = lib()
        with lifecycle.using(), self._use():
            ptr = self.ptr
            if self._allocated is not None:
                raise GgmlError("ggml_backend_sched_alloc_graph: a graph is already allocated; call reset() first")
            graph.check("alloc", self.backends, tolerate=self._bufs.own())
            clear_messages()
            if not L.ggml_backend_sched_alloc_graph(ptr, graph.ptr):
                raise failure("ggml_backend_sched_alloc_graph", "failed (no message logged)")
            self._bufs.adopt(self, _walk(graph._node_ptrs()))
            self._allocated = self._last = graph

    def compute(self, graph):
        """Computes the allocated `graph` (ggml_backend_sched_graph_compute)."""
        L = lib()
        with lifecycle.using(), self._use():
            ptr = self.ptr
            if self._allocated is None:
                raise NotAllocatedError("ggml_backend_sched_graph_compute: no graph is allocated; call alloc(graph) first")
            # another graph than the allocated one is the library's to refuse (it reads none of
            # its tensors' memory); the allocated one must still have all of its memory
            graph.check("compute" if graph is self._allocated else "alloc")
            clear_messages()
            status = L.ggml_backend_sched_graph_compute(ptr, graph.ptr)
            if status != 0:
                raise failure("ggml_backend_sched_graph_compute", STATUS.get(status, f"status {status}"))

    @property
    def n_splits(self):
        with lifecycle.using(), self._use():
            return lib().ggml_backend_sched_get_n_splits(self.ptr)

    @property
    def n_copies(self):
        with lifecycle.using(), self._use():
            return lib().ggml_backend_sched_get_n_copies(self.ptr)

    def buffer_size(self, backend):
        """The size of the compute buffer for `backend`."""
        with lifecycle.using(), self._use():
            b = self._index(backend, "buffer_size")
            return lib().ggml_backend_sched_get_buffer_size(self.ptr, b.ptr)

    def counters(self):
        """SchedulerCounters (ggml_rs_sched_counters)."""
        f = lib().require("ggml_rs_sched_counters", "counters")
        splits, repeats = ctypes.c_uint64(), ctypes.c_uint64()
        with lifecycle.using(), self._use():
            f(self.ptr, ctypes.byref(splits), ctypes.byref(repeats))
        return SchedulerCounters(splits.value, repeats.value)

    def dump_plan(self, graph=None, format="json"):
        """The split plan as text: "json" or "dot" (ggml_rs_sched_dump_plan)."""
        if format not in ("json", "dot"):
            raise ValueError(f"dump_plan: format {format!r} is not 'json' or 'dot'")
        f = lib().require("ggml_rs_sched_dump_plan", "dump_plan")
        fmt = 0 if format == "json" else 1
        with lifecycle.using(), self._use():
            g = graph.ptr if graph is not None else None
            n = f(self.ptr, g, fmt, None, 0)
            buf = ctypes.create_string_buffer(n + 1)
            f(self.ptr, g, fmt, buf, n + 1)
        return buf.value.decode("utf-8", "replace")

    def plan(self, graph=None):
        """The split plan, parsed from its JSON dump."""
        return json.loads(self.dump_plan(graph, "json"))

    def write_report(self, path, format="json"):
        """Writes the memory plan report of the last allocation or reservation, with the splits,
        to `path`, as "json" or "svg" (ggml_rs_sched_write_report)."""
        _write_report(self, "ggml_rs_sched_write_report", path, format, self._use)

    def report(self):
        """The memory plan report of the last allocation or reservation (`ggml_rs.report.Report`)."""
        return _report(self, self.write_report)
