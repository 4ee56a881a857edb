#!/usr/bin/python3
"""Progressive linearization (PAPERS §A6): fine-tune a linearized model around its frozen
linear MLPs, in PyTorch, and write it back in the same format.

Usage:
  /usr/bin/python3 tools/python/finetune_linearized.py --model LIN_DIR --out OUT_DIR
      [--steps 150] [--batch 8] [--lr 5e-4] [--seed 0] [--fit-text data/kjv-fit.txt]
      [--eval-text data/kjv-eval.txt] [--base models/tiny-gpt2] [--force]

LIN_DIR is what `nlb linearize` writes (docs/linearize.md): a GPT-2, GPT-NeoX or Llama-family directory
whose config.json lists every layer's MLP kind in "nlb_mlp_kinds" ("full", "linear",
"gated"). A linear layer stores mlp.surrogate.{weight [d, d], bias [d]} (y = x W + b, W as
[in, out] in both families) instead of its MLP; a gated layer keeps its MLP and adds the
surrogate and mlp.gate.{weight [d], bias [1], threshold [1]} (linear iff x.w + b > threshold).

The model is the reference of nlb_reference/models.py with those layers' MLPs replaced:
linear layers by the frozen map x W + b, gated layers by hard routing between the (trainable)
MLP and the frozen surrogate under the frozen gate. Every other weight is trained in float32
with Adam on random windows of `context` tokens of the fit text (next-token cross-entropy),
one thread, seeded. OUT_DIR gets config.json (unchanged), model.safetensors (F32; the
surrogate and gate tensors bit for bit as read), linearize.json (copied, if present) and
finetune.json: the eval-protocol PPL (float64, windows of `context`, non-overlapping) on the
first 8 windows and on all windows of the eval text, before and after, the latter computed
from the written file; with --base, also the unlinearized model's.
"""

import argparse
import json
import math
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from nlb_reference import hf_layout, protocol, safetensors_io  # noqa: E402
from nlb_reference.data import read_tokens  # noqa: E402
from nlb_reference.llama import LlamaConfig  # noqa: E402
from nlb_reference.models import Gpt2Config, build_model, config_from_hf, context_length  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GENERATOR = "tools/python/finetune_linearized.py"


class Affine(nn.Module):
    """y = x W + b with W [d_in, d_out] (the surrogate's layout)."""

    def __init__(self, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(d, d), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(d), requires_grad=False)

    def forward(self, x):
        return torch.matmul(x, self.weight) + self.bias


class Gate(nn.Module):
    """Folded hyperplane gate (PAPERS §A3): a row is linear iff x.w + b > threshold."""

    def __init__(self, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(d), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(1), requires_grad=False)
        self.threshold = nn.Parameter(torch.zeros(1), requires_grad=False)

    def linear_rows(self, x):
        return (torch.matmul(x, self.weight) + self.bias) > self.threshold


class LinearMlp(nn.Module):
    """A linearized layer's MLP: only the frozen surrogate."""

    def __init__(self, d: int):
        super().__init__()
        self.surrogate = Affine(d)

    def forward(self, x):
        return self.surrogate(x)


class GatedMlp(nn.Module):
    """A gated layer's MLP: the original MLP's modules (same names), the frozen surrogate and
    gate; hard routing per row."""

    def __init__(self, mlp: nn.Module, d: int):
        super().__init__()
        for name, child in mlp.named_children():
            self.add_module(name, child)
        self._full = mlp.forward  # runs the same child modules
        self.surrogate = Affine(d)
        self.gate = Gate(d)

    def forward(self, x):
        linear = self.gate.linear_rows(x).unsqueeze(-1)
        return torch.where(linear, self.surrogate(x), self._full(x))


def blocks(model):
    if isinstance(model.config, Gpt2Config):
        return model.transformer.h
    if isinstance(model.config, LlamaConfig):
        return model.model.layers
    return model.gpt_neox.layers


def width(config) -> int:
    return config.n_embd if isinstance(config, Gpt2Config) else config.hidden_size


def n_layers(config) -> int:
    return config.n_layer if isinstance(config, Gpt2Config) else config.num_hidden_layers


def load_linearized(directory, dtype=torch.float64):
    """(model, config, config_json, kinds) with strict names and shapes, weights cast to dtype."""
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        config_json = json.load(f)
    config = config_from_hf(config_json)
    kinds = config_json.get("nlb_mlp_kinds") or ["full"] * n_layers(config)
    if len(kinds) != n_layers(config) or any(k not in ("full", "linear", "gated") for k in kinds):
        raise ValueError(f"{directory}: nlb_mlp_kinds must be {n_layers(config)} of full/linear/gated, found {kinds}")
    model = build_model(config)
    d = width(config)
    for i, kind in enumerate(kinds):
        if kind == "linear":
            blocks(model)[i].mlp = LinearMlp(d)
        elif kind == "gated":
            blocks(model)[i].mlp = GatedMlp(blocks(model)[i].mlp, d)
    tensors, _ = safetensors_io.read(os.path.join(directory, "model.safetensors"))
    # GPT-2 files written without the "transformer." prefix (original hub files).
    if isinstance(config, Gpt2Config) and "wte.weight" in tensors:
        tensors = {("transformer." + k if not k.startswith("lm_head") else k): v for k, v in tensors.items()}
    hf_layout.check_tensors(directory, tensors, model.state_dict())
    model = hf_layout.load_weights(model, tensors, dtype)
    return model, config, config_json, kinds, tensors


def frozen_names(kinds, model):
    names = set()
    for name, _ in model.named_parameters():
        if ".mlp.surrogate." in name or ".mlp.gate." in name:
            names.add(name)
    return names


def ppl_pair(model, tokens, context):
    first = protocol.evaluate(model, tokens, context, max_windows=8)
    every = protocol.evaluate(model, tokens, context)
    return {
        "ppl_8_windows": first["ppl"],
        "ppl_all_windows": every["ppl"],
        "windows_all": every["windows"],
        "predicted_tokens_all": every["predicted_tokens"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="linearized model directory (nlb linearize)")
    ap.add_argument("--out", required=True, help="output directory (refused if non-empty, unless --force)")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--fit-text", default="data/kjv-fit.txt")
    ap.add_argument("--eval-text", default="data/kjv-eval.txt")
    ap.add_argument("--base", help="the unlinearized model directory, to record its PPL too")
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    out = os.path.abspath(args.out)
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)) and not args.force:
        sys.exit(f"{args.out} exists and is not empty (pass --force to replace it)")

    eval_tokens = read_tokens(os.path.join(REPO, args.eval_text) if not os.path.isabs(args.eval_text) else args.eval_text)
    fit_path = args.fit_text if os.path.isabs(args.fit_text) else os.path.join(REPO, args.fit_text)
    fit_tokens = torch.tensor(read_tokens(fit_path), dtype=torch.int64)

    model, config, config_json, kinds, tensors_in = load_linearized(args.model, torch.float64)
    context = args.context
    if context > context_length(config):
        sys.exit(f"--context {context} exceeds the model's {context_length(config)} positions")
    record = {
        "generator": GENERATOR,
        "torch_version": torch.__version__,
        "command": "/usr/bin/python3 " + GENERATOR + " " + " ".join(sys.argv[1:]),
        "model": args.model,
        "nlb_mlp_kinds": kinds,
        "eval_text": args.eval_text,
        "eval_protocol": f"windows of {context} bytes, non-overlapping from the file start, shorter last window dropped; float64",
        "finetune": {
            "fit_text": args.fit_text,
            "steps": args.steps,
            "batch": args.batch,
            "context": context,
            "optimizer": "Adam (torch.optim.Adam, betas 0.9/0.999, no weight decay)",
            "lr": args.lr,
            "seed": args.seed,
            "dtype": "float32",
            "threads": 1,
            "batches": "uniformly random window starts in the fit text (torch.randint, seeded)",
            "frozen": "every mlp.surrogate.* and mlp.gate.* tensor",
        },
    }
    if args.base:
        base, _ = hf_layout.load_model_dir(args.base, dtype=torch.float64)
        record["base"] = dict(ppl_pair(base, eval_tokens, context), model=args.base)
        print(f"base: {record['base']}", flush=True)
    record["before"] = ppl_pair(model, eval_tokens, context)
    print(f"before: {record['before']}", flush=True)

    # Fine-tune in float32.
    model = model.to(torch.float32)
    frozen = frozen_names(kinds, model)
    trainable = []
    for name, p in model.named_parameters():
        p.requires_grad_(name not in frozen)
        if name not in frozen:
            trainable.append(p)
    opt = torch.optim.Adam(trainable, lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    model.train()
    losses = []
    start = time.time()
    for step in range(args.steps):
        starts = torch.randint(0, fit_tokens.numel() - context + 1, (args.batch,), generator=gen)
        batch = torch.stack([fit_tokens[s : s + context] for s in starts.tolist()])
        logits = model(batch)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        if step % 10 == 0 or step == args.steps - 1:
            print(f"step {step}: loss {losses[-1]:.4f} ({time.time() - start:.0f} s)", flush=True)
    record["finetune"]["train_losses"] = losses
    record["finetune"]["seconds"] = round(time.time() - start, 1)
    model.eval()

    # Write to a temporary directory, check, evaluate the written file, rename into place.
    state = {k: v.detach().to(torch.float32).contiguous() for k, v in model.state_dict().items()}
    for name in frozen:
        if not torch.equal(state[name], tensors_in[name].to(torch.float32)):
            raise AssertionError(f"frozen tensor {name} changed")
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, "." + os.path.basename(out) + f".tmp-finetune-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        safetensors_io.write(os.path.join(tmp, "model.safetensors"), state, {"format": "pt"})
        with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(config_json, indent=2) + "\n")
        if os.path.exists(os.path.join(args.model, "linearize.json")):
            shutil.copyfile(os.path.join(args.model, "linearize.json"), os.path.join(tmp, "linearize.json"))
        written, _, _, _, tensors_out = load_linearized(tmp, torch.float64)
        for name in frozen:
            if not torch.equal(tensors_out[name], tensors_in[name]):
                raise AssertionError(f"frozen tensor {name} differs in the written file")
        record["after"] = ppl_pair(written, eval_tokens, context)
        print(f"after: {record['after']}", flush=True)
        for key in ("ppl_8_windows", "ppl_all_windows"):
            record["after"]["change_pct_vs_before_" + key[4:]] = 100.0 * (record["after"][key] / record["before"][key] - 1.0)
        with open(os.path.join(tmp, "finetune.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(record, indent=2) + "\n")
        if os.path.exists(out):
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
