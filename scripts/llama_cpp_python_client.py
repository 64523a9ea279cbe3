"""The real Python client: llama-cpp-python (the pin's own package) running a model greedily.

llama-cpp-python loads libllama with ctypes (dlopen, RTLD_LOCAL) from LLAMA_CPP_LIB_PATH, so
ggml-base arrives long after the interpreter started: the case a preloaded ggml-rs must handle.

    llama_cpp_python_client.py run MODEL PROMPT N_GEN LOGITS.npy [N_CTX N_BATCH N_UBATCH]
        greedy completion with logits for every position; prints the completion text and a
        sha256 of the logits to stdout, writes the logits to LOGITS.npy (default context 256,
        batch 64, ubatch = batch); the model is closed before the end, so llama.cpp's own check
        of the compute buffer size ("matches expectation") is logged
    llama_cpp_python_client.py compare A.npy B.npy
        exit 0 when the two logits arrays are bit for bit the same; prints the max abs difference

scripts/test.sh runs it with and without LD_PRELOAD of libggml_rs.so (see README, "At run time").
"""

import hashlib
import sys

import numpy as np


def run(model: str, prompt: str, n_gen: int, out: str, n_ctx: int = 256, n_batch: int = 64, n_ubatch: int = 0) -> None:
    from llama_cpp import Llama

    # verbose: llama's log (and ggml-rs's GGML_RS_LOG line) reaches stderr
    llm = Llama(
        model_path=model,
        n_ctx=n_ctx,
        n_batch=n_batch,
        n_ubatch=n_ubatch or n_batch,
        n_threads=2,
        n_threads_batch=2,
        logits_all=True,
        seed=1,
        flash_attn=False,
        verbose=True,
    )
    completion = llm.create_completion(prompt, max_tokens=n_gen, temperature=0.0, top_k=1)
    logits = np.ascontiguousarray(llm.scores[: llm.n_tokens, :])
    np.save(out, logits)
    text = completion["choices"][0]["text"]
    print("completion:", repr(text))
    print("tokens:", llm.n_tokens, "logits shape:", logits.shape)
    print("logits_sha256:", hashlib.sha256(logits.tobytes()).hexdigest())
    llm.close()


def compare(a_path: str, b_path: str) -> int:
    a, b = np.load(a_path), np.load(b_path)
    if a.shape != b.shape:
        print(f"logits shapes differ: {a.shape} vs {b.shape}")
        return 1
    diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
    same = a.tobytes() == b.tobytes()
    print(f"{a.shape[0]} positions x {a.shape[1]} logits: {'bit-identical' if same else 'DIFFERENT'}, max abs diff {diff:g}")
    return 0 if same else 1


if __name__ == "__main__":
    if len(sys.argv) in (6, 9) and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], *map(int, sys.argv[6:]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
