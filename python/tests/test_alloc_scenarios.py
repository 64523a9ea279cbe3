"""The graph allocator's seed scenarios (c_tests/test_alloc_scenarios.c) from Python, on the
CPU backend: each with its expected numbers, and the invariant it protects. Upstream's
ggml-alloc fails the first five (it takes a tensor of its own earlier allocation for an
external one, or replays a plan by position)."""

import numpy as np
import pytest

import ggml_rs as g
from helpers import filled, overlap


@pytest.fixture
def ga(cpu):
    with g.GraphAllocator(cpu) as a:
        yield a


def test_tensor_from_an_earlier_allocation_is_not_external(cpu, ctx, ga):
    # g1: b = 2a, d = b^2 + b; g2 reads b as a source only: nothing of g2 may sit on b
    a = ctx.tensor((4,), name="a").set_input()
    b = ctx.scale(a, 2.0, name="b")
    d = ctx.add(ctx.sqr(b), b).set_output()
    g1 = ctx.graph(d)
    ga.alloc(g1)
    a.set(filled((4,), 0.75))
    cpu.compute(g1)
    assert d.get()[0] == pytest.approx(1.5 * 1.5 + 1.5)

    e = ctx.scale(b, 0.5)
    f = ctx.sqr(e)
    gg = ctx.add(f, b).set_output()
    g2 = ctx.graph_of([e, f, gg])
    ga.alloc(g2)
    assert not any(overlap(t, b) for t in (e, f, gg)), "g2 placed a tensor on b, which it still reads"
    cpu.compute(g2)
    assert gg.get()[0] == pytest.approx(0.5625 + 1.5)


def test_forward_backward_graphs_sharing_tensors(cpu):
    with g.Context() as wctx, g.Context() as ctx:
        w = wctx.tensor((16,), name="w")
        with wctx.alloc_tensors(cpu):
            w.set(filled((16,), 0.5, 0.0))
            x = ctx.tensor((16,), name="x").set_input()
            h = ctx.mul(x, w, name="h")
            y = ctx.sqr(h, name="y").set_output()
            gf = ctx.graph(y)
            out = ctx.scale(ctx.mul(ctx.add(y, h), h), 0.5, name="out").set_output()
            gb = ctx.graph(out)
            with g.GraphAllocator(cpu) as ga:
                for it in range(20):
                    xv = 1.0 + it
                    graph = gb if it % 2 else gf
                    ga.alloc(graph)
                    x.set(filled((16,), xv, 0.0))
                    cpu.compute(graph)
                    hv = xv * 0.5
                    if graph is gf:
                        np.testing.assert_allclose(y.get(), hv * hv, rtol=1e-6)
                    else:
                        np.testing.assert_allclose(out.get(), 0.5 * (hv * hv + hv) * hv, rtol=1e-6)


def test_result_carried_over_to_the_next_graph(cpu, ctx, ga):
    x = ctx.tensor((8,), name="x").set_input()
    h = ctx.scale(x, 2.0, name="h").set_output()
    g1 = ctx.graph(h)
    ga.alloc(g1)
    x.set(filled((8,), 3.0))
    cpu.compute(g1)
    assert h.get()[0] == 6.0

    y = ctx.tensor((8,), name="y").set_input()
    t = ctx.scale(y, 10.0)
    o = ctx.add(t, h).set_output()
    g2 = ctx.graph_of([t, o])  # h is read, not recomputed
    ga.alloc(g2)
    assert not any(overlap(v, h) for v in (y, t, o)), "g2 placed a tensor on h"
    y.set(filled((8,), 0.6))
    cpu.compute(g2)
    assert o.get()[0] == pytest.approx(12.0)
    np.testing.assert_allclose(o.get(), 10 * filled((8,), 0.6) + 2 * filled((8,), 3.0), rtol=1e-6)


def test_lost_result_is_a_named_error(cpu, ctx, ga):
    x = ctx.tensor((64,), name="x").set_input()
    h = ctx.scale(x, 2.0, name="h")
    hs = ctx.sqr(h).set_output()  # h is read, then its memory is free
    g1 = ctx.graph(hs)
    ga.alloc(g1)
    x.set(filled((64,), 1.0))
    cpu.compute(g1)

    q = ctx.tensor((64,), name="q").set_input()
    q2 = ctx.sqr(ctx.scale(q, 2.0, name="q1"), name="q2").set_output()
    ga.alloc(ctx.graph(q2))  # takes the whole buffer, h's bytes included

    r = ctx.scale(h, 1.0).set_output()
    with pytest.raises(g.GgmlError, match="tensor 'h'") as e:
        ga.alloc(ctx.graph_of([r]))
    assert "graph #1" in str(e.value) and "graph #2" in str(e.value), str(e.value)


def test_carried_result_survives_buffer_growth(cpu, ctx, ga):
    x = ctx.tensor((8,), name="x").set_input()
    h = ctx.scale(x, 2.0, name="h").set_output()
    g1 = ctx.graph(h)
    ga.alloc(g1)
    x.set(filled((8,), 3.0))
    cpu.compute(g1)
    before = ga.buffer_size()

    big = ctx.tensor((256,), name="big").set_input()
    s = ctx.sum(big)
    rep = ctx.repeat(s, h)
    o = ctx.add(rep, h).set_output()
    g3 = ctx.graph_of([s, rep, o])
    ga.alloc(g3)
    assert ga.buffer_size() > before, "the scenario needs the buffer to grow"
    big.set(np.ones(256, np.float32))
    cpu.compute(g3)
    np.testing.assert_allclose(o.get(), 256.0 + 2 * filled((8,), 3.0))


def test_result_lost_to_reallocation_is_a_named_error(cpu, ctx, ga):
    x = ctx.tensor((8,), name="x").set_input()
    h = ctx.scale(x, 2.0, name="h").set_output()
    ga.alloc(ctx.graph(h))
    big = ctx.tensor((512,), name="big").set_input()
    ga.alloc(ctx.graph(ctx.scale(big, 2.0).set_output()))  # grows: a new buffer
    # from Python, h can no longer be read ...
    with pytest.raises(g.NotAllocatedError, match="tensor 'h'"):
        h.get()
    # ... and the allocator says why a graph reading it cannot be allocated
    r = ctx.scale(h, 1.0)
    with pytest.raises(g.GgmlError, match="tensor 'h'.*reallocated|reallocated.*tensor 'h'"):
        ga.alloc(ctx.graph_of([r]))


def test_replay_and_plan_statistics(cpu, ctx, ga):
    a = ctx.tensor((8,), name="a").set_input()
    b = ctx.tensor((8,), name="b").set_input()
    s = ctx.scale(a, 2.0, name="s")
    t = ctx.add(s, b, name="t")
    v = ctx.view(t, (4,), name="v")
    out = ctx.scale(v, 10.0, name="out").set_output()
    graph = ctx.graph(out)
    assert ga.plan_stats() is None
    for round in range(3):
        before = ga.counters()
        ga.alloc(graph)
        after = ga.counters()
        # the first allocation plans, the same graph again replays the plan
        assert (after.plans - before.plans, after.replays - before.replays) == ((1, 0) if round == 0 else (0, 1))
        a.set(filled((8,), 1.0))
        b.set(filled((8,), 100.0))
        cpu.compute(graph)
        np.testing.assert_allclose(out.get(), 10 * (2 * filled((4,), 1.0) + filled((4,), 100.0)))
    stats = ga.plan_stats()
    assert 0 < stats.lower_bound <= stats.planned <= ga.buffer_size()
    # a new output flag is a new plan
    s.set_output()
    ga.alloc(graph)
    assert ga.counters().plans == 2
    assert not overlap(s, t)
