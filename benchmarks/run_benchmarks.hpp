// BENCHMARK_MAIN()'s body as a function, for the benchmark programs whose main() reports or checks
// something first (bench_gemm: which library cblas_sgemm binds to; bench_cuda: a usable device).
#pragma once

#include <benchmark/benchmark.h>

namespace nlb::bench {

/// Runs the benchmarks the command line selects; 1 when it has arguments Google Benchmark does
/// not know.
inline int run_benchmarks(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace nlb::bench
