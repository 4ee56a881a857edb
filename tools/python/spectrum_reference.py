#!/usr/bin/python3
"""Independent PyTorch reference of `nlb spectrum`'s per-head routing measures (PAPERS §B1).

Usage:
  /usr/bin/python3 tools/python/spectrum_reference.py            # models/tiny-gpt2
  /usr/bin/python3 tools/python/spectrum_reference.py --model models/tiny-gpt2 --out FILE.json

Reads the model's model.safetensors directly (nlb_reference/safetensors_io.py; no model code),
casts every weight to float64 and, for each layer and head of the GPT-2 layout (c_attn.weight
[d, 3d] with y = x W + b; head h's query columns [h·d_h, (h+1)·d_h), its key columns d + the
same), forms the dense d × d score matrix of two forms (the values of `nlb spectrum --qk-bias`):

  exclude      M = W_Q W_Kᵀ, the paper's matrix (PAPERS §B1), the default of `nlb spectrum`;
  homogeneous  M̃ = [W_Q; b_Q] [W_K; b_K]ᵀ ((d+1) × (d+1)), the exact score form with the q/k
               biases over x̃ = [x, 1] (docs/attention_spectrum.md §1).

and writes per head, with the definitions of docs/attention_spectrum.md §3:

  skew_energy_fraction  ‖M_skew‖²_F / ‖M‖²_F with M_skew = (M − Mᵀ)/2, from the dense
                        matrices' Frobenius norms;
  skew_planes_90        the smallest p with Σ_{k<p} σ_k² ≥ 0.9 Σ_k σ_k², σ_k the rotation-plane
                        values of M_skew, descending.

The C++ code reduces M to the 2·d_h span of [W_Q W_K] and takes a Jacobi SVD of the small core;
here nothing is reduced: σ_k come from the dense Hermitian eigenproblem of i·M_skew (whose
eigenvalues are exactly ±σ_k, torch.linalg.eigvalsh), and the script checks them against
torch.linalg.svdvals of M_skew (each σ_k twice) before writing anything. For each head it also
records the cumulative skew-energy share with p and p − 1 planes, i.e. how far the count's
0.9 threshold is from flipping.
"""

import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from nlb_reference import safetensors_io  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GENERATOR = "tools/python/spectrum_reference.py"
FRACTION = 0.9
# svdvals vs eigvalsh of the same dense matrix (both backward stable, n ≤ 129): a plane value
# moves by O(n · eps · ‖M_skew‖₂); 1e-12 relative to the largest is ~100× that.
SELF_CHECK_REL = 1e-12


def sha256_of(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def plane_values(skew: torch.Tensor) -> torch.Tensor:
    """σ_k of a real skew-symmetric matrix, descending, one per plane (n // 2 of them)."""
    n = skew.shape[0]
    # i·S is Hermitian for real skew S; its real eigenvalues are ±σ_k (and zeros).
    ev = torch.linalg.eigvalsh(1j * skew.to(torch.complex128))  # ascending
    planes = torch.flip(ev, dims=[0])[: n // 2].clamp(min=0.0)
    sv = torch.linalg.svdvals(skew)  # descending, each σ_k twice
    paired = sv[: 2 * (n // 2)].reshape(-1, 2)
    scale = max(float(sv[0]), 1e-300)
    err = max(float((paired[:, 0] - planes).abs().max()), float((paired[:, 1] - planes).abs().max()))
    if err > SELF_CHECK_REL * scale:
        raise SystemExit(f"self-check failed: eigvalsh(i S) vs svdvals(S) differ by {err:.3e} (σ_1 = {scale:.3e})")
    return planes


def head_measures(wq: torch.Tensor, wk: torch.Tensor) -> dict:
    m = wq @ wk.T  # dense [n, n]
    skew = 0.5 * (m - m.T)
    share = float(skew.square().sum() / m.square().sum())
    squares = plane_values(skew).square()
    total = float(squares.sum())
    cumulative = torch.cumsum(squares, dim=0) / total
    planes = 0
    if total > 0:
        # the first p whose cumulative sum reaches the fraction (the definition, §3)
        planes = int(torch.nonzero(torch.cumsum(squares, dim=0) >= FRACTION * total)[0]) + 1
    return {
        "skew_energy_fraction": share,
        "skew_planes_90": planes,
        "cumulative_share_at_planes_90": float(cumulative[planes - 1]) if planes > 0 else 0.0,
        "cumulative_share_one_plane_fewer": float(cumulative[planes - 2]) if planes > 1 else 0.0,
    }


def reference(model_dir: str) -> dict:
    with open(os.path.join(REPO, model_dir, "config.json")) as f:
        config = json.load(f)
    if config.get("model_type") != "gpt2":
        raise SystemExit(f"{model_dir}: model_type {config.get('model_type')!r}, this script reads gpt2 only")
    weights_file = os.path.join(REPO, model_dir, "model.safetensors")
    tensors, _ = safetensors_io.read(weights_file)
    d, n_heads, n_layers = config["n_embd"], config["n_head"], config["n_layer"]
    dh = d // n_heads
    forms = {"exclude": [], "homogeneous": []}
    for layer in range(n_layers):
        w = tensors[f"transformer.h.{layer}.attn.c_attn.weight"].to(torch.float64)  # [d, 3d]
        b = tensors[f"transformer.h.{layer}.attn.c_attn.bias"].to(torch.float64)  # [3d]
        for h in range(n_heads):
            q_cols = slice(h * dh, (h + 1) * dh)
            k_cols = slice(d + h * dh, d + (h + 1) * dh)
            wq, wk = w[:, q_cols], w[:, k_cols]
            tag = {"layer": layer, "head": h}
            forms["exclude"].append({**tag, **head_measures(wq, wk)})
            wq1 = torch.cat([wq, b[q_cols].unsqueeze(0)], dim=0)
            wk1 = torch.cat([wk, b[k_cols].unsqueeze(0)], dim=0)
            forms["homogeneous"].append({**tag, **head_measures(wq1, wk1)})
    return {
        "model": model_dir,
        "model_sha256": sha256_of(weights_file),
        "generator": GENERATOR,
        "command": f"/usr/bin/python3 {GENERATOR}",
        "torch_version": torch.__version__,
        "compute_dtype": "float64",
        "nlbudget_fixture_version": "1",
        "layers": n_layers,
        "heads_per_layer": n_heads,
        "d_model": d,
        "head_dim": dh,
        "energy_fraction_for_counts": FRACTION,
        "definitions": {
            "exclude": "M = W_Q W_K^T (d x d), the paper's matrix",
            "homogeneous": "M = [W_Q; b_Q] [W_K; b_K]^T ((d+1) x (d+1)) over x~ = [x, 1]",
            "skew_energy_fraction": "||M_skew||_F^2 / ||M||_F^2, M_skew = (M - M^T)/2, dense Frobenius norms",
            "skew_planes_90": "smallest p with sum_{k<p} sigma_k^2 >= 0.9 sum_k sigma_k^2, sigma_k the plane "
            "values of M_skew descending (dense eigvalsh of i M_skew, checked against svdvals)",
            "cumulative_share_at_planes_90": "sum_{k<p} sigma_k^2 / sum_k sigma_k^2 with p = skew_planes_90",
            "cumulative_share_one_plane_fewer": "the same with p - 1 planes (0 when p <= 1)",
        },
        "forms": forms,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/tiny-gpt2", help="model directory, relative to the repository")
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures", "tiny-gpt2-spectrum.json"))
    args = ap.parse_args()
    result = reference(args.model)
    with open(args.out, "w") as f:
        f.write(json.dumps(result, indent=2) + "\n")
    for form, heads in result["forms"].items():
        margin = min(
            min(h["cumulative_share_at_planes_90"] - FRACTION, FRACTION - h["cumulative_share_one_plane_fewer"])
            for h in heads
        )
        print(f"{form}: {len(heads)} heads, smallest distance of a 0.9 cut from flipping {margin:.3e}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
