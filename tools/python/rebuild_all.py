#!/usr/bin/python3
"""Rebuilds data/, models/tiny-gpt2, models/tiny-neox, models/tiny-sd and
tests/fixtures/, then runs the self-check.

Usage:
  /usr/bin/python3 tools/python/rebuild_all.py [--skip-training] [--blas-dir DIR]

Prerequisites (Debian 12): python3-torch, python3-numpy and
  apt-get install -y bible-kjv bible-kjv-text jargon-text

--skip-training keeps the committed models and rebuilds only the data files,
the fixtures and the checks (minutes instead of about half an hour).
--blas-dir DIR puts DIR first on LD_LIBRARY_PATH of every step, to run torch
on an optimized BLAS without changing the system default: with Debian's
reference BLAS (the default libblas.so.3) a training step is about six times
slower (8.3 s against 1.3 s for a batch of 32 x 128 bytes on a busy 2-core machine).
The shipped models were trained with OpenBLAS 0.3.21 (serial), extracted by
  apt-get download libopenblas0-serial && dpkg -x libopenblas0-serial_*.deb x
and passed as --blas-dir x/usr/lib/x86_64-linux-gnu/openblas-serial
Floating-point results of training depend on the BLAS in the last bits, so a
retrained model matches the committed one closely but not bit for bit; the
fixtures are always recomputed from whatever model files are present.
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

TRAIN_STEPS = "1200"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skip-training", action="store_true")
    ap.add_argument("--blas-dir", help="directory holding an optimized libblas.so.3")
    args = ap.parse_args()
    env = dict(os.environ)
    if args.blas_dir:
        env["LD_LIBRARY_PATH"] = os.path.abspath(args.blas_dir) + (
            ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""
        )
    steps = [["make_data.py"]]
    if not args.skip_training:
        steps += [
            ["train.py", "--arch", "gpt2", "--out", "models/tiny-gpt2", "--steps", TRAIN_STEPS, "--log-every", "100"],
            ["train.py", "--arch", "neox", "--out", "models/tiny-neox", "--steps", TRAIN_STEPS, "--log-every", "100"],
            # S–D attention (sd_model.py); the shipped choice of ranks, filter and ln_1 is
            # train.py's default for --arch sd (see models/README.md).
            ["train.py", "--arch", "sd", "--out", "models/tiny-sd", "--steps", TRAIN_STEPS, "--log-every", "100"],
        ]
    steps += [["make_fixtures.py"], ["self_check.py"]]
    # Per-layer surrogate costs of both shipped models (tests/fixtures/tiny-*-mlp-budget.json).
    steps += [["mlp_budget_reference.py"]]
    # Per-head routing measures of tiny-gpt2 (tests/fixtures/tiny-gpt2-spectrum.json).
    steps += [["spectrum_reference.py"]]
    for step in steps:
        command = [sys.executable, os.path.join(HERE, step[0])] + step[1:]
        print("==> " + " ".join(["/usr/bin/python3", "tools/python/" + step[0]] + step[1:]), flush=True)
        start = time.time()
        subprocess.run(command, cwd=REPO, env=env, check=True)
        print(f"    ({time.time() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
