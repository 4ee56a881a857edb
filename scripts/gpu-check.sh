#!/usr/bin/env bash
# The prepared check for a GPU machine (docs/cuda.md). Two steps, because the GPU machine has the
# CUDA toolkit but no Debian -dev packages and no network, and a session gets it for minutes:
#
#   scripts/gpu-check.sh prepare   here (nvcc, Debian packages; CI runs it, docs/cuda.md):
#                                  builds the CUDA suites and bench_cuda into build/gpu and
#                                  gathers into build/gpu/bundle what must travel: the stripped
#                                  binaries and the shared libraries the GPU image lacks
#                                  (Boost.Test, Google Benchmark, the GEMM provider, ...; not
#                                  cuBLAS or the driver, which the image has). Prints the bundle's
#                                  size and fails when it passes the 64 MiB a run may carry. The
#                                  host GEMM provider is OpenBLAS (NLB_GPU_GEMM_PROVIDER to change
#                                  it): the measured default carries four libraries (101 MiB);
#                                  over the limit it rebuilds with Eigen's.
#   scripts/gpu-check.sh run       on the GPU machine, from the repository root, with
#                                  build/gpu/bundle carried. Steps, each under a timeout and all
#                                  under one deadline (NLB_GPU_CHECK_SECONDS, default 540):
#                                    preflight      nvidia-smi, driver and runtime versions, ldd of
#                                                   every binary, PyTorch and compute-sanitizer
#                                                   versions (reported; never stops the rest)
#                                    suites         test_cuda_ops, _mlp, _model (the model suite
#                                                   checks the logits against the PyTorch fixtures)
#                                    benchmarks     bench_cuda, then benchmarks/cuda/torch_cuda.py
#                                                   on the same GPT-2-small directory
#                                    memcheck       compute-sanitizer on every op and on the gated
#                                                   cases of the MLP and model suites
#                                  Each step writes NAME.log and NAME.json (exit status, seconds,
#                                  limit) to $OUT (or build/gpu/out), and summary.json lists them
#                                  all; the benchmarks' figures are bench_cuda.result.json and
#                                  torch_cuda.result.json. Exits 1 on any failure, 77 when no usable GPU is found.
#
# Only our own binaries get the bundle's libraries (LD_LIBRARY_PATH set per command): PyTorch and
# compute-sanitizer load the image's. The suites find models/ and tests/fixtures under
# $NLB_SOURCE_DIR (the repository root), since the binaries were built elsewhere.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
suites=(test_cuda_ops test_cuda_mlp test_cuda_model)
programs=("${suites[@]}" bench_cuda)
bundle=build/gpu/bundle
carry_limit=$((64 * 1024 * 1024)) # what one device call may carry (the device tool's limit)

# Builds the programs with GEMM provider $1 into build/gpu and fills the bundle from them.
build_bundle() {
  local provider=$1
  # No ISA flags: the GPU machine's CPU is not this one. Device code for the lent GPUs only
  # (H100/H200: sm_90, with its PTX for a newer one): the project's default also embeds PTX for
  # compute_75, a second device pass of every .cu file (81 -> 61 CPU-s for test_cuda_ops.cu).
  cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=Release -DNLB_ENABLE_CUDA=ON -DNLB_BUILD_TESTS=ON \
    -DNLB_ISA_FLAGS= -DNLB_GEMM_PROVIDER="$provider" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DNLB_BUILD_DOC_EXAMPLES=OFF -DNLB_BUILD_NUMERICS_TESTS=OFF -DNLB_BUILD_EXAMPLES=OFF \
    -DNLB_BUILD_TOOLS=OFF -DNLB_BUILD_BENCHMARKS=ON >/dev/null || return 1
  # One target for the four programs: make builds them two at a time (four goals would be built
  # one after another, each a single translation unit on one core).
  cmake --build build/gpu --target nlb_gpu_check_programs -j "$(nproc)" || return 1
  rm -rf "$bundle" && mkdir -p "$bundle/lib" || return 1
  local program binary
  for program in "${programs[@]}"; do
    binary=build/gpu/tests/$program
    [ -f "$binary" ] || binary=build/gpu/benchmarks/$program
    cp "$binary" "$bundle/" || return 1
    # Every shared library the binary loads, except glibc's own, the CUDA driver and cuBLAS (the
    # GPU image has its own, matching its driver).
    ldd "$binary" | awk '/=> \//{print $3}' |
      grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libcublas[^/]*)\.so' |
      xargs -r -I{} cp -L {} "$bundle/lib/"
  done
  strip --strip-unneeded "$bundle"/* "$bundle"/lib/* 2>/dev/null
  {
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "gemm provider $provider"
    nvcc --version | tail -n 2
    (cd "$bundle" && find . -type f -printf '%s %p\n' | sort -k2)
  } >"$bundle/manifest.txt"
}

bundle_bytes() { du -sb "$bundle" | cut -f1; }

# Everything a first look at a new GPU machine wants, each line's failure reported in place.
# Exit status: the number of problems found (missing libraries, no GPU, no driver).
preflight() {
  local problems=0 program missing
  echo "== nvidia-smi"
  if nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv; then
    nvidia-smi | head -n 12
  else
    echo "nvidia-smi failed or is missing"
    problems=$((problems + 1))
  fi
  echo "== driver"
  cat /proc/driver/nvidia/version 2>/dev/null || echo "no /proc/driver/nvidia/version"
  echo "== toolkit on the image"
  (command -v nvcc >/dev/null && nvcc --version | tail -n 2) || echo "no nvcc on PATH"
  echo "== bundle"
  cat "$bundle/manifest.txt" 2>/dev/null || echo "no $bundle/manifest.txt"
  for program in "${programs[@]}"; do
    echo "== ldd $program"
    if [ ! -x "$bundle/$program" ]; then
      echo "missing: $bundle/$program"
      problems=$((problems + 1))
      continue
    fi
    env LD_LIBRARY_PATH="$bundle_lib" ldd "$bundle/$program" | grep -E 'cu|not found|stdc\+\+'
    missing=$(env LD_LIBRARY_PATH="$bundle_lib" ldd "$bundle/$program" | grep -c 'not found')
    [ "$missing" -gt 0 ] && problems=$((problems + missing))
  done
  echo "== python"
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "transformers", transformers.__version__)' ||
    echo "PyTorch or transformers failed to import"
  echo "== compute-sanitizer"
  (command -v compute-sanitizer >/dev/null && compute-sanitizer --version | tail -n 1) ||
    echo "no compute-sanitizer on PATH"
  return "$problems"
}

# step NAME LIMIT COMMAND...: runs COMMAND under `timeout` (at most LIMIT seconds and never past
# the deadline), its output to $out/NAME.log; writes $out/NAME.json; sets step_status.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((deadline - $(date +%s)))
  if [ "$left" -lt 20 ]; then
    echo "$name: skipped, ${left} s left before the deadline"
    printf '{"step": "%s", "exit": null, "skipped": "deadline"}\n' "$name" >"$out/$name.json"
    step_status=124
    status=1
    return
  fi
  [ "$limit" -gt $((left - 10)) ] && limit=$((left - 10))
  local start end
  start=$(date +%s.%N)
  timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
  step_status=$?
  end=$(date +%s.%N)
  local seconds
  seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  local timed_out=false
  [ "$step_status" -eq 124 ] || [ "$step_status" -eq 137 ] && timed_out=true
  printf '{"step": "%s", "exit": %d, "seconds": %s, "limit_s": %d, "timed_out": %s}\n' \
    "$name" "$step_status" "$seconds" "$limit" "$timed_out" >"$out/$name.json"
  tail -n 5 "$out/$name.log"
  echo "$name: exit $step_status after $seconds s (limit $limit s)"
}

write_summary() {
  local first=1 f
  {
    echo "["
    for f in "${steps_run[@]}"; do
      [ -f "$out/$f.json" ] || continue
      [ $first -eq 1 ] || echo ","
      first=0
      tr -d '\n' <"$out/$f.json"
    done
    echo
    echo "]"
  } >"$out/summary.json"
}

case "${1:-}" in
prepare)
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  # OpenBLAS, not the build's default (measured): that one links oneDNN, LIBXSMM, BLIS and
  # OpenBLAS, a 101 MiB bundle, over the carry limit, so CI built the programs twice.
  provider=${NLB_GPU_GEMM_PROVIDER:-openblas}
  build_bundle "$provider" || exit 1
  bytes=$(bundle_bytes)
  echo "carry: $bundle, $bytes bytes ($((bytes / 1024 / 1024)) MiB), GEMM provider $provider"
  if [ "$bytes" -ge "$carry_limit" ] && [ "$provider" != eigen ]; then
    echo "over the 64 MiB carry limit: rebuilding with the Eigen provider"
    build_bundle eigen || exit 1
    bytes=$(bundle_bytes)
    echo "carry: $bundle, $bytes bytes ($((bytes / 1024 / 1024)) MiB), GEMM provider eigen"
  fi
  if [ "$bytes" -ge "$carry_limit" ]; then
    echo "gpu-check prepare: the bundle is over the 64 MiB carry limit" >&2
    exit 1
  fi
  ;;
run)
  out=${OUT:-build/gpu/out}
  mkdir -p "$out"
  deadline=$(($(date +%s) + ${NLB_GPU_CHECK_SECONDS:-540}))
  bundle_lib="$PWD/$bundle/lib"
  ours=(env "LD_LIBRARY_PATH=$bundle_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  export NLB_SOURCE_DIR="$PWD"
  export bundle bundle_lib
  export -f preflight
  programs_list="${programs[*]}"
  status=0
  steps_run=()

  steps_run+=(preflight)
  step preflight 60 bash -c "programs=($programs_list); preflight"
  [ "$step_status" -ne 0 ] && echo "preflight: $step_status problem(s), see $out/preflight.log"

  for suite in "${suites[@]}"; do
    steps_run+=("$suite")
    step "$suite" 180 "${ours[@]}" "$bundle/$suite" --log_level=message --report_level=short
    if [ "$step_status" -eq 77 ]; then # no usable GPU: nothing else can run
      write_summary
      exit 77
    fi
    [ "$step_status" -ne 0 ] && status=1
  done

  # The benchmarks (docs/benchmarks.md, "CUDA"): bench_cuda writes a GPT-2-small directory with
  # random weights to $TMPDIR, and PyTorch measures the same weights.
  tmp="$PWD/build/gpu/tmp"
  mkdir -p "$tmp"
  steps_run+=(bench_cuda)
  step bench_cuda 240 "${ours[@]}" TMPDIR="$tmp" "$bundle/bench_cuda" \
    --benchmark_out="$out/bench_cuda.result.json" --benchmark_out_format=json
  [ "$step_status" -ne 0 ] && status=1
  steps_run+=(torch_cuda)
  # shellcheck disable=SC2016 # the inner shell expands $1 and $2
  step torch_cuda 180 env TMPDIR="$tmp" bash -c \
    'python3 benchmarks/cuda/torch_cuda.py "$1" >"$2"' _ "$tmp/nlb-bench-gpt2-small" \
    "$out/torch_cuda.result.json"
  [ "$step_status" -ne 0 ] && status=1

  if command -v compute-sanitizer >/dev/null; then
    for suite in "${suites[@]}"; do
      cases='gated_*'
      [ "$suite" = test_cuda_ops ] && cases='*' # the ops suite is small: all of it
      steps_run+=("$suite.memcheck")
      # The sanitizer itself runs with the image's libraries; only the suite gets the bundle's.
      step "$suite.memcheck" 240 compute-sanitizer --tool memcheck --error-exitcode 3 \
        --target-processes all "${ours[@]}" "$bundle/$suite" --run_test="$cases" \
        --report_level=short
      [ "$step_status" -ne 0 ] && status=1
    done
  else
    echo "no compute-sanitizer on PATH: memcheck not run"
    status=1
  fi
  write_summary
  echo "summary: $out/summary.json"
  exit $status
  ;;
*)
  echo "usage: scripts/gpu-check.sh prepare|run" >&2
  exit 2
  ;;
esac
