#!/usr/bin/env python3
"""Helpers of scripts/gpu-check.sh (run on the GPU machine with its python3; numpy there, torch
optional, gguf from the pinned tree's gguf-py on PYTHONPATH).

  gpu_probe.py logits A.bin B.bin N_VOCAB [POSITIONS|all [MAX_NMSE]]
                                                normalised squared error of two llama-compare
                                                --logits dumps (B the reference) over the first
                                                POSITIONS rows, top-1 agreement per position;
                                                with MAX_NMSE: pass=yes|no and exit 1 above it
  gpu_probe.py weights MODEL.gguf               weight bytes one generated token reads (every
                                                tensor but the token embedding, whose GET_ROWS
                                                reads one row), and the matmul shapes of a layer
  gpu_probe.py bandwidth                        device copy bandwidth (torch; bytes read + written)
  gpu_probe.py gemm MODEL.gguf N_TOKENS         cuBLAS (torch, f16) time for the matmuls of one
                                                N_TOKENS batch of MODEL: the ceiling for ppN

Each prints one line `key=value ...` for the table; without torch or a GPU the probes print
`skipped=<why>` and exit 0, so the check goes on.
"""

import sys


def logits(a, b, n_vocab, positions=None, max_nmse=None):
    """nmse = sum (a - b)^2 / sum b^2 over the first `positions` rows (all when None): b is the
    reference. With max_nmse: `pass=yes|no` and exit status 0 / 1."""
    import numpy as np

    x = np.fromfile(a, dtype=np.float32)
    y = np.fromfile(b, dtype=np.float32)
    if x.size % n_vocab or y.size % n_vocab or x.size == 0:
        print(f"error=sizes {x.size} vs {y.size} (n_vocab {n_vocab}) pass=no")
        return 1
    x = x.reshape(-1, n_vocab).astype(np.float64)
    y = y.reshape(-1, n_vocab).astype(np.float64)
    n = min(x.shape[0], y.shape[0]) if positions is None else positions
    if n <= 0 or x.shape[0] < n or y.shape[0] < n:
        print(f"error=rows {x.shape[0]} vs {y.shape[0]}, {n} wanted pass=no")
        return 1
    x, y = x[:n], y[:n]
    nmse = float(((x - y) ** 2).sum() / max((y**2).sum(), 1e-30))
    top1 = float((x.argmax(1) == y.argmax(1)).mean())
    line = f"positions={n} nmse={nmse:.3e} top1_agree={top1:.3f} max_abs={float(abs(x - y).max()):.3e}"
    if max_nmse is None:
        print(line)
        return 0
    ok = bool(np.isfinite(nmse)) and nmse <= max_nmse
    print(f"{line} threshold={max_nmse:.0e} pass={'yes' if ok else 'no'}")
    return 0 if ok else 1


def model_info(path):
    import gguf

    r = gguf.GGUFReader(path)
    total = 0
    shapes = {}
    has_output = any(t.name == "output.weight" for t in r.tensors)
    for t in r.tensors:
        nbytes = int(t.n_bytes)
        if t.name == "token_embd.weight" and has_output:
            continue
        total += nbytes
        if len(t.shape) == 2 and t.name.endswith(".weight") and "norm" not in t.name:
            k, n = int(t.shape[0]), int(t.shape[1])  # ggml ne0 = in, ne1 = out
            shapes[(n, k)] = shapes.get((n, k), 0) + 1
    return total, shapes


def weights(path):
    total, shapes = model_info(path)
    print(f"bytes_per_token={total} matmuls={sum(shapes.values())}")
    return 0


def torch_cuda():
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no probe
        print(f"skipped=no torch ({type(e).__name__})")
        return None
    if not torch.cuda.is_available():
        print("skipped=torch sees no GPU")
        return None
    return torch


def bandwidth():
    torch = torch_cuda()
    if torch is None:
        return 0
    n = 2 << 30  # 2 GiB: many times the L2
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = 10
    start.record()
    for _ in range(reps):
        b.copy_(a)
    end.record()
    torch.cuda.synchronize()
    s = start.elapsed_time(end) / 1e3 / reps
    print(f"copy_GBps={2 * n / s / 1e9:.0f} device={torch.cuda.get_device_name(0).replace(' ', '_')}")
    return 0


def gemm(path, n_tokens):
    torch = torch_cuda()
    if torch is None:
        return 0
    _, shapes = model_info(path)
    total_s, flops = 0.0, 0.0
    for (n_out, k), count in shapes.items():
        w = torch.randn(n_out, k, dtype=torch.float16, device="cuda")
        x = torch.randn(k, n_tokens, dtype=torch.float16, device="cuda")
        for _ in range(3):
            w @ x
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        reps = 20
        start.record()
        for _ in range(reps):
            w @ x
        end.record()
        torch.cuda.synchronize()
        total_s += count * start.elapsed_time(end) / 1e3 / reps
        flops += count * 2.0 * n_out * k * n_tokens
    print(f"cublas_tflops={flops / total_s / 1e12:.1f} cublas_pp_tok_s={n_tokens / total_s:.0f} gemm_flops_per_batch={flops:.3e}")
    return 0


def main(argv):
    if 4 <= len(argv) <= 6 and argv[0] == "logits":
        positions = int(argv[4]) if len(argv) >= 5 and argv[4] != "all" else None
        max_nmse = float(argv[5]) if len(argv) == 6 else None
        return logits(argv[1], argv[2], int(argv[3]), positions, max_nmse)
    if len(argv) == 2 and argv[0] == "weights":
        return weights(argv[1])
    if argv == ["bandwidth"]:
        return bandwidth()
    if len(argv) == 3 and argv[0] == "gemm":
        return gemm(argv[1], int(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
