"""Writes tests/fixtures/sd-attention-reference.safetensors: SDAttention
(nlb_reference/sd_attention.py) on random float64 weights and inputs, the
reference for tests/attention/test_sd_attention.cpp.

Cases (tensor names "<case>.<name>"):
  diagonal  d 16, 4 heads, rank 4, DiagonalFilter, T 9
  scalar    d 16, 4 heads, rank 2, ScalarFilter,   T 9
  long      d 8,  2 heads, rank 6, DiagonalFilter, T 70 (crosses the 64-row panel of the
            C++ causal product)
Per case: x [T, d], the module's state_dict (u [H, d, r], v [H, d, r], theta [H, d] or [H],
c_v.weight [d, d], c_v.bias [d], c_proj.weight [d, d], c_proj.bias [d]), y [T, d] (the
causal S–D attention output), logits [H, T, T] (causal; masked entries written as 0) and
routing [H, T, T] (the full, non-causal routing scores x_i S_h x_jᵀ, unscaled).
Weights are drawn with std 0.5 and theta ~ N(0, 1), so the softmax is far from uniform.

Run: /usr/bin/python3 tools/python/make_sd_attention_fixture.py [--out PATH]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from nlb_reference import safetensors_io  # noqa: E402
from nlb_reference.sd_attention import SDAttention, skew_scores  # noqa: E402

SEED = 20261129
CASES = [
    ("diagonal", 16, 4, 4, "diagonal", 9),
    ("scalar", 16, 4, 2, "scalar", 9),
    ("long", 8, 2, 6, "diagonal", 70),
]


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(root, "tests", "fixtures",
                                                      "sd-attention-reference.safetensors"))
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(SEED)
    tensors = {}
    for name, d, heads, rank, filt, t in CASES:
        m = SDAttention(d, heads, rank, filt).double()
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.5)
            m.theta.copy_(torch.randn(m.theta.shape, generator=gen, dtype=torch.float64))
            x = torch.randn(t, d, generator=gen, dtype=torch.float64)
            y = m(x)
            logits = m.logits(x)
            logits = torch.where(torch.isinf(logits), torch.zeros_like(logits), logits)
            routing = skew_scores(x.unsqueeze(0), m.u, m.v)
        tensors[f"{name}.x"] = x
        tensors[f"{name}.y"] = y
        tensors[f"{name}.logits"] = logits
        tensors[f"{name}.routing"] = routing
        for key, value in m.state_dict().items():
            tensors[f"{name}.{key}"] = value
    meta = {"generator": "tools/python/make_sd_attention_fixture.py", "seed": str(SEED),
            "cases": ",".join(c[0] for c in CASES)}
    safetensors_io.write(args.out, tensors, meta)
    print(f"wrote {args.out}: {len(tensors)} tensors")


if __name__ == "__main__":
    main()
