#!/usr/bin/env python3
"""Checks of the memory plan report (docs/memory-report.md), for scripts/test.sh.

  check_report.py check DIR [--readback TSV] [--min-files N]
      every DIR/*.json is sound on its own (ggml_rs.report.problems: boxes inside the plan, steps
      inside the graph, views inside their sources, splits in order, no two boxes sharing bytes
      while both are live unless in place or a view); with --readback, the last allocation's
      report (highest number, kind *alloc) equals the places c_tests/report_llama.c read back
      from the tensors: every tensor read back has a box at its offset with its ggml_nbytes in a
      buffer of its buffer type
  check_report.py pairs DIR [--min-files N]
      every DIR/<k>.json (a report) is sound and holds the places in DIR/<k>.tsv (read back from
      the tensors by c_tests/report_graphs.c) as above
  check_report.py png FILE WIDTH HEIGHT [--min-colors N] [--expect-colors RRGGBB,...]
      FILE is a WIDTHxHEIGHT PNG (8-bit RGB/RGBA) with at least N distinct colours (default 5),
      not mostly one colour, and each expected colour on at least 1000 pixels (the report's kind
      colours: its boxes were drawn, not only the legend); a small PNG decoder (zlib and the five row filters)

Needs only Python 3: ggml_rs/report.py is loaded from python/ on its own.
"""

import argparse
import importlib.util
import os
import re
import struct
import sys
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def report_module():
    spec = importlib.util.spec_from_file_location("ggml_rs_report", os.path.join(ROOT, "python", "ggml_rs", "report.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cmd_check(args):
    rep_mod = report_module()
    files = sorted(f for f in os.listdir(args.dir) if f.endswith(".json"))
    if len(files) < args.min_files:
        print(f"{len(files)} reports in {args.dir}, expected at least {args.min_files}")
        return 1
    bad = 0
    n_tensors = n_inplace = 0
    ratios = []
    for f in files:
        r = rep_mod.load(os.path.join(args.dir, f))
        probs = rep_mod.problems(r)
        n_tensors += len(r.tensors)
        n_inplace += sum(t.inplace_of is not None for t in r.tensors)
        ratios += [b.size / b.lower_bound for b in r.buffers if b.lower_bound]
        if probs:
            bad += 1
            print(f"{f}: {len(probs)} problems, first: {probs[0]}")
    worst = max(ratios, default=1.0)
    print(f"{len(files)} reports, {n_tensors} boxes ({n_inplace} in place), {bad} with problems; plan/lower bound at most {worst:.3f}")
    if bad:
        return 1
    if args.readback:
        allocs = [f for f in files if re.match(r"^\d+-(sched-)?alloc\.json$", f)]
        if not allocs:
            print("no allocation report to compare with the read-back places")
            return 1
        r = rep_mod.load(os.path.join(args.dir, allocs[-1]))
        if not readback_matches(r, args.readback, allocs[-1], min_tensors=10):
            return 1
    return 0


def read_places(path):
    """The places a program read back from its tensors: (address, buffer type, offset, nbytes, name)."""
    lines = []
    with open(path) as fh:
        for line in fh:
            addr, buft, offset, nbytes, name = line.rstrip("\n").split("\t", 4)
            lines.append((int(addr, 16), buft, int(offset), int(nbytes), name))
    return lines


def readback_matches(r, tsv, label, min_tensors=1):
    """Whether every place read back (`tsv`) is a box of report `r` at that place, in a buffer of
    that buffer type, with that many bytes; prints what differs."""
    boxes = r.by_addr()
    lines = read_places(tsv)
    wrong = []
    # every line: a tensor is read back as a node and again as each reader's source
    for addr, buft, offset, nbytes, name in lines:
        box = boxes.get(addr)
        if box is None:
            wrong.append(f"{name} ({buft} +{offset}, {nbytes} bytes) is not in {label}")
        elif (r.buffers[box.buffer].name, box.offset, box.size) != (buft, offset, nbytes):
            wrong.append(f"{name}: read back {buft} +{offset} {nbytes} bytes, report {r.buffers[box.buffer].name} +{box.offset} {box.size} bytes")
    seen = {line[0] for line in lines}
    for m in wrong[:5]:
        print(m)
    print(f"{label}: {len(seen)} tensors read back ({len(lines)} reads), {len(lines) - len(wrong)} reads at their box, "
          f"{len(wrong)} not; {len(r.tensors)} boxes in the report")
    return not wrong and len(seen) >= min_tensors


def cmd_pairs(args):
    """Every DIR/<k>.json against DIR/<k>.tsv (c_tests/report_graphs.c)."""
    rep_mod = report_module()
    pairs = sorted(f[:-5] for f in os.listdir(args.dir) if f.endswith(".json") and os.path.exists(os.path.join(args.dir, f[:-5] + ".tsv")))
    if len(pairs) < args.min_files:
        print(f"{len(pairs)} report/read-back pairs in {args.dir}, expected at least {args.min_files}")
        return 1
    ok = True
    for k in pairs:
        r = rep_mod.load(os.path.join(args.dir, k + ".json"))
        probs = rep_mod.problems(r)
        for m in probs[:3]:
            print(f"{k}.json: {m}")
        kinds = ",".join(sorted({t.kind for t in r.tensors}))
        print(f"{k}.json ({r.kind}, {len(r.buffers)} buffers, {len(r.splits)} splits, kinds {kinds}): ", end="")
        ok &= not probs and readback_matches(r, os.path.join(args.dir, k + ".tsv"), f"{k}.json")
    return 0 if ok else 1


def png_pixels(path):
    """(width, height, rows of bytes, bytes per pixel) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = ihdr
    if depth != 8 or color not in (2, 6) or interlace:
        raise ValueError(f"{path}: depth {depth}, colour type {color}, interlace {interlace}: only 8-bit RGB/RGBA, not interlaced")
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, prev = [], bytes(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif f != 0:
            raise ValueError(f"{path}: row {y} has filter {f}")
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def cmd_png(args):
    width, height, rows, bpp = png_pixels(args.file)
    if (width, height) != (args.width, args.height):
        print(f"{args.file}: {width}x{height}, expected {args.width}x{args.height}")
        return 1
    counts = {}
    for row in rows:
        for x in range(0, len(row), bpp):
            px = row[x:x + 3]
            counts[px] = counts.get(px, 0) + 1
    total = width * height
    top = max(counts.values())
    white = counts.get(b"\xff\xff\xff", 0)
    print(f"{args.file}: {width}x{height}, {len(counts)} colours, {100 * white / total:.1f}% white, most common colour {100 * top / total:.1f}%")
    if len(counts) < args.min_colors or top > 0.97 * total:
        print("blank or nearly: too few colours, or one colour almost everywhere")
        return 1
    missing = [c for c in args.expect_colors.split(",") if c and counts.get(bytes.fromhex(c), 0) < args.min_pixels]
    if missing:
        print(f"colours on fewer than {args.min_pixels} pixels: {', '.join('#' + c for c in missing)}")
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("--readback")
    c.add_argument("--min-files", type=int, default=1)
    c = sub.add_parser("pairs")
    c.add_argument("dir")
    c.add_argument("--min-files", type=int, default=1)
    p = sub.add_parser("png")
    p.add_argument("file")
    p.add_argument("width", type=int)
    p.add_argument("height", type=int)
    p.add_argument("--min-colors", type=int, default=5)
    p.add_argument("--expect-colors", default="")
    p.add_argument("--min-pixels", type=int, default=1000)
    args = ap.parse_args()
    return {"check": cmd_check, "pairs": cmd_pairs, "png": cmd_png}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
