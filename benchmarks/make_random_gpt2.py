#!/usr/bin/python3
"""Writes a GPT-2-shaped model directory with random weights, for timing only.

Usage:
  /usr/bin/python3 benchmarks/make_random_gpt2.py --shape small  --out /tmp/nlb-gpt2/small
  /usr/bin/python3 benchmarks/make_random_gpt2.py --shape medium --out /tmp/nlb-gpt2/medium [--seed 0]

Shapes (the published GPT-2 ones; vocabulary 50257, n_positions 1024, MLP 4d, tied head):
  small   12 layers, d 768,  12 heads  (124 M parameters, 0.50 GB as float32)
  medium  24 layers, d 1024, 16 heads  (355 M parameters, 1.42 GB as float32)

Weights: every matrix and both embeddings N(0, 0.02), every bias 0, LayerNorm gain 1 and bias 0
(no residual-projection rescaling). The perplexity of such a model is meaningless; only the
times of what runs on it are read (benchmarks/budget_side_by_side.py).

Written: config.json in the form Hugging Face's GPT2Config.save_pretrained writes it (sorted
keys, indent 2), model.safetensors in save_pretrained's tensor names (`transformer.` prefix, the
tied lm_head not stored), F32, written here with struct + json one tensor at a time (no
`safetensors` package is needed and the whole file is never held in memory), and the GPT-2
tokenizer files vocab.json + merges.txt copied from models/gpt2-tokenizer. Write it under /tmp:
model weights are never committed.
"""

import argparse
import json
import os
import shutil
import struct

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

SHAPES = {
    "small": {"n_layer": 12, "n_embd": 768, "n_head": 12},
    "medium": {"n_layer": 24, "n_embd": 1024, "n_head": 16},
}
VOCAB = 50257
N_POSITIONS = 1024
EOS = 50256


def hf_config(shape: dict) -> dict:
    """config.json of a GPT-2 of this shape, as GPT2Config.save_pretrained writes it."""
    return {
        "activation_function": "gelu_new",
        "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.0,
        "bos_token_id": EOS,
        "embd_pdrop": 0.0,
        "eos_token_id": EOS,
        "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05,
        "model_type": "gpt2",
        "n_ctx": N_POSITIONS,
        "n_embd": shape["n_embd"],
        "n_head": shape["n_head"],
        "n_inner": None,
        "n_layer": shape["n_layer"],
        "n_positions": N_POSITIONS,
        "reorder_and_upcast_attn": False,
        "resid_pdrop": 0.0,
        "scale_attn_by_inverse_layer_idx": False,
        "scale_attn_weights": True,
        "summary_activation": None,
        "summary_first_dropout": 0.1,
        "summary_proj_to_labels": True,
        "summary_type": "cls_index",
        "summary_use_proj": True,
        "torch_dtype": "float32",
        "use_cache": True,
        "vocab_size": VOCAB,
    }


def tensor_shapes(shape: dict) -> dict:
    """name -> (shape, kind) with kind "normal", "zero" or "one", in save_pretrained's names."""
    d = shape["n_embd"]
    out = {
        "transformer.wte.weight": ((VOCAB, d), "normal"),
        "transformer.wpe.weight": ((N_POSITIONS, d), "normal"),
        "transformer.ln_f.weight": ((d,), "one"),
        "transformer.ln_f.bias": ((d,), "zero"),
    }
    for i in range(shape["n_layer"]):
        p = f"transformer.h.{i}."
        out.update({
            p + "ln_1.weight": ((d,), "one"),
            p + "ln_1.bias": ((d,), "zero"),
            p + "attn.c_attn.weight": ((d, 3 * d), "normal"),
            p + "attn.c_attn.bias": ((3 * d,), "zero"),
            p + "attn.c_proj.weight": ((d, d), "normal"),
            p + "attn.c_proj.bias": ((d,), "zero"),
            p + "ln_2.weight": ((d,), "one"),
            p + "ln_2.bias": ((d,), "zero"),
            p + "mlp.c_fc.weight": ((d, 4 * d), "normal"),
            p + "mlp.c_fc.bias": ((4 * d,), "zero"),
            p + "mlp.c_proj.weight": ((4 * d, d), "normal"),
            p + "mlp.c_proj.bias": ((d,), "zero"),
        })
    return out


def write_safetensors(path: str, shapes: dict, seed: int) -> int:
    """Writes the tensors of `shapes` (F32, name order) to `path`, drawing each when it is
    written. Returns the parameter count."""
    names = sorted(shapes)
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name in names:
        size = int(np.prod(shapes[name][0])) * 4
        header[name] = {"dtype": "F32", "shape": list(shapes[name][0]), "data_offsets": [offset, offset + size]}
        offset += size
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * ((-len(head)) % 8)  # pad to 8 bytes, as the Rust writer does
    rng = np.random.default_rng(seed)
    count = 0
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for name in names:
            shape, kind = shapes[name]
            if kind == "normal":
                t = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
            elif kind == "one":
                t = np.ones(shape, dtype=np.float32)
            else:
                t = np.zeros(shape, dtype=np.float32)
            f.write(t.astype("<f4", copy=False).tobytes())
            count += t.size
    os.replace(path + ".tmp", path)
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--out", required=True, help="the model directory to write (under /tmp)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    shape = SHAPES[args.shape]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(hf_config(shape), indent=2, sort_keys=True) + "\n")
    params = write_safetensors(os.path.join(args.out, "model.safetensors"), tensor_shapes(shape), args.seed)
    for name in ("vocab.json", "merges.txt"):
        shutil.copyfile(os.path.join(REPO, "models", "gpt2-tokenizer", name), os.path.join(args.out, name))
    print(f"wrote {args.out}: GPT-2 {args.shape} shape, {params:,} parameters, random N(0, 0.02) weights")


if __name__ == "__main__":
    main()
