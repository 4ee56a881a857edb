#!/usr/bin/env bash
# `nlb budget` (the default run: tiny-gpt2, the shipped texts) as 1 process with 1 GEMM thread,
# 2 MPI ranks with 1 thread each (gate features replicated, the default, and split), and 1
# process with 2 threads, interleaved, REPS times; prints
# the median wall time per stage (report.json "time_stages") of each configuration side by side
# and the speedups (docs/scaling.md). Wall-clock only: the stage times are the report's own.
#
#   benchmarks/mpi/budget_scaling.sh [NLB] [REPS]     (defaults: build/dev/tools/nlb/nlb, 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
nlb=$(realpath "${1:-build/dev/tools/nlb/nlb}")
reps=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
for rep in $(seq 1 "$reps"); do
  OPENBLAS_NUM_THREADS=1 "$nlb" budget --out "$work/one-$rep" >/dev/null 2>&1
  mpirun -n 2 --oversubscribe -x OPENBLAS_NUM_THREADS=1 "$nlb" budget --out "$work/ranks-$rep" \
    >/dev/null 2>&1
  mpirun -n 2 --oversubscribe -x OPENBLAS_NUM_THREADS=1 "$nlb" budget --gate-features split \
    --out "$work/split-$rep" >/dev/null 2>&1
  OPENBLAS_NUM_THREADS=2 "$nlb" budget --out "$work/threads-$rep" >/dev/null 2>&1
  echo "repetition $rep of $reps done" >&2
done
/usr/bin/python3 - "$work" "$reps" <<'PY'
import json, statistics, sys
work, reps = sys.argv[1], int(sys.argv[2])
def stages(kind):
    runs = [json.load(open(f"{work}/{kind}-{r}/report.json"))["time_stages"] for r in range(1, reps + 1)]
    return [(s["stage"], statistics.median(run[i]["seconds"] for run in runs)) for i, s in enumerate(runs[0])]
one, ranks, split, threads = stages("one"), stages("ranks"), stages("split"), stages("threads")
print("| stage | 1 rank, 1 thread (s) | 2 ranks, 1 thread each (s) | 2 ranks, gate features split (s) | 1 process, 2 threads (s) | 2 ranks / 1 rank | split / 1 rank | 2 threads / 1 thread |")
print("|---|---|---|---|---|---|---|---|")
for (name, a), (_, b), (_, d), (_, c) in zip(one, ranks, split, threads):
    print(f"| {name} | {a:.2f} | {b:.2f} | {d:.2f} | {c:.2f} | {a / b:.2f}× | {a / d:.2f}× | {a / c:.2f}× |")
ta, tb, td, tc = (sum(s for _, s in x) for x in (one, ranks, split, threads))
print(f"| all stages | {ta:.2f} | {tb:.2f} | {td:.2f} | {tc:.2f} | {ta / tb:.2f}× | {ta / td:.2f}× | {ta / tc:.2f}× |")
PY
