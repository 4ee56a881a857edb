#!/usr/bin/env bash
# The prepared check for a GPU machine (docs/cuda.md). Two steps, because the GPU machine has the
# CUDA toolkit but no Debian -dev packages and no network:
#
#   scripts/gpu-check.sh prepare   here (nvcc, Debian packages): builds the CUDA suites and
#                                  bench_cuda into build/gpu and gathers into build/gpu/bundle what
#                                  must travel: the binaries and the shared libraries the GPU image
#                                  lacks (Boost.Test, Google Benchmark, OpenBLAS, ...; not cuBLAS,
#                                  which the image has)
#   scripts/gpu-check.sh run       on the GPU machine, from the repository root, with
#                                  build/gpu/bundle carried: runs every suite (the model suite
#                                  checks the logits against the PyTorch fixtures), then
#                                  compute-sanitizer's memcheck on every op (test_cuda_ops) and on
#                                  the gated cases (one of them a whole-model forward), then the
#                                  benchmarks — bench_cuda and benchmarks/cuda/torch_cuda.py on the
#                                  same GPT-2-small directory — and writes every log to $OUT (or
#                                  build/gpu/out); exits non-zero on any failure, 77 when no usable
#                                  GPU is found.
#
# The suites find models/ and tests/fixtures under $NLB_SOURCE_DIR (set to the repository root
# here), since the binaries were built elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
suites=(test_cuda_ops test_cuda_mlp test_cuda_model)
programs=("${suites[@]}" bench_cuda)
bundle=build/gpu/bundle

case "${1:-}" in
prepare)
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  # No ISA flags: the GPU machine's CPU is not this one.
  cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=Release -DNLB_ENABLE_CUDA=ON -DNLB_BUILD_TESTS=ON \
    -DNLB_ISA_FLAGS= \
    -DNLB_BUILD_DOC_EXAMPLES=OFF -DNLB_BUILD_NUMERICS_TESTS=OFF -DNLB_BUILD_EXAMPLES=OFF \
    -DNLB_BUILD_TOOLS=OFF -DNLB_BUILD_BENCHMARKS=ON >/dev/null
  cmake --build build/gpu --target "${programs[@]}" -j "$(nproc)"
  rm -rf "$bundle" && mkdir -p "$bundle/lib"
  for suite in "${programs[@]}"; do
    binary=build/gpu/tests/$suite
    [ -f "$binary" ] || binary=build/gpu/benchmarks/$suite
    cp "$binary" "$bundle/"
    # Every shared library the binary loads, except glibc's own, the CUDA driver and cuBLAS (the
    # GPU image has its own, matching its driver).
    ldd "$binary" | awk '/=> \//{print $3}' |
      grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libcublas[^/]*)\.so' |
      xargs -r -I{} cp -L {} "$bundle/lib/"
  done
  du -sh "$bundle"
  ;;
run)
  out=${OUT:-build/gpu/out}
  mkdir -p "$out"
  export LD_LIBRARY_PATH="$PWD/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export NLB_SOURCE_DIR="$PWD"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt" || true
  status=0
  for suite in "${suites[@]}"; do
    set +e
    "$bundle/$suite" --log_level=message --report_level=short >"$out/$suite.log" 2>&1
    rc=$?
    set -e
    tail -n 5 "$out/$suite.log"
    echo "$suite: exit $rc"
    [ "$rc" -eq 77 ] && exit 77  # no usable GPU: nothing else can run
    [ "$rc" -ne 0 ] && status=1
    if command -v compute-sanitizer >/dev/null; then
      cases='gated_*'
      [ "$suite" = test_cuda_ops ] && cases='*'  # the ops suite is small: all of it
      set +e
      compute-sanitizer --tool memcheck --error-exitcode 3 "$bundle/$suite" \
        --run_test="$cases" --report_level=short >"$out/$suite.memcheck.log" 2>&1
      rc=$?
      set -e
      tail -n 3 "$out/$suite.memcheck.log"
      echo "$suite under compute-sanitizer memcheck: exit $rc"
      [ "$rc" -ne 0 ] && status=1
    fi
  done
  # The benchmarks (docs/benchmarks.md, "CUDA"): bench_cuda writes a GPT-2-small directory with
  # random weights to $TMPDIR, and PyTorch measures the same weights.
  export TMPDIR="$PWD/build/gpu/tmp"
  mkdir -p "$TMPDIR"
  set +e
  "$bundle/bench_cuda" --benchmark_out="$out/bench_cuda.json" --benchmark_out_format=json \
    >"$out/bench_cuda.log" 2>&1
  rc=$?
  set -e
  cat "$out/bench_cuda.log"
  echo "bench_cuda: exit $rc"
  [ "$rc" -ne 0 ] && status=1
  set +e
  python3 benchmarks/cuda/torch_cuda.py "$TMPDIR/nlb-bench-gpt2-small" >"$out/torch_cuda.json" \
    2>"$out/torch_cuda.log"
  rc=$?
  set -e
  cat "$out/torch_cuda.json" "$out/torch_cuda.log"
  echo "torch_cuda.py: exit $rc"
  [ "$rc" -ne 0 ] && status=1
  exit $status
  ;;
*)
  echo "usage: scripts/gpu-check.sh prepare|run" >&2
  exit 2
  ;;
esac
