"""Each op against numpy, the ways to make a backend, and numpy in and out."""

import numpy as np
import pytest

import ggml_rs as g

rng = np.random.default_rng(7)


def run_on_cpu(cpu, graph, inputs):
    """Allocates `graph` with a graph allocator, sets inputs, computes."""
    ga = g.GraphAllocator(cpu)
    ga.alloc(graph)
    for t, v in inputs.items():
        t.set(v)
    cpu.compute(graph)
    return ga


def test_version_and_layouts(library):
    assert g.version().startswith("ggml-rs ")
    assert library.is_ggml_rs


def test_ops_against_numpy(cpu, ctx):
    av = rng.standard_normal((3, 4)).astype(np.float32)
    bv = rng.standard_normal((3, 4)).astype(np.float32)
    rowv = rng.standard_normal((4,)).astype(np.float32)
    wv = rng.standard_normal((5, 4)).astype(np.float32)
    a = ctx.tensor((3, 4), name="a").set_input()
    b = ctx.tensor((3, 4), name="b").set_input()
    row = ctx.tensor((4,), name="row").set_input()
    w = ctx.tensor((5, 4), name="w").set_input()
    outs = {
        "add": (a + b, av + bv),
        "broadcast": (ctx.add(a, row), av + rowv),
        "mul": (a * b, av * bv),
        "scale": (a * 3.0, av * 3.0),
        "sqr": (ctx.sqr(a), av * av),
        "sum": (ctx.sum(a), np.array([av.sum()])),
        "mul_mat": (ctx.mul_mat(w, a), av @ wv.T),
        "cont_transpose": (ctx.cont(ctx.transpose(a)), av.T),
        "reshape": (ctx.cont(ctx.reshape(a, (2, 6))), av.reshape(2, 6)),
        "view": (ctx.cont(ctx.view(a, (2, 2), offset=4 * 4 + 4, strides=(16, 4))), av[1:3, 1:3]),
        "cpy_f16": (ctx.cpy(a, ctx.tensor((3, 4), np.float16)), av.astype(np.float16)),
        "repeat": (ctx.repeat(row, a), np.broadcast_to(rowv, (3, 4))),
    }
    for t, _ in outs.values():
        t.set_output()
    graph = ctx.graph(*(t for t, _ in outs.values()))
    with run_on_cpu(cpu, graph, {a: av, b: bv, row: rowv, w: wv}):
        for name, (t, want) in outs.items():
            got = t.get()
            assert got.dtype == want.dtype and got.shape == want.shape, name
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


def test_numpy_shapes_and_get_into(cpu, ctx):
    x = ctx.tensor((2, 3), name="x").set_input()
    y = (x * 2.0).set_output()
    assert x.shape == (2, 3) and x.ne == (3, 2, 1, 1) and x.dtype == np.float32 and x.type_name == "f32"
    with run_on_cpu(cpu, ctx.graph(y), {x: np.arange(6, dtype=np.float32).reshape(2, 3)}):
        out = np.empty((2, 3), np.float32)
        assert y.get(out=out) is out
        np.testing.assert_array_equal(out, 2 * np.arange(6).reshape(2, 3))
        # a leading 1 is the same ggml shape
        x.set(np.ones((1, 2, 3), np.float32))
        # a non-contiguous array is copied first
        x.set(np.arange(6, dtype=np.float32).reshape(3, 2).T)
        np.testing.assert_array_equal(x.get(), np.arange(6).reshape(3, 2).T)


def test_backends_by_registry(library):
    with g.Backend.by_name("CPU") as b:
        assert b.is_cpu and b.name == "CPU"
    with g.Backend.by_type("cpu") as b:
        assert b.is_cpu
        assert b.buffer_type.is_host and b.buffer_type.name == "CPU"
    with pytest.raises(g.GgmlError, match="no device named"):
        g.Backend.by_name("NO-SUCH-DEVICE")


@pytest.mark.parametrize("registry", [True, False], ids=["registry", "ggml_backend_rpc_init"])
def test_rpc_backend_both_ways(rpc_endpoint, cpu, registry):
    with g.Backend.rpc(rpc_endpoint, registry=registry) as rpc, g.Context() as ctx:
        assert rpc.name.startswith("RPC") and not rpc.is_cpu and not rpc.buffer_type.is_host
        x = ctx.tensor((8,), name="x").set_input()
        y = ctx.sqr(x * 3.0).set_output()
        graph = ctx.graph(y)
        with g.GraphAllocator(rpc) as ga:
            ga.alloc(graph)
            assert y.buffer_name.startswith("RPC")
            x.set(np.arange(8, dtype=np.float32))
            rpc.compute(graph)
            np.testing.assert_array_equal(y.get(), (3 * np.arange(8)) ** 2)
