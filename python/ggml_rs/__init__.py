"""ggml_rs: ggml graphs, allocators and schedulers from Python, on ggml-rs.

    import numpy as np, ggml_rs as g
    with g.Backend.cpu() as cpu, g.Context() as ctx:
        x = ctx.tensor((2, 3), name="x").set_input()
        y = (x * 2.0 + x).set_output()
        graph = ctx.graph(y)
        with g.Scheduler([cpu]) as sched:
            sched.alloc(graph)
            x.set(np.ones((2, 3), np.float32))
            sched.compute(graph)
            print(y.get())            # 3.0 everywhere

The libraries are found through $GGML_RS_LIB_DIR (or `load(lib_dir=...)`) on first use;
`library_info()` says which were loaded (a LoadWarning says when it is stock ggml, not ggml-rs).
"""

from ._lib import ClosedError, GgmlError, LoadWarning, NotAllocatedError, library_info, load
from .alloc import AllocatorCounters, GraphAllocator, PlanStats, Scheduler, SchedulerCounters
from .backend import Backend, Buffer, BufferType
from .graph import Context, Graph, Tensor
from . import report

__all__ = [
    "AllocatorCounters", "Backend", "Buffer", "BufferType", "ClosedError", "Context", "GgmlError", "Graph",
    "GraphAllocator", "LoadWarning", "NotAllocatedError", "PlanStats", "Scheduler", "SchedulerCounters", "Tensor",
    "library_info", "load", "report", "version",
]
__version__ = "0.1.0"


def version():
    """The loaded library's version ("ggml-rs 0.1.0 (ggml 0.25.3)"), or None for upstream's ggml."""
    lib = load()
    return lib.ggml_rs_version().decode() if lib.is_ggml_rs else None
