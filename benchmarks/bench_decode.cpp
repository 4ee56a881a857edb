// Batch-1 generation with the KV cache (GPT-2 small, random weights), against the machine's read
// bandwidth measured in the same program. benchmarks/torch_decode.py runs the same loop in PyTorch.
//
//   build/release/benchmarks/bench_decode --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true   (one command line)
//
// BM_read_bandwidth/threads/MiB  the sum of a float array, split among `threads` std::threads:
//                               512 MiB (about one decoding step's reads, re-read as decoding
//                               re-reads its weights) and 2 GiB (8x this machine's 260 MiB L3).
// BM_decode<S>/prompt/new/threads  the prompt's tokens prefilled (not timed), then `new` steps
//                               of one token each (timed: the forward through the cache and the
//                               logits), with the weight matrices in storage S (f32, or f16 / bf16
//                               / q8: backend::with_weights, widened in registers).
//                               threads = the context's (Context(threads)): the GEMM provider's
//                               threads and the split of the one-row products (GEMV) by output
//                               columns.
// BM_prefill<S>/T/threads      one whole forward of T tokens with logits (the prefill a
//                               generation starts with), in storage S, for the side-by-side
//                               comparison of 16-bit against float weights.
// BM_prefill_widening<S>       the widening of every 16-bit weight matrix that one prefill
//                               does, alone (its share of BM_prefill's 16-bit-minus-float time).
// Counters of BM_decode: tokens_per_second; bytes_per_token, what one step must read: every
// block's weight matrices and the unembedding (4 bytes per value in f32, 2 in f16 / bf16, 1.125 in
// q8), their biases and LayerNorms (F32), plus the KV cache rows (the mean over the steps);
// bound_tokens_per_second = the bandwidth of re-reading a buffer of bytes_per_token at that thread
// count / bytes_per_token (part of it may stay in the L3 between passes, as part of the weights do
// between tokens); pct_of_bound = tokens_per_second / bound_tokens_per_second;
// dram_bound_tokens_per_second the same with the 2 GiB buffer.
//
// BM_decode_dense/threads and BM_decode_gated/f/threads, side by side: prompt 16, 128 steps, the
// same model with every layer's MLP gated (ModelVariant: a random d x d surrogate and a hyperplane
// gate calibrated to route a fraction f% of N(0, 1) rows linear; the layer-normed inputs the gates
// see are distributed alike, and the fraction measured while decoding is reported). A token routed
// linear reads the d² surrogate instead of the MLP's 8d² weights: predicted_speedup = dense bytes
// per token / gated bytes per token at the measured fraction (every gate read too).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpt2_small_model.hpp"
#include "nlb/analysis/model_variant.hpp"
#include "nlb/core/aligned_buffer.hpp"
#include "nlb/core/gemm_scratch.hpp"
#include "nlb/core/half_matrix.hpp"
#include "nlb/core/weight_storage.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/narrow_gemm.hpp"
#include "provider_only.hpp"
#include "random_matrix.hpp"
#include "read_bandwidth.hpp"

namespace {

using Backend = nlb::backend::cpu;
using nlb::Index;

void BM_read_bandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const std::size_t floats = static_cast<std::size_t>(state.range(1)) << 18;  // MiB
  nlb::bench::read_once(threads, floats);  // first touch of the buffer, not timed
  for (auto _ : state)
    benchmark::DoNotOptimize(nlb::bench::read_once(threads, floats));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(floats * sizeof(float)));
}

// Bytes one decoding step at `span` cached positions reads, with `matrix_bytes` per value of the
// weight matrices (4 for f32, 2 for f16 / bf16, 1 + 4 / 32 for q8's values and block scales);
// everything else is F32.
double step_bytes(const nlb::ModelConfig& c, double span, double matrix_bytes = 4) {
  const double d = static_cast<double>(c.d_model), layers = static_cast<double>(c.n_layers);
  // Per block: w_qkv 3d², w_out d² and the MLP's 8d²; their 9d biases and two LayerNorms' 4d.
  const double matrices = layers * 12 * d * d + static_cast<double>(c.vocab_size) * d;
  const double vectors = layers * 13 * d + 2 * d;  // ... and ln_f
  const double cache = layers * 2 * span * d;      // keys and values
  return matrix_bytes * matrices + 4 * (vectors + cache);
}

template <class Storage>
using BackendOf = std::conditional_t<nlb::storage::is_narrow<Storage>,
                                     nlb::backend::with_weights<Storage, Backend>, Backend>;
template <class Storage>
using ModelOf = nlb::Transformer<float, BackendOf<Storage>>;
using Model = ModelOf<nlb::storage::f32>;

// GPT-2 small with its weight matrices in Storage (loaded once per storage).
template <class Storage = nlb::storage::f32>
const ModelOf<Storage>& decode_model() {
  static const ModelOf<Storage> model =
      nlb::load_model<float, BackendOf<Storage>>(nlb::bench::gpt2_small_dir());
  return model;
}

// `n` token ids drawn uniformly from the vocabulary (the same ids in every benchmark).
std::vector<std::int32_t> random_tokens(Index n) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
  std::mt19937 rng(3);
  for (auto& t : tokens)
    t = static_cast<std::int32_t>(rng() % 50257);
  return tokens;
}

// Seconds of `steps` single-token steps after a `prompt`-token prefill, through `overrides`
// (empty: the dense model, the same layers as Transformer::forward runs); `counts` (empty, or one
// per layer) receives the rows each layer routed.
template <class M>
double decode_seconds(nlb::Context<typename M::backend_type>& ctx, const M& model,
                      std::span<const std::int32_t> tokens, Index prompt, Index steps,
                      std::span<const typename M::Override> overrides,
                      std::span<nlb::RouteCounts> counts, typename M::Cache& cache,
                      typename M::Workspace& ws, typename M::Logits& logits) {
  cache.clear();
  model.embed(ctx, tokens.first(static_cast<std::size_t>(prompt)), ws.x, ws);
  model.run_layers(ctx, ws.x, 0, model.layer_count(), ws, overrides, &cache);
  const auto start = std::chrono::steady_clock::now();
  for (Index i = prompt; i < prompt + steps; ++i) {
    model.embed(ctx, tokens.subspan(static_cast<std::size_t>(i), 1), ws.x, ws, i);
    model.run_layers(ctx, ws.x, 0, model.layer_count(), ws, overrides, &cache, nlb::NoTaps{},
                     counts);
    model.head(ctx, ws.x, logits, ws);
  }
  benchmark::DoNotOptimize(logits.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Bytes per weight-matrix value in Storage.
template <class Storage>
constexpr double matrix_bytes() {
  if constexpr (nlb::storage::is_half<Storage>)
    return 2;
  else if constexpr (std::is_same_v<Storage, nlb::storage::q8>)
    return 1 + 4.0 / static_cast<double>(nlb::q8_block);
  else
    return 4;
}

template <class Storage>
void BM_decode(benchmark::State& state) {
  const auto& model = decode_model<Storage>();
  const Index prompt = state.range(0), steps = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  nlb::Context<BackendOf<Storage>> ctx(threads);
  const auto tokens = random_tokens(prompt + steps);
  auto cache = model.make_cache();
  typename ModelOf<Storage>::Workspace ws;
  typename ModelOf<Storage>::Logits logits;
  double seconds = 0;
  {
    const nlb::bench::OneThreadAfter<Backend> one_thread_after;
    for (auto _ : state) {
      const double s = decode_seconds(ctx, model, tokens, prompt, steps, {}, {}, cache, ws, logits);
      state.SetIterationTime(s);
      seconds += s;
    }
  }
  const double bytes =
      step_bytes(model.config(), static_cast<double>(prompt) + static_cast<double>(steps + 1) / 2,
                 matrix_bytes<Storage>());
  const double bandwidth = nlb::bench::read_bandwidth(threads, bytes);
  const double dram = nlb::bench::read_bandwidth(
      threads, static_cast<double>(nlb::bench::kBandwidthFloats * sizeof(float)));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * steps);
  const double tokens_per_second =
      static_cast<double>(steps) * static_cast<double>(state.iterations()) / seconds;
  state.counters["tokens_per_second"] = tokens_per_second;
  state.counters["bytes_per_token"] = bytes;
  state.counters["bound_tokens_per_second"] = bandwidth / bytes;
  state.counters["pct_of_bound"] = 100 * tokens_per_second * bytes / bandwidth;
  state.counters["read_GBps"] = bandwidth / 1e9;
  state.counters["dram_bound_tokens_per_second"] = dram / bytes;
  state.counters["threads"] = threads;
}

// One whole forward of T tokens (logits included), after one untimed warm-up forward.
template <class Storage>
void BM_prefill(benchmark::State& state) {
  const auto& model = decode_model<Storage>();
  const Index length = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const nlb::bench::OneThreadAfter<Backend> one_thread_after;
  nlb::Context<BackendOf<Storage>> ctx(threads);
  const auto tokens = random_tokens(length);
  typename ModelOf<Storage>::Workspace ws;
  typename ModelOf<Storage>::Logits logits;
  model.forward(ctx, tokens, logits, ws);
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    model.forward(ctx, tokens, logits, ws);
    benchmark::DoNotOptimize(logits.data());
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * length);
  state.counters["threads"] = threads;
}

// The widening one 16-bit prefill does, alone: every weight matrix of the model (per block the
// [d, 3d], [d, d], [d, 4d] and [4d, d] products, and the tied unembedding's [vocab, d] read
// transposed) widened once, panel by panel as ops::gemm widens them for a product of more than
// one row (ops::detail::for_each_widened_panel), on the calling thread, with no product. Set
// against BM_prefill's 16-bit minus float time at the same T, it says how much of that
// difference the widening is.
template <class Storage>
void BM_prefill_widening(benchmark::State& state) {
  using H = typename Storage::element;
  const auto& c = decode_model().config();
  const Index d = c.d_model, h = c.d_hidden;
  const auto half = [](Index rows, Index cols, std::uint64_t seed) {
    return nlb::HalfMatrix<H>(nlb::bench::random_matrix(rows, cols, 0.02f, seed));
  };
  const std::vector<nlb::HalfMatrix<H>> block = {half(d, 3 * d, 60), half(d, d, 61), half(d, h, 62),
                                                 half(h, d, 63)};
  const nlb::HalfMatrix<H> unembedding = half(c.vocab_size, d, 64);
  nlb::GemmScratch<float> scratch;
  double checksum = 0;
  const auto touch = [&](Index, const auto& panel) { checksum += panel(0, 0); };
  for (auto _ : state) {
    for (Index layer = 0; layer < c.n_layers; ++layer) {
      for (const auto& w : block)
        nlb::ops::detail::for_each_widened_panel<false>(Backend{}, w, scratch, touch);
    }
    nlb::ops::detail::for_each_widened_panel<true>(Backend{}, unembedding, scratch, touch);
    benchmark::DoNotOptimize(checksum);
  }
  const double values = static_cast<double>(c.n_layers * 12 * d * d + c.vocab_size * d);
  state.counters["widened_values"] = values;
  state.counters["widen_GBps"] = benchmark::Counter(values * (sizeof(H) + sizeof(float)) / 1e9,
                                                    benchmark::Counter::kIsIterationInvariantRate);
}

// Every layer's MLP replaced by a gated one routing about `fraction` of its rows linear.
struct GatedLayers {
  using Variant = nlb::ModelVariant<float, Backend>;
  std::vector<Variant::Surrogate> surrogates;
  Variant variant;

  GatedLayers(Index layers, Index d, double fraction) {
    surrogates.reserve(static_cast<std::size_t>(layers));
    const nlb::Activations<float> calibration = nlb::bench::random_matrix(4096, d, 1.0f, 40);
    for (Index l = 0; l < layers; ++l) {
      const auto seed = static_cast<std::uint64_t>(41 + 3 * l);
      surrogates.emplace_back(nlb::bench::random_matrix(d, d, 0.03f, seed),
                              nlb::bench::random_matrix(1, d, 0.1f, seed + 1));
      Variant::Gate gate(
          nlb::ColVector<float>(nlb::bench::random_matrix(d, 1, 1.0f, seed + 2).col(0)), 0.0f);
      gate.calibrate_linear_fraction(calibration, fraction);
      variant.add_gated(l, surrogates.back(), gate);
    }
  }
};

constexpr Index kPrompt = 16, kSteps = 128;

void decode_side_by_side(benchmark::State& state, double fraction, int threads) {
  const Model& model = decode_model();
  const auto& c = model.config();
  const Index layers = model.layer_count(), d = c.d_model;
  std::optional<GatedLayers> gated;
  if (fraction >= 0)
    gated.emplace(layers, d, fraction);
  const auto overrides =
      gated ? gated->variant.overrides(layers) : std::vector<nlb::LayerOverride<float, Backend>>{};
  std::vector<nlb::RouteCounts> counts(static_cast<std::size_t>(layers));
  const auto tokens = random_tokens(kPrompt + kSteps);
  nlb::Context<Backend> ctx(threads);
  auto cache = model.make_cache();
  Model::Workspace ws;
  Model::Logits logits;
  double seconds = 0;
  {
    const nlb::bench::OneThreadAfter<Backend> one_thread_after;
    for (auto _ : state) {
      const double s =
          decode_seconds(ctx, model, tokens, kPrompt, kSteps, overrides, counts, cache, ws, logits);
      state.SetIterationTime(s);
      seconds += s;
    }
  }
  const double span = static_cast<double>(kPrompt) + static_cast<double>(kSteps + 1) / 2;
  const double dense_bytes = step_bytes(c, span);
  double linear = 0, rows = 0;
  for (const auto& r : counts) {
    linear += static_cast<double>(r.linear);
    rows += static_cast<double>(r.linear + r.full);
  }
  const double f = rows > 0 ? linear / rows : 0;
  const double dd = static_cast<double>(d), ll = static_cast<double>(layers);
  // Per layer and token: the gate (d + 1) always, then the surrogate (d² + d) instead of the
  // MLP (8d² + 5d) for a fraction f of the tokens.
  const double gated_bytes =
      gated ? dense_bytes + 4 * ll * ((dd + 1) + f * ((dd * dd + dd) - (8 * dd * dd + 5 * dd)))
            : dense_bytes;
  state.counters["tokens_per_second"] =
      static_cast<double>(kSteps) * static_cast<double>(state.iterations()) / seconds;
  state.counters["linear_fraction"] = f;
  state.counters["predicted_speedup"] = dense_bytes / gated_bytes;
  state.counters["threads"] = threads;
}

void BM_decode_dense(benchmark::State& state) {
  decode_side_by_side(state, -1, static_cast<int>(state.range(0)));
}

void BM_decode_gated(benchmark::State& state) {
  decode_side_by_side(state, static_cast<double>(state.range(0)) / 100.0,
                      static_cast<int>(state.range(1)));
}

}  // namespace

// A buffer of one decoding step's reads (512 MiB) and one 8x the L3 (2 GiB).
BENCHMARK(BM_read_bandwidth)
    ->ArgsProduct({{1, 2}, {512, 2048}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// prompt 16 + 128 new tokens, and the last 128 positions of a 1024-token context, on 1 and 2
// threads; float and 16-bit weight matrices side by side.
void decode_runs(benchmark::internal::Benchmark* b) {
  b->ArgsProduct({{16, 896}, {128}, {1, 2}})
      ->Iterations(3)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}
BENCHMARK_TEMPLATE(BM_decode, nlb::storage::f32)->Apply(decode_runs);
BENCHMARK_TEMPLATE(BM_decode, nlb::storage::bf16)->Apply(decode_runs);
BENCHMARK_TEMPLATE(BM_decode, nlb::storage::f16)->Apply(decode_runs);
BENCHMARK_TEMPLATE(BM_decode, nlb::storage::q8)->Apply(decode_runs);
// One forward of 128 and of 1024 tokens, on 1 and 2 threads.
void prefill_runs(benchmark::internal::Benchmark* b) {
  b->ArgsProduct({{128, 1024}, {1, 2}})
      ->Iterations(5)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}
BENCHMARK_TEMPLATE(BM_prefill, nlb::storage::f32)->Apply(prefill_runs);
BENCHMARK_TEMPLATE(BM_prefill, nlb::storage::bf16)->Apply(prefill_runs);
BENCHMARK_TEMPLATE(BM_prefill, nlb::storage::f16)->Apply(prefill_runs);
BENCHMARK_TEMPLATE(BM_prefill, nlb::storage::q8)->Apply(prefill_runs);
BENCHMARK_TEMPLATE(BM_prefill_widening, nlb::storage::bf16)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_prefill_widening, nlb::storage::f16)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decode_dense)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decode_gated)
    ->ArgsProduct({{25, 50, 75}, {1, 2}})
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
