#!/usr/bin/env python3
"""Records one CPU kind's GEMM sweep in the library: rewrites that kind's block of
include/nlb/ops/detail/gemm_measurements.hpp, which gemm_provider::measured reads.

Usage (one of the two inputs):
  /usr/bin/python3 benchmarks/gemm_measurements.py --cpu "amd 26 avx512" \
      --source "2 vCPUs of an AMD EPYC (Zen 5), 2026-12-07" RESULT.json
  /usr/bin/python3 benchmarks/gemm_measurements.py --cpu "intel 6 avx512" --source "..." \
      --markdown docs/benchmarks.md --heading "GEMM providers at the model's products" \
      [--omit openblas]

RESULT.json: bench_gemm's JSON output (--benchmark_out) of a run with
--benchmark_filter='BM_fma_peak|BM_sweep': its BM_sweep/<provider>/m:M/k:D/n:4D/bT:B/threads:P
rows. --markdown reads instead the table under the heading (as docs/benchmarks.md records such a
run: | d | m | layout | threads | eigen | openblas | blis | onednn | libxsmm | ... |); --omit
leaves a provider's column out (recorded as not measured). --cpu is the vendor (intel, amd), the
CPUID family and the vector ISA (avx512, avx2), as nlb::this_cpu_kind() reports them
(`nlb_cpu_kind` prints it). Other kinds' blocks are kept as they are.
"""
import argparse
import json
import os
import re
import sys

PROVIDERS = ["eigen", "openblas", "blis", "onednn", "libxsmm"]  # MeasuredProvider's order
HEADER = "include/nlb/ops/detail/gemm_measurements.hpp"
BEGIN = "  // BEGIN "
END = "  // END "


def from_json(path):
    with open(path) as f:
        data = json.load(f)
    rows = {}
    pattern = re.compile(r"BM_sweep/(\w+)/m:(\d+)/k:(\d+)/n:(\d+)/bT:(\d)/threads:(\d+)")
    for b in data["benchmarks"]:
        if b.get("aggregate_name") not in (None, "median"):
            continue
        match = pattern.match(b.get("run_name", b["name"]))
        if not match:
            continue
        provider, m, k, n, transposed, threads = match.groups()
        if int(n) != 4 * int(k):
            sys.exit(f"{path}: {b['name']}: expected n = 4k (the sweep's MLP product)")
        key = (int(threads), transposed == "1", int(k), int(m))
        rows.setdefault(key, {})[provider] = b["GFLOP/s"]
    return rows


def from_markdown(path, heading):
    lines = open(path).read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("#") and heading in line), None)
    if start is None:
        sys.exit(f"{path}: no heading containing {heading!r}")
    rows = {}
    header = None
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if header is not None and rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if set(cells[0]) <= set("-: "):
            continue
        record = dict(zip(header, cells))
        key = (int(record["threads"]), record["layout"] == "NT", int(record["d"]), int(record["m"]))
        rows[key] = {p: float(record[p]) for p in PROVIDERS if p in record and record[p]}
    if not rows:
        sys.exit(f"{path}: no table rows under {heading!r}")
    return rows


def block(cpu, source, rows, omit):
    vendor, family, isa = cpu.split()
    out = [f"{BEGIN}{cpu}: {source}"]
    for (threads, transposed, width, m), gflops in sorted(rows.items()):
        values = ", ".join(
            "0" if p in omit or p not in gflops else f"{gflops[p]:.0f}" for p in PROVIDERS)
        out.append(f"  {{CpuVendor::{vendor}, {family}, CpuVectorIsa::{isa}, {threads}, "
                   f"{'true' if transposed else 'false'}, {width}, {m}, {{{values}}}}},")
    out.append(f"{END}{cpu}")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--markdown")
    parser.add_argument("--heading")
    parser.add_argument("--omit", action="append", default=[])
    parser.add_argument("--header", default=HEADER)
    parser.add_argument("result", nargs="?")
    args = parser.parse_args()
    if len(args.cpu.split()) != 3:
        sys.exit("--cpu: vendor family isa, e.g. 'amd 26 avx512'")
    rows = from_markdown(args.markdown, args.heading) if args.markdown else from_json(args.result)
    text = open(args.header).read().splitlines()
    first = next(i for i, line in enumerate(text) if line.startswith("inline constexpr GemmMeasurement"))
    last = next(i for i in range(first, len(text)) if text[i] == "};")
    blocks, current = {}, None
    for line in text[first + 1:last]:
        if line.startswith(BEGIN):
            current = line[len(BEGIN):].split(":")[0]
            blocks[current] = []
        if current is not None:
            blocks[current].append(line)
        if line.startswith(END):
            current = None
    blocks[args.cpu] = block(args.cpu, args.source, rows, set(args.omit))
    body = [line for key in sorted(blocks) for line in blocks[key]]
    text[first + 1:last] = body
    with open(args.header + ".tmp", "w") as f:
        f.write("\n".join(text) + "\n")
    os.replace(args.header + ".tmp", args.header)
    print(f"{args.header}: {len(rows)} rows for {args.cpu}")


if __name__ == "__main__":
    main()
