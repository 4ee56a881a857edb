// Stages 1, 3, 4 and 6 of the MLP budget pipeline on the eval set (PAPERS §A2–§A7): the
// baseline, every layer linear alone and all together, every gate alone and every budget's joint
// gating, each with a bootstrap interval, in one pass of the runner over every eval window.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nlb/analysis/bootstrap.hpp"
#include "nlb/analysis/budget/fit_stage.hpp"
#include "nlb/analysis/budget/gate_training.hpp"
#include "nlb/analysis/budget/label_stage.hpp"
#include "nlb/analysis/budget/observer.hpp"
#include "nlb/analysis/flops.hpp"
#include "nlb/analysis/variant_runner.hpp"

namespace nlb {

/// Per-layer eval results.
struct EvalLayer {
  double all_linear_ppl = 0;
  Interval all_linear_delta_pct;
  double gate_ppl = std::numeric_limits<double>::quiet_NaN();
  Interval gate_delta_pct{std::numeric_limits<double>::quiet_NaN(),
                          std::numeric_limits<double>::quiet_NaN(),
                          std::numeric_limits<double>::quiet_NaN()};
  double gate_linear_fraction = std::numeric_limits<double>::quiet_NaN();
};

/// Joint gating measured on the eval set for one budget.
struct EvalJoint {
  double budget_pct = 0;
  double ppl = 0;
  Interval delta_pct;
  double linear_fraction = 0;                 // share of all MLP rows routed linear
  std::vector<double> layer_linear_fraction;  // [layers]
  FlopSaving flops;
};

/// Everything computed from the eval tokens.
struct EvalStage {
  Index windows = 0;
  Index predicted_tokens = 0;
  double baseline_ppl = 0;
  std::vector<EvalLayer> layers;
  double all_layers_linear_ppl = 0;
  Interval all_layers_linear_delta_pct;
  std::vector<EvalJoint> joint;            // [budgets]; empty without a label stage
  std::vector<std::vector<double>> delta;  // [layers][positions] δ on the eval set
};

/// Stages 1, 3 (and 4, 6 when `label` is not null) in one pass over every full eval window: the
/// unmodified model, each layer linear, all layers linear, each layer gated alone (threshold 0),
/// and each budget's joint gating; the unmodified prefix of a window is computed once.
/// Δ% intervals: bootstrap_delta_pct with the protocol's resamples and seed (each quantity
/// its own stream: seed + index). Reads only `eval_tokens`. Throws ArgumentError naming `what`
/// when no full window fits.
template <class T>
EvalStage run_eval_stage(VariantRunner<T>& runner, const SurrogateFit<T>& fit,
                         const std::type_identity_t<LabelStage<T>>* label,
                         std::span<const std::int32_t> eval_tokens, const BudgetProtocol& protocol,
                         const std::function<void(Index, Index)>& progress = {},
                         const std::string& what = "eval tokens") {
  const auto& model = runner.model();
  const Index layers = model.layer_count();
  const Index ctx = protocol.context;
  EvalStage out;
  out.windows = static_cast<Index>(eval_tokens.size()) / ctx;
  require_windows(what, eval_tokens, std::max<Index>(out.windows, 1), ctx, "one eval window");
  out.predicted_tokens = out.windows * (ctx - 1);
  auto variants = one_layer_linear_variants(fit.surrogates);
  {
    ModelVariant<T> all;
    for (Index l = 0; l < layers; ++l)
      all.add_linear(l, fit.surrogates[static_cast<std::size_t>(l)]);
    variants.push_back(std::move(all));
  }
  if (label) {
    for (Index l = 0; l < layers; ++l) {
      const auto ls = static_cast<std::size_t>(l);
      ModelVariant<T> v;
      v.add_gated(l, fit.surrogates[ls], label->gates[ls].gate);
      variants.push_back(std::move(v));
    }
    const auto gates = label->plain_gates();
    for (const auto& state : label->joint)
      variants.push_back(joint_variant(model, fit.surrogates, gates, state));
  }
  const VariantLosses r = runner.measure(eval_tokens, out.windows, ctx, variants, true, progress);
  std::vector<double> base_sums(static_cast<std::size_t>(out.windows));
  for (Index w = 0; w < out.windows; ++w)
    base_sums[static_cast<std::size_t>(w)] = r.window_sum(r.base, w);
  auto interval = [&](std::size_t v) {
    std::vector<double> sums(static_cast<std::size_t>(out.windows));
    for (Index w = 0; w < out.windows; ++w)
      sums[static_cast<std::size_t>(w)] = r.window_sum(r.variant[v], w);
    return bootstrap_delta_pct(base_sums, sums, ctx - 1, protocol.bootstrap_resamples,
                               protocol.seed + v);
  };
  auto rows_linear = [&](std::size_t v, Index l) {
    return static_cast<double>(r.counts[v][static_cast<std::size_t>(l)].linear) /
           static_cast<double>(out.windows * ctx);
  };
  out.baseline_ppl = detail::ppl_of(r.base);
  out.layers.resize(static_cast<std::size_t>(layers));
  for (Index l = 0; l < layers; ++l) {
    const auto ls = static_cast<std::size_t>(l);
    out.layers[ls].all_linear_ppl = detail::ppl_of(r.variant[ls]);
    out.layers[ls].all_linear_delta_pct = interval(ls);
    out.delta.push_back(loss_delta(r.variant[ls], r.base, out.predicted_tokens));
  }
  const auto all = static_cast<std::size_t>(layers);
  out.all_layers_linear_ppl = detail::ppl_of(r.variant[all]);
  out.all_layers_linear_delta_pct = interval(all);
  if (label) {
    for (Index l = 0; l < layers; ++l) {
      const std::size_t v = all + 1 + static_cast<std::size_t>(l);
      auto& e = out.layers[static_cast<std::size_t>(l)];
      e.gate_ppl = detail::ppl_of(r.variant[v]);
      e.gate_delta_pct = interval(v);
      e.gate_linear_fraction = rows_linear(v, l);
    }
    const auto& cfg = model.config();
    const flops::TransformerShape shape{
        static_cast<double>(cfg.d_model),    static_cast<double>(cfg.d_hidden),
        static_cast<double>(layers),         0.5 * static_cast<double>(ctx + 1),
        static_cast<double>(cfg.vocab_size), static_cast<double>(cfg.mlp_matrices()),
        static_cast<double>(cfg.kv_width())};
    for (std::size_t b = 0; b < label->joint.size(); ++b) {
      const std::size_t v = all + 1 + static_cast<std::size_t>(layers) + b;
      EvalJoint j;
      j.budget_pct = protocol.budgets_pct[b];
      j.ppl = detail::ppl_of(r.variant[v]);
      j.delta_pct = interval(v);
      std::vector<bool> gated_flags(static_cast<std::size_t>(layers));
      double linear = 0;
      for (Index l = 0; l < layers; ++l) {
        j.layer_linear_fraction.push_back(rows_linear(v, l));
        linear += j.layer_linear_fraction.back();
        gated_flags[static_cast<std::size_t>(l)] =
            label->joint[b].fractions[static_cast<std::size_t>(l)] > 0.0;
      }
      j.linear_fraction = linear / static_cast<double>(layers);
      j.flops = flop_saving(shape, j.layer_linear_fraction, gated_flags);
      out.joint.push_back(std::move(j));
    }
  }
  return out;
}

}  // namespace nlb
