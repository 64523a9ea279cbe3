#!/usr/bin/env python3
"""Write a random-weight Flux.2-klein model that stable-diffusion.cpp loads and runs.

No weights can be downloaded for the image job, so this writes one: the real Flux.2-klein
architecture as stable-diffusion.cpp builds it (src/flux.hpp, src/llm.hpp, src/auto_encoder_kl.hpp
of the pinned sdist), shrunk to the smallest sizes the architecture allows. The output is a pure
function of the arguments: each tensor's values come from an RNG seeded with (seed, crc32 of its
name), the pinned numpy and safetensors of scripts/requirements.txt write it, no metadata.

    PY=$(scripts/pyenv.sh | tail -n1)
    $PY scripts/gen_sd_model.py --seed 1 --out flux2-klein-tiny.safetensors
    sd-cli -m flux2-klein-tiny.safetensors -p "a cat" -W 64 -H 64 --steps 1 -s 42 -o out.png

One file, with stable-diffusion.cpp's own tensor names (so `-m` alone loads all three parts):
  model.diffusion_model.*   Flux.2 DiT: 1 double-stream + 1 single-stream block, hidden 128. The
                            rotary axes of Flux.2 are fixed ({32, 32, 32, 32}), so the head size
                            is 128 and hidden 128 is one head. The loader tells Flux.2 from Flux by
                            double_stream_modulation_img, and klein from Flux.2 by the absence of
                            single_blocks.47.
  text_encoders.llm.model.* Qwen3 (klein's text encoder): 1 layer, hidden 64, the full 151936-token
                            vocabulary (stable-diffusion.cpp tokenizes with its built-in Qwen2
                            tokenizer, so the ids reach up to there); Qwen3's 32 query / 8 KV heads
                            of 128 are fixed by the loader. With one layer the encoder's output is
                            the final norm of hidden 64, which sizes the DiT's txt_in.
  first_stage_model.*       the Flux.2 VAE decoder (32 latent channels, ch_mult 1,2,4,4), ch 32;
                            no encoder (text-to-image decodes only).

Weights are N(0, 1/fan_in), biases N(0, 0.02), norm weights 1: activations stay O(1) and the
image is noise, not a flat colour. Matrices and convolutions are f16 (--type f32 for all f32),
norms, biases and 1-D tensors f32.
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib

import numpy as np
from safetensors.numpy import save_file

HIDDEN = 128  # DiT hidden size: one head of 128 (the rotary axes fix the head size)
MLP_RATIO = 3  # Flux.2: mlp_ratio 3 with a SiLU-gated MLP (the first linear is doubled)
IN_CHANNELS = 128  # Flux.2 latents: 32 VAE channels patched 2x2
TXT_DIM = 64  # the text encoder's hidden size = the DiT's context_in_dim
LLM_VOCAB = 151936  # Qwen3's vocabulary
LLM_HEADS, LLM_KV_HEADS, LLM_HEAD_DIM = 32, 8, 128  # fixed by stable-diffusion.cpp for Qwen3
LLM_FF = 128
VAE_CH = 32
VAE_CH_MULT = (1, 2, 4, 4)
VAE_RES_BLOCKS = 2
VAE_Z = 32


class Writer:
    def __init__(self, seed: int, dtype: np.dtype) -> None:
        self.seed = seed
        self.dtype = dtype
        self.tensors: dict[str, np.ndarray] = {}

    def rng(self, name: str) -> np.random.Generator:
        return np.random.default_rng([self.seed, zlib.crc32(name.encode())])

    def add(self, name: str, value: np.ndarray, matrix: bool) -> None:
        if name in self.tensors:
            raise ValueError(f"tensor {name} written twice")
        self.tensors[name] = np.ascontiguousarray(value.astype(self.dtype if matrix else np.float32))

    # shapes are PyTorch's (out, in, ...): safetensors stores them so, ggml sees them reversed
    def weight(self, name: str, *shape: int) -> None:
        fan_in = int(np.prod(shape[1:]))
        self.add(name, self.rng(name).standard_normal(shape) / np.sqrt(fan_in), matrix=True)

    def bias(self, name: str, n: int) -> None:
        self.add(name, self.rng(name).standard_normal(n) * 0.02, matrix=False)

    def ones(self, name: str, n: int) -> None:
        self.add(name, np.ones(n), matrix=False)

    def linear(self, prefix: str, n_in: int, n_out: int, bias: bool) -> None:
        self.weight(f"{prefix}.weight", n_out, n_in)
        if bias:
            self.bias(f"{prefix}.bias", n_out)

    def conv(self, prefix: str, n_in: int, n_out: int, k: int) -> None:
        self.weight(f"{prefix}.weight", n_out, n_in, k, k)
        self.bias(f"{prefix}.bias", n_out)

    def group_norm(self, prefix: str, n: int) -> None:
        self.ones(f"{prefix}.weight", n)
        self.bias(f"{prefix}.bias", n)


def flux2(w: Writer) -> None:
    p = "model.diffusion_model"
    h, mlp = HIDDEN, HIDDEN * MLP_RATIO
    head = LLM_HEAD_DIM  # hidden / num_heads; num_heads = hidden / key_norm size
    # Flux.2 has no biases (disable_bias) and shares its modulations across blocks
    w.linear(f"{p}.img_in", IN_CHANNELS, h, bias=False)
    w.linear(f"{p}.txt_in", TXT_DIM, h, bias=False)
    w.linear(f"{p}.time_in.in_layer", 256, h, bias=False)
    w.linear(f"{p}.time_in.out_layer", h, h, bias=False)
    w.linear(f"{p}.double_stream_modulation_img.lin", h, 6 * h, bias=False)
    w.linear(f"{p}.double_stream_modulation_txt.lin", h, 6 * h, bias=False)
    w.linear(f"{p}.single_stream_modulation.lin", h, 3 * h, bias=False)
    for stream in ("img", "txt"):
        b = f"{p}.double_blocks.0.{stream}"
        w.linear(f"{b}_attn.qkv", h, 3 * h, bias=False)
        w.ones(f"{b}_attn.norm.query_norm.scale", head)
        w.ones(f"{b}_attn.norm.key_norm.scale", head)
        w.linear(f"{b}_attn.proj", h, h, bias=False)
        w.linear(f"{b}_mlp.0", h, 2 * mlp, bias=False)
        w.linear(f"{b}_mlp.2", mlp, h, bias=False)
    b = f"{p}.single_blocks.0"
    w.linear(f"{b}.linear1", h, 3 * h + 2 * mlp, bias=False)
    w.linear(f"{b}.linear2", h + mlp, h, bias=False)
    w.ones(f"{b}.norm.query_norm.scale", head)
    w.ones(f"{b}.norm.key_norm.scale", head)
    w.linear(f"{p}.final_layer.linear", h, IN_CHANNELS, bias=False)
    w.linear(f"{p}.final_layer.adaLN_modulation.1", h, 2 * h, bias=False)


def qwen3(w: Writer) -> None:
    p = "text_encoders.llm.model"
    w.weight(f"{p}.embed_tokens.weight", LLM_VOCAB, TXT_DIM)
    layer = f"{p}.layers.0"
    w.linear(f"{layer}.self_attn.q_proj", TXT_DIM, LLM_HEADS * LLM_HEAD_DIM, bias=False)
    w.linear(f"{layer}.self_attn.k_proj", TXT_DIM, LLM_KV_HEADS * LLM_HEAD_DIM, bias=False)
    w.linear(f"{layer}.self_attn.v_proj", TXT_DIM, LLM_KV_HEADS * LLM_HEAD_DIM, bias=False)
    w.linear(f"{layer}.self_attn.o_proj", LLM_HEADS * LLM_HEAD_DIM, TXT_DIM, bias=False)
    w.ones(f"{layer}.self_attn.q_norm.weight", LLM_HEAD_DIM)
    w.ones(f"{layer}.self_attn.k_norm.weight", LLM_HEAD_DIM)
    w.linear(f"{layer}.mlp.gate_proj", TXT_DIM, LLM_FF, bias=False)
    w.linear(f"{layer}.mlp.up_proj", TXT_DIM, LLM_FF, bias=False)
    w.linear(f"{layer}.mlp.down_proj", LLM_FF, TXT_DIM, bias=False)
    w.ones(f"{layer}.input_layernorm.weight", TXT_DIM)
    w.ones(f"{layer}.post_attention_layernorm.weight", TXT_DIM)
    w.ones(f"{p}.norm.weight", TXT_DIM)


def resnet(w: Writer, prefix: str, n_in: int, n_out: int) -> None:
    w.group_norm(f"{prefix}.norm1", n_in)
    w.conv(f"{prefix}.conv1", n_in, n_out, 3)
    w.group_norm(f"{prefix}.norm2", n_out)
    w.conv(f"{prefix}.conv2", n_out, n_out, 3)
    if n_in != n_out:
        w.conv(f"{prefix}.nin_shortcut", n_in, n_out, 1)


def vae_decoder(w: Writer) -> None:
    p = "first_stage_model"
    w.conv(f"{p}.post_quant_conv", VAE_Z, VAE_Z, 1)
    d = f"{p}.decoder"
    block_in = VAE_CH * VAE_CH_MULT[-1]
    w.conv(f"{d}.conv_in", VAE_Z, block_in, 3)
    resnet(w, f"{d}.mid.block_1", block_in, block_in)
    w.group_norm(f"{d}.mid.attn_1.norm", block_in)
    for name in ("q", "k", "v", "proj_out"):
        w.conv(f"{d}.mid.attn_1.{name}", block_in, block_in, 1)
    resnet(w, f"{d}.mid.block_2", block_in, block_in)
    for i in reversed(range(len(VAE_CH_MULT))):
        block_out = VAE_CH * VAE_CH_MULT[i]
        for j in range(VAE_RES_BLOCKS + 1):
            resnet(w, f"{d}.up.{i}.block.{j}", block_in, block_out)
            block_in = block_out
        if i != 0:
            w.conv(f"{d}.up.{i}.upsample.conv", block_in, block_in, 3)
    w.group_norm(f"{d}.norm_out", block_in)
    w.conv(f"{d}.conv_out", block_in, 3, 3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--type", choices=("f16", "f32"), default="f16", help="type of the matrices and convolutions")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    t0 = time.monotonic()
    w = Writer(args.seed, np.dtype(np.float16 if args.type == "f16" else np.float32))
    flux2(w)
    qwen3(w)
    vae_decoder(w)
    save_file(w.tensors, args.out)
    params = sum(t.size for t in w.tensors.values())
    size = sum(t.nbytes for t in w.tensors.values())
    print(
        f"{args.out}: Flux.2-klein (tiny), {len(w.tensors)} tensors, {params / 1e6:.1f}M parameters, "
        f"{size / 1e6:.1f} MB of {args.type} weights, written in {time.monotonic() - t0:.2f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
