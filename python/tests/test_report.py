"""The memory plan report against the allocation it describes: every box is where the tensor's
`data` is in its compute buffer (read back through ggml-base) with its `ggml_nbytes`, no two boxes
share bytes while both are live unless one computes in place of the other or views it, and with
`GGML_RS_ALLOC_REPORT` every plan is written, numbered, without ever failing an allocation."""

import ctypes
import json
import os
import subprocess
import sys
import textwrap

import pytest

import ggml_rs as g
from ggml_rs import report
from ggml_rs._lib import lib, tensor_struct
from helpers import filled


def mlp(ctx, n=8, layers=3):
    """A small graph with in-place candidates, views, a transpose and a matmul: x -> (w x + x)^2 ..."""
    x = ctx.tensor((n,), name="x").set_input()
    w = ctx.tensor((n, n), name="w").set_input()
    h = x
    for i in range(layers):
        m = ctx.mul_mat(w, ctx.reshape(h, (1, n)), name=f"mm{i}")
        h = ctx.sqr(ctx.add(ctx.reshape(m, (n,)), h), name=f"h{i}")
        h = ctx.scale(h, 0.5, name=f"s{i}")
    t = ctx.cont(ctx.transpose(ctx.reshape(h, (2, n // 2))), name="t")
    out = ctx.sum(t, name="out").set_output()
    return x, w, out, ctx.graph(out)


def placed(t):
    """(buffer, offset in it, ggml_nbytes) of tensor t, from its header and ggml-base."""
    s = tensor_struct.from_address(t.ptr)
    base = lib().ggml_backend_buffer_get_base(s.buffer)
    return s.buffer, s.data - base, t.nbytes


def graph_tensors(graph):
    """Every tensor the graph reaches: nodes, leafs and their sources."""
    from ggml_rs.graph import _walk
    return list(_walk(graph._node_ptrs()))


def check_against_tensors(rep, graph, n_buffers=1):
    """Every box is its tensor's place (the graph's tensors, and the scheduler's copies of split
    inputs): a buffer of the box's buffer type, `data` minus that buffer's base, `ggml_nbytes`
    bytes; every tensor of the graph in a compute buffer has a box; the report is sound."""
    L = lib()
    compute = set()
    for box in rep.tensors:
        s = tensor_struct.from_address(box.addr)
        assert s.name.decode() == box.name
        base = L.ggml_backend_buffer_get_base(s.buffer)
        nbytes = L.ggml_nbytes(box.addr)
        assert (box.offset, box.size) == (s.data - base, nbytes), f"{box.name}: box {box.offset}+{box.size}, tensor at {s.data - base}+{nbytes}"
        buft = L.ggml_backend_buft_name(L.ggml_backend_buffer_get_type(s.buffer)).decode()
        assert rep.buffers[box.buffer].name == buft, f"{box.name}: box in {rep.buffers[box.buffer].name}, tensor in {buft}"
        compute.add(s.buffer)
    assert len(compute) == n_buffers, f"boxes in {len(compute)} buffers, expected {n_buffers}"
    boxes = rep.by_addr()
    for ptr in graph_tensors(graph):
        s = tensor_struct.from_address(ptr)
        assert ptr in boxes or s.buffer not in compute or not s.data, f"tensor {s.name} in a compute buffer is not in the report"
    assert report.problems(rep) == []


def test_gallocr_report_matches_the_allocation(cpu, ctx, tmp_path):
    x, w, out, graph = mlp(ctx)
    with g.GraphAllocator(cpu) as ga:
        ga.alloc(graph)
        rep = ga.report()
        assert rep.kind == "alloc" and rep.n_steps == len(graph._node_ptrs())
        assert {t.kind for t in rep.tensors} >= {"input", "output", "node", "view"}
        assert any(t.inplace_of is not None for t in rep.tensors), "sqr/scale compute in place of their source"
        check_against_tensors(rep, graph)
        stats = ga.plan_stats()
        assert (rep.buffers[0].size, rep.buffers[0].lower_bound) == (stats.planned, stats.lower_bound)
        # it still computes what it should
        x.set(filled((8,), 0.25)), w.set(filled((8, 8), 0.01))
        cpu.compute(graph)
        assert out.get().shape == (1,)
        ga.write_report(tmp_path / "r.svg", "svg")
        svg = (tmp_path / "r.svg").read_text()
        assert svg.startswith("<svg") and svg.count('<rect id="t') == len(rep.tensors)


def test_gallocr_report_of_a_reserve(cpu, ctx):
    _, _, _, graph = mlp(ctx, n=16, layers=4)
    with g.GraphAllocator(cpu) as ga:
        ga.reserve(graph)
        rep = ga.report()
        assert rep.kind == "reserve" and report.problems(rep) == []
        assert rep.buffers[0].allocated == [ga.buffer_size()]


def test_scheduler_report_has_the_splits(cpu, ctx):
    x, w, out, graph = mlp(ctx)
    with g.Scheduler([cpu]) as sched:
        sched.alloc(graph)
        rep = sched.report()
        assert rep.kind == "sched-alloc"
        assert [(s.backend, s.first, s.end) for s in rep.splits] == [("CPU", 0, rep.n_steps)]
        assert rep.buffers[0].ids == [0] and {t.buffer_id for t in rep.tensors} == {0}
        check_against_tensors(rep, graph)


def test_scheduler_report_with_two_backends(rpc, cpu, ctx):
    # the middle layer on the rpc-server: three splits, copies between them, two compute buffers
    x = ctx.tensor((64,), name="x").set_input()
    a0 = ctx.scale(x, 0.5, name="a0")
    a = ctx.sqr(a0, name="a1")
    b0 = ctx.sqr(a, name="b0")
    b = ctx.add(b0, a, name="b1")
    c0 = ctx.add(b, x, name="c0")
    c = ctx.scale(c0, 2.0, name="c1").set_output()
    graph = ctx.graph(c)
    with g.Scheduler([rpc, cpu]) as sched:
        for t, on in ((a0, cpu), (a, cpu), (b0, rpc), (b, rpc), (c0, cpu), (c, cpu)):
            sched.set_tensor_backend(t, on)
        sched.alloc(graph)
        rep = sched.report()
        backends = [s.backend for s in rep.splits]
        assert len(backends) >= 3 and backends[0] == backends[-1] != backends[1], backends
        assert [b.ids for b in rep.buffers] == [[0], [1]]
        for sp in rep.splits:
            on = 0 if sp.backend == backends[1] else 1
            computed = [t for t in rep.tensors if sp.first <= t.first < sp.end and t.kind in ("node", "output")]
            assert computed and all(t.buffer_id == on for t in computed), sp
        # the copies the splits read (a1 into the rpc-server, b1 back to the CPU) have boxes too
        copies = {t.name.split("#")[1]: t.buffer_id for t in rep.tensors if t.name.count("#") == 2}
        assert copies == {"a1": 0, "b1": 1}, copies
        check_against_tensors(rep, graph, n_buffers=2)
        x.set(filled((64,), 1.0, 0.0))
        sched.compute(graph)
        assert c.get()[0] == pytest.approx(2.0 * ((0.5 ** 2) ** 2 + 0.5 ** 2 + 1.0))


def test_nothing_planned_yet_raises(cpu):
    with g.GraphAllocator(cpu) as ga:
        with pytest.raises(g.GgmlError, match="nothing was planned yet"):
            ga.report()
        with pytest.raises(ValueError):
            ga.write_report("x", "png")


def test_loader_checks_version_and_kinds(tmp_path):
    good = {"version": 1, "kind": "alloc", "graph": 1, "n_steps": 2, "splits": [],
            "buffers": [{"id": 0, "name": "CPU", "ids": [0], "planned": [64], "allocated": [64], "size": 64, "lower_bound": 64, "placement": "upstream"}],
            "tensors": [{"id": 0, "name": "a", "op": "NONE", "kind": "input", "buffer": 0, "buffer_id": 0, "chunk": 0, "offset": 0, "size": 32,
                         "alloc_size": 32, "first": 0, "last": 1, "inplace_of": None, "view_of": None, "addr": "0x10"},
                        {"id": 1, "name": "b", "op": "ADD", "kind": "node", "buffer": 0, "buffer_id": 0, "chunk": 0, "offset": 32, "size": 32,
                         "alloc_size": 32, "first": 1, "last": 1, "inplace_of": None, "view_of": None, "addr": "0x20"}]}
    p = tmp_path / "r.json"
    p.write_text(json.dumps(good))
    rep = report.load(p)
    assert rep.tensors[0].addr == 0x10 and report.problems(rep) == []
    # b moved over a while a is live: a conflict, named
    bad = json.loads(json.dumps(good))
    bad["tensors"][1]["offset"] = 16
    assert report.conflicts(report.from_dict(bad)) == [(0, 1)]
    assert any("share bytes while both are live" in m for m in report.problems(report.from_dict(bad)))
    # ... unless b computes in place of a, at the step a ends
    ok = json.loads(json.dumps(good))
    ok["tensors"][1].update(offset=0, inplace_of=0)
    assert report.problems(report.from_dict(ok)) == []
    for key, value, msg in (("version", 2, "version"), ("kind", None, None)):
        d = json.loads(json.dumps(good))
        d[key] = value
        if msg:
            with pytest.raises(ValueError, match=msg):
                report.from_dict(d)
    d = json.loads(json.dumps(good))
    d["tensors"][0]["kind"] = "weird"
    with pytest.raises(ValueError, match="unknown kind"):
        report.from_dict(d)


SCRIPT = textwrap.dedent("""
    import ggml_rs as g
    with g.Backend.cpu(n_threads=1) as cpu, g.Context() as ctx, g.GraphAllocator(cpu) as ga:
        x = ctx.tensor((16,), name="x").set_input()
        y = ctx.sqr(ctx.scale(x, 2.0)).set_output()
        graph = ctx.graph(y)
        ga.reserve(graph)        # a plan: reported
        ga.alloc(graph)          # the reserved plan placed, no new plan: nothing
        ga.alloc(graph)          # the same graph again: nothing
        z = ctx.add(ctx.sqr(x), x).set_output()
        ga.alloc(ctx.graph(z))   # another graph, planned: reported
        print("allocated")
""")


def run_script(env_dir):
    env = dict(os.environ, GGML_RS_ALLOC_REPORT=str(env_dir))
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)


def test_env_var_writes_every_plan_numbered(tmp_path):
    d = tmp_path / "reports"
    r = run_script(d)
    assert r.returncode == 0 and "allocated" in r.stdout, r.stderr
    assert sorted(os.listdir(d)) == ["0000-reserve.json", "0000-reserve.svg", "0001-alloc.json", "0001-alloc.svg"]
    # a second run into the same folder adds to it
    assert run_script(d).returncode == 0
    assert sorted(os.listdir(d))[-2:] == ["0003-alloc.json", "0003-alloc.svg"]
    for f in sorted(os.listdir(d)):
        if f.endswith(".json"):
            assert report.problems(report.load(d / f)) == []


def test_env_var_unwritable_never_fails_the_allocation(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    r = run_script(blocker / "sub")
    assert r.returncode == 0 and "allocated" in r.stdout, r.stderr
    # one warning naming the path, however many reports failed
    lines = [l for l in r.stderr.splitlines() if "GGML_RS_ALLOC_REPORT" in l]
    assert len(lines) == 1 and str(blocker / "sub") in lines[0], r.stderr
