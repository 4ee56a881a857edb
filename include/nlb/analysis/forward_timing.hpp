// Wall-clock of the unmodified model against a variant (PAPERS §A5: measured time beside the
// FLOPs), measured in one run on whichever backend the model runs: a forward over windows, or
// batch-1 decoding through the KV cache. Written once for every backend; the clock stops after
// the context's queued work has finished.
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nlb/core.hpp"
#include "nlb/mlp/route_counts.hpp"
#include "nlb/model/layer_override.hpp"
#include "nlb/model/transformer.hpp"

namespace nlb {

/// Wall-clock of the dense against the gated model, measured in one run: a forward over eval
/// windows (time_forward) or batch-1 decoding through the KV cache (time_decode).
struct ForwardTiming {
  double dense_ms = 0;  // median over repetitions
  double gated_ms = 0;
  double saved_pct = 0;              // 100 (1 − gated / dense)
  double gated_linear_fraction = 0;  // RouteCounts of the timed gated runs (all layers)
};

namespace detail {

// Runs (dense, gated) `repetitions` times alternately after one warm-up of each, so both see the
// same machine load; each returns its milliseconds. The gated run's route counts are cleared
// before every timed gated run. Medians into a ForwardTiming (gated_linear_fraction from
// `counts`).
template <class Dense, class Gated>
ForwardTiming alternate_timing(Dense&& run_dense, Gated&& run_gated,
                               std::vector<RouteCounts>& counts, Index repetitions) {
  std::vector<double> dense, gated;
  run_dense();  // warm-up: first-touch of workspaces and caches
  run_gated();
  for (Index r = 0; r < repetitions; ++r) {
    dense.push_back(run_dense());
    counts.assign(counts.size(), RouteCounts{});
    gated.push_back(run_gated());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
  };
  ForwardTiming out;
  out.dense_ms = median(dense);
  out.gated_ms = median(gated);
  out.saved_pct = 100.0 * (1.0 - out.gated_ms / out.dense_ms);
  RouteCounts total;
  for (const auto& c : counts) {
    total.linear += c.linear;
    total.full += c.full;
  }
  out.gated_linear_fraction = total.linear_fraction();
  return out;
}

// Milliseconds f() takes, its queued work on the context included.
template <class Backend, class F>
double timed_ms(Context<Backend>& ctx, F&& f) {
  ctx.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  ctx.synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace detail

/// Times forward passes over the first `windows` windows, dense (Transformer::forward) and with
/// `overrides` (one LayerOverride per layer: the same pass through run_layers), alternating
/// (dense, gated) `repetitions` times; reports the medians. One workspace serves both, so neither
/// run allocates in the model after the warm-up; the logits stay where the model runs. Not
/// deterministic (wall-clock): reports keep it apart.
template <class T, class Backend>
ForwardTiming time_forward(Context<Backend>& ctx, const Transformer<T, Backend>& model,
                           std::span<const std::int32_t> tokens, Index windows, Index context,
                           std::span<const LayerOverride<T, Backend>> overrides,
                           Index repetitions) {
  using Model = Transformer<T, Backend>;
  const Index layers = model.layer_count();
  typename Model::Workspace ws;
  typename Model::Logits logits;
  std::vector<RouteCounts> counts(static_cast<std::size_t>(layers));
  auto window = [&](Index w) {
    return tokens.subspan(static_cast<std::size_t>(w * context), static_cast<std::size_t>(context));
  };
  auto run_dense = [&] {
    return detail::timed_ms(ctx, [&] {
      for (Index w = 0; w < windows; ++w)
        model.forward(ctx, window(w), logits, ws);
    });
  };
  auto run_gated = [&] {
    return detail::timed_ms(ctx, [&] {
      for (Index w = 0; w < windows; ++w) {
        model.embed(ctx, window(w), ws.x, ws);
        model.run_layers(ctx, ws.x, 0, layers, ws, overrides, nullptr, NoTaps{}, std::span(counts));
        model.head(ctx, ws.x, logits, ws);
      }
    });
  };
  return detail::alternate_timing(run_dense, run_gated, counts, repetitions);
}

/// Times batch-1 decoding of tokens[0, steps): one token per forward through the KV cache
/// (positions 0 .. steps − 1, logits every step), dense and with `overrides`, alternating
/// `repetitions` times; reports the medians of the whole decode. At batch 1 a token routed
/// linear reads the d × d surrogate instead of the MLP's 8d² weights, so decoding, bound by
/// reading the weights, saves in proportion to bytes rather than FLOPs. The cache and the
/// workspace are allocated once. Throws ArgumentError when steps is not in
/// [1, min(tokens, n_positions)].
template <class T, class Backend>
ForwardTiming time_decode(Context<Backend>& ctx, const Transformer<T, Backend>& model,
                          std::span<const std::int32_t> tokens, Index steps,
                          std::span<const LayerOverride<T, Backend>> overrides, Index repetitions) {
  using Model = Transformer<T, Backend>;
  const Index most = std::min(static_cast<Index>(tokens.size()), model.config().n_positions);
  if (steps < 1 || steps > most) {
    throw ArgumentError(nlb::detail::expected_found(
        "time_decode: steps", "a value in [1, " + std::to_string(most) + "]", steps));
  }
  const Index layers = model.layer_count();
  typename Model::Workspace ws;
  typename Model::Logits logits;
  auto cache = model.make_cache(steps);
  std::vector<RouteCounts> counts(static_cast<std::size_t>(layers));
  auto token = [&](Index i) { return tokens.subspan(static_cast<std::size_t>(i), 1); };
  auto run_dense = [&] {
    cache.clear();
    return detail::timed_ms(ctx, [&] {
      for (Index i = 0; i < steps; ++i)
        model.forward(ctx, token(i), logits, ws, NoTaps{}, &cache);
    });
  };
  auto run_gated = [&] {
    cache.clear();
    return detail::timed_ms(ctx, [&] {
      for (Index i = 0; i < steps; ++i) {
        model.embed(ctx, token(i), ws.x, ws, i);
        model.run_layers(ctx, ws.x, 0, layers, ws, overrides, &cache, NoTaps{}, std::span(counts));
        model.head(ctx, ws.x, logits, ws);
      }
    });
  };
  return detail::alternate_timing(run_dense, run_gated, counts, repetitions);
}

}  // namespace nlb
