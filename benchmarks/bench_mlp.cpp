// Dense Mlp vs GatedMLP vs the bare provider GEMMs of the same shapes (and of the gated layer's
// blocks), side by side in one run.
//
//   build/release/benchmarks/bench_mlp --benchmark_format=json > mlp.json
//   /usr/bin/python3 benchmarks/report.py mlp.json     # tables with measured/predicted speedups
//
// Arguments: {d, T} for dense and bare GEMM, {d, T, 100·f} for gated. One thread.
//
// The ...ProviderOnly variants run the same with a context whose small_gemm is off
// (Context::set_small_gemm(false), bench::provider_only): every product in the BLAS provider, none
// in kernels::small_gemm (the row kernel ops::gemm uses for 2 … 64 rows where the SIMD width has
// it), so that both are measured side by side. BM_ReadBandwidth is the one-thread read bandwidth of
// this machine, the bound on streaming the weights.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>

#include "nlb/analysis/flops.hpp"
#include "nlb/core.hpp"
#include "nlb/mlp.hpp"
#include "provider_only.hpp"
#include "random_matrix.hpp"
#include "read_bandwidth.hpp"

namespace {

using nlb::Index;
using Backend = nlb::backend::cpu;
using Context = nlb::Context<Backend>;
using Matrix = nlb::Activations<float>;
using MlpT = nlb::Mlp<float>;
using SurrogateT = nlb::RidgeSurrogate<float>;
using GateT = nlb::HyperplaneGate<float>;

using nlb::bench::random_matrix;

MlpT random_mlp(Index d) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  return MlpT(random_matrix(d, 4 * d, scale, 1), random_matrix(1, 4 * d, 0.1f, 2),
              random_matrix(4 * d, d, scale / 2, 3), random_matrix(1, d, 0.1f, 4));
}

void set_counters(benchmark::State& state, Index d, Index tokens, double flops_per_token) {
  state.SetItemsProcessed(state.iterations() * tokens);  // items/s = tokens/s
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_token * static_cast<double>(tokens) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["d"] = static_cast<double>(d);
  state.counters["T"] = static_cast<double>(tokens);
}

void BM_DenseMlp(benchmark::State& state) {
  Context ctx;
  const Index d = state.range(0), tokens = state.range(1);
  const MlpT mlp = random_mlp(d);
  const Matrix X = random_matrix(tokens, d, 1.0f, 5);
  Matrix Y(tokens, d);
  MlpT::Workspace ws;
  for (auto _ : state) {
    mlp.forward(ctx, X, Y, ws);
    benchmark::DoNotOptimize(Y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, d, tokens, nlb::flops::dense_mlp_per_token(double(d), 4.0 * double(d)));
}

// The gated MLP in `ctx` (one thread; small_gemm on, or off for the ProviderOnly run).
void gated_mlp(benchmark::State& state, Context& ctx) {
  const Index d = state.range(0), tokens = state.range(1);
  const double fraction = static_cast<double>(state.range(2)) / 100.0;
  const Matrix X = random_matrix(tokens, d, 1.0f, 5);
  GateT gate(nlb::ColVector<float>(random_matrix(d, 1, 1.0f, 6).col(0)), 0.0f);
  gate.calibrate_linear_fraction(X, fraction);
  const nlb::GatedMLP<MlpT, SurrogateT, GateT> gated(
      random_mlp(d), SurrogateT(random_matrix(d, d, 0.03f, 7), random_matrix(1, d, 0.1f, 8)), gate);
  Matrix Y(tokens, d);
  decltype(gated)::Workspace ws;
  nlb::RouteCounts counts;
  for (auto _ : state) {
    counts = gated.forward(ctx, X, Y, ws);
    benchmark::DoNotOptimize(Y.data());
    benchmark::ClobberMemory();
  }
  const double f = counts.linear_fraction();
  set_counters(state, d, tokens, nlb::flops::gated_mlp_per_token(double(d), 4.0 * double(d), f));
  // The weights one forward reads: the MLP's two matrices when a row takes the full path, the
  // surrogate's when one takes the linear path (biases and the gate are negligible).
  const double weight_bytes =
      sizeof(float) * ((counts.full > 0 ? 8.0 * double(d) * double(d) : 0.0) +
                       (counts.linear > 0 ? double(d) * double(d) : 0.0));
  state.counters["weight_GBps"] =
      benchmark::Counter(weight_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["linear_fraction"] = f;
  state.counters["predicted_speedup"] = nlb::flops::predicted_mlp_speedup(f);
}

// The two GEMMs of the MLP and nothing else, by the backend's GEMM provider (the one Mlp
// uses): the ceiling the Mlp is measured against. Also run at the row counts the gated layer's
// full path gets (T (1 - f)), so that its small-block GEMM rate is measured in the same run.
void bare_gemm(benchmark::State& state, const Context& ctx) {
  const Index d = state.range(0), tokens = state.range(1);
  const MlpT mlp = random_mlp(d);
  const Matrix X = random_matrix(tokens, d, 1.0f, 5);
  Matrix H(tokens, 4 * d), Y(tokens, d);
  nlb::GemmScratch<float> scratch;
  for (auto _ : state) {
    nlb::ops::gemm(ctx, X, mlp.w_fc(), H, scratch);
    nlb::ops::gemm(ctx, H, mlp.w_proj(), Y, scratch);
    benchmark::DoNotOptimize(Y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, d, tokens, nlb::flops::dense_mlp_per_token(double(d), 4.0 * double(d)));
}

// The surrogate's one [T, d] x [d, d] GEMM by the provider, at the row counts the gated layer's
// linear path gets (T f).
void bare_surrogate_gemm(benchmark::State& state, const Context& ctx) {
  const Index d = state.range(0), tokens = state.range(1);
  const Matrix W = random_matrix(d, d, 0.03f, 7);
  const Matrix X = random_matrix(tokens, d, 1.0f, 5);
  Matrix Y(tokens, d);
  nlb::GemmScratch<float> scratch;
  for (auto _ : state) {
    nlb::ops::gemm(ctx, X, W, Y, scratch);
    benchmark::DoNotOptimize(Y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, d, tokens, 2.0 * double(d) * double(d));
}

void BM_BareGemm(benchmark::State& state) {
  bare_gemm(state, Context());
}

void BM_BareSurrogateGemm(benchmark::State& state) {
  bare_surrogate_gemm(state, Context());
}

void BM_GatedMlp(benchmark::State& state) {
  Context ctx;
  gated_mlp(state, ctx);
}

void BM_BareGemmProviderOnly(benchmark::State& state) {
  bare_gemm(state, nlb::bench::provider_only(Context()));
}

void BM_BareSurrogateGemmProviderOnly(benchmark::State& state) {
  bare_surrogate_gemm(state, nlb::bench::provider_only(Context()));
}

void BM_GatedMlpProviderOnly(benchmark::State& state) {
  Context ctx = nlb::bench::provider_only(Context());
  gated_mlp(state, ctx);
}

// Sums a 256 MiB float array (far beyond the caches) as 16 side-by-side streams: the rate at
// which one thread reads memory.
void BM_ReadBandwidth(benchmark::State& state) {
  static const nlb::AlignedBuffer<float> buffer = [] {
    nlb::AlignedBuffer<float> b(std::size_t{1} << 26);
    std::fill(b.data(), b.data() + b.size(), 1.0f);  // touched: no page faults timed
    return b;
  }();
  for (auto _ : state)
    benchmark::DoNotOptimize(nlb::bench::sum_streams(buffer.data(), buffer.size()));
  state.SetBytesProcessed(state.iterations() *
                          static_cast<std::int64_t>(buffer.size() * sizeof(float)));
}

void dense_args(benchmark::internal::Benchmark* b) {
  for (int d : {768, 1024}) {
    for (int t : {64, 512})
      b->Args({d, t});
  }
}

// Row counts of the gated layer's two blocks at T = 64 and f = 0.25, 0.5, 0.75 (the bare MLP
// GEMMs at 64 rows are dense_args' already).
void block_args(benchmark::internal::Benchmark* b) {
  for (int d : {768, 1024}) {
    for (int t : {16, 32, 48})
      b->Args({d, t});
  }
}

// The surrogate's GEMM at the block row counts and at the whole T = 64 (f = 1).
void surrogate_args(benchmark::internal::Benchmark* b) {
  block_args(b);
  for (int d : {768, 1024})
    b->Args({d, 64});
}

// The small-batch case only (T = 64), for the side-by-side ProviderOnly runs.
void gated_small_batch_args(benchmark::internal::Benchmark* b) {
  for (int d : {768, 1024}) {
    for (int f : {25, 50, 75})
      b->Args({d, 64, f});
  }
}

void gated_args(benchmark::internal::Benchmark* b) {
  for (int d : {768, 1024}) {
    for (int t : {64, 512}) {
      for (int f : {0, 25, 50, 75, 100})
        b->Args({d, t, f});
    }
  }
}

}  // namespace

BENCHMARK(BM_BareGemm)->Apply(dense_args)->Apply(block_args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BareSurrogateGemm)->Apply(surrogate_args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DenseMlp)->Apply(dense_args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GatedMlp)->Apply(gated_args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BareGemmProviderOnly)->Apply(block_args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BareSurrogateGemmProviderOnly)->Apply(surrogate_args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GatedMlpProviderOnly)->Apply(gated_small_batch_args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadBandwidth)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
