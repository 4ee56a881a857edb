// Forward tokens/s of a GPT-2-small-shaped model (12 layers, d 768, 12 heads, vocab 50257)
// with random weights, loaded from a temporary safetensors file like any model directory.
// benchmarks/torch_forward.py runs the same forward in PyTorch for the side-by-side figure.
//
//   build/release/benchmarks/bench_transformer --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true   (one command line)
//
// BM_Gpt2SmallForward/<provider>: the model on backend::simd with each GEMM provider of this
// build (nlb/ops/gemm.hpp), side by side. Arguments: {T, threads}; threads are the provider's
// GEMM threads (ops::set_gemm_threads: Eigen's OpenMP threads, OpenBLAS's or BLIS's pool).
// OpenBLAS 0.3.21 does not know every CPU: set OPENBLAS_CORETYPE (docs/benchmarks.md).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "nlb/io/safetensors_writer.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/ops/gemm.hpp"

namespace {

namespace fs = std::filesystem;

// Writes a GPT-2-small model directory with N(0, 0.02²) weights (LayerNorm gains 1, biases 0)
// once per process and returns its path.
const fs::path& gpt2_small_dir() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / "nlb-bench-gpt2-small";
    fs::create_directories(d);
    const long long V = 50257, P = 1024, D = 768, L = 12;
    std::mt19937_64 rng(1);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    nlb::io::SafetensorsWriter w;
    auto add = [&](const std::string& name, std::vector<std::int64_t> shape, float fill,
                   bool random) {
      std::size_t n = 1;
      for (auto s : shape)
        n *= static_cast<std::size_t>(s);
      std::vector<float> v(n, fill);
      if (random) {
        for (auto& x : v)
          x = normal(rng);
      }
      w.add(name, nlb::io::DType::F32, std::move(shape), std::span<const float>(v));
    };
    add("transformer.wte.weight", {V, D}, 0, true);
    add("transformer.wpe.weight", {P, D}, 0, true);
    for (long long i = 0; i < L; ++i) {
      const std::string p = "transformer.h." + std::to_string(i) + ".";
      add(p + "ln_1.weight", {D}, 1, false);
      add(p + "ln_1.bias", {D}, 0, false);
      add(p + "attn.c_attn.weight", {D, 3 * D}, 0, true);
      add(p + "attn.c_attn.bias", {3 * D}, 0, false);
      add(p + "attn.c_proj.weight", {D, D}, 0, true);
      add(p + "attn.c_proj.bias", {D}, 0, false);
      add(p + "ln_2.weight", {D}, 1, false);
      add(p + "ln_2.bias", {D}, 0, false);
      add(p + "mlp.c_fc.weight", {D, 4 * D}, 0, true);
      add(p + "mlp.c_fc.bias", {4 * D}, 0, false);
      add(p + "mlp.c_proj.weight", {4 * D, D}, 0, true);
      add(p + "mlp.c_proj.bias", {D}, 0, false);
    }
    add("transformer.ln_f.weight", {D}, 1, false);
    add("transformer.ln_f.bias", {D}, 0, false);
    w.write(d / "model.safetensors");
    std::ofstream(d / "config.json")
        << R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,)"
        << R"( "n_positions": 1024, "vocab_size": 50257, "layer_norm_epsilon": 1e-05,)"
        << R"( "activation_function": "gelu_new"})";
    return d;
  }();
  return dir;
}

template <class Provider>
void BM_Gpt2SmallForward(benchmark::State& state) {
  using Backend = nlb::backend::simd<xsimd::default_arch, Provider>;
  static const auto model = nlb::load_model<float, Backend>(gpt2_small_dir());
  const auto T = static_cast<std::size_t>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  nlb::ops::set_gemm_threads(Backend{}, threads);
  std::vector<std::int32_t> tokens(T);
  std::mt19937 rng(2);
  for (auto& t : tokens)
    t = static_cast<std::int32_t>(rng() % 50257);
  nlb::RowMatrix<float> logits;
  for (auto _ : state) {
    model.forward(tokens, logits);
    benchmark::DoNotOptimize(logits.data());
  }
  nlb::ops::set_gemm_threads(Backend{}, 1);
  state.SetItemsProcessed(state.iterations() * static_cast<long long>(T));  // tokens/s
  state.counters["threads"] = static_cast<double>(threads);
  state.counters["provider_in_use"] = nlb::ops::gemm_provider_in_use(Backend{}) ? 1.0 : 0.0;
}

void forward_args(benchmark::internal::Benchmark* b) {
  b->Args({128, 1})->Args({128, 2})->Args({1024, 1})->Args({1024, 2});
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
}

}  // namespace

BENCHMARK(BM_Gpt2SmallForward<nlb::gemm_provider::eigen>)
    ->Name("BM_Gpt2SmallForward/eigen")
    ->Apply(forward_args);
#if defined(NLB_HAVE_OPENBLAS)
BENCHMARK(BM_Gpt2SmallForward<nlb::gemm_provider::openblas>)
    ->Name("BM_Gpt2SmallForward/openblas")
    ->Apply(forward_args);
#endif
#if defined(NLB_HAVE_BLIS)
BENCHMARK(BM_Gpt2SmallForward<nlb::gemm_provider::blis>)
    ->Name("BM_Gpt2SmallForward/blis")
    ->Apply(forward_args);
#endif

BENCHMARK_MAIN();
