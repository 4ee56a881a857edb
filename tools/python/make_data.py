#!/usr/bin/python3
"""Builds data/kjv-{fit,label,eval}.txt, data/jargon-eval.txt (committed) and
the training split out/data/kjv-train.txt (not committed) from the Debian
packages bible-kjv, bible-kjv-text and jargon-text.

Usage: /usr/bin/python3 tools/python/make_data.py [--repo DIR]
The cleaning and the split are described in nlb_reference/data.py and
data/README.md. Deterministic: the same packages give byte-identical files.
"""

import argparse
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from nlb_reference import data  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    raw = text.encode("ascii")
    with open(path, "wb") as f:
        f.write(raw)
    print(f"{os.path.relpath(path, REPO)}: {len(raw)} bytes, sha256 {hashlib.sha256(raw).hexdigest()[:16]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=REPO, help="repository root (default: this checkout)")
    args = ap.parse_args()
    splits = data.split_kjv(data.kjv_chapters())
    for name in ("fit", "label", "eval"):
        write(os.path.join(args.repo, "data", f"kjv-{name}.txt"), splits[name])
    write(os.path.join(args.repo, "data", "jargon-eval.txt"), data.jargon_eval())
    write(os.path.join(args.repo, "out", "data", "kjv-train.txt"), splits["train"])


if __name__ == "__main__":
    main()
