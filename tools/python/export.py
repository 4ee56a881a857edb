#!/usr/bin/python3
"""Inspects a Hugging Face model directory or rewrites its weights in another dtype.

Usage:
  /usr/bin/python3 tools/python/export.py --model DIR --list
  /usr/bin/python3 tools/python/export.py --model DIR --out DIR2 --dtype bf16

--list prints config.json's architecture fields and every tensor (name,
dtype, shape) as the strict reader sees them. --out writes config.json and
model.safetensors with the weights rounded (to nearest even) to --dtype; the
model is rebuilt and loaded strictly first, so a malformed input is refused.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from nlb_reference import hf_layout, safetensors_io  # noqa: E402

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    args = ap.parse_args()
    if args.list:
        with open(os.path.join(args.model, "config.json")) as f:
            print(json.dumps(json.load(f), indent=2, sort_keys=True))
        tensors, meta = safetensors_io.read(os.path.join(args.model, "model.safetensors"))
        print(f"__metadata__: {meta}")
        for name in sorted(tensors):
            t = tensors[name]
            print(f"{name}\t{str(t.dtype).replace('torch.', '')}\t{list(t.shape)}")
    if args.out:
        model, _ = hf_layout.load_model_dir(args.model, dtype=torch.float32)
        hf_layout.save_model_dir(model, args.out, dtype=DTYPES[args.dtype])
        print(f"wrote {args.out} ({args.dtype})")
    if not args.list and not args.out:
        ap.error("nothing to do: pass --list and/or --out")


if __name__ == "__main__":
    main()
