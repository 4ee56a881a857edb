// GEMM providers side by side in one run (nlb/ops/gemm.hpp), with the machine's measured FMA
// peak: every provider this build found, at the products of a GPT-2-small forward.
//
//   build/release/benchmarks/bench_gemm --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true          (one command line)
//
// BM_fma_peak: one core's float FMA throughput (independent accumulator chains of the widest
// xsimd batch this build targets): the limit a GEMM is held to. BM_gemm/<provider>: ops::gemm
// with that provider (measured: the per-product choice from the recorded sweeps); arguments
// {m, k, n, rhs transposed, threads}: [m, k] · [k, n] (transposed: the [n, k] matrix's
// transpose, as the tied unembedding is used). The GPT-2-small products at T = 128 and 1024 on
// one thread, then the MLP products of the d = 768 / 1024 / 2048 models (GPT-2 small, medium, a
// 1B Llama's width) at m = 4 … 1024 rows, NN ([m, d] · [d, 4d]) and NT ([m, d] · ([4d, d])ᵀ), on
// one and two threads. A product of one row never reaches a provider (ops::gemm's vector path),
// so m starts at 4. main() prints the CPU kind (nlb/core/cpu_kind.hpp) that
// benchmarks/gemm_measurements.py records the sweep under.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <cstdio>
#include <random>
#include <string>

#include "nlb/core/context.hpp"
#include "nlb/core/cpu_kind.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/core/xsimd.hpp"
#include "nlb/ops/gemm.hpp"
#include "random_matrix.hpp"
#include "run_benchmarks.hpp"

namespace {

using nlb::Index;
using Matrix = nlb::RowMatrix<float>;

using nlb::bench::random_matrix;

void BM_fma_peak(benchmark::State& state) {
  using Batch = xsimd::batch<float>;
  constexpr int chains = 16;  // more than FMA latency × ports, so throughput-bound
  Batch acc[chains];
  for (int c = 0; c < chains; ++c)
    acc[c] = Batch(1.0f + 1e-7f * static_cast<float>(c));
  const Batch a(0.999999f), b(1e-7f);
  constexpr std::int64_t steps = 1 << 16;
  for (auto _ : state) {
    // The chains stay in registers (no stores inside the loop); the results are used below,
    // and FMA is not reassociated without -ffast-math, so no step can be left out.
    for (std::int64_t i = 0; i < steps; ++i) {
      for (int c = 0; c < chains; ++c)
        acc[c] = xsimd::fma(acc[c], a, b);
    }
    for (int c = 0; c < chains; ++c)
      benchmark::DoNotOptimize(acc[c]);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(Batch::size) * chains * static_cast<double>(steps) * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate);
  state.counters["lanes"] = static_cast<double>(Batch::size);
}

template <class Provider>
void BM_gemm(benchmark::State& state) {
  const Index m = state.range(0), k = state.range(1), n = state.range(2);
  const bool transposed = state.range(3) != 0;
  const int threads = state.range(4) > 0 ? static_cast<int>(state.range(4)) : 1;
  using Backend = nlb::backend::simd<xsimd::default_arch, Provider>;
  const nlb::Context<Backend> ctx(threads);
  const Matrix a = random_matrix(m, k, 1.0f, 1);
  const Matrix b = transposed ? random_matrix(n, k, 1.0f, 2) : random_matrix(k, n, 1.0f, 2);
  Matrix c(m, n);
  nlb::GemmScratch<float> scratch;
  for (auto _ : state) {
    if (transposed)
      nlb::ops::gemm(ctx, a, b.transpose(), c, scratch);
    else
      nlb::ops::gemm(ctx, a, b, c, scratch);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(m) * double(k) * double(n) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// GPT-2 small (d 768, MLP 3072, vocabulary 50 257) at T = 128 and 1024: QKV, attention output,
// MLP up and down projections; the unembedding at T = 128.
void gpt2_shapes(benchmark::internal::Benchmark* b) {
  for (const Index t : {128, 1024}) {
    b->Args({t, 768, 2304, 0, 1});
    b->Args({t, 768, 768, 0, 1});
    b->Args({t, 768, 3072, 0, 1});
    b->Args({t, 3072, 768, 0, 1});
  }
  b->Args({128, 768, 50257, 1, 1});
  b->ArgNames({"m", "k", "n", "bT", "threads"});
  b->Unit(benchmark::kMicrosecond);
  b->UseRealTime();
}

// The MLP's up projection at three widths, few rows to many, NN and NT, one and two threads.
void width_sweep(benchmark::internal::Benchmark* b) {
  for (const Index d : {768, 1024, 2048})
    for (const Index t : {4, 16, 64, 128, 1024})
      for (const Index transposed : {0, 1})
        for (const Index threads : {1, 2})
          b->Args({t, d, 4 * d, transposed, threads});
  b->ArgNames({"m", "k", "n", "bT", "threads"});
  b->Unit(benchmark::kMicrosecond);
  b->UseRealTime();
}

BENCHMARK(BM_fma_peak);

// BM_gemm/<provider> and BM_sweep/<provider> for each provider of this build.
template <class Provider>
void register_provider() {
  if constexpr (nlb::gemm_provider::is_available<Provider>) {
    const std::string name = nlb::gemm_provider::name<Provider>();
    benchmark::RegisterBenchmark(("BM_gemm/" + name).c_str(), BM_gemm<Provider>)
        ->Apply(gpt2_shapes);
    benchmark::RegisterBenchmark(("BM_sweep/" + name).c_str(), BM_gemm<Provider>)
        ->Apply(width_sweep);
  }
}

}  // namespace

int main(int argc, char** argv) {
#if defined(NLB_HAVE_OPENBLAS)
  // With OpenBLAS and BLIS in one program both export cblas_sgemm; the OpenBLAS provider calls
  // that name, so say which library it binds to (BLIS is called by its own bli_ names).
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cblas_sgemm), &info) != 0 && info.dli_fname != nullptr)
    std::printf("cblas_sgemm comes from %s\n", info.dli_fname);
#endif
  std::printf("CPU kind: %s\n", nlb::describe(nlb::this_cpu_kind()).c_str());
  register_provider<nlb::gemm_provider::eigen>();
  nlb::gemm_provider::for_each_library_provider(
      [](auto provider) { register_provider<decltype(provider)>(); });
  register_provider<nlb::gemm_provider::measured>();
  return nlb::bench::run_benchmarks(argc, argv);
}
