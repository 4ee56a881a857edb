#!/usr/bin/python3
"""Checks the reference implementation, the shipped models and the fixtures.

Usage: /usr/bin/python3 tools/python/self_check.py [--skip-determinism]

  1. safetensors codec: round trip of every dtype (bit-exact), header layout
     (8-byte padded, tensors in name order, packed), and rejection of
     malformed files.
  2. Each shipped model directory: tensor names and shapes exactly the list
     written out from the HF specification (nlb_reference/independent.py),
     all F32, config.json parses and matches the tensors.
  3. The torch modules against an independent numpy formulation (loops over
     heads and positions, 2x2 rotary rotations, math.erf/tanh GELU) on a
     short input, in float64: logits and every tap. Also a sequential-residual
     GPT-NeoX with random weights, to cover use_parallel_residual = false;
     and the Llama family (nlb_reference/llama.py) with random weights:
     grouped-query, multi-query and multi-head attention, Qwen2's biases,
     tied and untied heads, the rope_scaling kinds, and its refusals.
  4. Fixtures: reloaded with the reader; logits, loss and taps recomputed in
     float64 from the reloaded weights and compared with the stored values;
     the model SHA-256 stamp matches; the PPL JSON runs recomputed.
  5. F16/BF16 logits fixtures: the float32 weights rounded to nearest even
     without torch have the recorded checksum (weights_fnv1a64); the logits
     recomputed from them.
  6. Training determinism: two 3-step runs of train.py give identical files.
  7. models/tiny-llama (Llama 3-style, BF16): its tensor list and config.json,
     its tokenizer.json = models/llama3-style-tokenizer's, the module against
     the numpy formulation on the first 48 tokens of the fixture, and the
     fixture (tiny-llama-reference.safetensors: logits at the recorded
     positions, loss, taps) and tiny-llama-ppl.json recomputed; the PPL runs
     and the fixture's tokens need out/data/*.llama3.u16
     (tools/node/tokenize_corpus.mjs) and are skipped, saying so, without them.

Prints every maximum error and exits non-zero if any bound is exceeded.
"""

import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from nlb_reference import hf_layout, independent, protocol, safetensors_io  # noqa: E402
from nlb_reference.data import read_tokens  # noqa: E402
from nlb_reference.llama import LlamaConfig, LlamaForCausalLM  # noqa: E402
from nlb_reference.models import NeoXConfig, NeoXForCausalLM, context_length  # noqa: E402

import make_fixtures  # noqa: E402  (fnv1a64_of_tensors)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.path.join(REPO, "tests", "fixtures")
MODELS = ("tiny-gpt2", "tiny-neox")

# Bounds (relative to the compared tensor's max magnitude unless stated).
F64_AGREEMENT = 1e-11  # two float64 formulations: rounding differences only
F64_REPRODUCE = 1e-12  # same computation repeated (possibly another BLAS)
F32_STORAGE = 2.0**-24  # float64 -> float32 rounding, relative per element

failures = []


def report(what, value, bound):
    """Prints one measured error against its bound and records a failure."""
    ok = value <= bound
    print(f"  {'ok  ' if ok else 'FAIL'} {what}: {value:.3e} (bound {bound:.1e})")
    if not ok:
        failures.append(what)


def require(what, ok):
    """A yes/no check, printed like the others (0 = holds)."""
    report(what + " [0 = holds]", 0.0 if ok else 1.0, 0.0)


def rel_max(a, b):
    """max |a - b| / max |b|."""
    a = torch.as_tensor(a, dtype=torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64)
    scale = float(b.abs().max())
    return float((a - b).abs().max()) / (scale if scale > 0 else 1.0)


def storage_error(stored_f32, exact_f64):
    """max over elements of |f32 - f64| / |f64| (zeros guarded)."""
    exact = exact_f64.double()
    err = (stored_f32.double() - exact).abs() / exact.abs().clamp_min(1e-30)
    return float(err.max())


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def load_raw(directory):
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    tensors, meta = safetensors_io.read(os.path.join(directory, "model.safetensors"))
    return cfg, tensors, meta


def same_bits(a, b):
    """Equal dtype, shape and raw bits (so -0.0 and NaN payloads count too)."""
    ints = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    as_int = ints[a.element_size()]
    return torch.equal(a.contiguous().view(as_int), b.contiguous().view(as_int))


def with_header(header):
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw


def f32_entry(count, begin, end):
    return {"dtype": "F32", "shape": [count], "data_offsets": [begin, end]}


def check_codec():
    print("1. safetensors codec")
    gen = torch.Generator().manual_seed(7)
    tensors = {
        "f64": torch.randn(3, 5, generator=gen, dtype=torch.float64),
        "f32": torch.randn(2, 3, 4, generator=gen),
        "f16": torch.randn(7, generator=gen).half(),
        "bf16": torch.randn(3, 3, generator=gen).bfloat16(),
        "i64": torch.randint(-(2**40), 2**40, (4,), generator=gen),
        "i32": torch.randint(-1000, 1000, (2, 2), generator=gen, dtype=torch.int32),
        "empty": torch.zeros(0, 4),
        "scalar": torch.tensor(3.5),
    }
    blob = safetensors_io.encode(tensors, {"k": "v"})
    back, meta = safetensors_io.decode(blob)
    require("round trip of F64/F32/F16/BF16/I64/I32/empty/scalar is bit-exact",
            meta == {"k": "v"} and all(same_bits(back[k], t) for k, t in tensors.items()))
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    names = [k for k in header if k != "__metadata__"]
    spans = [header[k]["data_offsets"] for k in names]
    packed = spans[0][0] == 0 and spans[-1][1] == len(blob) - 8 - n
    packed = packed and all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1))
    require("header padded to 8 bytes, tensors in name order, packed",
            n % 8 == 0 and names == sorted(names) and packed)

    cases = {
        "truncated": blob[:-3],
        "5 bytes": blob[:5],
        "header past end": struct.pack("<Q", len(blob)) + blob[8:],
        "invalid json": struct.pack("<Q", 4) + b"{x:1",
        "unknown dtype": with_header({"a": {"dtype": "F8", "shape": [1], "data_offsets": [0, 1]}}) + b"\0",
        "numel mismatch": with_header({"a": f32_entry(2, 0, 4)}) + b"\0" * 4,
        "overlap": with_header({"a": f32_entry(2, 0, 8), "b": f32_entry(2, 4, 12)}) + b"\0" * 12,
        "out of bounds": with_header({"a": f32_entry(2, 0, 8)}) + b"\0" * 4,
        "hole": with_header({"a": f32_entry(1, 4, 8)}) + b"\0" * 8,
    }
    missed = []
    for name, data in cases.items():
        try:
            safetensors_io.decode(data)
            missed.append(name)
        except safetensors_io.SafetensorsError:
            pass
    report(f"malformed files rejected ({len(cases)} cases; accepted: {missed or 'none'})", float(len(missed)), 0.0)


def check_layout(name):
    cfg, tensors, meta = load_raw(os.path.join(REPO, "models", name))
    expected = independent.expected_names(cfg)
    found = {k: list(t.shape) for k, t in tensors.items()}
    mismatch = sorted(k for k in set(expected) | set(found) if expected.get(k) != found.get(k))
    require(f"{name}: {len(found)} tensors named and shaped as HF writes them (differences: {mismatch or 'none'})",
            not mismatch)
    require(f"{name}: every tensor F32, metadata {meta}",
            all(t.dtype == torch.float32 for t in tensors.values()) and meta == {"format": "pt"})
    return cfg, tensors


def check_independent(name, cfg, tensors, tokens):
    model, _ = hf_layout.load_model_dir(os.path.join(REPO, "models", name), dtype=torch.float64)
    taps = {}
    with torch.no_grad():
        logits = model(torch.tensor([tokens]), taps)[0]
    weights = {k: t.double().numpy() for k, t in tensors.items()}
    forward = independent.gpt2_forward if cfg["model_type"] == "gpt2" else independent.neox_forward
    ref_logits, ref_taps = forward(weights, cfg, np.array(tokens))
    report(f"{name}: logits, torch module vs independent numpy loops (T={len(tokens)}, float64)",
           rel_max(logits, ref_logits), F64_AGREEMENT)
    require(f"{name}: same tap names", set(taps) == set(ref_taps))
    worst = max(rel_max(taps[k][0], ref_taps[k]) for k in ref_taps)
    report(f"{name}: worst of {len(ref_taps)} taps, module vs independent", worst, F64_AGREEMENT)


def check_sequential_neox(tokens):
    cfg = NeoXConfig(vocab_size=256, max_position_embeddings=32, hidden_size=48, num_hidden_layers=2,
                     num_attention_heads=3, intermediate_size=96, rotary_pct=0.5, use_parallel_residual=False)
    model = NeoXForCausalLM(cfg).double()
    model.init_weights(torch.Generator().manual_seed(3))
    noise = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for p in model.parameters():  # non-trivial LayerNorm gains and biases
            p.add_(0.05 * torch.randn(p.shape, generator=noise, dtype=torch.float64))
        taps = {}
        logits = model(torch.tensor([tokens]), taps)[0]
    weights = {k: t.numpy() for k, t in model.state_dict().items()}
    ref_logits, ref_taps = independent.neox_forward(weights, cfg.to_hf(), np.array(tokens))
    what = "random NeoX, sequential residual, rotary_pct 0.5, 3 heads"
    report(f"{what}: logits vs independent", rel_max(logits, ref_logits), F64_AGREEMENT)
    report(f"{what}: worst tap vs independent", max(rel_max(taps[k][0], ref_taps[k]) for k in ref_taps),
           F64_AGREEMENT)


def check_llama_family(tokens):
    """The Llama-family module (nlb_reference/llama.py) against the numpy loops
    on random weights with non-trivial norm gains and biases: grouped-query
    (2 KV heads for 4), multi-query (1) and multi-head (4) attention, Qwen2's
    q/k/v biases, tied and untied unembedding, an explicit head_dim, and the
    rope_scaling kinds llama3, linear and none."""
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 64}
    cases = [
        ("llama, GQA 4/2, llama3 scaling, untied", dict(model_type="llama", rope_scaling=llama3)),
        ("llama, MQA 4/1, linear scaling, tied", dict(model_type="llama", num_key_value_heads=1,
                                                      rope_scaling={"type": "linear", "factor": 2.0},
                                                      tie_word_embeddings=True)),
        ("qwen2, MHA 4/4, q/k/v biases, tied", dict(model_type="qwen2", num_key_value_heads=4,
                                                    tie_word_embeddings=True)),
        ("mistral, GQA 4/2, head_dim 16 != d/heads", dict(model_type="mistral", head_dim=16)),
    ]
    for what, changes in cases:
        cfg = LlamaConfig(**{**dict(vocab_size=256, max_position_embeddings=32, hidden_size=48,
                                    intermediate_size=80, num_hidden_layers=2, num_attention_heads=4,
                                    num_key_value_heads=2, rope_theta=500.0), **changes})
        model = LlamaForCausalLM(cfg).double()
        model.init_weights(torch.Generator().manual_seed(5))
        noise = torch.Generator().manual_seed(6)
        with torch.no_grad():
            for p in model.parameters():  # non-trivial gains and biases
                p.add_(0.05 * torch.randn(p.shape, generator=noise, dtype=torch.float64))
            taps = {}
            logits = model(torch.tensor([tokens]), taps)[0]
        hf = cfg.to_hf()
        require(f"{what}: config.json round trip", LlamaConfig.from_hf(hf) == cfg)
        weights = {k: t.numpy() for k, t in model.state_dict().items()}
        ref_logits, ref_taps = independent.llama_forward(weights, hf, np.array(tokens))
        report(f"{what}: logits vs independent", rel_max(logits, ref_logits), F64_AGREEMENT)
        require(f"{what}: same tap names", set(taps) == set(ref_taps))
        report(f"{what}: worst tap vs independent",
               max(rel_max(taps[k][0], ref_taps[k]) for k in ref_taps), F64_AGREEMENT)
    for bad, message in [
        (dict(num_key_value_heads=3), "must divide"),
        (dict(rope_scaling={"rope_type": "yarn", "factor": 4.0}), "'yarn'"),
        (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}), "low_freq_factor"),
        (dict(model_type="phi3"), "phi3"),
    ]:
        try:
            LlamaConfig(**bad)
            require(f"LlamaConfig({bad}) refused", False)
        except ValueError as e:
            require(f"LlamaConfig({bad}) refused, naming {message}", message in str(e))
    windowed = LlamaConfig(model_type="mistral", sliding_window=8)
    try:
        LlamaForCausalLM(windowed)(torch.zeros(1, 9, dtype=torch.int64))
        require("sliding_window 8 over 9 positions refused", False)
    except ValueError as e:
        require("sliding_window 8 over 9 positions refused", "sliding_window 8" in str(e))


def check_loss_taps_and_float32(name, model_dir, fixture, tokens, logits, taps):
    """The stored per-position losses and taps of a model's fixture against the float64 forward
    (`logits`, `taps` of `tokens`), then, for information, how close a float32 forward of the
    same weights gets. The file stores no block_input taps (each equals the previous block's
    output) and the taps of the first window only (make_fixtures.py)."""
    loss = protocol.per_position_loss(logits, tokens)
    report(f"{name}: stored F32 loss vs recomputed float64, per element", storage_error(fixture["loss"], loss),
           F32_STORAGE)
    kept = {k: v for k, v in taps.items() if not k.endswith(".block_input")}
    stored_taps = {k for k in fixture if k.startswith("tap.")}
    require(f"{name}: fixture holds exactly the {len(kept)} stored taps", stored_taps == {"tap." + k for k in kept})
    report(f"{name}: worst stored F32 tap vs recomputed float64 (first window), per element",
           max(storage_error(fixture["tap." + k], v[:fixture["tap." + k].shape[0]]) for k, v in kept.items()),
           F32_STORAGE)
    model32, _ = hf_layout.load_model_dir(model_dir, dtype=torch.float32)
    with torch.no_grad():
        logits32 = model32(tokens)
    print(f"  info {name}: float32 torch forward vs float64: max abs "
          f"{float((logits32.double() - logits).abs().max()):.3e}, relative to max |logit| "
          f"{rel_max(logits32, logits):.3e}")


def fixture_and_model(name):
    """models/<name> in float64 and its tests/fixtures/<name>-reference.safetensors, after checking
    the fixture's stamp of the model file: (model_dir, fixture, model, config, context length)."""
    model_dir = os.path.join(REPO, "models", name)
    fixture, meta = safetensors_io.read(os.path.join(FIX, f"{name}-reference.safetensors"))
    require(f"{name}: fixture's model_sha256 stamp matches model.safetensors",
            meta["model_sha256"] == sha256_of(os.path.join(model_dir, "model.safetensors")))
    model, config = hf_layout.load_model_dir(model_dir, dtype=torch.float64)
    return model_dir, fixture, model, config, context_length(config)


def check_fixture(name):
    model_dir, fixture, model, config, ctx = fixture_and_model(name)
    tokens = fixture["tokens"]
    first_windows = protocol.windows(read_tokens(os.path.join(REPO, "data", "kjv-eval.txt")), ctx, 2)
    require(f"{name}: fixture tokens are the first 2 windows of data/kjv-eval.txt",
            torch.equal(tokens, first_windows))
    taps = {}
    with torch.no_grad():
        logits = model(tokens, taps)
    report(f"{name}: recomputed logits vs logits_f64", rel_max(logits, fixture["logits_f64"]), F64_REPRODUCE)
    check_loss_taps_and_float32(name, model_dir, fixture, tokens, logits, taps)

    with open(os.path.join(FIX, f"{name}-ppl.json")) as f:
        ppl = json.load(f)
    worst = 0.0
    for run in ppl["runs"]:
        tokens_of_text = read_tokens(os.path.join(REPO, run["text"]))
        again = protocol.evaluate(model, tokens_of_text, run["context"], run["max_windows"])
        require(f"{name}: {run['text']}[{run['max_windows']}] window and token counts",
                all(again[k] == run[k] for k in ("windows", "predicted_tokens", "context")))
        worst = max(worst, abs(again["ppl"] - run["ppl"]) / run["ppl"])
    report(f"{name}: {len(ppl['runs'])} PPL runs recomputed, relative", worst, F64_REPRODUCE)


def rounded_bits(x_f32, tag):
    """int16 bit patterns of float32 values rounded to float16 or bfloat16,
    computed without torch: numpy's float16 cast, and for bfloat16
    round-to-nearest-even on the float32 bit pattern (finite values)."""
    if tag == "f16":
        return x_f32.astype(np.float16).view(np.int16)
    bits = x_f32.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16).view(np.int16)


def check_rounded():
    """The F16/BF16 logits fixtures: the weights they come from are models/tiny-gpt2 rounded to
    nearest even (rounded here without torch), their checksum is the one recorded, and the
    logits recomputed from them match the stored ones. The rounded copies are not committed:
    the C++ tests write them and check the same checksum."""
    cfg, f32_tensors, _ = load_raw(os.path.join(REPO, "models", "tiny-gpt2"))
    for tag, dtype, dtype_name in (("f16", torch.float16, "float16"), ("bf16", torch.bfloat16, "bfloat16")):
        fixture, meta = safetensors_io.read(os.path.join(FIX, f"tiny-gpt2-{tag}-logits.safetensors"))
        with tempfile.TemporaryDirectory() as directory:
            tensors = {k: torch.from_numpy(rounded_bits(t.numpy(), tag)).view(dtype) for k, t in f32_tensors.items()}
            safetensors_io.write(os.path.join(directory, "model.safetensors"), tensors, {"format": "pt"})
            with open(os.path.join(directory, "config.json"), "w") as f:
                json.dump(dict(cfg, torch_dtype=dtype_name), f)
            checksum = make_fixtures.fnv1a64_of_tensors(os.path.join(directory, "model.safetensors"))
            require(f"tiny-gpt2-{tag}: FNV-1a of the rounded weights {checksum} is the fixture's "
                    f"{meta.get('weights_fnv1a64')}", checksum == meta.get("weights_fnv1a64"))
            model, _ = hf_layout.load_model_dir(directory, dtype=torch.float64)
        with torch.no_grad():
            logits = model(fixture["tokens"])
        report(f"tiny-gpt2-{tag}: stored logits vs recomputed float64, per element",
               storage_error(fixture["logits"], logits), F32_STORAGE)


def check_determinism():
    digests = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(2):
            out = os.path.join(tmp, f"run{run}")
            command = [sys.executable, os.path.join(REPO, "tools", "python", "train.py"), "--arch", "neox",
                       "--out", out, "--steps", "3", "--log-every", "3", "--val-windows", "2", "--no-metrics"]
            subprocess.run(command, check=True, capture_output=True)
            digests.append(sha256_of(os.path.join(out, "model.safetensors")))
    require("train.py: two 3-step runs write identical model.safetensors", digests[0] == digests[1])


def check_tiny_llama(name="tiny-llama"):
    model_dir = os.path.join(REPO, "models", name)
    cfg, tensors, meta = load_raw(model_dir)
    expected = independent.expected_names(cfg)
    found = {k: list(t.shape) for k, t in tensors.items()}
    mismatch = sorted(k for k in set(expected) | set(found) if expected.get(k) != found.get(k))
    require(f"{name}: {len(found)} tensors named and shaped as HF writes LlamaForCausalLM's "
            f"(differences: {mismatch or 'none'})", not mismatch)
    require(f"{name}: every tensor BF16, torch_dtype bfloat16, metadata {meta}",
            all(t.dtype == torch.bfloat16 for t in tensors.values()) and meta == {"format": "pt"}
            and cfg["torch_dtype"] == "bfloat16")
    require(f"{name}: config.json has the keys of a Llama 3.2 config, llama3 rope_scaling, untied, GQA 4/2",
            cfg["model_type"] == "llama" and cfg["rope_scaling"]["rope_type"] == "llama3"
            and not cfg["tie_word_embeddings"] and cfg["num_key_value_heads"] == 2
            and cfg["num_attention_heads"] == 4
            and all(k in cfg for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "head_dim",
                                       "max_position_embeddings", "rms_norm_eps", "rope_theta", "vocab_size",
                                       "bos_token_id", "eos_token_id", "attention_bias", "mlp_bias")))
    require(f"{name}: tokenizer.json is models/llama3-style-tokenizer/tokenizer.json",
            sha256_of(os.path.join(model_dir, "tokenizer.json"))
            == sha256_of(os.path.join(REPO, "models", "llama3-style-tokenizer", "tokenizer.json")))
    _, fixture, model, config, ctx = fixture_and_model(name)
    tokens = fixture["tokens"]

    # The module against the numpy loops, on the first 48 tokens of the fixture's first window.
    short = tokens[0, :48]
    taps = {}
    with torch.no_grad():
        logits = model(short[None], taps)[0]
    ref_logits, ref_taps = independent.llama_forward({k: t.double().numpy() for k, t in tensors.items()}, cfg,
                                                     short.numpy())
    report(f"{name}: logits, torch module vs independent numpy loops (T=48, float64)",
           rel_max(logits, ref_logits), F64_AGREEMENT)
    require(f"{name}: same tap names", set(taps) == set(ref_taps))
    report(f"{name}: worst of {len(ref_taps)} taps, module vs independent",
           max(rel_max(taps[k][0], ref_taps[k]) for k in ref_taps), F64_AGREEMENT)

    token_file = os.path.join(REPO, make_fixtures.LLAMA_TOKEN_FILES[make_fixtures.EVAL_TEXT])
    have_tokens = all(os.path.exists(os.path.join(REPO, f)) for f in make_fixtures.LLAMA_TOKEN_FILES.values())
    if have_tokens:
        first_windows = protocol.windows(make_fixtures.read_u16_tokens(os.path.relpath(token_file, REPO)), ctx, 2)
        require(f"{name}: fixture tokens are the first 2 windows of {os.path.relpath(token_file, REPO)}",
                torch.equal(tokens, first_windows))
    else:
        print(f"  skip {name}: out/data/*.llama3.u16 absent (tools/node/tokenize_corpus.mjs): token and PPL checks")
    taps = {}
    with torch.no_grad():
        logits = model(tokens, taps)
    positions = fixture["logit_positions"]
    report(f"{name}: recomputed logits vs logits_f64 at positions {positions.tolist()}",
           rel_max(logits[:, positions], fixture["logits_f64"]), F64_REPRODUCE)
    check_loss_taps_and_float32(name, model_dir, fixture, tokens, logits, taps)
    if not have_tokens:
        return
    with open(os.path.join(FIX, f"{name}-ppl.json")) as f:
        ppl = json.load(f)
    worst = 0.0
    for run in ppl["runs"]:
        require(f"{name}: {run['tokens_file']} has the recorded SHA-256",
                sha256_of(os.path.join(REPO, run["tokens_file"])) == run["tokens_file_sha256"])
        again = protocol.evaluate(model, make_fixtures.read_u16_tokens(run["tokens_file"]), run["context"],
                                  run["max_windows"])
        require(f"{name}: {run['text']}[{run['max_windows']}] window and token counts",
                all(again[k] == run[k] for k in ("windows", "predicted_tokens", "context")))
        worst = max(worst, abs(again["ppl"] - run["ppl"]) / run["ppl"])
    report(f"{name}: {len(ppl['runs'])} PPL runs recomputed, relative", worst, F64_REPRODUCE)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skip-determinism", action="store_true")
    ap.add_argument("--only-llama", action="store_true", help="run only the checks of the Llama family (3c, 7)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.only_llama:
        print("3c. Llama family (random weights)")
        check_llama_family(read_tokens(os.path.join(REPO, "data", "kjv-eval.txt"))[1000:1012])
        print("7. tiny-llama")
        check_tiny_llama()
        if failures:
            print(f"FAILED: {len(failures)} check(s): {failures}")
            sys.exit(1)
        print("all checks passed")
        return
    check_codec()
    text = read_tokens(os.path.join(REPO, "data", "kjv-eval.txt"))
    short = text[1000:1020]  # 20 tokens
    for name in MODELS:
        print(f"2-4. {name}")
        cfg, tensors = check_layout(name)
        check_independent(name, cfg, tensors, short)
        check_fixture(name)
    print("3b. sequential residual")
    check_sequential_neox(short[:12])
    print("3c. Llama family (random weights)")
    check_llama_family(short[:12])
    print("5. rounded copies")
    check_rounded()
    if not args.skip_determinism:
        print("6. determinism")
        check_determinism()
    print("7. tiny-llama")
    check_tiny_llama()
    if failures:
        print(f"FAILED: {len(failures)} check(s): {failures}")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
