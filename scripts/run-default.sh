#!/usr/bin/env bash
# README command 1: install what is missing, build optimized, run the default job: the MLP
# budget report (`nlb budget`, PAPERS §A) of the shipped tiny GPT-2 on the shipped texts.
# Extra arguments go to `nlb budget` (e.g. --out DIR, --model DIR). The report lands in
# budget-report/ (report.md, report.json, layers.csv, SVG plots).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
nlb_ensure_packages
cmake --preset release >/dev/null
cmake --build --preset release --target nlb -j "$(nlb_jobs)"
exec build/release/tools/nlb/nlb budget "$@"
