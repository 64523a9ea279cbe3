"""ggml-rs's CPU backend written in Rust (libggml_rs_cpu.so), loaded as a backend module beside
upstream's CPU: the same graphs give the same numbers on both."""

import numpy as np
import pytest

import ggml_rs as g
from helpers import rust_cpu_path

rng = np.random.default_rng(11)


_module_path = rust_cpu_path


def _run(backend):
    """0.5 (W a + b)^2 on `backend`, and numpy's result"""
    av = rng.standard_normal((6, 32)).astype(np.float32)
    wv = rng.standard_normal((5, 32)).astype(np.float32)
    bv = rng.standard_normal((6, 5)).astype(np.float32)
    with g.Context() as ctx:
        a = ctx.tensor((6, 32), name="a").set_input()
        w = ctx.tensor((5, 32), name="w").set_input()
        b = ctx.tensor((6, 5), name="b").set_input()
        out = ctx.scale(ctx.sqr(ctx.add(ctx.mul_mat(w, a), b)), 0.5).set_output()
        graph = ctx.graph(out)
        with g.GraphAllocator(backend) as ga:
            ga.alloc(graph)
            for t, v in ((a, av), (w, wv), (b, bv)):
                t.set(v)
            backend.compute(graph)
            got = out.get()
    return got, 0.5 * (av @ wv.T + bv) ** 2


def test_module_registers_a_device_of_its_own():
    names = g.Backend.load_module(_module_path())
    assert names == ["RSCPU"], names
    # loading again registers nothing new
    assert g.Backend.load_module(_module_path()) == names


def test_same_numbers_as_numpy_and_upstreams_cpu():
    path = _module_path()
    with g.Backend.rust_cpu(path, n_threads=2) as rs, g.Backend.cpu(n_threads=1) as cpu:
        assert rs.name == "RSCPU"
        state = rng.bit_generator.state
        got_rs, want = _run(rs)
        rng.bit_generator.state = state
        got_cpu, want_again = _run(cpu)
    np.testing.assert_array_equal(want, want_again)
    np.testing.assert_allclose(got_rs, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_rs, got_cpu, rtol=1e-5, atol=1e-5)


def test_a_missing_module_is_an_error():
    with pytest.raises(g.GgmlError, match="not a file"):
        g.Backend.load_module("/nonexistent/libggml_rs_cpu.so")
