// Ridge surrogate fit (PAPERS.md §A1): streamed statistics + eigendecomposition, at the paper's
// size (N = 10,000 tokens, d_in = d_out = 1024, float activations in batches of 512 rows),
// stage by stage, plus the paper's SVD form in plain Eigen at a smaller size for comparison.
// One thread (Eigen without OpenMP). Run: build/benchmarks/bench_ridge
#include <benchmark/benchmark.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cstdint>
#include <random>

#include "nlb/mlp/ridge_surrogate.hpp"

namespace {

using nlb::Index;

// Deterministic float activations [rows, cols] ~ N(0, 1) + 0.5.
nlb::Activations<float> activations(Index rows, Index cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.5f, 1.0f);
  nlb::Activations<float> m(rows, cols);
  for (Index i = 0; i < m.size(); ++i)
    m.data()[i] = normal(rng);
  return m;
}

// Inputs and targets of one size, built once per size.
struct Data {
  nlb::Activations<float> x, y;
};

const Data& data_for(Index rows, Index d) {
  static Index cached_rows = -1;
  static Index cached_d = -1;
  static Data data;
  if (rows != cached_rows || d != cached_d) {
    data.x = activations(rows, d, 1);
    data.y = activations(rows, d, 2);
    cached_rows = rows;
    cached_d = d;
  }
  return data;
}

constexpr Index batch_rows = 512;

nlb::RidgeStats<> accumulate(const Data& data) {
  nlb::RidgeStats<> stats(data.x.cols(), data.y.cols());
  for (Index r = 0; r < data.x.rows(); r += batch_rows) {
    const Index b = std::min(batch_rows, data.x.rows() - r);
    stats.add(data.x.middleRows(r, b), data.y.middleRows(r, b));
  }
  return stats;
}

void set_counters(benchmark::State& state, Index rows) {
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kIsIterationInvariantRate);
}

// Stage 1: RidgeStats::add over N rows in batches of 512 (N d² + 2 N d² FLOPs).
void BM_RidgeAccumulate(benchmark::State& state) {
  const Index rows = state.range(0);
  const Data& data = data_for(rows, state.range(1));
  for (auto _ : state) {
    nlb::RidgeStats<> stats = accumulate(data);
    benchmark::DoNotOptimize(stats.cxx().data());
  }
  set_counters(state, rows);
}

// Stage 2: RidgeSurrogate::fit from accumulated statistics (eigendecomposition, O(d³)).
void BM_RidgeFit(benchmark::State& state) {
  const Data& data = data_for(state.range(0), state.range(1));
  const nlb::RidgeStats<> stats = accumulate(data);
  for (auto _ : state) {
    nlb::RidgeSurrogate<float> surrogate;
    benchmark::DoNotOptimize(surrogate.fit(stats, 0.01).r2);
  }
}

// Both stages: what fitting one layer's surrogate costs.
void BM_RidgeAccumulateAndFit(benchmark::State& state) {
  const Index rows = state.range(0);
  const Data& data = data_for(rows, state.range(1));
  for (auto _ : state) {
    const nlb::RidgeStats<> stats = accumulate(data);
    nlb::RidgeSurrogate<float> surrogate;
    benchmark::DoNotOptimize(surrogate.fit(stats, 0.01).r2);
  }
  set_counters(state, rows);
}

// The paper's closed form (thin SVD of the centered data, plain Eigen BDCSVD), all rows in
// memory: the comparison for the streamed path above at the same size.
void BM_RidgeFitSvd(benchmark::State& state) {
  const Index rows = state.range(0);
  const Data& data = data_for(rows, state.range(1));
  for (auto _ : state) {
    const nlb::RidgeSolution solution = nlb::fit_svd(data.x, data.y, 0.01);
    benchmark::DoNotOptimize(solution.weight.data());
  }
  set_counters(state, rows);
}

}  // namespace

BENCHMARK(BM_RidgeAccumulate)
    ->Args({10000, 1024})
    ->Unit(benchmark::kSecond)
    ->Iterations(3)
    ->UseRealTime();
BENCHMARK(BM_RidgeFit)->Args({10000, 1024})->Unit(benchmark::kSecond)->Iterations(3)->UseRealTime();
BENCHMARK(BM_RidgeAccumulateAndFit)
    ->Args({10000, 1024})
    ->Unit(benchmark::kSecond)
    ->Iterations(3)
    ->UseRealTime();
BENCHMARK(BM_RidgeAccumulateAndFit)
    ->Args({10000, 256})
    ->Unit(benchmark::kSecond)
    ->Iterations(3)
    ->UseRealTime();
BENCHMARK(BM_RidgeFitSvd)
    ->Args({10000, 256})
    ->Unit(benchmark::kSecond)
    ->Iterations(3)
    ->UseRealTime();

BENCHMARK_MAIN();
