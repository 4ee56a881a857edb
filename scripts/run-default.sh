#!/usr/bin/env bash
# README command 1: install what is missing, build optimized, run the default job.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
nlb_ensure_packages
cmake --preset release >/dev/null
cmake --build --preset release --target example_mlp_budget -j "$(nlb_jobs)"
exec build/release/examples/example_mlp_budget "$@"
