#!/usr/bin/python3
"""The MLP budget protocol of `nlb budget` (docs/budget.md §3) written the way a researcher would
write it in PyTorch + scikit-learn, to time it stage by stage against nlb (issue 38 §1).

Usage:
  /usr/bin/python3 benchmarks/torch_budget_pipeline.py --threads 2            # tiny-gpt2, defaults
  /usr/bin/python3 benchmarks/torch_budget_pipeline.py --threads 2 --model DIR \\
      --fit-tokens-file F --label-tokens-file L --eval-tokens-file E --cross-tokens-file C \\
      --fit-positions 256 --label-positions 254 --calibration-positions 127 \\
      [--joint-evaluations 3,2] [--prefix-reuse] [--json-out FILE]

Prints one JSON object on stdout: "stages" (stage name -> wall seconds, the names of nlb's
report.json `time_stages`), "substages" (the parts a stage is made of), "total_seconds" (the
stages), "load_seconds" (imports excluded: model and token files), and "results" (the numbers the
stages found, to check that the work was done).

The model: a GPT-2 directory (config.json + model.safetensors; with or without the `transformer.`
prefix) read into the project's plain PyTorch GPT-2 (tools/python/nlb_reference/models.py), float32,
eval mode, every pass under `torch.inference_mode()`, `torch.set_num_threads(--threads)` and the
BLAS pinned to the same count (benchmarks/torch_threads.py, imported before torch). Replacing an
MLP means swapping the block's `mlp` module for a surrogate or a gated module (the usual way;
taps are forward hooks on `ln_2`, the MLP and the embeddings). Tokens: a byte-level model (vocabulary
256, like models/tiny-gpt2) reads the texts' bytes; any other model needs token-id files
(`nlb tokenize --out`, little-endian u16 or u32), so both programs read the same ids.

Stages and what each runs (the same sets, windows and configurations as nlb budget, docs/budget.md §3;
context C, L layers, B budgets, windows of C tokens that never overlap):
  fit: surrogates     ceil(fit/C) fit windows, one pass with hooks; per layer the ridge in float64
                      (torch): W = (XcᵀXc + λI)⁻¹ XcᵀYc by a linear solve, b = ȳ − x̄W, and R².
  label: delta per position
                      ceil(label/(C−1)) label windows: the unmodified pass (hooks keep x = ln_2's
                      output and e = token + position embedding of the label positions) and L
                      passes with one layer's MLP swapped for its surrogate; δ = L_lin − L_full in
                      float64, per label position (rows 0..C−2 of each window).
  label: gates and probes
                      per layer: labels δ ≤ median (25th percentile when < 5% of δ < 0) on the
                      first 80%; StandardScaler + LogisticRegression(C=1, max_iter=1000) on x;
                      AUC (roc_auc_score) on the last 20%; folded to w' = w/σ, b' = b − w'·μ;
                      the probes: the same fit on e and on c = x − e (the x probe is the gate).
  label: joint calibration
                      thresholds routing k·5% of the label rows; cost curves: each layer gated
                      alone at each of 20 fractions on the calibration windows (the next
                      ceil(cal/(C−1)) windows of the label file) plus the unmodified pass; per
                      budget the multiple-choice knapsack (numpy DP, 1000 units) and joint passes
                      with every chosen gate on, the capacity corrected until the upper end of the
                      95% paired bootstrap interval meets the budget (nlb's rule); with
                      --joint-evaluations exactly that many joint passes per budget (the count
                      nlb's report.json gives per budget); then the chosen states on the label
                      windows.
  eval: baseline, linear, gated, joint
                      every full eval window: unmodified, each layer linear, all layers linear,
                      each layer gated alone (threshold 0), each budget's joint gates: 2L + 2 + B
                      configurations, with bootstrap intervals (1000 resamples).
  cross: no-fly lists every full cross window: unmodified and each layer linear; per-token mean δ
                      on the eval and cross files, no-fly lists and their Pearson r.
  timing: dense vs gated forward and decode
                      per budget, 7 alternating repetitions of a dense and a gated forward over
                      the first min(32, eval windows) eval windows, and of batch-1 decoding of the
                      first min(64, C) eval tokens through a KV cache (written here; the reference
                      model has none); medians.

Simplifications against nlb (the work per stage is the same; the numbers need not agree to the bit):
  - Each configuration is a full forward pass from the embedding (the usual way); nlb runs a
    configuration that changes layer l from l on, reusing the unmodified prefix. --prefix-reuse
    does the same here (layer l's input kept from the unmodified pass), to separate the two effects.
  - The ridge is a float64 solve of the regularised normal equations (nlb: the same W from an
    eigendecomposition of the centered Gram matrix, accumulated in a stream).
  - The gate is sklearn's lbfgs logistic regression (nlb: Newton to convergence); labels, split,
    z-scoring and the C = 1 objective are the same.
  - Bootstrap draws come from numpy (nlb: splitmix64), so intervals differ in the last digits.
  - The gated MLP routes rows by boolean indexing: the linear rows through x W + b, the others
    through the full MLP.
  - Nothing is written but the JSON (no report files, charts, gate files).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch_threads  # noqa: F401  (before torch: pins the BLAS threads to --threads)
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(REPO, "tools", "python"))
from nlb_reference import models, safetensors_io  # noqa: E402

STEPS = 20  # calibration fractions 0.05 k, k = 1..20


# ------------------------------------------------------------------------------ model and data


def load_model(directory):
    """The GPT-2 of `directory` as nlb_reference's Gpt2LMHeadModel, float32, eval mode."""
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        config = models.Gpt2Config.from_hf(json.load(f))
    tensors, _ = safetensors_io.read(os.path.join(directory, "model.safetensors"))
    state = {}
    for name, t in tensors.items():
        if name.endswith((".attn.bias", ".attn.masked_bias")) or name == "lm_head.weight":
            continue  # the causal-mask buffers and the tied head of hub files
        state[name if name.startswith("transformer.") else "transformer." + name] = t.to(torch.float32)
    model = models.Gpt2LMHeadModel(config)
    model.load_state_dict(state, strict=True)
    return model.float().eval(), config


def read_tokens(text_path, ids_path, dtype, vocab):
    if ids_path:
        return torch.from_numpy(np.fromfile(ids_path, dtype="<u2" if dtype == "u16" else "<u4").astype(np.int64))
    if vocab != 256:
        raise SystemExit(f"{text_path}: a model with a {vocab}-token vocabulary needs --*-tokens-file "
                         "(nlb tokenize --out), the same ids nlb reads")
    with open(text_path, "rb") as f:
        return torch.from_numpy(np.frombuffer(f.read(), dtype=np.uint8).astype(np.int64))


def windows_of(tokens, context, count=None, skip=0):
    """[count, context] windows starting at window `skip` (all full windows when count is None)."""
    full = tokens.numel() // context
    count = full - skip if count is None else count
    if skip + count > full or count < 1:
        raise SystemExit(f"expected at least {(skip + count) * context} tokens, found {tokens.numel()}")
    return tokens[skip * context:(skip + count) * context].view(count, context)


# ---------------------------------------------------------------------- MLP replacements


class Surrogate(torch.nn.Module):
    """y = x W + b (float32 copy of the float64 ridge fit)."""

    def __init__(self, w, b):
        super().__init__()
        self.w = w.to(torch.float32)
        self.b = b.to(torch.float32)

    def forward(self, x):
        return torch.addmm(self.b, x.reshape(-1, x.shape[-1]), self.w).view(x.shape)


class GatedMlp(torch.nn.Module):
    """Rows with gate score x·w' + b' > threshold go through the surrogate, the rest through the
    full MLP; counts the rows routed linear."""

    def __init__(self, mlp, surrogate, gate_w, gate_b, threshold):
        super().__init__()
        self.mlp = mlp
        self.surrogate = surrogate
        self.gate_w = gate_w
        self.gate_b = float(gate_b)
        self.threshold = float(threshold)
        self.linear_rows = 0
        self.rows = 0

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        linear = (flat @ self.gate_w + self.gate_b) > self.threshold
        out = torch.empty_like(flat)
        out[linear] = self.surrogate(flat[linear])
        dense = ~linear
        out[dense] = self.mlp(flat[dense])
        self.linear_rows += int(linear.sum())
        self.rows += flat.shape[0]
        return out.view(x.shape)


class Swapped:
    """Context manager: blocks[l].mlp = modules[l] inside, restored after."""

    def __init__(self, model, modules):
        self.blocks = model.transformer.h
        self.modules = modules
        self.saved = {}

    def __enter__(self):
        for l, m in self.modules.items():
            self.saved[l] = self.blocks[l].mlp
            self.blocks[l].mlp = m
        return self

    def __exit__(self, *exc):
        for l, m in self.saved.items():
            self.blocks[l].mlp = m


# ---------------------------------------------------------------------------- forward passes


def position_losses(logits, chunk):
    """[B, C − 1] next-token cross-entropy (float64)."""
    b, t, v = logits.shape
    return F.cross_entropy(logits[:, :-1].reshape(-1, v), chunk[:, 1:].reshape(-1),
                           reduction="none").view(b, t - 1).double()


class Runner:
    """Runs configurations (dict layer -> replacement MLP module) over a window set and returns
    per-position losses [windows, C − 1]. Plain: each configuration is a full forward over every
    window (configurations outer, batches inner). With prefix_reuse: per batch, the unmodified pass
    keeps every layer's input and a configuration whose first replaced layer is l runs from l on."""

    def __init__(self, model, batch, prefix_reuse):
        self.model = model
        self.batch = batch
        self.prefix_reuse = prefix_reuse

    def _head(self, x):
        body = self.model.transformer
        return torch.matmul(body.ln_f(x), body.wte.weight.t())

    def _from(self, x, start):
        for block in self.model.transformer.h[start:]:
            x = block(x)
        return self._head(x)

    def _base_states(self, chunk):
        body = self.model.transformer
        x = body.wte(chunk) + body.wpe(torch.arange(chunk.shape[1]))[None]
        states = []
        for block in body.h:
            states.append(x)
            x = block(x)
        return states, self._head(x)

    def measure(self, windows, configs, with_base=True):
        """-> (base losses or None, [losses of each config])."""
        n = windows.shape[0]
        with torch.inference_mode():
            if not self.prefix_reuse:
                base = None
                if with_base:
                    base = np.concatenate([position_losses(self.model(windows[s:s + self.batch]),
                                                           windows[s:s + self.batch]).numpy()
                                           for s in range(0, n, self.batch)])
                out = []
                for cfg in configs:
                    with Swapped(self.model, cfg):
                        out.append(np.concatenate([position_losses(self.model(windows[s:s + self.batch]),
                                                                   windows[s:s + self.batch]).numpy()
                                                   for s in range(0, n, self.batch)]))
                return base, out
            base_parts, parts = [], [[] for _ in configs]
            for s in range(0, n, self.batch):
                chunk = windows[s:s + self.batch]
                states, logits = self._base_states(chunk)
                if with_base:
                    base_parts.append(position_losses(logits, chunk).numpy())
                for i, cfg in enumerate(configs):
                    start = min(cfg) if cfg else len(states)
                    with Swapped(self.model, cfg):
                        x = states[start] if start < len(states) else None
                        lg = self._from(x, start) if x is not None else logits
                        parts[i].append(position_losses(lg, chunk).numpy())
            return (np.concatenate(base_parts) if with_base else None), [np.concatenate(p) for p in parts]


def decode(model, tokens, steps):
    """Batch-1 decoding of tokens[:steps] one at a time through a KV cache, logits every step."""
    body = model.transformer
    d = model.config.n_embd
    heads = model.config.n_head
    hd = d // heads
    caches = [None] * len(body.h)
    for t in range(steps):
        x = (body.wte.weight[tokens[t]] + body.wpe.weight[t]).view(1, 1, d)
        for i, block in enumerate(body.h):
            q, k, v = block.attn.c_attn(block.ln_1(x)).split(d, dim=-1)
            q, k, v = (z.view(1, 1, heads, hd).transpose(1, 2) for z in (q, k, v))
            if caches[i] is not None:
                k = torch.cat([caches[i][0], k], dim=2)
                v = torch.cat([caches[i][1], v], dim=2)
            caches[i] = (k, v)
            att = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd), dim=-1)
            x = x + block.attn.c_proj(torch.matmul(att, v).transpose(1, 2).reshape(1, 1, d))
            x = x + block.mlp(block.ln_2(x))
        torch.matmul(body.ln_f(x), body.wte.weight.t())


# ------------------------------------------------------------------------------- statistics


def ppl(losses):
    return math.exp(float(np.mean(losses)))


def delta_pct(var_sum, base_sum, positions):
    return 100.0 * math.expm1((var_sum - base_sum) / positions)


def bootstrap(base_losses, var_losses, resamples, seed):
    """Δ% and its paired 95% percentile interval over windows: [value, low, high]."""
    b = base_losses.sum(axis=1)
    v = var_losses.sum(axis=1)
    positions = base_losses.shape[1]
    w = b.shape[0]
    idx = np.random.default_rng(seed).integers(0, w, size=(resamples, w))
    draws = 100.0 * np.expm1((v[idx].sum(axis=1) - b[idx].sum(axis=1)) / (w * positions))
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return [delta_pct(v.sum(), b.sum(), w * positions), float(lo), float(hi)]


def gate_labels(delta):
    """1 = "linear OK" iff δ ≤ median (25th percentile when fewer than 5% of δ are negative)."""
    cut = np.percentile(delta, 25) if (delta < 0).sum() * 20 < delta.size else np.median(delta)
    return (delta <= cut).astype(np.int64), float(cut)


def fit_gate(features, delta, n_train):
    """StandardScaler + LogisticRegression(C=1) on the first n_train rows; held-out AUC; the gate
    folded to (w', b')."""
    y, cut = gate_labels(delta[:n_train])
    scaler = StandardScaler().fit(features[:n_train])
    clf = LogisticRegression(C=1.0, max_iter=1000).fit(scaler.transform(features[:n_train]), y)
    held = (delta[n_train:] <= cut).astype(np.int64)
    scores = clf.decision_function(scaler.transform(features[n_train:]))
    auc = float(roc_auc_score(held, scores)) if 0 < held.sum() < held.size else float("nan")
    w = clf.coef_[0] / scaler.scale_
    b = float(clf.intercept_[0] - w @ scaler.mean_)
    return w, b, auc


def knapsack(cost, value, capacity, resolution=1000):
    """Multiple-choice knapsack on a grid (option 0 = nothing): max Σ value s.t. Σ cost ≤ capacity,
    costs rounded up to whole units."""
    layers = len(cost)
    if not capacity > 0:
        return [0] * layers
    unit = capacity / resolution
    best = np.zeros(resolution + 1)
    choices, weights = [], []
    for l in range(layers):
        wt = [min(resolution + 1, int(math.ceil(max(c, 0.0) / unit - 1e-9))) if math.isfinite(c) else resolution + 1
              for c in cost[l]]
        nxt = best.copy()
        choice = np.zeros(resolution + 1, dtype=np.int64)
        for k in range(1, len(cost[l])):
            if wt[k] > resolution:
                continue
            cand = np.full(resolution + 1, -np.inf)
            cand[wt[k]:] = best[:resolution + 1 - wt[k]] + value[l][k]
            better = cand > nxt
            nxt[better] = cand[better]
            choice[better] = k
        best = nxt
        choices.append(choice)
        weights.append(wt)
    out = [0] * layers
    c = resolution
    for l in range(layers - 1, -1, -1):
        out[l] = int(choices[l][c])
        c -= weights[l][out[l]]
    return out


# ---------------------------------------------------------------------------------- pipeline


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(REPO, "models", "tiny-gpt2"))
    for name, default in (("fit", "kjv-fit.txt"), ("label", "kjv-label.txt"), ("eval", "kjv-eval.txt"),
                          ("cross", "jargon-eval.txt")):
        ap.add_argument(f"--{name}-text", default=os.path.join(REPO, "data", default))
        ap.add_argument(f"--{name}-tokens-file")
    ap.add_argument("--token-dtype", choices=("u16", "u32"), default="u16")
    ap.add_argument("--context", type=int)
    ap.add_argument("--fit-positions", type=int, default=10000)
    ap.add_argument("--label-positions", type=int, default=25000)
    ap.add_argument("--calibration-positions", type=int)
    ap.add_argument("--budget-pct", type=float, action="append")
    ap.add_argument("--joint-evaluations", help="joint calibration passes per budget, comma-separated "
                    "(nlb's report.json: allocation[b].evaluations); default: nlb's stopping rules, ≤ 10")
    ap.add_argument("--lambda", dest="lam", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--decode-steps", type=int, default=64)
    ap.add_argument("--timing-windows", type=int, default=32)
    ap.add_argument("--timing-repetitions", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8, help="windows per forward")
    ap.add_argument("--prefix-reuse", action="store_true")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    budgets = args.budget_pct or [1.0, 3.0]
    forced = [int(v) for v in args.joint_evaluations.split(",")] if args.joint_evaluations else None
    if forced is not None and len(forced) != len(budgets):
        raise SystemExit("--joint-evaluations: one count per budget")

    t_load = time.perf_counter()
    model, config = load_model(args.model)
    toks = {name: read_tokens(getattr(args, f"{name}_text"), getattr(args, f"{name}_tokens_file"),
                              args.token_dtype, config.vocab_size) for name in ("fit", "label", "eval", "cross")}
    load_seconds = time.perf_counter() - t_load
    ctx = args.context or min(128, config.n_positions)
    L = config.n_layer
    d = config.n_embd
    h = config.inner_size
    n_fit = args.fit_positions
    n_label = args.label_positions
    n_cal = args.calibration_positions or 3 * n_label
    label_windows = -(-n_label // (ctx - 1))
    cal_windows = -(-n_cal // (ctx - 1))
    n_train = int(math.floor(0.8 * n_label))
    runner = Runner(model, args.batch, args.prefix_reuse)
    blocks = model.transformer.h
    stages, sub, results = {}, {}, {"protocol": {
        "context": ctx, "fit_positions": n_fit, "label_positions": n_label, "calibration_positions": n_cal,
        "label_windows": label_windows, "calibration_windows": cal_windows, "budgets_pct": budgets,
        "threads": args.threads, "batch": args.batch, "prefix_reuse": args.prefix_reuse,
        "torch": torch.__version__}}

    def stage(name):
        class Timer:
            def __enter__(self):
                self.t = time.perf_counter()
                print(f"torch budget: {name} ...", file=sys.stderr, flush=True)

            def __exit__(self, *exc):
                stages[name] = time.perf_counter() - self.t
                print(f"torch budget: {name} done in {stages[name]:.1f} s", file=sys.stderr, flush=True)
        return Timer()

    def timed_sub(name, t0):
        sub[name] = sub.get(name, 0.0) + time.perf_counter() - t0

    def saving(f):  # MLP FLOPs saved per token at linear fraction f (PAPERS §A5; nlb analysis/flops.hpp)
        return f * (4.0 * d * h - 2.0 * d * d) - 2.0 * d

    # ---- fit: surrogates
    surrogates, r2 = [], []
    with stage("fit: surrogates"):
        t0 = time.perf_counter()
        fit_w = windows_of(toks["fit"], ctx, -(-n_fit // ctx))
        xs = [[] for _ in range(L)]
        ys = [[] for _ in range(L)]
        hooks = []
        for l, block in enumerate(blocks):
            hooks.append(block.ln_2.register_forward_hook(lambda m, i, o, l=l: xs[l].append(o.reshape(-1, d))))
            hooks.append(block.mlp.register_forward_hook(lambda m, i, o, l=l: ys[l].append(o.reshape(-1, d))))
        with torch.inference_mode():
            for s in range(0, fit_w.shape[0], args.batch):
                model(fit_w[s:s + args.batch])
        for hk in hooks:
            hk.remove()
        timed_sub("fit: taps (forward)", t0)
        t0 = time.perf_counter()
        for l in range(L):
            x = torch.cat(xs[l])[:n_fit].double()
            y = torch.cat(ys[l])[:n_fit].double()
            mx, my = x.mean(0), y.mean(0)
            xc, yc = x - mx, y - my
            w = torch.linalg.solve(xc.t() @ xc + args.lam * torch.eye(d, dtype=torch.float64), xc.t() @ yc)
            b = my - mx @ w
            res = yc - xc @ w
            r2.append(float(1.0 - (res * res).sum() / (yc * yc).sum()))
            surrogates.append(Surrogate(w, b))
        del xs, ys
        timed_sub("fit: ridge (float64)", t0)
    results["surrogate_r2"] = r2

    # ---- label: delta per position
    label_all = windows_of(toks["label"], ctx, label_windows + cal_windows)
    label_w = label_all[:label_windows]
    cal_w = label_all[label_windows:]
    with stage("label: delta per position"):
        xs = [[] for _ in range(L)]
        hooks = [block.ln_2.register_forward_hook(lambda m, i, o, l=l: xs[l].append(o[:, :-1].reshape(-1, d)))
                 for l, block in enumerate(blocks)]
        with torch.inference_mode():
            base_parts = []
            for s in range(0, label_windows, args.batch):
                chunk = label_w[s:s + args.batch]
                base_parts.append(position_losses(model(chunk), chunk).numpy())
            pos = torch.arange(ctx - 1)
            e_label = (model.transformer.wte(label_w[:, :-1]) + model.transformer.wpe(pos)[None]).reshape(-1, d)
        for hk in hooks:
            hk.remove()
        label_base = np.concatenate(base_parts)
        x_label = [torch.cat(xs[l])[:n_label].numpy() for l in range(L)]
        e_label = e_label[:n_label].numpy()
        del xs
        # the L one-layer-linear configurations (the base pass above carried the hooks)
        _, lin = runner.measure(label_w, [{l: surrogates[l]} for l in range(L)], with_base=False)
        base_flat = label_base.reshape(-1)[:n_label]
        delta = [lin[l].reshape(-1)[:n_label] - base_flat for l in range(L)]
    results["label_baseline_ppl"] = ppl(base_flat)

    # ---- label: gates and probes
    gates, aucs, probes = [], [], []
    with stage("label: gates and probes"):
        for l in range(L):
            t0 = time.perf_counter()
            w, b, auc = fit_gate(x_label[l], delta[l], n_train)
            gates.append((torch.from_numpy(w.astype(np.float32)), b))
            aucs.append(auc)
            timed_sub("label: gates", t0)
            t0 = time.perf_counter()
            _, _, auc_e = fit_gate(e_label, delta[l], n_train)
            _, _, auc_c = fit_gate(x_label[l] - e_label, delta[l], n_train)
            probes.append({"embedding": auc_e, "context": auc_c, "full": auc})
            timed_sub("label: probes", t0)
    results["gate_auc"] = aucs
    results["probes"] = probes

    def gated(l, threshold):
        return GatedMlp(blocks[l].mlp, surrogates[l], gates[l][0], gates[l][1], threshold)

    def joint_config(steps, thresholds):
        return {l: gated(l, thresholds[l][k]) for l, k in enumerate(steps) if k > 0}

    # ---- label: joint calibration
    with stage("label: joint calibration"):
        t0 = time.perf_counter()
        thresholds = []
        for l in range(L):
            s = np.sort(x_label[l] @ gates[l][0].numpy().astype(np.float64) + gates[l][1])[::-1]
            row = [math.inf]
            for k in range(1, STEPS + 1):
                m = int(round(k / STEPS * s.size))
                row.append(-math.inf if m >= s.size else float(s[m]))
            thresholds.append(row)
        timed_sub("calibration: thresholds", t0)
        t0 = time.perf_counter()
        configs, order = [], []
        for l in range(L):
            for k in range(1, STEPS + 1):
                configs.append({l: gated(l, thresholds[l][k])})
                order.append((l, k))
        cal_base, cal_var = runner.measure(cal_w, configs, with_base=True)
        cal_rows = cal_windows * ctx
        base_total = cal_base.sum()
        cal_positions = cal_windows * (ctx - 1)
        curve = [[0.0] * (STEPS + 1) for _ in range(L)]
        frac = [[0.0] * (STEPS + 1) for _ in range(L)]
        for (l, k), cfg, losses in zip(order, configs, cal_var):
            curve[l][k] = delta_pct(losses.sum(), base_total, cal_positions)
            frac[l][k] = cfg[l].linear_rows / cal_rows
        timed_sub("calibration: cost curves", t0)
        t0 = time.perf_counter()
        value = [[0.0] + [saving(f) for f in frac[l][1:]] for l in range(L)]
        allocations, joint = [], []

        def measure_state(steps):
            cfg = joint_config(steps, thresholds)
            _, (losses,) = runner.measure(cal_w, [cfg], with_base=False)
            layer_frac = [cfg[l].linear_rows / cal_rows if l in cfg else 0.0 for l in range(L)]
            return {"delta_pct": bootstrap(cal_base, losses, args.resamples, args.seed),
                    "layer_linear_fraction": layer_frac}

        for bi, budget in enumerate(budgets):
            target = forced[bi] if forced else None
            capacity, met, failed = budget, -1.0, math.inf
            tries, evaluations, chosen, best = [], 0, -1, -math.inf
            for it in range(10 if target is None else 60):
                if target is not None and evaluations >= target:
                    break
                steps = knapsack(curve, value, capacity)
                same = next((t for t in tries if t["steps"] == steps), None)
                if same is not None and not (target is not None and it >= 40):
                    meas = same["calibration"]
                elif not any(steps):
                    meas = {"delta_pct": [0.0, 0.0, 0.0], "layer_linear_fraction": [0.0] * L}
                else:
                    meas = measure_state(steps)
                    evaluations += 1
                meets = meas["delta_pct"][2] <= budget
                if meets:
                    sv = sum(saving(meas["layer_linear_fraction"][l]) for l in range(L) if steps[l] > 0)
                    if sv > best:
                        best, chosen = sv, len(tries)
                    met = max(met, capacity)
                else:
                    failed = min(failed, capacity)
                tries.append({"capacity_pct": capacity, "steps": steps, "calibration": meas, "meets": meets})
                high = meas["delta_pct"][2]
                if math.isinf(failed):
                    saturated = all(max(value[l]) <= value[l][steps[l]] for l in range(L))
                    if saturated and target is None:
                        break
                    capacity *= min(max(budget / high, 1.25), 4.0) if high > 0 else 4.0
                elif met < 0:
                    capacity *= min(max(budget / high, 0.25), 0.8) if high > 0 else 0.5
                else:
                    if failed - met <= 0.02 * failed and target is None:
                        break
                    capacity = 0.5 * (met + failed)
            steps = tries[chosen]["steps"] if chosen >= 0 else [0] * L
            allocations.append({"budget_pct": budget, "evaluations": evaluations, "tries": len(tries),
                                "chosen": chosen})
            joint.append({"budget_pct": budget, "steps": steps,
                          "calibration_delta_pct": tries[chosen]["calibration"]["delta_pct"] if chosen >= 0 else None})
        timed_sub("calibration: joint passes", t0)
        # the chosen states on the label windows (the positions the gates were fitted on)
        t0 = time.perf_counter()
        chosen_cfgs = [joint_config(j["steps"], thresholds) for j in joint if any(j["steps"])]
        if chosen_cfgs:
            _, lab = runner.measure(label_w, chosen_cfgs, with_base=False)
            it = iter(lab)
            for j in joint:
                if any(j["steps"]):
                    j["label_delta_pct"] = delta_pct(next(it).reshape(-1)[:n_label].sum(), base_flat.sum(), n_label)
        timed_sub("calibration: chosen states on the label windows", t0)
    results["calibration_evaluations"] = sum(a["evaluations"] for a in allocations)
    results["allocation"] = allocations

    # ---- eval: baseline, linear, gated, joint
    eval_w = windows_of(toks["eval"], ctx)
    with stage("eval: baseline, linear, gated, joint"):
        configs = [{l: surrogates[l]} for l in range(L)]
        configs.append({l: surrogates[l] for l in range(L)})
        configs += [{l: gated(l, 0.0)} for l in range(L)]
        configs += [joint_config(j["steps"], thresholds) for j in joint]
        ev_base, ev = runner.measure(eval_w, configs, with_base=True)
        rows = eval_w.shape[0] * ctx
        intervals = [bootstrap(ev_base, v, args.resamples, args.seed + i) for i, v in enumerate(ev)]
        eval_delta = [(ev[l] - ev_base).reshape(-1) for l in range(L)]
        for j, cfg, iv in zip(joint, configs[2 * L + 1:], intervals[2 * L + 1:]):
            j["eval_delta_pct"] = iv
            j["eval_linear_fraction"] = sum(m.linear_rows for m in cfg.values()) / (rows * L)
    results["eval_baseline_ppl"] = ppl(ev_base)
    results["all_linear_delta_pct"] = [iv[0] for iv in intervals[:L]]
    results["all_layers_linear_delta_pct"] = intervals[L][0]
    results["gate_delta_pct"] = [iv[0] for iv in intervals[L + 1:2 * L + 1]]
    results["gate_linear_fraction"] = [configs[L + 1 + l][l].linear_rows / rows for l in range(L)]
    results["joint"] = joint

    # ---- cross: no-fly lists
    cross_w = windows_of(toks["cross"], ctx)
    with stage("cross: no-fly lists"):
        cr_base, cr = runner.measure(cross_w, [{l: surrogates[l]} for l in range(L)], with_base=True)
        vocab = config.vocab_size
        ids_eval = eval_w[:, :-1].reshape(-1).numpy()
        ids_cross = cross_w[:, :-1].reshape(-1).numpy()
        no_fly = []
        for l in range(L):
            means = []
            for ids, dl in ((ids_eval, eval_delta[l]), (ids_cross, (cr[l] - cr_base).reshape(-1))):
                count = np.bincount(ids, minlength=vocab)
                total = np.bincount(ids, weights=dl, minlength=vocab)
                means.append((np.divide(total, count, out=np.zeros(vocab), where=count > 0), count))
            (ma, ca), (mb, cb) = means
            lists = [int(((c >= 10) & (m > 0.05)).sum()) for m, c in means]
            common = (ca >= 10) & (cb >= 10)
            r = float(np.corrcoef(ma[common], mb[common])[0, 1]) if common.sum() >= 3 else float("nan")
            no_fly.append({"eval_count": lists[0], "cross_count": lists[1], "common_tokens": int(common.sum()),
                           "correlation": r})
    results["cross_baseline_ppl"] = ppl(cr_base)
    results["no_fly"] = no_fly

    # ---- timing: dense vs gated forward and decode
    with stage("timing: dense vs gated forward and decode"):
        tw = eval_w[:min(args.timing_windows, eval_w.shape[0])]
        steps = min(args.decode_steps, ctx)
        first = toks["eval"][:steps]
        timing = []
        with torch.inference_mode():
            for j in joint:
                cfg = joint_config(j["steps"], thresholds)
                fwd = {"dense": [], "gated": []}
                dec = {"dense": [], "gated": []}
                for _ in range(args.timing_repetitions):
                    for kind, modules in (("dense", {}), ("gated", cfg)):
                        with Swapped(model, modules):
                            t0 = time.perf_counter()
                            for s in range(0, tw.shape[0], args.batch):
                                model(tw[s:s + args.batch])
                            fwd[kind].append(time.perf_counter() - t0)
                            t0 = time.perf_counter()
                            decode(model, first, steps)
                            dec[kind].append(time.perf_counter() - t0)
                timing.append({k: statistics.median(v) * 1e3 for k, v in
                               (("forward_dense_ms", fwd["dense"]), ("forward_gated_ms", fwd["gated"]),
                                ("decode_dense_ms", dec["dense"]), ("decode_gated_ms", dec["gated"]))})
    results["timing"] = timing

    out = {"stages": stages, "substages": sub, "total_seconds": sum(stages.values()),
           "load_seconds": load_seconds, "results": results}
    text = json.dumps(out, indent=1)
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
