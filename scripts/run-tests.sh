#!/usr/bin/env bash
# README command 2: install what is missing, build everything with tests, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
nlb_ensure_packages
cmake --preset dev
cmake --build --preset dev -j "$(nlb_jobs)"
ctest --preset dev
