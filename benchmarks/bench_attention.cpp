// Attention components (issue #5 §6), float, one thread.
//
// Scores (the T x T matrix every attention writes):
//   BM_dense_scores/T          S = q kᵀ for already-projected q, k [T, 64] (one dense head,
//                              d_h = 64): one [T, 64] x [64, T] GEMM, all T² entries written
//                              (what DenseAttention does before its causal softmax). The Q/K
//                              projections are NOT included.
//   BM_routing_scores<R>/T     SkewSymmetricRouting<float, R>::scores(X, out, causal = true) on
//                              X [T, 768]: INCLUDES the projections X U, X V (2·T·768·R FLOPs)
//                              and computes the causal entries j <= i only (T(T+1)/2 written).
//   BM_routing_scores_full<R>/T  the same with causal = false: the strict lower triangle by GEMM,
//                              then the upper triangle written as its negation (T² written).
//   BM_routing_from_features<R>/T  the causal score product alone, on precomputed features
//                              q, k [T, R] (detail::causal_product, the projections excluded:
//                              the counterpart of BM_dense_scores).
//   BM_write_bound/T           std::fill of T² floats: the memory bound of writing the full
//                              score matrix once (half of it for the causal form).
// Counter bytes_per_second = score bytes written per second (4 per entry written).
//
// One attention head, d_h = 64, q, k, v [T, 64] given (projections excluded):
//   BM_softmax_attention/T     P = softmax_causal((q / 8) kᵀ), out = P v (DenseAttention's
//                              per-head path: full [T, T] GEMM, row softmax with causal limit,
//                              [T, T] x [T, 64] GEMM).
//   BM_tiled_attention/T/Q/K   the same head as ops::detail::tiled_causal_attention with query
//                              tiles of Q rows and key tiles of K rows (what every attention
//                              component runs): only the causal scores, no [T, T] matrix.
//   BM_linear_attention/T      linear_attention_head: φ = elu + 1 on q, k, chunked prefix sums.
//
// The whole attention block of GPT-2 small (d = 768, 12 heads), X [T, 768] given:
//   BM_attention_block/T       DenseAttention<float>::forward: QKV projection, causal softmax
//                              attention per head, output projection (backend::cpu, so the
//                              build's default GEMM provider, a context of one thread). The PyTorch
//                              side is benchmarks/torch_attention.py (the same block, written the
//                              usual way: [T, T] scores, mask, softmax, P v).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include "nlb/attention/dense_attention.hpp"
#include "nlb/attention/linear_attention.hpp"
#include "nlb/attention/skew_routing.hpp"
#include "nlb/core.hpp"
#include "nlb/kernels/softmax.hpp"
#include "nlb/ops/detail/tiled_attention.hpp"
#include "provider_only.hpp"
#include "random_matrix.hpp"

namespace {

using nlb::Index;
using nlb::RowMatrix;
using Context = nlb::Context<nlb::backend::cpu>;

constexpr Index kWidth = 768;  // d of the low-rank routing input (GPT-2 small)
constexpr Index kHead = 64;    // d_h of the dense head

using nlb::bench::random_matrix;

void set_bytes(benchmark::State& state, double entries) {
  state.counters["bytes_per_second"] =
      benchmark::Counter(entries * sizeof(float), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_write_bound(benchmark::State& state) {
  const Index t = state.range(0);
  RowMatrix<float> out = RowMatrix<float>::Zero(t, t);  // touched: no page faults timed
  float value = 0.0f;
  for (auto _ : state) {
    std::fill(out.data(), out.data() + out.size(), value);
    value += 1.0f;
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, static_cast<double>(t) * static_cast<double>(t));
}

void BM_dense_scores(benchmark::State& state) {
  const Index t = state.range(0);
  const RowMatrix<float> q = random_matrix(t, kHead, 1.0f, 1), k = random_matrix(t, kHead, 1.0f, 2);
  RowMatrix<float> out = RowMatrix<float>::Zero(t, t);  // touched: no page faults timed
  for (auto _ : state) {
    out.noalias() = q * k.transpose();
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, static_cast<double>(t) * static_cast<double>(t));
}

template <int Rank>
void routing_scores(benchmark::State& state, bool causal) {
  const Index t = state.range(0);
  const nlb::SkewSymmetricRouting<float, Rank> routing(random_matrix(kWidth, Rank / 2, 0.05f, 3),
                                                       random_matrix(kWidth, Rank / 2, 0.05f, 4));
  const RowMatrix<float> x = random_matrix(t, kWidth, 1.0f, 5);
  RowMatrix<float> out = RowMatrix<float>::Zero(t, t);  // touched: no page faults timed
  for (auto _ : state) {
    routing.scores(x, out, causal);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double td = static_cast<double>(t);
  set_bytes(state, causal ? td * (td + 1) / 2 : td * td);
}

template <int Rank>
void BM_routing_scores(benchmark::State& state) {
  routing_scores<Rank>(state, true);
}

template <int Rank>
void BM_routing_scores_full(benchmark::State& state) {
  routing_scores<Rank>(state, false);
}

template <int Rank>
void BM_routing_from_features(benchmark::State& state) {
  const Index t = state.range(0);
  const RowMatrix<float> q = random_matrix(t, Rank, 1.0f, 9), k = random_matrix(t, Rank, 1.0f, 10);
  RowMatrix<float> out = RowMatrix<float>::Zero(t, t);
  for (auto _ : state) {
    nlb::detail::causal_product<float>(q, k, out, 0);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double td = static_cast<double>(t);
  set_bytes(state, td * (td + 1) / 2);
}

void BM_softmax_attention(benchmark::State& state) {
  const Index t = state.range(0);
  const RowMatrix<float> q = random_matrix(t, kHead, 1.0f, 6), k = random_matrix(t, kHead, 1.0f, 7),
                         v = random_matrix(t, kHead, 1.0f, 8);
  RowMatrix<float> scores = RowMatrix<float>::Zero(t, t), out(t, kHead), scaled(t, kHead);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHead));
  for (auto _ : state) {
    // The scale goes on q: (q k^T) * scale made Eigen evaluate the product into a fresh [T, T]
    // temporary first (64 MiB of page faults per call at T = 4096).
    scaled.noalias() = q * scale;
    scores.noalias() = scaled * k.transpose();
    for (Index i = 0; i < t; ++i)
      nlb::kernels::softmax(nlb::backend::cpu{}, scores.row(i).data(), t, i + 1);
    out.noalias() = scores * v;
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, static_cast<double>(t) * static_cast<double>(t));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * t);
}

void BM_tiled_attention(benchmark::State& state) {
  const Index t = state.range(0);
  const Context ctx;
  const nlb::ops::detail::AttentionTiles tiles{state.range(1), state.range(2)};
  const RowMatrix<float> q = random_matrix(t, kHead, 1.0f, 6), k = random_matrix(t, kHead, 1.0f, 7),
                         v = random_matrix(t, kHead, 1.0f, 8);
  RowMatrix<float> out(t, kHead);
  nlb::ops::detail::TiledAttentionScratch<float> scratch;
  nlb::GemmScratch<float> gemm;
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHead));
  for (auto _ : state) {
    nlb::ops::detail::tiled_causal_attention<nlb::backend::cpu, float>(ctx, q, k, v, scale, 0, out,
                                                                       scratch, gemm, tiles);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * t);
}

void BM_linear_attention(benchmark::State& state) {
  const Index t = state.range(0);
  const RowMatrix<float> q = random_matrix(t, kHead, 1.0f, 6), k = random_matrix(t, kHead, 1.0f, 7),
                         v = random_matrix(t, kHead, 1.0f, 8);
  RowMatrix<float> out(t, kHead);
  const Context ctx;
  for (auto _ : state) {
    nlb::linear_attention_head<float>(ctx, q, k, v, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * t);
}

// The block in `ctx` (one thread; small_gemm on, or off for the provider_only run).
void attention_block(benchmark::State& state, Context& ctx) {
  const Index t = state.range(0), heads = 12;
  nlb::AttentionWeights<float> w{
      random_matrix(kWidth, 3 * kWidth, 0.02f, 11), random_matrix(1, 3 * kWidth, 0.02f, 12),
      random_matrix(kWidth, kWidth, 0.02f, 13), random_matrix(1, kWidth, 0.02f, 14)};
  const nlb::DenseAttention<float> attention(std::move(w), heads);
  const RowMatrix<float> x = random_matrix(t, kWidth, 1.0f, 15);
  nlb::Activations<float> y(t, kWidth);
  nlb::DenseAttention<float>::Workspace ws;
  for (auto _ : state) {
    attention.forward(ctx, x, y, ws);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * t);
}

void BM_attention_block(benchmark::State& state) {
  Context ctx(1);
  attention_block(state, ctx);
}

// The same with kernels::small_gemm off (the per-head tiles' products in the provider).
void BM_attention_block_provider_only(benchmark::State& state) {
  Context ctx = nlb::bench::provider_only(Context(1));
  attention_block(state, ctx);
}

}  // namespace

BENCHMARK(BM_attention_block)->Arg(128)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention_block_provider_only)
    ->Arg(128)
    ->Arg(1024)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_write_bound)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_dense_scores)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_routing_scores, 2)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_routing_scores, 8)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_routing_scores, 32)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_routing_from_features, 2)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_routing_from_features, 8)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_routing_from_features, 32)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_routing_scores_full, 2)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_routing_scores_full, 8)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_routing_scores_full, 32)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_softmax_attention)
    ->RangeMultiplier(2)
    ->Range(128, 4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_tiled_attention)
    ->ArgsProduct({{1024, 4096}, {32, 64, 128}, {128, 256, 512}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_linear_attention)->RangeMultiplier(2)->Range(128, 4096)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
