#!/usr/bin/env python3
"""Write a llama-architecture GGUF model with random weights and a working SPM tokenizer.

The models exist to exercise llama.cpp's graph building, scheduling and kernels in tests and
benchmarks without downloading anything. The output is a pure function of the arguments: the
same arguments give a byte-identical file (no timestamps, seeded per-tensor RNG, pinned numpy
and gguf versions in scripts/requirements.txt).

    PY=$(scripts/pyenv.sh | tail -n1)
    $PY scripts/gen_model.py --size tiny   --type f32  --seed 1 --out tiny-f32.gguf
    $PY scripts/gen_model.py --size medium --type q8_0 --seed 1 --out medium-q8_0.gguf

Sizes:
  tiny    n_embd 64, 2 layers, 4 heads / 2 KV heads (GQA), n_ff 172, vocab 1024, ctx 512 (222k parameters)
  medium  n_embd 512, 8 layers, 8 heads, n_ff 1536, vocab 32000, ctx 2048 (60.0M parameters)
  large   n_embd 2048, 8 layers, 16 heads / 8 KV heads, n_ff 5632, vocab 32000, ctx 2048 (~510M
          parameters: weights far larger than a GPU's L2, for the CUDA backend's bandwidth check)
  moe     a mixture of experts (llama's Mixtral form): n_embd 512, 4 layers, 8 heads / 4 KV heads,
          8 experts of n_ff 768, 2 used per token, vocab 32000 (MUL_MAT_ID; 73.7M parameters)

Weights are N(0, 1/fan_in) (embeddings N(0, 1)), norms 1.0: activations stay O(1) and greedy
generation produces varied tokens. The rows of <unk>, <s> and </s> in output.weight are zero, so
greedy generation never ends early on EOS.

Types: f32, f16, q8_0. Norm weights always stay f32 (llama.cpp expects that). With q8_0, a matrix
whose rows are not a multiple of the 32-value block (tiny's ffn_down, rows of n_ff = 172) is
stored as f16, as llama-quantize also falls back for such shapes.
"""

from __future__ import annotations

import argparse
import itertools
import os
import string
import sys
import zlib
from dataclasses import dataclass

import numpy as np
import gguf


@dataclass(frozen=True)
class Config:
    n_vocab: int
    n_ctx: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    rms_eps: float = 1e-5
    rope_freq_base: float = 10000.0
    # mixture of experts (llama's Mixtral form): n_expert FFNs of n_ff each, n_expert_used per token
    n_expert: int = 0
    n_expert_used: int = 0

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


SIZES = {
    # n_ff 172 is deliberately not a multiple of 32/64: odd shapes reach kernels' tail paths.
    "tiny": Config(n_vocab=1024, n_ctx=512, n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=172),
    "medium": Config(n_vocab=32000, n_ctx=2048, n_embd=512, n_layer=8, n_head=8, n_head_kv=8, n_ff=1536),
    "large": Config(n_vocab=32000, n_ctx=2048, n_embd=2048, n_layer=8, n_head=16, n_head_kv=8, n_ff=5632),
    # rows of 512 / 768: whole K-quant and IQ super-blocks, so llama-quantize keeps every preset's types
    "moe": Config(n_vocab=32000, n_ctx=2048, n_embd=512, n_layer=4, n_head=8, n_head_kv=4, n_ff=768,
                  n_expert=8, n_expert_used=2),
}

QTYPES = {
    "f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "q4_0": (gguf.GGMLQuantizationType.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
}


# ---------------------------------------------------------------------------------------------
# Tokenizer: SentencePiece-style ("llama") vocab. llama.cpp's SPM tokenizer starts from single
# UTF-8 characters, repeatedly merges the adjacent pair whose concatenation is a token with the
# highest score, and falls back to the <0xNN> byte tokens for anything left unknown. So any text
# tokenizes, and the word pieces below only make tokenization less byte-heavy.

SPACE = "\u2581"  # "▁", SentencePiece's marker for a preceding space

UNK_ID, BOS_ID, EOS_ID = 0, 1, 2

from words import COMMON_WORDS  # noqa: E402 (scripts/ is the script's own folder)


def _word_pieces():
    """Candidate pieces, most "common" first (earlier pieces get higher merge scores)."""
    yield SPACE
    printable = [chr(c) for c in range(33, 127)]  # visible ASCII; a space is SPACE
    for c in printable:
        yield SPACE + c
        yield c
    # every prefix of a common word, so that merges can grow "▁h" -> "▁he" -> ... -> "▁hello"
    for w in COMMON_WORDS:
        for k in range(2, len(w) + 1):
            yield SPACE + w[:k]
            yield w[:k]
    letters = string.ascii_lowercase
    for n in (2, 3):
        for t in itertools.product(letters, repeat=n):
            yield SPACE + "".join(t)
            yield "".join(t)


def build_vocab(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    tokens: list[str] = ["<unk>", "<s>", "</s>"]
    types: list[int] = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    scores: list[float] = [0.0] * len(tokens)

    seen = set(tokens)
    rank = 0
    for piece in _word_pieces():
        if len(tokens) == n_vocab:
            break
        if piece in seen:  # llama.cpp requires unique token texts
            continue
        seen.add(piece)
        tokens.append(piece)
        types.append(gguf.TokenType.NORMAL)
        scores.append(-float(rank))  # like SentencePiece log-probs: frequent pieces score higher
        rank += 1
    if len(tokens) != n_vocab:
        raise SystemExit(f"vocab of {n_vocab} tokens requested, only {len(tokens)} pieces available")
    return tokens, scores, [int(t) for t in types]


# ---------------------------------------------------------------------------------------------
# Weights


def tensor_rng(seed: int, name: str) -> np.random.Generator:
    # One stream per tensor, keyed by name: a tensor's values do not depend on the others' order.
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def random_matrix(seed: int, name: str, rows: int, cols: int, std: float | None = None) -> np.ndarray:
    """A (rows, cols) float32 matrix, i.e. a ggml tensor with ne0 = cols, ne1 = rows.

    The default std 1/sqrt(cols) (fan-in scaling) makes every projection keep its input's scale:
    activations stay O(1), logits have std ~1, and q.k/sqrt(d) is large enough for attention to
    be selective. (A flat 0.02 std made attention near-uniform, so greedy generation on the
    medium model fell into a one-token loop after ~15 tokens.)
    """
    if std is None:
        std = 1.0 / np.sqrt(cols)
    rng = tensor_rng(seed, name)
    return rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(std)


def model_tensors(cfg: Config, seed: int):
    """Yields (name, float32 array, is_norm), per layer in the usual GGUF order."""
    n_q = cfg.n_head * cfg.head_dim
    n_kv = cfg.n_head_kv * cfg.head_dim

    # unit-variance embeddings: the residual stream starts at the scale the layers add to it
    yield "token_embd.weight", random_matrix(seed, "token_embd.weight", cfg.n_vocab, cfg.n_embd, 1.0), False
    for i in range(cfg.n_layer):
        p = f"blk.{i}."
        yield p + "attn_norm.weight", np.ones(cfg.n_embd, dtype=np.float32), True
        yield p + "attn_q.weight", random_matrix(seed, p + "attn_q.weight", n_q, cfg.n_embd), False
        yield p + "attn_k.weight", random_matrix(seed, p + "attn_k.weight", n_kv, cfg.n_embd), False
        yield p + "attn_v.weight", random_matrix(seed, p + "attn_v.weight", n_kv, cfg.n_embd), False
        yield p + "attn_output.weight", random_matrix(seed, p + "attn_output.weight", cfg.n_embd, n_q), False
        yield p + "ffn_norm.weight", np.ones(cfg.n_embd, dtype=np.float32), True
        if cfg.n_expert:
            # the router stays f32 (as llama-quantize keeps it); the experts are 3-D [n_expert, rows, cols]
            yield p + "ffn_gate_inp.weight", random_matrix(seed, p + "ffn_gate_inp.weight", cfg.n_expert, cfg.n_embd), True
            for name, rows, cols in (("ffn_gate_exps", cfg.n_ff, cfg.n_embd), ("ffn_up_exps", cfg.n_ff, cfg.n_embd),
                                     ("ffn_down_exps", cfg.n_embd, cfg.n_ff)):
                m = random_matrix(seed, p + name + ".weight", cfg.n_expert * rows, cols)
                yield p + name + ".weight", m.reshape(cfg.n_expert, rows, cols), False
            continue
        yield p + "ffn_gate.weight", random_matrix(seed, p + "ffn_gate.weight", cfg.n_ff, cfg.n_embd), False
        yield p + "ffn_up.weight", random_matrix(seed, p + "ffn_up.weight", cfg.n_ff, cfg.n_embd), False
        yield p + "ffn_down.weight", random_matrix(seed, p + "ffn_down.weight", cfg.n_embd, cfg.n_ff), False
    yield "output_norm.weight", np.ones(cfg.n_embd, dtype=np.float32), True

    output = random_matrix(seed, "output.weight", cfg.n_vocab, cfg.n_embd)
    # Zero logits for <unk>, <s>, </s>: random logits are positive at the top, so greedy decoding
    # never picks them and generation always runs the requested number of tokens (no early EOS).
    output[[UNK_ID, BOS_ID, EOS_ID], :] = 0.0
    yield "output.weight", output, False


def encode(arr: np.ndarray, is_norm: bool, qtype: gguf.GGMLQuantizationType):
    """Returns (array to write, ggml type) for one tensor."""
    if is_norm or qtype == gguf.GGMLQuantizationType.F32:
        return arr.astype(np.float32), gguf.GGMLQuantizationType.F32
    if qtype == gguf.GGMLQuantizationType.F16:
        return arr.astype(np.float16), gguf.GGMLQuantizationType.F16
    block, _ = gguf.GGML_QUANT_SIZES[qtype]
    if arr.shape[-1] % block != 0:
        return arr.astype(np.float16), gguf.GGMLQuantizationType.F16
    # gguf's Q8_0 is bit-exact with ggml's quantize_row_q8_0_ref (d = amax/127, round half away)
    return gguf.quants.quantize(arr, qtype), qtype


# ---------------------------------------------------------------------------------------------


def write_model(cfg: Config, size: str, type_name: str, seed: int, out: str) -> tuple[int, int]:
    qtype, ftype = QTYPES[type_name]
    tmp = f"{out}.tmp.{os.getpid()}"  # write then rename: readers never see a partial file
    w = gguf.GGUFWriter(tmp, "llama")  # also writes general.architecture

    w.add_name(f"ggml-rs random llama {size} {type_name} seed {seed}")
    w.add_file_type(int(ftype))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    w.add_vocab_size(cfg.n_vocab)
    w.add_context_length(cfg.n_ctx)
    w.add_embedding_length(cfg.n_embd)
    w.add_block_count(cfg.n_layer)
    w.add_feed_forward_length(cfg.n_ff)
    w.add_head_count(cfg.n_head)
    w.add_head_count_kv(cfg.n_head_kv)
    w.add_layer_norm_rms_eps(cfg.rms_eps)
    w.add_rope_dimension_count(cfg.head_dim)  # llama requires n_rot == head dim
    w.add_rope_freq_base(cfg.rope_freq_base)
    if cfg.n_expert:
        w.add_expert_count(cfg.n_expert)
        w.add_expert_used_count(cfg.n_expert_used)

    tokens, scores, types = build_vocab(cfg.n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(UNK_ID)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    n_params = 0
    for name, arr, is_norm in model_tensors(cfg, seed):
        n_params += arr.size
        data, ggml_type = encode(arr, is_norm, qtype)
        if ggml_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=ggml_type)

    try:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(tmp, out)
    except BaseException:
        w.close()
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return n_params, os.path.getsize(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), required=True)
    ap.add_argument("--type", choices=list(QTYPES), required=True, dest="type_name")
    ap.add_argument("--seed", type=int, default=0, help="RNG seed (default 0)")
    ap.add_argument("--out", required=True, help="output .gguf path")
    args = ap.parse_args(argv)
    if args.seed < 0:
        ap.error("--seed must be >= 0")

    cfg = SIZES[args.size]
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    n_params, n_bytes = write_model(cfg, args.size, args.type_name, args.seed, args.out)
    print(f"wrote {args.out}: llama {args.size} {args.type_name} seed {args.seed}, "
          f"{n_params} parameters, {n_bytes} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
