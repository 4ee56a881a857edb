#!/usr/bin/python3
"""Independent PyTorch reference of the MLP budget's surrogate stages (PAPERS §A1).

Usage:
  /usr/bin/python3 tools/python/mlp_budget_reference.py            # both shipped models
  /usr/bin/python3 tools/python/mlp_budget_reference.py --model models/tiny-gpt2 --out FILE.json

For each model it computes, from the model code of nlb_reference/ (not from
the C++ pipeline), what `nlb budget` reports in its first three stages:

  1. baseline_ppl: eval-protocol PPL of the unmodified model;
  2. per layer, a float64 ridge surrogate of the MLP, fitted on the taps of the
     unmodified model, with its fit R² (surrogate_r2);
  3. per layer, the eval PPL with only that layer's MLP replaced by its
     surrogate at every position (all_linear_ppl) and
     Δ% = 100 (PPL_lin / PPL_base − 1); and all layers replaced at once
     (each by its own surrogate from stage 2).

Protocol (the same as the C++ pipeline's; written to the JSON's "protocol"):
  - a text file's bytes are its tokens; windows of `context` (128) tokens,
    non-overlapping, consecutive from the start of the file, a shorter last
    window dropped;
  - fit positions: the first `fit_tokens` (10,000) positions of
    data/kjv-fit.txt in window order, i.e. 78 full windows plus the first 16
    rows of window 79; the taps are computed on whole windows of the
    unmodified model (a window's first rows do not depend on its later ones);
  - x = MLP input after the pre-MLP LayerNorm (GPT-2 ln_2 output, NeoX
    post_attention_layernorm output), y = the MLP's raw output before the
    residual add; taps computed in float64;
  - ridge in float64 (PAPERS §A1): X_c = X − x̄, Y_c = Y − ȳ, thin SVD
    X_c = U S Vᵀ, W = V diag(s / (s² + λ)) Uᵀ Y_c, b = ȳ − x̄ W, λ = 0.01
    absolute; the surrogate is y = x W + b with W [d, d];
  - surrogate_r2 as include/nlb/mlp/ridge_surrogate.hpp reports it: pooled
    over outputs, 1 − Σ_k SSE_k / Σ_k Syy_k on the fitting rows, SSE_k the
    residual sum of squares of output k under the fitted (W, b), Syy_k its
    centered sum of squares. (The C++ code gets SSE from co-moments; here it
    is the residual computed directly, a different algorithm for the same
    number.)
  - eval: every full window of data/kjv-eval.txt, model and surrogates in
    float64, PPL = exp(mean next-token cross-entropy over every position but
    the first of each window).
"""

import argparse
import hashlib
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from nlb_reference import hf_layout, protocol  # noqa: E402
from nlb_reference.data import read_tokens  # noqa: E402
from nlb_reference.models import Gpt2Config  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GENERATOR = "tools/python/mlp_budget_reference.py"
MODELS = ("tiny-gpt2", "tiny-neox")

PROTOCOL = {
    "fit_text": "data/kjv-fit.txt",
    "eval_text": "data/kjv-eval.txt",
    "context": 128,
    "fit_tokens": 10000,
    "lambda": 0.01,
    "lambda_scaling": "absolute",
    "windows": "non-overlapping, consecutive from the file start, a shorter last window dropped",
    "fit_positions": "the first fit_tokens positions in window order; taps from whole windows of the unmodified model",
    "x": "MLP input after the pre-MLP LayerNorm (GPT-2 ln_2, NeoX post_attention_layernorm)",
    "y": "MLP output before the residual add",
    "tap_dtype": "float64",
    "ridge": "float64; center; thin SVD of X_c; W = V diag(s/(s^2+lambda)) U^T Y_c; b = mean_y - mean_x W",
    "surrogate_r2": "pooled over outputs: 1 - sum_k SSE_k / sum_k Syy_k on the fit rows",
    "eval_windows": "every full window of eval_text",
    "eval_dtype": "float64",
    "all_layers_linear": "every layer's MLP replaced at once, each by its own surrogate fitted on the unmodified model",
    "delta_pct": "100 (PPL_lin / PPL_base - 1)",
}


class LinearSurrogate(nn.Module):
    """y = x W + b, W [d_in, d_out], b [d_out]: the frozen surrogate of one MLP."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight.clone(), requires_grad=False)
        self.bias = nn.Parameter(bias.clone(), requires_grad=False)

    def forward(self, x):
        return torch.matmul(x, self.weight) + self.bias


def blocks(model):
    """The model's blocks; each has an `mlp` attribute."""
    if isinstance(model.config, Gpt2Config):
        return model.transformer.h
    return model.gpt_neox.layers


def ridge_fit(x: torch.Tensor, y: torch.Tensor, lam: float):
    """PAPERS §A1 closed form in float64. x [N, d_in], y [N, d_out] ->
    (W [d_in, d_out], b [d_out], pooled R² on these rows)."""
    x = x.to(torch.float64)
    y = y.to(torch.float64)
    mean_x = x.mean(dim=0)
    mean_y = y.mean(dim=0)
    xc = x - mean_x
    yc = y - mean_y
    u, s, vh = torch.linalg.svd(xc, full_matrices=False)  # thin: u [N, r], s [r], vh [r, d_in]
    w = vh.t() @ (torch.diag(s / (s * s + lam)) @ (u.t() @ yc))
    b = mean_y - mean_x @ w
    residual = y - (x @ w + b)  # equals yc - xc w since b = ȳ − x̄ W
    sse = float((residual * residual).sum())
    sst = float((yc * yc).sum())
    r2 = 1.0 - sse / sst if sst > 0 else float("nan")
    return w, b, r2


@torch.no_grad()
def fit_surrogates(model, fit_tokens, context: int, n_fit: int, lam: float):
    """Per layer (W, b, R²) from the first n_fit positions of the fit stream."""
    n_windows = -(-n_fit // context)  # whole windows covering n_fit positions
    w = protocol.windows(fit_tokens, context)
    if w.shape[0] < n_windows:
        raise ValueError(f"fit text has {w.shape[0]} windows of {context}, {n_windows} needed for {n_fit} positions")
    w = w[:n_windows]
    n_layers = len(blocks(model))
    xs = [[] for _ in range(n_layers)]
    ys = [[] for _ in range(n_layers)]
    for start in range(0, w.shape[0], 8):
        taps = {}
        model(w[start : start + 8], taps)
        for i in range(n_layers):
            xs[i].append(taps[f"{i}.mlp_input"].reshape(-1, taps[f"{i}.mlp_input"].shape[-1]))
            ys[i].append(taps[f"{i}.mlp_output"].reshape(-1, taps[f"{i}.mlp_output"].shape[-1]))
    out = []
    for i in range(n_layers):
        x = torch.cat(xs[i])[:n_fit]
        y = torch.cat(ys[i])[:n_fit]
        assert x.shape[0] == n_fit
        out.append(ridge_fit(x, y, lam))
    return out


def eval_with(model, replaced: dict, eval_tokens, context: int) -> dict:
    """Eval-protocol result with blocks[i].mlp swapped for replaced[i]; restores them."""
    saved = {}
    for i, module in replaced.items():
        saved[i] = blocks(model)[i].mlp
        blocks(model)[i].mlp = module
    try:
        return protocol.evaluate(model, eval_tokens, context)
    finally:
        for i, module in saved.items():
            blocks(model)[i].mlp = module


def sha256_of(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def delta_pct(ppl: float, base: float) -> float:
    return 100.0 * (ppl / base - 1.0)


def run(model_dir: str) -> dict:
    p = PROTOCOL
    model, _ = hf_layout.load_model_dir(os.path.join(REPO, model_dir), dtype=torch.float64)
    fit_tokens = read_tokens(os.path.join(REPO, p["fit_text"]))
    eval_tokens = read_tokens(os.path.join(REPO, p["eval_text"]))
    base = protocol.evaluate(model, eval_tokens, p["context"])
    print(f"{model_dir}: baseline PPL {base['ppl']:.6f} ({base['windows']} windows)", flush=True)
    surrogates = fit_surrogates(model, fit_tokens, p["context"], p["fit_tokens"], p["lambda"])
    layers = []
    for i, (w, b, r2) in enumerate(surrogates):
        res = eval_with(model, {i: LinearSurrogate(w, b)}, eval_tokens, p["context"])
        layers.append(
            {
                "layer": i,
                "surrogate_r2": r2,
                "all_linear_ppl": res["ppl"],
                "all_linear_delta_pct": delta_pct(res["ppl"], base["ppl"]),
            }
        )
        print(f"  layer {i}: R2 {r2:.6f}  PPL {res['ppl']:.6f}  delta {layers[-1]['all_linear_delta_pct']:+.4f}%",
              flush=True)
    every = {i: LinearSurrogate(w, b) for i, (w, b, _) in enumerate(surrogates)}
    all_res = eval_with(model, every, eval_tokens, p["context"])
    print(f"  all layers: PPL {all_res['ppl']:.6f}", flush=True)
    return {
        "model": model_dir,
        "model_sha256": sha256_of(os.path.join(REPO, model_dir, "model.safetensors")),
        "protocol": dict(p),
        "generator": GENERATOR,
        "command": f"/usr/bin/python3 {GENERATOR}",
        "torch_version": torch.__version__,
        "eval_windows": base["windows"],
        "eval_predicted_tokens": base["predicted_tokens"],
        "baseline_ppl": base["ppl"],
        "layers": layers,
        "all_layers_linear_ppl": all_res["ppl"],
        "all_layers_linear_delta_pct": delta_pct(all_res["ppl"], base["ppl"]),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="one model directory (relative to the repo); default: both shipped models")
    ap.add_argument("--out", help="output JSON (with --model); default tests/fixtures/<model>-mlp-budget.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.model:
        targets = [(args.model, args.out or os.path.join("tests", "fixtures",
                                                         os.path.basename(args.model.rstrip("/")) + "-mlp-budget.json"))]
    else:
        targets = [(f"models/{m}", f"tests/fixtures/{m}-mlp-budget.json") for m in MODELS]
    for model_dir, out in targets:
        result = run(model_dir)
        path = os.path.join(REPO, out)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(result, indent=2) + "\n")
        os.replace(tmp, path)
        print(f"wrote {out}", flush=True)


if __name__ == "__main__":
    main()
