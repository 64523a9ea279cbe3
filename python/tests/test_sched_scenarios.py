"""The scheduler's seed scenarios (c_tests/test_sched_scenarios.c) from Python, with two real
backends: an rpc-server process (its buffers are not host memory, so splits and copies really
happen) and the local CPU. Upstream's scheduler fails the first three (stale results after
reset + alloc, and the graph argument of compute ignored)."""

import json

import numpy as np
import pytest

import ggml_rs as g
from helpers import filled


@pytest.mark.parametrize("parallel", [False, True], ids=["one-copy", "four-copies"])
def test_reset_alloc_loop(rpc, cpu, ctx, parallel):
    # x (input) -> n1 = 2x on RPC -> n2 = n1^2 on the CPU, allocated anew every round
    with g.Scheduler([rpc, cpu], parallel=parallel) as sched:
        assert sched.n_copies == (4 if parallel else 1)
        x = ctx.tensor((4,), name="x").set_input()
        n1 = ctx.scale(x, 2.0, name="n1")
        n2 = ctx.sqr(n1, name="n2").set_output()
        graph = ctx.graph(n2)
        for round in range(1, 13):
            sched.reset()
            sched.set_tensor_backend(n1, rpc)
            sched.set_tensor_backend(n2, cpu)
            sched.alloc(graph)
            assert sched.n_splits == 2
            assert sched.tensor_backend(n1) is rpc
            x.set(np.full(4, round, np.float32))
            sched.compute(graph)
            np.testing.assert_array_equal(n2.get(), np.full(4, (2.0 * round) ** 2, np.float32), err_msg=f"round {round}")


def test_compute_honours_its_graph_argument(rpc, cpu, ctx):
    with g.Scheduler([rpc, cpu]) as sched:
        x = ctx.tensor((4,), name="x").set_input()
        a = ctx.scale(x, 2.0, name="a").set_output()
        ga = ctx.graph(a)
        y = ctx.tensor((4,), name="y").set_input()
        b = ctx.scale(y, 5.0, name="b").set_output()
        gb = ctx.graph(b)
        sched.alloc(ga)
        x.set(np.ones(4, np.float32))
        # the library's own message comes back in the exception
        with pytest.raises(g.GgmlError, match="not the allocated one"):
            sched.compute(gb)
        sched.compute(ga)
        assert a.get()[0] == 2.0
        sched.reset()
        sched.alloc(gb)
        y.set(np.ones(4, np.float32))
        sched.compute(gb)
        assert b.get()[0] == 5.0


def test_result_read_by_the_next_graph(rpc, cpu, ctx):
    with g.Scheduler([rpc, cpu]) as sched:
        # an "encoder" graph computes emb on the RPC device ...
        img = ctx.tensor((16,), name="img").set_input()
        e1 = ctx.scale(img, 0.5, name="e1")
        emb = ctx.add(e1, img, name="emb").set_output()
        genc = ctx.graph(emb)
        sched.set_tensor_backend(e1, rpc)
        sched.set_tensor_backend(emb, rpc)
        sched.alloc(genc)
        img.set(np.full(16, 2.0, np.float32))
        sched.compute(genc)
        assert emb.get()[0] == 3.0
        assert emb.buffer_name.startswith("RPC"), emb.buffer_name

        # ... and the "language model" graph of the same scheduler reads it, round after round
        tok = ctx.tensor((16,), name="tok").set_input()
        t = ctx.scale(tok, 10.0)
        out = ctx.add(t, emb, name="out").set_output()
        glm = ctx.graph_of([t, out])
        for round in range(3):
            sched.reset()
            sched.set_tensor_backend(out, cpu)
            sched.alloc(glm)
            tok.set(np.full(16, 1.0 + round, np.float32))
            sched.compute(glm)
            np.testing.assert_array_equal(out.get(), np.full(16, 10.0 * (1 + round) + 3.0, np.float32))

        # a graph in between takes the device memory: reading emb again is a named error
        z = ctx.tensor((16,), name="z").set_input()
        z1 = ctx.scale(z, 2.0, name="z1")
        z2 = ctx.add(z1, z, name="z2").set_output()
        gz = ctx.graph(z2)
        sched.reset()
        sched.set_tensor_backend(z1, rpc)
        sched.set_tensor_backend(z2, rpc)
        sched.alloc(gz)
        sched.reset()
        sched.set_tensor_backend(out, cpu)
        with pytest.raises(g.GgmlError, match="tensor 'emb'"):
            sched.alloc(glm)


def test_weights_on_the_device_mul_mat(rpc, cpu):
    # w (8x4) lives on the server: the mul_mat runs next to it; y = x @ w.T
    rng = np.random.default_rng(1)
    wv = rng.standard_normal((8, 4)).astype(np.float32)
    with g.Context() as wctx, g.Context() as ctx:
        w = wctx.tensor((8, 4), name="w")
        with wctx.alloc_tensors(rpc) as wbuf:
            wbuf.set_usage("weights")
            w.set(wv)
            np.testing.assert_array_equal(w.get(), wv)
            x = ctx.tensor((3, 4), name="x").set_input()
            y = ctx.scale(ctx.mul_mat(w, x, name="xw"), 0.5, name="y")
            out = ctx.sqr(y, name="out").set_output()
            graph = ctx.graph(out)
            with g.Scheduler([rpc, cpu]) as sched:
                for round in range(4):
                    sched.reset()
                    sched.set_tensor_backend(out, cpu)
                    sched.alloc(graph)
                    assert sched.tensor_backend(graph.nodes[0]) is rpc
                    xv = rng.standard_normal((3, 4)).astype(np.float32)
                    x.set(xv)
                    sched.compute(graph)
                    np.testing.assert_allclose(out.get(), (0.5 * xv @ wv.T) ** 2, rtol=1e-5, atol=1e-6)


def test_repeats_counted_and_plan_dumped(rpc, cpu, ctx):
    with g.Scheduler([rpc, cpu]) as sched:
        x = ctx.tensor((4,), name="x").set_input()
        a = ctx.scale(x, 2.0, name="a")
        b = ctx.sqr(a, name="b")
        c = ctx.scale(b, 3.0, name="c").set_output()
        graph = ctx.graph(c)
        on = rpc
        for round in range(1, 7):
            if round == 4:
                on = cpu  # another user assignment: split anew
            before = sched.counters()
            sched.reset()
            sched.set_tensor_backend(a, on)
            sched.alloc(graph)
            after = sched.counters()
            changed = round in (1, 4)
            assert (after.splits - before.splits, after.repeats - before.repeats) == ((1, 0) if changed else (0, 1)), round
            x.set(np.full(4, round, np.float32))
            sched.compute(graph)
            assert c.get()[0] == 3.0 * (2.0 * round) ** 2

        sched.reset()
        sched.set_tensor_backend(a, rpc)
        sched.set_tensor_backend(c, cpu)
        sched.alloc(graph)
        plan = sched.plan(graph)
        assert plan["backends"][-1] == "CPU" and plan["backends"][0].startswith("RPC")
        assert len(plan["splits"]) == sched.n_splits >= 2
        where = {n["name"]: n["backend"] for n in plan["nodes"]}
        assert where["a"].startswith("RPC") and where["c"] == "CPU", where
        assert json.loads(sched.dump_plan(graph)) == plan
        assert "digraph sched" in sched.dump_plan(graph, format="dot")


def test_reserve_and_buffer_sizes(rpc, cpu, ctx):
    with g.Scheduler([rpc, cpu]) as sched:
        x = ctx.tensor((64,), name="x").set_input()
        a = ctx.scale(x, 2.0, name="a")
        b = ctx.sqr(a, name="b").set_output()
        graph = ctx.graph(b)
        sched.set_tensor_backend(a, rpc)
        sched.reserve(graph)
        sizes = sched.buffer_size(rpc), sched.buffer_size(cpu)
        assert all(s > 0 for s in sizes), sizes
        sched.set_tensor_backend(a, rpc)
        sched.alloc(graph)
        assert (sched.buffer_size(rpc), sched.buffer_size(cpu)) == sizes
        x.set(filled((64,), 1.0))
        sched.compute(graph)
        np.testing.assert_allclose(b.get(), (2 * filled((64,), 1.0)) ** 2)


def test_alternating_graphs_that_grow_the_buffers(rpc, cpu, ctx):
    # a small and a large graph in turn: the large one reallocates the compute buffers, so the
    # small one's tensors point into freed buffers when it comes back; it is placed anew
    with g.Scheduler([rpc, cpu]) as sched:
        graphs = []
        for n in (4, 4096):
            x = ctx.tensor((n,), name=f"x{n}").set_input()
            a = ctx.scale(x, 2.0, name=f"a{n}")
            y = ctx.sqr(a, name=f"y{n}").set_output()
            graphs.append((n, x, a, y, ctx.graph(y)))
        for round in range(6):
            n, x, a, y, graph = graphs[round % 2] if round < 4 else graphs[0]
            sched.reset()
            sched.set_tensor_backend(a, rpc)
            sched.alloc(graph)
            x.set(np.full(n, round, np.float32))
            sched.compute(graph)
            np.testing.assert_array_equal(y.get(), np.full(n, (2.0 * round) ** 2, np.float32), err_msg=f"round {round}")
        # a result of the small graph read after the large graph ran: it keeps its value, or
        # allocating the graph that reads it names it
        y4 = graphs[0][3]
        kept = y4.get()
        n, x, a, y, graph = graphs[1]
        sched.reset()
        sched.alloc(graph)
        x.set(np.full(n, 7.0, np.float32))
        sched.compute(graph)
        r = ctx.scale(y4, 1.0, name="r").set_output()
        sched.reset()
        try:
            sched.alloc(ctx.graph_of([r]))
        except g.GgmlError as e:
            assert "tensor 'y4'" in str(e), str(e)
        else:
            sched.compute(sched._allocated)
            np.testing.assert_array_equal(r.get(), kept)
