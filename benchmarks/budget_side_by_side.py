#!/usr/bin/python3
"""`nlb budget` against the PyTorch + scikit-learn pipeline (benchmarks/torch_budget_pipeline.py)
on the same model, token ids, windows and position counts, run alternately; prints the
stage-by-stage table (issue 38 §1).

Usage:
  /usr/bin/python3 benchmarks/budget_side_by_side.py                       # tiny-gpt2, nlb's defaults
  /usr/bin/python3 benchmarks/make_random_gpt2.py --shape small --out /tmp/nlb-gpt2/small
  /usr/bin/python3 benchmarks/budget_side_by_side.py --model /tmp/nlb-gpt2/small \\
      --fit-positions 256 --label-positions 254 --calibration-positions 127 \\
      --eval-windows 2 --cross-windows 2 [--context N] [--decode-steps N] [--budget-pct P ...] \\
      [--repetitions 1] [--threads 2] [--torch-threads N] [--torch-arg=--prefix-reuse] \\
      [--nlb PATH] [--work /tmp/nlb-side-by-side]

Each repetition runs nlb, then the PyTorch pipeline (nlb, torch, nlb, torch, ...), each under
`nice -n 0` as it is, with the same thread count (nlb: OPENBLAS_NUM_THREADS, which sets its
contexts' threads; PyTorch: --threads, torch.set_num_threads and the BLAS pinned to it), or
--torch-threads for PyTorch where its best setting differs (on 2 busy cores: 1). The PyTorch
side is given the number of joint calibration passes per budget that nlb's report.json says it ran
in the same repetition (`allocation[b].evaluations`), so both do the same calibration work.

Inputs: a byte-level model (models/tiny-gpt2) reads the texts directly on both sides (with
--eval-windows / --cross-windows, their first windows are written to the work directory); any
other model gets each text encoded once by `nlb tokenize --model DIR --text F --out F.bin` (u16
ids), the eval and cross ids cut to --eval-windows / --cross-windows whole windows, and both
programs read the same token-id files.

nlb's stage times are report.json's `time_stages`; the PyTorch side's are its printed "stages"
(the same names). "end to end" is each process's wall time (model load, tokens, report files for
nlb; interpreter start, imports and load for PyTorch). The load average (/proc/loadavg) before
and after every run is printed with the table: the machine may be shared with other work.
Everything (the reports, the PyTorch JSON, a summary JSON) stays in --work.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DEFAULT_NLB = os.path.join(REPO, "build", "release", "tools", "nlb", "nlb")
TEXTS = {"fit": "kjv-fit.txt", "label": "kjv-label.txt", "eval": "kjv-eval.txt", "cross": "jargon-eval.txt"}
STAGES = [
    "fit: surrogates",
    "label: delta per position",
    "label: gates and probes",
    "label: joint calibration",
    "eval: baseline, linear, gated, joint",
    "cross: no-fly lists",
    "timing: dense vs gated forward and decode",
]


def loadavg():
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


def wait_for(path):
    while not os.access(path, os.X_OK):
        print(f"waiting for {path} (polling every 60 s)", file=sys.stderr, flush=True)
        time.sleep(60)


def byte_level(model_dir):
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        return json.load(f)["vocab_size"] == 256


def context_of(model_dir, given):
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        return given or min(128, json.load(f)["n_positions"])


def prepare_inputs(args, work, ctx):
    """-> (nlb options, torch options) naming the same inputs."""
    limits = {"eval": args.eval_windows, "cross": args.cross_windows}
    if byte_level(args.model):
        paths = {}
        for name, text in TEXTS.items():
            src = os.path.join(REPO, "data", text)
            if limits.get(name):
                with open(src, "rb") as f:
                    data = f.read()[: limits[name] * ctx]
                if len(data) < limits[name] * ctx:
                    raise SystemExit(f"{src}: fewer than {limits[name]} windows")
                paths[name] = os.path.join(work, f"{name}.txt")
                with open(paths[name], "wb") as f:
                    f.write(data)
            else:
                paths[name] = src
        opts = [x for name, p in paths.items() for x in (f"--{name}-text", p)]
        return opts, opts
    import numpy as np

    opts = []
    for name, text in TEXTS.items():
        out = os.path.join(work, f"{name}.bin")
        subprocess.run([args.nlb, "tokenize", "--model", args.model, "--text", os.path.join(REPO, "data", text),
                        "--out", out], check=True, stdout=subprocess.DEVNULL)
        if limits.get(name):
            ids = np.fromfile(out, dtype="<u2")
            if ids.size < limits[name] * ctx:
                raise SystemExit(f"{text}: {ids.size} tokens, fewer than {limits[name]} windows of {ctx}")
            ids[: limits[name] * ctx].tofile(out)
        opts += [f"--{name}-tokens-file", out]
    return opts, opts


def run_nlb(args, work, inputs, rep, threads):
    out_dir = os.path.join(work, f"nlb-report-{rep}")
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = ["nice", "-n", "0", args.nlb, "budget", "--model", args.model, *inputs, "--out", out_dir]
    cmd += position_options(args)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    before = loadavg()
    t0 = time.perf_counter()
    with open(os.path.join(work, f"nlb-{rep}.log"), "w", encoding="utf-8") as log:
        subprocess.run(cmd, check=True, env=env, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    with open(os.path.join(out_dir, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    return {"command": " ".join(cmd[3:]), "wall": wall, "load_before": before, "load_after": loadavg(),
            "stages": {s["stage"]: s["seconds"] for s in report["time_stages"]},
            "total": report["time_total_seconds"],
            "evaluations": [a["evaluations"] for a in report["allocation"]],
            "calibration_evaluations": report["calibration_evaluations"],
            "baseline_ppl": report["baseline_ppl"],
            "joint_eval_delta_pct": [j["delta_pct"] for j in report["joint"]]}


def run_torch(args, work, inputs, rep, threads, evaluations):
    out = os.path.join(work, f"torch-{rep}.json")
    cmd = ["nice", "-n", "0", "/usr/bin/python3", os.path.join(REPO, "benchmarks", "torch_budget_pipeline.py"),
           "--threads", str(threads), "--model", args.model, *inputs, "--json-out", out,
           "--joint-evaluations", ",".join(str(e) for e in evaluations)]
    cmd += position_options(args) + list(args.torch_arg or [])
    before = loadavg()
    t0 = time.perf_counter()
    with open(os.path.join(work, f"torch-{rep}.log"), "w", encoding="utf-8") as log:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=log)
    wall = time.perf_counter() - t0
    with open(out, encoding="utf-8") as f:
        res = json.load(f)
    r = res["results"]
    return {"command": " ".join(cmd[3:]), "wall": wall, "load_before": before, "load_after": loadavg(),
            "stages": res["stages"], "substages": res["substages"], "total": res["total_seconds"],
            "calibration_evaluations": r["calibration_evaluations"], "baseline_ppl": r["eval_baseline_ppl"],
            "joint_eval_delta_pct": [j["eval_delta_pct"][0] for j in r["joint"]]}


def position_options(args):
    opts = []
    for name in ("context", "fit_positions", "label_positions", "calibration_positions", "decode_steps"):
        v = getattr(args, name)
        if v is not None:
            opts += ["--" + name.replace("_", "-"), str(v)]
    for b in args.budget_pct or []:
        opts += ["--budget-pct", str(b)]
    return opts


def fmt(v):
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def table(nlb_runs, torch_runs):
    med = statistics.median
    lines = ["| stage | nlb s | PyTorch+sklearn s | ratio (PyTorch / nlb) |", "|---|---|---|---|"]
    for s in STAGES:
        a = med([r["stages"].get(s, 0.0) for r in nlb_runs])
        b = med([r["stages"].get(s, 0.0) for r in torch_runs])
        lines.append(f"| {s} | {fmt(a)} | {fmt(b)} | {b / a:.1f}× |" if a > 0 else f"| {s} | {fmt(a)} | {fmt(b)} | — |")
    a, b = med([r["total"] for r in nlb_runs]), med([r["total"] for r in torch_runs])
    lines.append(f"| all stages | {fmt(a)} | {fmt(b)} | **{b / a:.1f}×** |")
    a, b = med([r["wall"] for r in nlb_runs]), med([r["wall"] for r in torch_runs])
    lines.append(f"| end to end (process wall) | {fmt(a)} | {fmt(b)} | **{b / a:.1f}×** |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(REPO, "models", "tiny-gpt2"))
    ap.add_argument("--nlb", default=DEFAULT_NLB)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--torch-threads", type=int, help="default: --threads")
    ap.add_argument("--repetitions", type=int, default=1)
    ap.add_argument("--context", type=int)
    ap.add_argument("--fit-positions", type=int)
    ap.add_argument("--label-positions", type=int)
    ap.add_argument("--calibration-positions", type=int)
    ap.add_argument("--budget-pct", type=float, action="append")
    ap.add_argument("--decode-steps", type=int, help="tokens decoded in the timing stage (both sides; default 64)")
    ap.add_argument("--eval-windows", type=int, help="only the first N eval windows (default: every one)")
    ap.add_argument("--cross-windows", type=int, help="only the first N cross windows (default: every one)")
    ap.add_argument("--torch-arg", action="append", help="passed on to torch_budget_pipeline.py (e.g. "
                    "--torch-arg=--prefix-reuse)")
    ap.add_argument("--work", default="/tmp/nlb-side-by-side")
    args = ap.parse_args()
    args.model = os.path.abspath(args.model)
    wait_for(args.nlb)
    os.makedirs(args.work, exist_ok=True)
    ctx = context_of(args.model, args.context)
    inputs, torch_inputs = prepare_inputs(args, args.work, ctx)
    nlb_runs, torch_runs = [], []
    for rep in range(args.repetitions):
        n = run_nlb(args, args.work, inputs, rep, args.threads)
        print(f"nlb   {rep}: {n['wall']:.1f} s wall, stages {n['total']:.1f} s, load {n['load_before']} -> "
              f"{n['load_after']}", file=sys.stderr, flush=True)
        nlb_runs.append(n)
        t = run_torch(args, args.work, torch_inputs, rep, args.torch_threads or args.threads, n["evaluations"])
        print(f"torch {rep}: {t['wall']:.1f} s wall, stages {t['total']:.1f} s, load {t['load_before']} -> "
              f"{t['load_after']}", file=sys.stderr, flush=True)
        torch_runs.append(t)
    summary = {"model": args.model, "threads": args.threads, "torch_threads": args.torch_threads or args.threads,
               "nlb": nlb_runs, "torch": torch_runs}
    with open(os.path.join(args.work, "side_by_side.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(summary, indent=1) + "\n")
    print(f"model {args.model}; threads nlb {args.threads}, PyTorch {args.torch_threads or args.threads}; "
          f"{args.repetitions} alternating repetition(s), medians")
    print()
    print(table(nlb_runs, torch_runs))
    print()
    for i, (n, t) in enumerate(zip(nlb_runs, torch_runs)):
        print(f"repetition {i}: load average nlb {n['load_before']} -> {n['load_after']}, "
              f"PyTorch {t['load_before']} -> {t['load_after']}; joint calibration passes nlb "
              f"{n['calibration_evaluations']}, PyTorch {t['calibration_evaluations']}; baseline PPL nlb "
              f"{n['baseline_ppl']:.4f}, PyTorch {t['baseline_ppl']:.4f}; joint eval Δ% nlb "
              + ", ".join(f"{v:+.2f}" for v in n["joint_eval_delta_pct"]) + ", PyTorch "
              + ", ".join(f"{v:+.2f}" for v in t["joint_eval_delta_pct"]))
    print()
    print("PyTorch sub-stages (s): " + ", ".join(f"{k} {statistics.median([r['substages'][k] for r in torch_runs]):.2f}"
                                                for k in torch_runs[0]["substages"]))
    print("nlb: " + nlb_runs[0]["command"])
    print("PyTorch: " + torch_runs[0]["command"])


if __name__ == "__main__":
    main()
