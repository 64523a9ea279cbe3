"""The memory plan report (README "Memory plan report"): the JSON that `GGML_RS_ALLOC_REPORT=<dir>`
or `write_report` writes, loaded as plain dataclasses, and the check that no two tensors share
bytes while both are live.

    import ggml_rs.report as r
    rep = r.load("reports/0003-sched-alloc.json")
    for t in rep.tensors:
        print(t.name, t.kind, rep.buffers[t.buffer].name, t.offset, t.size, t.first, t.last)
    assert r.conflicts(rep) == []

Pure Python: it needs neither numpy nor the libraries (scripts load this file on its own).
"""

import json
from dataclasses import dataclass, field
from typing import List, Optional

VERSION = 1
KINDS = ("input", "output", "node", "leaf", "carried", "view")


@dataclass(frozen=True)
class Buffer:
    """A compute buffer: the allocator's buffer `ids` sharing it, `planned` and `allocated` bytes
    per chunk; `size` = sum(planned)."""

    id: int
    name: str
    ids: List[int]
    planned: List[int]
    allocated: List[int]
    size: int
    lower_bound: int
    placement: str


@dataclass(frozen=True)
class TensorBox:
    """A tensor's box: bytes [offset, offset + size) of chunk `chunk` of buffer `buffer`, live in
    node steps first..last (both included). `buffer_id`: the allocator's buffer id it was placed
    for (the scheduler's backend index; None for a carried tensor). `inplace_of` / `view_of` are
    ids of other boxes."""

    id: int
    name: str
    op: str
    kind: str
    buffer: int
    buffer_id: Optional[int]
    chunk: int
    offset: int
    size: int
    alloc_size: int
    first: int
    last: int
    inplace_of: Optional[int]
    view_of: Optional[int]
    addr: int


@dataclass(frozen=True)
class Split:
    """A scheduler split: backend, node steps first..end-1 of the allocator's graph."""

    id: int
    backend: str
    first: int
    end: int


@dataclass
class Report:
    kind: str
    graph: int
    n_steps: int
    buffers: List[Buffer] = field(default_factory=list)
    splits: List[Split] = field(default_factory=list)
    tensors: List[TensorBox] = field(default_factory=list)
    path: Optional[str] = None

    def by_addr(self):
        """{tensor address: box}."""
        return {t.addr: t for t in self.tensors}


def _fields(cls, d, where):
    names = list(cls.__dataclass_fields__)
    missing = [n for n in names if n not in d]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    return {n: d[n] for n in names}


def from_dict(d, where="report"):
    """A Report from the parsed JSON; ValueError naming what is wrong."""
    if d.get("version") != VERSION:
        raise ValueError(f"{where}: version {d.get('version')!r}, this loader reads {VERSION}")
    buffers = [Buffer(**_fields(Buffer, b, f"{where}: buffer {i}")) for i, b in enumerate(d["buffers"])]
    splits = [Split(**_fields(Split, s, f"{where}: split {i}")) for i, s in enumerate(d["splits"])]
    tensors = []
    for i, t in enumerate(d["tensors"]):
        f = _fields(TensorBox, t, f"{where}: tensor {i}")
        f["addr"] = int(f["addr"], 16)
        if f["kind"] not in KINDS:
            raise ValueError(f"{where}: tensor {i} ({f['name']}): unknown kind {f['kind']!r}")
        tensors.append(TensorBox(**f))
    return Report(kind=d["kind"], graph=d["graph"], n_steps=d["n_steps"], buffers=buffers, splits=splits, tensors=tensors)


def loads(text, where="report"):
    return from_dict(json.loads(text), where)


def load(path):
    """The report in the JSON file `path`."""
    with open(path, encoding="utf-8") as f:
        r = loads(f.read(), str(path))
    r.path = str(path)
    return r


def memory_of(tensors, i):
    """The box whose memory box i is in: itself, or the end of its chain of view sources (a view
    of a view, as the scheduler's keep-alive markers are, names the view it was made from)."""
    for _ in range(len(tensors)):
        if tensors[i].view_of is None:
            break
        i = tensors[i].view_of
    return i


def may_share(tensors, a, b):
    """Whether boxes a and b may share bytes at one step: one computes in place of the other (at
    the step it takes the memory over), or one is a view into the other's memory, or both are
    views into one tensor's memory."""
    ta, tb = tensors[a], tensors[b]
    views = ta.view_of is not None or tb.view_of is not None
    return ta.inplace_of == b or tb.inplace_of == a or (views and memory_of(tensors, a) == memory_of(tensors, b))


def conflicts(report):
    """Pairs (a, b) of box ids that share bytes at a step where both are live and may not."""
    ts = report.tensors
    order = sorted((t for t in ts if t.size > 0), key=lambda t: (t.buffer, t.chunk, t.offset))
    out = []
    for k, ta in enumerate(order):
        for tb in order[k + 1:]:
            if (tb.buffer, tb.chunk) != (ta.buffer, ta.chunk) or tb.offset >= ta.offset + ta.size:
                break
            if ta.first <= tb.last and tb.first <= ta.last and not may_share(ts, ta.id, tb.id):
                out.append((min(ta.id, tb.id), max(ta.id, tb.id)))
    return out


def problems(report):
    """Everything wrong with a report on its own (an empty list for a sound one): ids in order,
    boxes inside what the plan sized, steps inside the graph, views inside their sources, links
    to existing boxes, splits covering the graph in order, the lower bound no more than the plan,
    and no conflicts."""
    out = []
    ts = report.tensors
    for i, t in enumerate(ts):
        name = f"tensor {i} ({t.name})"
        if t.id != i:
            out.append(f"{name}: id {t.id}")
        if not 0 <= t.buffer < len(report.buffers):
            out.append(f"{name}: buffer {t.buffer} does not exist")
            continue
        if t.buffer_id is not None and t.buffer_id not in report.buffers[t.buffer].ids:
            out.append(f"{name}: buffer id {t.buffer_id} is not one of buffer {t.buffer}'s {report.buffers[t.buffer].ids}")
        planned = report.buffers[t.buffer].planned
        if not 0 <= t.chunk < len(planned):
            out.append(f"{name}: chunk {t.chunk} does not exist")
        elif t.offset + max(t.size, t.alloc_size) > planned[t.chunk]:
            out.append(f"{name}: bytes {t.offset}..{t.offset + max(t.size, t.alloc_size)} past the chunk's {planned[t.chunk]}")
        if not 0 <= t.first <= t.last < max(report.n_steps, 1):
            out.append(f"{name}: steps {t.first}..{t.last} outside 0..{report.n_steps - 1}")
        for link in ("inplace_of", "view_of"):
            j = getattr(t, link)
            if j is not None and not 0 <= j < len(ts):
                out.append(f"{name}: {link} {j} does not exist")
        if t.kind == "view":
            src = ts[t.view_of] if t.view_of is not None and 0 <= t.view_of < len(ts) else None
            if src is None:
                out.append(f"{name}: a view without a source")
            elif (t.buffer, t.chunk) != (src.buffer, src.chunk) or t.offset < src.offset or t.offset + t.size > src.offset + max(src.size, src.alloc_size):
                out.append(f"{name}: not inside its source {src.name}")
        if t.inplace_of is not None and 0 <= t.inplace_of < len(ts):
            p = ts[t.inplace_of]
            if (p.buffer, p.chunk, p.offset) != (t.buffer, t.chunk, t.offset) or p.last != t.first:
                out.append(f"{name}: computed in place of {p.name}, but not at its place or not when it ends")
    for b in report.buffers:
        if b.lower_bound > b.size:
            out.append(f"buffer {b.id} ({b.name}): lower bound {b.lower_bound} above the plan's {b.size} bytes")
    if report.splits:
        if report.splits[0].first != 0 or report.splits[-1].end != report.n_steps:
            out.append(f"splits cover {report.splits[0].first}..{report.splits[-1].end}, not the graph's 0..{report.n_steps}")
        for a, b in zip(report.splits, report.splits[1:]):
            if a.end != b.first or a.first > a.end:
                out.append(f"splits {a.id} and {b.id} do not follow each other ({a.first}..{a.end}, {b.first}..{b.end})")
    for a, b in conflicts(report):
        ta, tb = ts[a], ts[b]
        out.append(f"{ta.name} (steps {ta.first}..{ta.last}, bytes {ta.offset}+{ta.size}) and {tb.name} "
                   f"(steps {tb.first}..{tb.last}, bytes {tb.offset}+{tb.size}) share bytes while both are live")
    return out
