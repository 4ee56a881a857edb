// Row kernels (nlb/kernels/): scalar reference vs xsimd form, float, GPT-2 row widths
// 768 (small) and 1024 (medium). items/s counts row elements. The in-place kernels (GELU,
// softmax) first copy a fixed input row into the work row, so every iteration sees the same
// data; the copy (a few ns per row) is included in both backends' times.
#include "nlb/kernels.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using nlb::Index;
namespace backend = nlb::backend;
namespace kernels = nlb::kernels;
namespace math = nlb::math;

using Scalar = backend::scalar;
using Simd = backend::simd<>;

std::vector<float> random_row(Index n, float mean, float sd, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(mean, sd);
  std::vector<float> row(static_cast<std::size_t>(n));
  for (auto& v : row)
    v = dist(rng);
  return row;
}

void set_items(benchmark::State& state, Index n) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * n);
}

template <class Backend, class Math>
void BM_gelu_tanh(benchmark::State& state) {
  const Index n = state.range(0);
  const auto input = random_row(n, 0.0f, 2.0f, 1);
  auto row = input;
  for (auto _ : state) {
    std::copy(input.begin(), input.end(), row.begin());
    kernels::gelu_tanh<Math>(Backend{}, row.data(), n);
    benchmark::DoNotOptimize(row.data());
    benchmark::ClobberMemory();
  }
  set_items(state, n);
}

template <class Backend>
void BM_gelu_erf(benchmark::State& state) {
  const Index n = state.range(0);
  const auto input = random_row(n, 0.0f, 2.0f, 2);
  auto row = input;
  for (auto _ : state) {
    std::copy(input.begin(), input.end(), row.begin());
    kernels::gelu_erf(Backend{}, row.data(), n);
    benchmark::DoNotOptimize(row.data());
    benchmark::ClobberMemory();
  }
  set_items(state, n);
}

template <class Backend>
void BM_layer_norm(benchmark::State& state) {
  const Index n = state.range(0);
  const auto x = random_row(n, 0.5f, 3.0f, 3);
  const auto gamma = random_row(n, 1.0f, 0.2f, 4);
  const auto beta = random_row(n, 0.0f, 0.2f, 5);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    kernels::layer_norm(Backend{}, x.data(), y.data(), gamma.data(), beta.data(), n, 1e-5f);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_items(state, n);
}

template <class Backend>
void BM_softmax(benchmark::State& state) {
  const Index n = state.range(0);
  const auto input = random_row(n, 0.0f, 3.0f, 6);
  auto row = input;
  for (auto _ : state) {
    std::copy(input.begin(), input.end(), row.begin());
    kernels::softmax(Backend{}, row.data(), n);
    benchmark::DoNotOptimize(row.data());
    benchmark::ClobberMemory();
  }
  set_items(state, n);
}

// The normaliser of a next-token loss over a vocabulary (GPT-2's: 50 257 logits per position).
template <class Backend>
void BM_log_sum_exp(benchmark::State& state) {
  const Index n = state.range(0);
  const auto row = random_row(n, 0.0f, 3.0f, 7);
  for (auto _ : state) {
    double lse = kernels::log_sum_exp(Backend{}, row.data(), n);
    benchmark::DoNotOptimize(lse);
  }
  set_items(state, n);
}

}  // namespace

BENCHMARK_TEMPLATE(BM_gelu_tanh, Scalar, math::exact)->Arg(768)->Arg(1024);
BENCHMARK_TEMPLATE(BM_gelu_tanh, Simd, math::exact)->Arg(768)->Arg(1024);
BENCHMARK_TEMPLATE(BM_gelu_tanh, Scalar, math::fast)->Arg(768)->Arg(1024);
BENCHMARK_TEMPLATE(BM_gelu_tanh, Simd, math::fast)->Arg(768)->Arg(1024);
BENCHMARK_TEMPLATE(BM_gelu_erf, Scalar)->Arg(768)->Arg(1024);
BENCHMARK_TEMPLATE(BM_gelu_erf, Simd)->Arg(768)->Arg(1024);
BENCHMARK_TEMPLATE(BM_layer_norm, Scalar)->Arg(768)->Arg(1024);
BENCHMARK_TEMPLATE(BM_layer_norm, Simd)->Arg(768)->Arg(1024);
BENCHMARK_TEMPLATE(BM_softmax, Scalar)->Arg(768)->Arg(1024);
BENCHMARK_TEMPLATE(BM_softmax, Simd)->Arg(768)->Arg(1024);
BENCHMARK_TEMPLATE(BM_log_sum_exp, Scalar)->Arg(256)->Arg(50257);
BENCHMARK_TEMPLATE(BM_log_sum_exp, Simd)->Arg(256)->Arg(50257);

BENCHMARK_MAIN();
