#!/usr/bin/env python3
"""Turns Google Benchmark JSON output into the Markdown tables of docs/benchmarks.md.

Usage: /usr/bin/python3 benchmarks/report.py RESULT.json [...]

Uses the median aggregate when the run had --benchmark_repetitions, else the single run.
For bench_mlp it adds the comparisons the issue asks for: Mlp GFLOP/s against the bare
GEMMs, the measured GatedMLP speedup against the FLOP-predicted 16 / (16(1-f) + 2f), and, where
the run has the bare GEMMs at the gated layer's block sizes, against the speedup those GEMM
rates allow. Where the run has the ProviderOnly variants (kernels::small_gemm switched off), a
table sets the two side by side, with the weights each forward streams against the measured
read bandwidth.
"""
import json
import sys


def load(paths):
    rows = {}
    context = None
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        context = context or data.get("context", {})
        for b in data["benchmarks"]:
            aggregate = b.get("aggregate_name")
            if aggregate not in (None, "median"):
                continue
            name = b.get("run_name", b["name"])
            if aggregate is None and name in rows:
                continue  # keep the median when both exist
            rows[name] = b
    return context, rows


def seconds(b):
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
    return b["real_time"] * scale


def by_args(items):
    """Sorts (name, row) pairs by their numeric arguments: d, then T, then f."""
    def key(item):
        return [int(a) if a.isdigit() else 0 for a in item[0].split("/")[1:]]
    return sorted(items, key=key)


def family(rows, name):
    """The rows of benchmark `name`, one per argument list ("NAME/d/T[/f]")."""
    return {n: b for n, b in rows.items() if n.startswith(name + "/")}


def gated_rows(family_rows, dense):
    """(d, T, f, row, the dense Mlp's row at that d and T or None) for the rows of a
    gated-MLP benchmark family, in argument order."""
    for name, b in by_args(family_rows.items()):
        d, t, f = name.split("/")[1:4]
        yield d, t, f, b, dense.get(f"BM_DenseMlp/{d}/{t}")


def mlp_tables(rows):
    out = []
    dense = family(rows, "BM_DenseMlp")
    bare = family(rows, "BM_BareGemm")
    gated = family(rows, "BM_GatedMlp")
    if dense and bare:
        out.append("| d | T | bare GEMMs GFLOP/s | Mlp GFLOP/s | Mlp / bare |")
        out.append("|---|---|---|---|---|")
        for name, b in by_args(dense.items()):
            args = name.split("/", 1)[1]
            g = bare.get("BM_BareGemm/" + args)
            if g is None:
                continue
            d, t = args.split("/")[:2]
            out.append(f"| {d} | {t} | {g['GFLOP/s']:.1f} | {b['GFLOP/s']:.1f} | "
                       f"{100 * b['GFLOP/s'] / g['GFLOP/s']:.1f}% |")
        out.append("")
    if dense and gated:
        out.append("| d | T | f | gated tokens/s | measured speedup | predicted | measured / predicted |")
        out.append("|---|---|---|---|---|---|---|")
        for d, t, f, b, base in gated_rows(gated, dense):
            if base is None:
                continue
            measured = seconds(base) / seconds(b)
            predicted = b["predicted_speedup"]
            out.append(f"| {d} | {t} | {b['linear_fraction']:.2f} | {b['items_per_second']:.0f} | "
                       f"{measured:.2f}x | {predicted:.2f}x | {100 * measured / predicted:.0f}% |")
        out.append("")
    surrogate = family(rows, "BM_BareSurrogateGemm")
    if dense and gated and bare and surrogate:
        # What the provider's GEMM rates at the two blocks' row counts allow: the dense Mlp's
        # time over (bare MLP GEMMs at T(1-f) rows + the surrogate's GEMM at T f rows).
        out.append("| d | T | f | full-path rows | bare GEMMs there GFLOP/s | allowed by GEMM rates | "
                   "measured speedup | measured / allowed |")
        out.append("|---|---|---|---|---|---|---|---|")
        for d, t, f, b, base in gated_rows(gated, dense):
            linear_rows = round(b["linear_fraction"] * int(t))
            full_rows = int(t) - linear_rows
            full = bare.get(f"BM_BareGemm/{d}/{full_rows}") if full_rows else None
            lin = surrogate.get(f"BM_BareSurrogateGemm/{d}/{linear_rows}") if linear_rows else None
            if base is None or (full_rows and full is None) or (linear_rows and lin is None):
                continue
            floor = (seconds(full) if full else 0.0) + (seconds(lin) if lin else 0.0)
            allowed = seconds(base) / floor
            measured = seconds(base) / seconds(b)
            rate = f"{full['GFLOP/s']:.1f}" if full else "-"
            out.append(f"| {d} | {t} | {b['linear_fraction']:.2f} | {full_rows} | {rate} | "
                       f"{allowed:.2f}x | {measured:.2f}x | {100 * measured / allowed:.0f}% |")
        out.append("")
    provider_only = family(rows, "BM_GatedMlpProviderOnly")
    bandwidth = rows.get("BM_ReadBandwidth")
    if dense and gated and provider_only:
        read = bandwidth["bytes_per_second"] / 1e9 if bandwidth else None
        out.append(f"Read bandwidth, one thread: {read:.1f} GB/s" if read else
                   "Read bandwidth: not in this run")
        out.append("")
        out.append("| d | T | f | provider only: measured / predicted | with small_gemm: "
                   "measured / predicted | weights streamed GB/s | % of read bandwidth |")
        out.append("|---|---|---|---|---|---|---|")
        for d, t, f, b, base in gated_rows(provider_only, dense):
            with_kernel = gated.get(f"BM_GatedMlp/{d}/{t}/{f}")
            if base is None or with_kernel is None:
                continue
            predicted = b["predicted_speedup"]
            before = seconds(base) / seconds(b) / predicted
            after = seconds(base) / seconds(with_kernel) / predicted
            streamed = with_kernel["weight_GBps"]
            share = f"{100 * streamed / read:.0f}%" if read else "-"
            out.append(f"| {d} | {t} | {b['linear_fraction']:.2f} | {100 * before:.0f}% | "
                       f"{100 * after:.0f}% | {streamed:.1f} | {share} |")
        out.append("")
    return out


def generic_table(rows):
    out = ["| benchmark | time | counters |", "|---|---|---|"]
    for name, b in rows.items():
        counters = ", ".join(
            f"{k} {v:.4g}" for k, v in b.items()
            if isinstance(v, (int, float)) and k not in (
                "real_time", "cpu_time", "iterations", "repetitions", "repetition_index",
                "threads", "family_index", "per_family_instance_index"))
        out.append(f"| {name} | {b['real_time']:.4g} {b.get('time_unit', 'ns')} | {counters} |")
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    context, rows = load(sys.argv[1:])
    print(f"Machine: {context.get('num_cpus')} CPUs at {context.get('mhz_per_cpu')} MHz, "
          f"date {context.get('date')}, library build {context.get('library_build_type')}")
    print()
    lines = mlp_tables(rows)
    print("\n".join(lines if lines else generic_table(rows)))


if __name__ == "__main__":
    main()
