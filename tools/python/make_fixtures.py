#!/usr/bin/python3
"""Writes the reference fixtures under tests/fixtures/ from the shipped models.

Usage: /usr/bin/python3 tools/python/make_fixtures.py [--only tiny-gpt2|tiny-neox|tiny-sd|tiny-llama]

For each of models/tiny-gpt2, models/tiny-neox and models/tiny-sd (S–D
attention, nlb_reference/sd_model.py):
  tests/fixtures/<model>-reference.safetensors
      tokens [2, 128] I64: the first two eval-protocol windows of
          data/kjv-eval.txt (its bytes 0..255);
      logits_f64 [2, 128, 256] F64;
      loss [2, 127] F32: loss[b, j] = cross-entropy of logits[b, j] against
          tokens[b, j + 1];
      tap.embedding and, for every layer i, tap.{i}.attn_output,
          tap.{i}.mlp_input, tap.{i}.mlp_output, tap.{i}.block_output, each
          [1, 128, d] F32: the first window only, and no tap.{i}.block_input,
          which equals tap.{i-1}.block_output (tap.embedding for i = 0; the
          script checks that) — to keep the committed data small.
  tests/fixtures/<model>-ppl.json
      eval-protocol PPL on data/kjv-eval.txt (first 8 windows, all windows)
      and data/jargon-eval.txt (all windows).
And for tiny-sd only:
  tests/fixtures/tiny-sd-variant/{config.json,model.safetensors}: a 2-layer
      "nlb-sd" model derived from models/tiny-sd's first two layers that
      exercises the other loader paths: ranks [16, 8] (layer 1's U, V keep
      their first 4 columns), the scalar filter (θ_h = mean of the diagonal
      θ_h) and a pre-attention LayerNorm ln_1 (γ_k = 1 + 0.1 sin k,
      β_k = 0.05 cos k);
  tests/fixtures/tiny-sd-variant-logits.safetensors: tokens and logits_f64
      of that model on the same two windows.
And for tiny-gpt2 only:
  tests/fixtures/tiny-gpt2-{f16,bf16}-logits.safetensors: tokens and logits
      (F32) of the weights rounded (to nearest even) to F16 / BF16 on the same
      two windows, and in the metadata `weights_fnv1a64`, the checksum of those
      rounded weights' stored bytes (fnv1a64_of_tensors). The rounded model
      directories are written to a temporary directory, not committed: the
      tests write the same copies from models/tiny-gpt2 and check them against
      this checksum (tests/support/model_copy.hpp).

And models/tiny-llama (Llama 3-style, nlb_reference/llama.py; BF16 weights,
vocabulary 3 261), whose inputs are token ids: out/data/kjv-eval.llama3.u16 and
out/data/jargon-eval.llama3.u16, written by tools/node/tokenize_corpus.mjs
(HF tokenizers reading models/tiny-llama/tokenizer.json; run it first):
  tests/fixtures/tiny-llama-reference.safetensors
      tokens [2, 128] I64: the first two eval-protocol windows of the tokens
          of data/kjv-eval.txt;
      logit_positions [9] I64 (0, 15, 31, ..., 127) and logits_f64 [2, 9, 3261]
          F64: the logits at those positions only (every position would be
          6.7 MB);
      loss [2, 127] F32 at every predicted position, as above;
      the taps as above (first window, no block_input), [1, 128, 96] F32.
  tests/fixtures/tiny-llama-ppl.json: as above on the token files, with the
      per-byte perplexity and the SHA-256 of each token file.
  Without the token files a run without --only skips tiny-llama (saying so);
  --only tiny-llama fails.
The weights are already BF16 (as the Hub's Llama checkpoints), so the
reference file is the BF16 logits fixture of this model; no rounded copy.

Everything is computed in float64 from the stored weights (casting F32, F16
and BF16 to float64 is exact), then stored as F32 unless stated. Every
safetensors file carries __metadata__ with the fixture version, the torch
version, the command and the SHA-256 of the weights it was computed from.
"""

import argparse
import hashlib
import json
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from nlb_reference import hf_layout, protocol, safetensors_io, sd_model  # noqa: E402
from nlb_reference.data import read_tokens  # noqa: E402
from nlb_reference.models import context_length  # noqa: E402

EVAL_TEXT = "data/kjv-eval.txt"
CROSS_TEXT = "data/jargon-eval.txt"
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
FIXTURE_VERSION = "1"
COMMAND = "/usr/bin/python3 tools/python/make_fixtures.py"
MODELS = ("tiny-gpt2", "tiny-neox", "tiny-sd", "tiny-llama")
LLAMA_TOKEN_FILES = {  # text -> its token ids, written by tools/node/tokenize_corpus.mjs
    EVAL_TEXT: "out/data/kjv-eval.llama3.u16",
    CROSS_TEXT: "out/data/jargon-eval.llama3.u16",
}
LLAMA_LOGIT_POSITIONS = (0, 15, 31, 47, 63, 79, 95, 111, 127)
FIXTURE_WINDOWS = 2
TAP_WINDOWS = 1  # the reference files keep the taps of the first window only


def sha256_of(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fnv1a64_of_tensors(path) -> str:
    """FNV-1a (64-bit) over the stored bytes of every tensor of a safetensors
    file, tensors in name order, as 16 lower-case hex digits. Read from the
    file's header and offsets, not through torch; tests/support/model_copy.hpp
    computes the same."""
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    header.pop("__metadata__", None)
    h = 0xCBF29CE484222325
    for name in sorted(header):
        begin, end = header[name]["data_offsets"]
        for byte in data[8 + n + begin : 8 + n + end]:
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def stamp(model_dir: str, **extra) -> dict:
    meta = {
        "format": "pt",
        "nlbudget_fixture_version": FIXTURE_VERSION,
        "generator": "tools/python/make_fixtures.py (nlb_reference)",
        "torch_version": torch.__version__,
        "command": COMMAND,
        "model": model_dir,
        "model_sha256": sha256_of(os.path.join(REPO, model_dir, "model.safetensors")),
        "compute_dtype": "float64",
    }
    meta.update({k: str(v) for k, v in extra.items()})
    return meta


@torch.no_grad()
def reference_outputs(model, tokens):
    """logits (float64), per-position loss (float64) and taps for [B, T] tokens."""
    taps = {}
    logits = model(tokens, taps)
    loss = protocol.per_position_loss(logits, tokens)
    return logits, loss, taps


def load_any_model_dir(directory, dtype):
    """(model, context) of a Hugging Face layout directory or an "nlb-sd" one."""
    with open(os.path.join(directory, "config.json")) as f:
        if json.load(f).get("model_type") == "nlb-sd":
            model, config = sd_model.load_model_dir(directory, dtype=dtype)
            return model, config.n_positions
    model, config = hf_layout.load_model_dir(directory, dtype=dtype)
    return model, context_length(config)


def write_ppl_json(name, ppl, summary):
    """Writes tests/fixtures/<name>-ppl.json and prints `summary` after its path."""
    path = os.path.join(FIXTURES, f"{name}-ppl.json")
    with open(path, "w") as f:
        f.write(json.dumps(ppl, indent=2) + "\n")
    print(f"{os.path.relpath(path, REPO)}: {summary}")


def add_stored_taps(name, taps, tensors):
    """Adds the taps a fixture stores to `tensors`: every tap but block_input (each equals the
    previous block's output, checked here), first TAP_WINDOWS windows, as float32."""
    previous_output = taps["embedding"]
    for layer in range(len([k for k in taps if k.endswith(".block_output")])):
        if not torch.equal(taps[f"{layer}.block_input"], previous_output):
            raise SystemExit(f"{name}: tap {layer}.block_input differs from the previous block's output")
        previous_output = taps[f"{layer}.block_output"]
    for tap_name, value in taps.items():
        if not tap_name.endswith(".block_input"):
            tensors["tap." + tap_name] = value[:TAP_WINDOWS].float()


def write_reference(name: str) -> None:
    model_dir = f"models/{name}"
    model, ctx = load_any_model_dir(os.path.join(REPO, model_dir), dtype=torch.float64)
    tokens = protocol.windows(read_tokens(os.path.join(REPO, EVAL_TEXT)), ctx, FIXTURE_WINDOWS)
    logits, loss, taps = reference_outputs(model, tokens)
    tensors = {
        "tokens": tokens,
        "logits_f64": logits,
        "loss": loss.float(),
    }
    add_stored_taps(name, taps, tensors)
    meta = stamp(
        model_dir,
        text=EVAL_TEXT,
        windows=f"first {FIXTURE_WINDOWS} windows of {ctx} bytes (bytes 0..{FIXTURE_WINDOWS * ctx - 1})",
        loss="loss[b, j] = cross-entropy(logits[b, j], tokens[b, j + 1])",
        taps=f"first {TAP_WINDOWS} window(s); tap.<i>.block_input = tap.<i-1>.block_output "
        "(tap.embedding for i = 0), not stored",
    )
    path = os.path.join(FIXTURES, f"{name}-reference.safetensors")
    safetensors_io.write(path, tensors, meta)
    print(f"{os.path.relpath(path, REPO)}: {len(tensors)} tensors, {os.path.getsize(path)} bytes")

    runs = []
    for text, max_windows in ((EVAL_TEXT, 8), (EVAL_TEXT, None), (CROSS_TEXT, None)):
        result = protocol.evaluate(model, read_tokens(os.path.join(REPO, text)), ctx, max_windows)
        runs.append({"text": text, "max_windows": max_windows, **result})
    ppl = {
        "model": model_dir,
        "model_sha256": meta["model_sha256"],
        "protocol": "consecutive non-overlapping windows of `context` bytes, a shorter last window dropped; "
        "every position but the first of each window predicted; ppl = exp(mean cross-entropy)",
        "compute_dtype": "float64",
        "nlbudget_fixture_version": FIXTURE_VERSION,
        "torch_version": torch.__version__,
        "command": COMMAND,
        "runs": runs,
    }
    write_ppl_json(name, ppl, ", ".join(f"{r['text']}[{r['max_windows']}] ppl {r['ppl']:.6f}" for r in runs))


def read_u16_tokens(rel_path):
    """Token ids of a little-endian u16 token file under the repository."""
    path = os.path.join(REPO, rel_path)
    if not os.path.exists(path):
        raise SystemExit(f"{rel_path} is missing: run `npm ci && node tokenize_corpus.mjs` in tools/node first")
    with open(path, "rb") as f:
        raw = f.read()
    return torch.frombuffer(bytearray(raw), dtype=torch.int16).to(torch.int64).bitwise_and(0xFFFF).tolist()


def llama_byte_lengths(model_dir):
    """Bytes each token id of the model's ByteLevel tokenizer.json stands for
    (one character of a vocabulary entry per byte; special tokens 0)."""
    with open(os.path.join(REPO, model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    size = max([*tok["model"]["vocab"].values(), *(t["id"] for t in tok["added_tokens"])]) + 1
    lengths = [0] * size
    for piece, token_id in tok["model"]["vocab"].items():
        lengths[token_id] = len(piece)
    return lengths


def write_llama_reference(name: str = "tiny-llama") -> None:
    """The reference and PPL files of a Llama-family model over token files (see the module doc)."""
    model_dir = f"models/{name}"
    model, ctx = load_any_model_dir(os.path.join(REPO, model_dir), dtype=torch.float64)
    token_file = LLAMA_TOKEN_FILES[EVAL_TEXT]
    eval_tokens = read_u16_tokens(token_file)
    tokens = protocol.windows(eval_tokens, ctx, FIXTURE_WINDOWS)
    logits, loss, taps = reference_outputs(model, tokens)
    positions = torch.tensor(LLAMA_LOGIT_POSITIONS, dtype=torch.int64)
    tensors = {
        "tokens": tokens,
        "logit_positions": positions,
        "logits_f64": logits[:, positions].contiguous(),
        "loss": loss.float(),
    }
    add_stored_taps(name, taps, tensors)
    lengths = llama_byte_lengths(model_dir)
    window_bytes = sum(lengths[t] for t in tokens.flatten().tolist())
    meta = stamp(
        model_dir,
        text=EVAL_TEXT,
        tokens_file=token_file,
        tokens_file_sha256=sha256_of(os.path.join(REPO, token_file)),
        tokenizer=f"{model_dir}/tokenizer.json (HF tokenizers, npm binding; tools/node/tokenize_corpus.mjs; "
        "no special tokens)",
        windows=f"first {FIXTURE_WINDOWS} windows of {ctx} tokens (bytes 0..{window_bytes - 1} of the text)",
        logits="logits_f64[b, k] = logits of window b at position logit_positions[k]",
        loss="loss[b, j] = cross-entropy(logits[b, j], tokens[b, j + 1]), every position",
        taps=f"first {TAP_WINDOWS} window(s); tap.<i>.block_input = tap.<i-1>.block_output "
        "(tap.embedding for i = 0), not stored",
        weights="BF16 as stored (exact in float64)",
    )
    path = os.path.join(FIXTURES, f"{name}-reference.safetensors")
    safetensors_io.write(path, tensors, meta)
    print(f"{os.path.relpath(path, REPO)}: {len(tensors)} tensors, {os.path.getsize(path)} bytes")

    runs = []
    for text, max_windows in ((EVAL_TEXT, 8), (EVAL_TEXT, None), (CROSS_TEXT, None)):
        text_tokens = read_u16_tokens(LLAMA_TOKEN_FILES[text])
        result = protocol.evaluate(model, text_tokens, ctx, max_windows)
        w = protocol.windows(text_tokens, ctx, max_windows)
        predicted_bytes = sum(lengths[t] for t in w[:, 1:].flatten().tolist())
        total = result["mean_loss"] * result["predicted_tokens"]
        runs.append({
            "text": text,
            "tokens_file": LLAMA_TOKEN_FILES[text],
            "tokens_file_sha256": sha256_of(os.path.join(REPO, LLAMA_TOKEN_FILES[text])),
            "text_tokens": len(text_tokens),
            "max_windows": max_windows,
            **result,
            "predicted_bytes": predicted_bytes,
            "mean_loss_per_byte": total / predicted_bytes,
            "ppl_per_byte": math.exp(total / predicted_bytes),
        })
    ppl = {
        "model": model_dir,
        "model_sha256": meta["model_sha256"],
        "protocol": "the text tokenized by the model's tokenizer.json (no special tokens); consecutive "
        "non-overlapping windows of `context` tokens, a shorter last window dropped; every position but the "
        "first of each window predicted; ppl = exp(mean cross-entropy); ppl_per_byte = exp(total "
        "cross-entropy / bytes of the predicted tokens)",
        "compute_dtype": "float64",
        "nlbudget_fixture_version": FIXTURE_VERSION,
        "torch_version": torch.__version__,
        "command": COMMAND,
        "runs": runs,
    }
    write_ppl_json(
        name,
        ppl,
        ", ".join(
            f"{r['text']}[{r['max_windows']}] ppl {r['ppl']:.6f} (per byte {r['ppl_per_byte']:.6f})" for r in runs
        ),
    )


def write_sd_variant() -> None:
    source = os.path.join(REPO, "models", "tiny-sd")
    base, config = sd_model.load_model_dir(source, dtype=torch.float32)
    variant_config = sd_model.SDConfig(
        vocab_size=config.vocab_size,
        n_positions=config.n_positions,
        n_embd=config.n_embd,
        n_layer=2,
        n_head=config.n_head,
        ranks=[config.ranks[0], config.ranks[1] // 2],
        filter_kind="scalar",
        attn_layer_norm=True,
        layer_norm_epsilon=config.layer_norm_epsilon,
        activation_function=config.activation_function,
    )
    variant = sd_model.SDLMHeadModel(variant_config)
    k = torch.arange(config.n_embd, dtype=torch.float64)
    with torch.no_grad():
        for name, p in variant.named_parameters():
            if name.startswith("transformer.h."):
                layer = int(name.split(".")[2])
            if name.endswith("ln_1.weight"):
                p.copy_(1.0 + 0.1 * torch.sin(k))
            elif name.endswith("ln_1.bias"):
                p.copy_(0.05 * torch.cos(k))
            elif name.endswith("attn.theta"):
                p.copy_(dict(base.named_parameters())[name].mean(dim=1))
            elif name.endswith("attn.u") or name.endswith("attn.v"):
                p.copy_(dict(base.named_parameters())[name][:, :, : variant_config.ranks[layer] // 2])
            else:
                p.copy_(dict(base.named_parameters())[name])
    directory = os.path.join(FIXTURES, "tiny-sd-variant")
    sd_model.save_model_dir(variant, directory)
    rel_dir = os.path.relpath(directory, REPO)
    model, ctx = load_any_model_dir(directory, dtype=torch.float64)
    tokens = protocol.windows(read_tokens(os.path.join(REPO, EVAL_TEXT)), ctx, FIXTURE_WINDOWS)
    with torch.no_grad():
        logits = model(tokens)
    meta = stamp(
        rel_dir,
        text=EVAL_TEXT,
        windows=f"first {FIXTURE_WINDOWS} windows of {ctx} bytes",
        derived_from="models/tiny-sd: layers 0-1, ranks [16, 8], scalar filter (mean theta), "
        "ln_1 gamma = 1 + 0.1 sin k, beta = 0.05 cos k",
    )
    path = os.path.join(FIXTURES, "tiny-sd-variant-logits.safetensors")
    safetensors_io.write(path, {"tokens": tokens, "logits_f64": logits}, meta)
    print(f"{rel_dir}: {os.path.relpath(path, REPO)}: max |logit| {float(logits.abs().max()):.3f}")


def write_rounded_copies(name: str = "tiny-gpt2") -> None:
    source = os.path.join(REPO, "models", name)
    f32_model, config = hf_layout.load_model_dir(source, dtype=torch.float32)
    ctx = context_length(config)
    tokens = protocol.windows(read_tokens(os.path.join(REPO, EVAL_TEXT)), ctx, FIXTURE_WINDOWS)
    f64_model, _ = hf_layout.load_model_dir(source, dtype=torch.float64)
    with torch.no_grad():
        f32_logits = f64_model(tokens)
    for tag, dtype in (("f16", torch.float16), ("bf16", torch.bfloat16)):
        with tempfile.TemporaryDirectory(prefix=f"nlb-{name}-{tag}-") as directory:
            # Round the float32 weights once (to nearest, ties to even) and store.
            hf_layout.save_model_dir(f32_model, directory, dtype=dtype)
            weights = os.path.join(directory, "model.safetensors")
            weight_bytes = os.path.getsize(weights)
            checksum = fnv1a64_of_tensors(weights)
            rounded, _ = hf_layout.load_model_dir(directory, dtype=torch.float64)
        with torch.no_grad():
            logits = rounded(tokens)
        diff = float((logits - f32_logits).abs().max())
        tensors = {"tokens": tokens, "logits": logits.float()}
        meta = stamp(
            f"models/{name}",
            text=EVAL_TEXT,
            windows=f"first {FIXTURE_WINDOWS} windows of {ctx} bytes",
            rounding=f"float32 -> {tag}, round to nearest even, every tensor",
            weights_fnv1a64=checksum,
            max_abs_diff_vs_f32_weights=f"{diff:.6e}",
            max_abs_logit_f32_weights=f"{float(f32_logits.abs().max()):.6e}",
        )
        path = os.path.join(FIXTURES, f"{name}-{tag}-logits.safetensors")
        safetensors_io.write(path, tensors, meta)
        print(
            f"models/{name} rounded to {tag}: weights {weight_bytes} bytes, FNV-1a {checksum}; "
            f"{os.path.relpath(path, REPO)}: max |logits - logits(F32 weights)| = {diff:.3e}"
        )


def main():
    torch.set_num_threads(1)
    os.makedirs(FIXTURES, exist_ok=True)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=MODELS, help="write only this model's fixtures")
    args = ap.parse_args()
    for name in MODELS:
        if args.only not in (None, name):
            continue
        if name != "tiny-llama":
            write_reference(name)
        elif args.only or all(os.path.exists(os.path.join(REPO, f)) for f in LLAMA_TOKEN_FILES.values()):
            write_llama_reference(name)
        else:  # a plain run (rebuild_all.py) on a machine without node keeps the committed files
            print("tiny-llama: skipped, out/data/*.llama3.u16 absent (tools/node/tokenize_corpus.mjs); "
                  "the committed tiny-llama fixtures are kept")
    if args.only in (None, "tiny-sd"):
        write_sd_variant()
    if args.only in (None, "tiny-gpt2"):
        write_rounded_copies("tiny-gpt2")


if __name__ == "__main__":
    main()
