"""Misuse raises a Python exception naming what is wrong; the process never crashes.

Each of these would abort the process, or read freed or unallocated memory, if it reached ggml
unchecked."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ggml_rs as g


def simple(ctx):
    x = ctx.tensor((4,), name="x").set_input()
    y = ctx.scale(x, 2.0, name="y").set_output()
    return x, y, ctx.graph(y)


def test_compute_before_alloc(cpu, ctx):
    x, y, graph = simple(ctx)
    with pytest.raises(g.NotAllocatedError, match="tensor '(x|y)' has no memory"):
        cpu.compute(graph)
    with g.Scheduler([cpu]) as sched:
        with pytest.raises(g.NotAllocatedError, match="call alloc"):
            sched.compute(graph)
        sched.alloc(graph)
        sched.reset()
        with pytest.raises(g.NotAllocatedError):
            sched.compute(graph)


def test_alloc_twice_without_reset(cpu, ctx):
    x, y, graph = simple(ctx)
    with g.Scheduler([cpu]) as sched:
        sched.alloc(graph)
        with pytest.raises(g.GgmlError, match="reset"):
            sched.alloc(graph)


def test_set_and_get_check_memory_dtype_and_shape(cpu, ctx):
    x, y, graph = simple(ctx)
    with pytest.raises(g.NotAllocatedError, match="tensor 'x' has no memory"):
        x.set(np.ones(4, np.float32))
    with pytest.raises(g.NotAllocatedError, match="tensor 'y'"):
        y.get()
    with g.GraphAllocator(cpu) as ga:
        ga.alloc(graph)
        with pytest.raises(TypeError, match="float32.*float64"):
            x.set(np.ones(4))
        with pytest.raises(ValueError, match=r"shape \(4,\).*\(5,\)"):
            x.set(np.ones(5, np.float32))
        with pytest.raises(ValueError, match="shape"):
            x.set(np.ones((4, 1), np.float32))
        with pytest.raises(ValueError, match="writable"):
            out = np.ones(4, np.float32)
            out.flags.writeable = False
            y.get(out=out)
        with pytest.raises(ValueError, match="not contiguous"):
            ctx.transpose(x.ctx.reshape(x, (2, 2))).get()
    # the allocator is closed: its buffer is gone with it
    with pytest.raises(g.NotAllocatedError, match="buffer was freed"):
        y.get()


def test_bad_shapes_raise_before_ggml_asserts(ctx):
    a = ctx.tensor((3, 4))
    b = ctx.tensor((2, 4))
    with pytest.raises(ValueError, match="broadcast"):
        ctx.add(a, b)
    with pytest.raises(ValueError, match="broadcast"):
        ctx.mul(a, ctx.tensor((3,)))
    with pytest.raises(ValueError, match="mul_mat"):
        ctx.mul_mat(a, ctx.tensor((3, 5)))
    with pytest.raises(ValueError, match="transposed"):
        ctx.mul_mat(ctx.transpose(a), ctx.tensor((2, 3)))
    with pytest.raises(ValueError, match="elements"):
        ctx.cpy(a, b)
    with pytest.raises(ValueError, match="elements"):
        ctx.reshape(a, (5, 2))
    with pytest.raises(ValueError, match="outside"):
        ctx.view(a, (4, 4))
    with pytest.raises(ValueError, match="dimensions"):
        ctx.tensor((1, 2, 3, 4, 5))
    with pytest.raises(TypeError, match="dtype"):
        ctx.tensor((2,), dtype=np.complex64)


def test_full_context_raises():
    with g.Context(max_tensors=2, max_graphs=0) as ctx:
        a = ctx.tensor((4,))
        ctx.sqr(a)
        with pytest.raises(g.GgmlError, match="context is full"):
            ctx.sqr(a)
        with pytest.raises(g.GgmlError, match="context is full"):
            ctx.graph(a)


def test_closed_objects_raise(cpu):
    ctx = g.Context()
    x, y, graph = simple(ctx)
    ctx.close()
    ctx.close()  # idempotent
    for use in (lambda: x.name, lambda: ctx.sqr(x), lambda: ctx.tensor((2,)), lambda: graph.n_nodes, lambda: y.get(),
                lambda: ctx.graph_of([]), lambda: ctx.graph()):
        with pytest.raises(g.ClosedError):
            use()

    b = g.Backend.cpu()
    sched = g.Scheduler([b])
    b.close()  # closes the scheduler first
    assert sched.closed
    with pytest.raises(g.ClosedError, match="scheduler is closed"):
        sched.reset()
    with pytest.raises(g.ClosedError, match="backend CPU is closed"):
        g.Scheduler([b])


def test_graph_reading_a_closed_context(cpu):
    with g.Context() as ctx:
        wctx = g.Context()
        w = wctx.tensor((4,), name="w")
        wbuf = wctx.alloc_tensors(cpu)
        w.set(np.ones(4, np.float32))
        x = ctx.tensor((4,), name="x").set_input()
        y = ctx.mul(x, w).set_output()
        graph = ctx.graph(y)
        with g.GraphAllocator(cpu) as ga:
            ga.alloc(graph)
            x.set(np.ones(4, np.float32))
            cpu.compute(graph)
            wbuf.close()  # the weights' memory is gone
            with pytest.raises(g.NotAllocatedError, match="tensor 'w'"):
                cpu.compute(graph)
            wctx.close()  # and now their headers too (closing the context closed its buffers)
            with pytest.raises(g.ClosedError, match="its context was closed"):
                cpu.compute(graph)
            with pytest.raises(g.ClosedError):
                ga.alloc(graph)


def test_scheduler_arguments(cpu, rpc, ctx):
    with pytest.raises(ValueError, match="last backend must be a CPU"):
        g.Scheduler([cpu, rpc])
    with pytest.raises(ValueError, match="twice"):
        g.Scheduler([cpu, cpu])
    with pytest.raises(ValueError, match="cannot use buffer type"):
        g.Scheduler([rpc, cpu], buffer_types=[cpu.buffer_type, cpu.buffer_type])
    x, y, graph = simple(ctx)
    with g.Scheduler([cpu]) as sched, g.Backend.cpu() as other:
        with pytest.raises(ValueError, match="not one of the scheduler's backends"):
            sched.set_tensor_backend(y, other)
        with pytest.raises(ValueError, match="not one of the scheduler's backends"):
            sched.buffer_size(other)


def test_rpc_endpoint_that_does_not_answer():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens once it is closed
    with pytest.raises(ConnectionError, match=f"127.0.0.1:{port}"):
        g.Backend.rpc(f"127.0.0.1:{port}", timeout=1)


def run_python(code):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env=env)


def test_objects_left_to_the_garbage_collector_and_to_exit():
    # nothing closed explicitly: dropped in an awkward order, in a cycle, and alive at exit
    r = run_python("""
        import gc, numpy as np, ggml_rs as g
        cpu = g.Backend.cpu()
        for i in range(20):
            ctx = g.Context()
            x = ctx.tensor((4,), name="x").set_input()
            y = ctx.sqr(x).set_output()
            graph = ctx.graph(y)
            sched = g.Scheduler([cpu])
            sched.alloc(graph)
            x.set(np.full(4, i, np.float32))
            sched.compute(graph)
            assert y.get()[0] == i * i
            cycle = [sched, ctx]
            cycle.append(cycle)
            del ctx, sched, graph, cycle        # the tensors still hold their context
            assert y.get()[0] == i * i          # the scheduler (and its buffer) are still held
            del x, y
            gc.collect()
        wctx = g.Context()
        w = wctx.tensor((4,), name="w")
        buf = wctx.alloc_tensors(cpu)
        keep = (g.Scheduler([cpu, ]), g.GraphAllocator(cpu), buf)
        print("done")
    """)
    assert r.returncode == 0 and r.stdout.strip() == "done", r.stdout + r.stderr


def test_the_garbage_collector_frees_dependents_first(monkeypatch):
    from ggml_rs import _owner
    kinds, order = {}, []
    real = _owner._release

    def spy(free, ptr, unregister, keep_alive):
        order.append(kinds[ptr])
        real(free, ptr, unregister, keep_alive)

    monkeypatch.setattr(_owner, "_release", spy)

    def make():
        cpu = g.Backend.cpu()
        ctx = g.Context()
        x, y, graph = simple(ctx)
        ctx.tensor((4,), name="w")  # one more tensor for the buffer
        buf = ctx.alloc_tensors(cpu)
        sched = g.Scheduler([cpu])
        ga = g.GraphAllocator(cpu)
        sched.alloc(graph)
        for o in (cpu, ctx, buf, sched, ga):
            kinds[o._ptr] = o.kind
        # dropped in creation order: the references between them decide the order of the frees
        return [cpu, ctx, buf, sched, ga]

    objs = make()
    while objs:
        objs.pop(0)
    import gc
    gc.collect()
    assert sorted(order) == sorted(kinds.values()), order
    assert order.index("scheduler") < order.index("backend") and order.index("graph allocator") < order.index("backend")
    assert order.index("buffer") < order.index("backend") and order.index("buffer") < order.index("context")
    assert order.index("scheduler") < order.index("context"), order


def test_library_message_in_the_exception(cpu, ctx):
    # an allocation the library refuses: its logged error is the exception's text
    with g.Scheduler([cpu]) as sched:
        x, y, ga_ = simple(ctx)
        z = ctx.tensor((4,), name="z").set_input()
        gb = ctx.graph(ctx.scale(z, 3.0).set_output())
        sched.alloc(ga_)
        with pytest.raises(g.GgmlError) as e:
            sched.compute(gb)
        assert "ggml_backend_sched_graph_compute" in str(e.value) and "not the allocated one" in str(e.value)
        assert any("not the allocated one" in m for m in e.value.messages)
