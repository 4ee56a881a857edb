// Joint gating (PAPERS §A7): every layer's gate on at once, per-layer thresholds calibrated on
// the label set to meet a total perplexity budget, then measured jointly — FLOPs and time.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "nlb/analysis/bootstrap.hpp"
#include "nlb/analysis/flops.hpp"
#include "nlb/analysis/label_rows.hpp"
#include "nlb/analysis/mlp_variants.hpp"
#include "nlb/core.hpp"
#include "nlb/model/loss.hpp"

namespace nlb {

/// Δ% of a loss sum `sum` against the unmodified model's `base_sum` over the same `positions`:
/// 100 (exp((sum − base_sum) / positions) − 1), the perplexity ratio's excess.
inline double delta_pct_of_sums(double sum, double base_sum, double positions) {
  return 100.0 * std::expm1((sum - base_sum) / positions);
}

/// Share of the rows routed linear over every layer of `counts`, with `rows` rows per layer.
inline double linear_share(const std::vector<RouteCounts>& counts, double rows) {
  double linear = 0;
  for (const auto& c : counts)
    linear += static_cast<double>(c.linear);
  return linear / (rows * static_cast<double>(counts.size()));
}

/// One state of the joint calibration: per-layer linear fractions on the label set (a layer at 0
/// keeps its full MLP, no gate), the per-layer thresholds that give them, and the measured joint
/// label cost (and, for a chosen state, its cost on the calibration split).
struct JointState {
  std::vector<double> fractions;     // [layers] target linear fraction on the label positions
  std::vector<double> thresholds;    // [layers] gate thresholds (+inf where the fraction is 0)
  double label_delta_pct = 0;        // joint Δ% on the label positions
  double label_linear_fraction = 0;  // share of all MLP rows of the label windows routed linear
  Index changed_layer = -1;          // the layer raised to reach this state (-1: the start)
  /// Joint Δ% on the calibration split with its paired bootstrap 95% interval, and the share of
  /// its MLP rows routed linear (set for the states run_label_stage chooses; NaN otherwise).
  Interval calibration_delta_pct{std::numeric_limits<double>::quiet_NaN(),
                                 std::numeric_limits<double>::quiet_NaN(),
                                 std::numeric_limits<double>::quiet_NaN()};
  double calibration_linear_fraction = std::numeric_limits<double>::quiet_NaN();
};

/// The calibration path: path[0] is "no gates", path[i] the state after i accepted steps.
struct JointCalibration {
  std::vector<JointState> path;
  Index evaluations = 0;  // joint label forward passes run
  /// The state chosen for `budget_pct`: the path up to (not including) the first step whose
  /// joint label Δ% exceeds the budget — what a greedy run with that budget would stop at.
  const JointState& for_budget(double budget_pct) const {
    std::size_t i = 1;
    while (i < path.size() && path[i].label_delta_pct <= budget_pct)
      ++i;
    return path[i - 1];
  }
};

/// The gates' thresholds for a fraction grid: thresholds[l][k] routes round(k · step · N) of the
/// N label rows of layer l linear (HyperplaneGate::calibrate_linear_fraction on the label x).
/// With `rows` split (nlb/analysis/label_rows.hpp) label_x holds this process's rows only and
/// the scores of all holders are gathered first (every holder calls together). O(L N d +
/// L steps N log N).
template <class T>
std::vector<std::vector<double>> fraction_thresholds(const std::vector<HyperplaneGate<T>>& gates,
                                                     const std::vector<Activations<T>>& label_x,
                                                     Index steps, const LabelRows& rows = {}) {
  std::vector<std::vector<double>> out(gates.size());
  for (std::size_t l = 0; l < gates.size(); ++l) {
    HyperplaneGate<T> g = gates[l];
    const ColVector<T> here = g.score(label_x[l]);
    std::vector<T> scores(here.data(), here.data() + here.size());
    if (rows.split()) {
      const std::vector<double> all = rows.all(std::vector<double>(scores.begin(), scores.end()));
      scores.assign(all.begin(), all.end());  // exact: the values were T
    }
    out[l].push_back(std::numeric_limits<double>::infinity());
    for (Index k = 1; k <= steps; ++k) {
      const double f = std::min(1.0, static_cast<double>(k) / static_cast<double>(steps));
      out[l].push_back(static_cast<double>(g.calibrate_linear_fraction_of_scores(scores, f)));
    }
  }
  return out;
}

/// The variant of a joint state: every layer with a fraction > 0 gated at its threshold
/// (the gate copied with that threshold; the surrogates and the model's MLPs referred to).
/// Throws ArgumentError when a gated layer of `model` does not hold a full MLP.
template <class T, class Backend>
MlpVariant<T, Backend> joint_variant(
    const Transformer<T, Backend>& model,
    const std::vector<RidgeSurrogate<T, Dynamic, Dynamic, Backend>>& surrogates,
    const std::vector<HyperplaneGate<T, Dynamic, Backend>>& gates, const JointState& state) {
  MlpVariant<T, Backend> v;
  for (std::size_t l = 0; l < gates.size(); ++l) {
    if (state.fractions[l] <= 0.0)
      continue;
    if (!model.layers()[l].mlp().is_full()) {
      throw ArgumentError(
          detail::expected_found("joint_variant: the MLP slot of layer " + std::to_string(l),
                                 "a full MLP", "a surrogate or gated MLP"));
    }
    HyperplaneGate<T, Dynamic, Backend> g = gates[l];
    g.set_threshold(static_cast<T>(state.thresholds[l]));
    v.add_gated(static_cast<Index>(l), surrogates[l], std::move(g));
  }
  return v;
}

/// Greedy joint calibration on the label set (PAPERS §A7, [ours]; docs/budget.md):
/// start with no gates; a step raises one layer's label linear fraction by `step` (thresholds
/// from fraction_thresholds); of all possible steps take the one whose joint label Δ% — all
/// gates on at once, measured by a forward pass over the label windows — is smallest; stop when
/// even that one exceeds `max_budget_pct` or every layer is at fraction 1. Lazy evaluation:
/// each candidate keeps the Δ% last measured for it; the smallest is re-measured in the current
/// state and taken only if it is still the smallest (ties: the lower layer). This assumes a
/// step's cost does not fall as other layers are raised, and spends ~1–2 label passes per step
/// instead of one per layer.
/// label_tokens: the label windows; label_positions N and base_losses (the unmodified model's
/// first N label losses) define Δ% = 100 (exp((Σ L_joint − Σ L_base) / N) − 1).
/// When windows · (L + 1) · context · d values of T fit in `cache_bytes` (default 1 GiB), the
/// unmodified stream at every layer input is kept and a state runs from its first gated layer.
/// The label linear fraction counts the rows of every label window (all positions).
/// `measure_elsewhere`, when given, runs a state's variant over the label windows instead of the
/// host model (another engine, nlb/analysis/variant_engine.hpp; no stream is kept here then).
template <class T, class Backend>
JointCalibration calibrate_joint(
    const Transformer<T, Backend>& model, std::span<const std::int32_t> label_tokens, Index windows,
    Index context, std::span<const double> base_losses,
    const std::vector<RidgeSurrogate<T, Dynamic, Dynamic, Backend>>& surrogates,
    const std::vector<HyperplaneGate<T, Dynamic, Backend>>& gates,
    const std::vector<std::vector<double>>& thresholds, double max_budget_pct,
    const std::function<void(Index, double)>& progress = {},
    std::size_t cache_bytes = std::size_t{1} << 30,
    const std::function<VariantLosses(const MlpVariant<T, Backend>&)>& measure_elsewhere = {}) {
  const auto layers = gates.size();
  const auto n = base_losses.size();
  double base_sum = 0;
  for (double v : base_losses)
    base_sum += v;
  const Index steps = static_cast<Index>(thresholds.at(0).size()) - 1;
  JointCalibration out;
  // The unmodified model's residual stream at every layer's input for every label window, kept
  // when it fits in `cache_bytes`: a joint state then runs only from its first gated layer.
  using Model = Transformer<T, Backend>;
  typename Model::Workspace ws;
  typename Model::Stream x;
  RowMatrix<T> logits;
  PrefixStreams<T, Backend> prefix;
  if (!measure_elsewhere && PrefixStreams<T, Backend>::bytes_needed(model, windows, context) <=
                                static_cast<double>(cache_bytes)) {
    prefix = PrefixStreams<T, Backend>::keep(model, label_tokens, windows, context);
  }
  auto measure = [&](const std::vector<Index>& k, JointState& s) {
    s.fractions.assign(layers, 0.0);
    s.thresholds.assign(layers, std::numeric_limits<double>::infinity());
    for (std::size_t l = 0; l < layers; ++l) {
      s.fractions[l] = static_cast<double>(k[l]) / static_cast<double>(steps);
      s.thresholds[l] = thresholds[l][static_cast<std::size_t>(k[l])];
    }
    const MlpVariant<T, Backend> v = joint_variant(model, surrogates, gates, s);
    const auto overrides = v.overrides(static_cast<Index>(layers));
    const Index first = v.first_layer(static_cast<Index>(layers));
    double sum = 0;
    std::size_t counted = 0;
    std::vector<RouteCounts> counts(layers);
    if (measure_elsewhere) {  // every label window from its embedding, by another engine
      const VariantLosses r = measure_elsewhere(v);
      for (std::size_t i = 0; i < r.variant[0].size() && counted < n; ++i, ++counted)
        sum += r.variant[0][i];
      counts = r.counts[0];
    }
    for (Index w = 0; w < windows && counted < n && !measure_elsewhere; ++w) {
      const auto window = label_tokens.subspan(static_cast<std::size_t>(w * context),
                                               static_cast<std::size_t>(context));
      if (!prefix.kept.empty()) {
        x = prefix.kept[static_cast<std::size_t>(w)][static_cast<std::size_t>(first)];
        model.run_layers(x, first, static_cast<Index>(layers), ws, overrides, nullptr, NoTaps{},
                         std::span(counts));
      } else {
        model.embed(window, x);
        model.run_layers(x, 0, static_cast<Index>(layers), ws, overrides, nullptr, NoTaps{},
                         std::span(counts));
      }
      model.head(x, logits, ws);
      const auto loss = next_token_losses(logits, window);
      for (std::size_t i = 0; i < loss.size() && counted < n; ++i, ++counted)
        sum += loss[i];
    }
    s.label_delta_pct = delta_pct_of_sums(sum, base_sum, static_cast<double>(n));
    s.label_linear_fraction = linear_share(counts, static_cast<double>(windows * context));
    ++out.evaluations;
  };
  std::vector<Index> k(layers, 0);
  JointState start;
  start.fractions.assign(layers, 0.0);
  start.thresholds.assign(layers, std::numeric_limits<double>::infinity());
  out.path.push_back(start);
  std::vector<JointState> candidate(layers);
  std::vector<Index> stamp(layers, -1);
  Index step_index = 0;
  for (;;) {
    Index best = -1;
    for (std::size_t l = 0; l < layers; ++l) {
      if (k[l] >= steps)
        continue;
      if (stamp[l] < 0) {
        auto kk = k;
        ++kk[l];
        measure(kk, candidate[l]);
        stamp[l] = step_index;
      }
      if (best < 0 ||
          candidate[l].label_delta_pct < candidate[static_cast<std::size_t>(best)].label_delta_pct)
        best = static_cast<Index>(l);
    }
    if (best < 0)
      break;  // every layer at fraction 1
    const auto b = static_cast<std::size_t>(best);
    if (stamp[b] != step_index) {
      auto kk = k;
      ++kk[b];
      measure(kk, candidate[b]);
      stamp[b] = step_index;
      continue;  // re-rank with the fresh value
    }
    if (candidate[b].label_delta_pct > max_budget_pct)
      break;
    ++k[b];
    candidate[b].changed_layer = best;
    out.path.push_back(candidate[b]);
    ++step_index;
    if (progress)
      progress(step_index, candidate[b].label_delta_pct);
  }
  return out;
}

/// FLOPs saved by per-layer linear fractions (PAPERS §A5; analysis/flops.hpp), in % of the
/// dense MLPs and of the whole forward pass. A layer with `gated[l]` false has no gate and
/// saves nothing; a gated one saves f (dense − surrogate) − gate per token.
struct FlopSaving {
  double mlp_pct = 0;
  double forward_pct = 0;
};
inline FlopSaving flop_saving(const flops::TransformerShape& shape,
                              std::span<const double> fractions, const std::vector<bool>& gated) {
  double saved = 0;
  for (std::size_t l = 0; l < fractions.size(); ++l)
    if (gated[l])
      saved += flops::mlp_saving_per_token(shape.d_model, shape.d_hidden, fractions[l]);
  FlopSaving out;
  out.mlp_pct =
      100.0 * saved / (shape.n_layers * flops::dense_mlp_per_token(shape.d_model, shape.d_hidden));
  out.forward_pct = 100.0 * saved / flops::forward_per_token(shape);
  return out;
}

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
// same machine load; each returns its milliseconds. `reset` runs before every timed gated run
// (clears its route counts). Medians into a ForwardTiming (gated_linear_fraction from `counts`).
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

}  // namespace detail

/// Times forward passes over the first `windows` windows, dense (Transformer::forward) and with
/// `variant` (the same pass through run_layers with its overrides), alternating (dense, gated)
/// `repetitions` times; reports the medians. One workspace serves both, so neither run
/// allocates in the model after the warm-up. Not deterministic (wall-clock): reports keep it
/// apart.
template <class T, class Backend>
ForwardTiming time_forward(const Transformer<T, Backend>& model,
                           std::span<const std::int32_t> tokens, Index windows, Index context,
                           const MlpVariant<T, Backend>& variant, Index repetitions) {
  using clock = std::chrono::steady_clock;
  using Model = Transformer<T, Backend>;
  const Index layers = model.layer_count();
  typename Model::Workspace ws;
  RowMatrix<T> logits;
  const auto overrides = variant.overrides(layers);
  std::vector<RouteCounts> counts(static_cast<std::size_t>(layers));
  auto window = [&](Index w) {
    return tokens.subspan(static_cast<std::size_t>(w * context), static_cast<std::size_t>(context));
  };
  auto run_dense = [&] {
    const auto t0 = clock::now();
    for (Index w = 0; w < windows; ++w)
      model.forward(window(w), logits, ws);
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  auto run_gated = [&] {
    const auto t0 = clock::now();
    for (Index w = 0; w < windows; ++w) {
      model.embed(window(w), ws.x);
      model.run_layers(ws.x, 0, layers, ws, overrides, nullptr, NoTaps{}, std::span(counts));
      model.head(ws.x, logits, ws);
    }
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  return detail::alternate_timing(run_dense, run_gated, counts, repetitions);
}

/// Times batch-1 decoding of tokens[0, steps): one token per forward through the KV cache
/// (positions 0 .. steps − 1, logits every step), dense and with `variant`, alternating
/// `repetitions` times; reports the medians of the whole decode. At batch 1 a token routed
/// linear reads the d × d surrogate instead of the MLP's 8d² weights, so decoding, bound by
/// reading the weights, saves in proportion to bytes rather than FLOPs. The cache and the
/// workspace are allocated once. Throws ArgumentError when steps is not in
/// [1, min(tokens, n_positions)].
template <class T, class Backend>
ForwardTiming time_decode(const Transformer<T, Backend>& model,
                          std::span<const std::int32_t> tokens, Index steps,
                          const MlpVariant<T, Backend>& variant, Index repetitions) {
  using clock = std::chrono::steady_clock;
  using Model = Transformer<T, Backend>;
  const Index most = std::min(static_cast<Index>(tokens.size()), model.config().n_positions);
  if (steps < 1 || steps > most) {
    throw ArgumentError(nlb::detail::expected_found(
        "time_decode: steps", "a value in [1, " + std::to_string(most) + "]", steps));
  }
  const Index layers = model.layer_count();
  typename Model::Workspace ws;
  RowMatrix<T> logits;
  auto cache = model.make_cache();
  const auto overrides = variant.overrides(layers);
  std::vector<RouteCounts> counts(static_cast<std::size_t>(layers));
  auto token = [&](Index i) { return tokens.subspan(static_cast<std::size_t>(i), 1); };
  auto run_dense = [&] {
    cache.clear();
    const auto t0 = clock::now();
    for (Index i = 0; i < steps; ++i)
      model.forward(token(i), logits, ws, NoTaps{}, &cache);
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  auto run_gated = [&] {
    cache.clear();
    const auto t0 = clock::now();
    for (Index i = 0; i < steps; ++i) {
      model.embed(token(i), ws.x, i);
      model.run_layers(ws.x, 0, layers, ws, overrides, &cache, NoTaps{}, std::span(counts));
      model.head(ws.x, logits, ws);
    }
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  return detail::alternate_timing(run_dense, run_gated, counts, repetitions);
}

}  // namespace nlb
