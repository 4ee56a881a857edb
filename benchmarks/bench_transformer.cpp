// Forward tokens/s of a GPT-2-small-shaped model (12 layers, d 768, 12 heads, vocab 50257)
// with random weights, loaded from a temporary safetensors file like any model directory.
// benchmarks/torch_forward.py runs the same forward in PyTorch for the side-by-side figure.
//
//   build/release/benchmarks/bench_transformer --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true   (one command line)
//
// BM_Gpt2SmallForward/<provider>: the model on backend::simd with each GEMM provider of this
// build (nlb/ops/gemm.hpp), side by side. Arguments: {T, threads}; threads are the context's
// (Context<Backend>(threads), which ops::gemm gives the provider: Eigen's OpenMP threads,
// OpenBLAS's or BLIS's pool, OpenMP's count for oneDNN; measured: every one of them).
// OpenBLAS 0.3.21 does not know every CPU: set OPENBLAS_CORETYPE (docs/benchmarks.md).
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <type_traits>

#include "gpt2_small_model.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/ops/gemm.hpp"
#include "provider_only.hpp"
#include "run_benchmarks.hpp"

namespace {

using nlb::bench::gpt2_small_dir;

template <class Provider>
using BackendOf = nlb::backend::simd<xsimd::default_arch, Provider>;

// The forward in a context of state.range(1) threads; `small_gemm` off gives every product to
// the provider.
template <class Provider>
void forward(benchmark::State& state, bool small_gemm) {
  using Backend = BackendOf<Provider>;
  static const auto model = nlb::load_model<float, Backend>(gpt2_small_dir());
  using Model = std::remove_cvref_t<decltype(model)>;
  const auto T = static_cast<std::size_t>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const nlb::bench::OneThreadAfter<Backend> one_thread_after;
  nlb::Context<Backend> ctx(threads);
  ctx.set_small_gemm(small_gemm);
  std::vector<std::int32_t> tokens(T);
  std::mt19937 rng(2);
  for (auto& t : tokens)
    t = static_cast<std::int32_t>(rng() % 50257);
  typename Model::Logits logits;
  for (auto _ : state) {
    // A fresh workspace per forward, as the workspace-less forward(tokens, logits) these figures
    // were first measured with allocated one (docs/benchmarks.md compares against them).
    typename Model::Workspace ws;
    model.forward(ctx, tokens, logits, ws);
    benchmark::DoNotOptimize(logits.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<long long>(T));  // tokens/s
  state.counters["threads"] = static_cast<double>(threads);
  state.counters["provider_in_use"] = nlb::ops::gemm_provider_in_use(Backend{}) ? 1.0 : 0.0;
}

template <class Provider>
void BM_Gpt2SmallForward(benchmark::State& state) {
  forward<Provider>(state, true);
}

// The same with kernels::small_gemm off: every product in the provider (its few-row products are
// the attention's per-head tiles; the projections have T >= 128 rows).
template <class Provider>
void BM_Gpt2SmallForwardProviderOnly(benchmark::State& state) {
  forward<Provider>(state, false);
}

void forward_args(benchmark::internal::Benchmark* b) {
  b->Args({128, 1})->Args({128, 2})->Args({1024, 1})->Args({1024, 2});
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
}

// BM_Gpt2SmallForward/<provider> for each provider of this build; also with small_gemm off for
// the default one.
template <class Provider>
void register_provider() {
  if constexpr (nlb::gemm_provider::is_available<Provider>) {
    const std::string name = nlb::gemm_provider::name<Provider>();
    benchmark::RegisterBenchmark(("BM_Gpt2SmallForward/" + name).c_str(),
                                 BM_Gpt2SmallForward<Provider>)
        ->Apply(forward_args);
    if constexpr (std::is_same_v<Provider, nlb::gemm_provider::default_provider> &&
                  !std::is_same_v<Provider, nlb::gemm_provider::eigen>)
      benchmark::RegisterBenchmark(("BM_Gpt2SmallForward/" + name + "_provider_only").c_str(),
                                   BM_Gpt2SmallForwardProviderOnly<Provider>)
          ->Apply(forward_args);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_provider<nlb::gemm_provider::eigen>();
  nlb::gemm_provider::for_each_library_provider(
      [](auto provider) { register_provider<decltype(provider)>(); });
  register_provider<nlb::gemm_provider::measured>();
  return nlb::bench::run_benchmarks(argc, argv);
}
