// The search across MLP gates and attention conversions (docs/budget.md, "One budget across MLP
// and attention"): each budget spent over both kinds of change by one knapsack, corrected by
// joint measurement, then measured on the eval set and timed — every pass through the runner.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nlb/analysis/bootstrap.hpp"
#include "nlb/analysis/budget/across.hpp"
#include "nlb/analysis/budget/allocation.hpp"
#include "nlb/analysis/budget/fit_stage.hpp"
#include "nlb/analysis/budget/label_stage.hpp"
#include "nlb/analysis/budget/observer.hpp"
#include "nlb/analysis/flops.hpp"
#include "nlb/analysis/forward_timing.hpp"
#include "nlb/analysis/variant_runner.hpp"

namespace nlb {

/// One budget's state across MLP gates and attention conversions, measured.
struct AcrossResult {
  double budget_pct = 0;
  std::vector<double> gate_fractions;      // [layers] chosen fraction of label rows (0: no gate)
  std::vector<std::string> attention;      // [layers] chosen conversion, "" when unchanged
  std::vector<Index> attention_parameter;  // [layers] its parameter (skew_rank: r)
  Interval calibration_delta_pct;          // the chosen try's joint measurement
  double eval_ppl = 0;
  Interval eval_delta_pct;                         // on every eval window
  std::vector<double> eval_layer_linear_fraction;  // [layers] MLP rows routed linear
  double eval_linear_fraction = 0;                 // all layers
  double mlp_flops_saved_pct = 0;                  // of the dense MLPs, at the eval fractions
  double attention_flops_saved_pct = 0;            // of the model's own attention
  double forward_flops_saved_pct = 0;   // of the whole forward (own attention, dense MLPs, head)
  double attention_share = 0;           // attention's part of the FLOPs saved (0 when none)
  ForwardTiming prefill;                // eval windows, unmodified vs this state
  std::optional<ForwardTiming> decode;  // batch-1 decoding; none when a chosen layer is linear
                                        // attention (no KV cache)
};

/// The search across MLP and attention for every budget (docs/budget.md).
template <class T>
struct AcrossStage {
  std::vector<LayerAttentionOptions<T>> options;  // [layers] every conversion, costed
  AcrossGroups groups;                            // offered options and cost curves
  std::vector<BudgetAllocation> allocations;      // [budgets]
  std::vector<AcrossResult> results;              // [budgets]
};

/// Spends each budget across the layers' gates and attention conversions (attention_options at
/// the protocol's context): the gates' cost curves of the label stage's allocation search
/// (label.cost_curves) and each offered conversion's cost alone, both on the calibration split,
/// one knapsack over both (allocate_across) corrected by joint measurement on the calibration
/// split; then each chosen state on every eval window (Δ% with interval, linear fractions,
/// FLOPs saved) and timed against the unmodified model (prefill over timing_windows eval
/// windows, batch-1 decode of decode_steps tokens), every pass through `runner`. Throws
/// ArgumentError when the label stage ran the greedy search (no cost curves).
template <class T>
AcrossStage<T> run_across_stage(VariantRunner<T>& runner, const SurrogateFit<T>& fit,
                                const LabelStage<T>& label,
                                std::span<const std::int32_t> label_tokens,
                                std::span<const std::int32_t> eval_tokens,
                                const BudgetProtocol& protocol, const BudgetObserver& obs = {}) {
  if (label.cost_curves.delta_pct.empty()) {
    throw ArgumentError(detail::expected_found("run_across_stage: the label stage's search",
                                               "allocation (per-layer cost curves)", "greedy"));
  }
  const auto& model = runner.model();
  const Index layers = model.layer_count();
  const Index ctx = protocol.context;
  const auto& cfg = model.config();
  const auto steps = static_cast<Index>(std::llround(1.0 / protocol.calibration_step));
  AcrossStage<T> out;
  out.options = attention_options(model, ctx);
  const WindowSetMeasure<T> measure_cal =
      detail::calibration_measure(runner, label_tokens, label.windows, protocol, obs);
  const std::function<double(double)> mlp_saving = [&](double f) {
    return flops::mlp_saving_per_token(static_cast<double>(cfg.d_model),
                                       static_cast<double>(cfg.d_hidden), f,
                                       static_cast<double>(cfg.mlp_matrices()));
  };
  out.groups = across_groups(label.cost_curves, mlp_saving, out.options, measure_cal);
  const auto gates = label.plain_gates();
  const auto variant_of = [&](const std::vector<Index>& k) {
    return across_variant(model, fit.surrogates, gates, label.thresholds, steps, out.options,
                          out.groups, k);
  };
  AllocationOptions settings;
  settings.max_tries = protocol.allocation_tries;
  settings.resamples = protocol.bootstrap_resamples;
  settings.seed = protocol.seed;
  const auto measure_state = [&](const std::vector<Index>& k) {
    const VariantLosses r = measure_cal({variant_of(k)}, false);
    return joint_measurement(r, 0, out.groups.curves.base_sums, settings.resamples, settings.seed);
  };
  const std::vector<Index> none(static_cast<std::size_t>(2 * layers), 0);
  std::vector<std::vector<Index>> chosen;
  std::vector<ModelVariant<T>> variants;
  for (double b : protocol.budgets_pct) {
    out.allocations.push_back(
        allocate_across(out.groups, out.options, mlp_saving, b, measure_state, settings));
    const auto& a = out.allocations.back();
    chosen.push_back(a.chosen < 0 ? none : a.tries[static_cast<std::size_t>(a.chosen)].steps);
    variants.push_back(variant_of(chosen.back()));
  }
  // Every chosen state on every eval window, then timed.
  const Index windows = static_cast<Index>(eval_tokens.size()) / ctx;
  const VariantLosses r = runner.measure(eval_tokens, windows, ctx, variants, true);
  std::vector<double> base_sums(static_cast<std::size_t>(windows));
  for (Index w = 0; w < windows; ++w)
    base_sums[static_cast<std::size_t>(w)] = r.window_sum(r.base, w);
  double own_attention = 0;
  for (const auto& o : out.options)
    own_attention += o.flops_per_token;
  const double dense_mlps = static_cast<double>(layers) *
                            flops::dense_mlp_per_token(static_cast<double>(cfg.d_model),
                                                       static_cast<double>(cfg.d_hidden),
                                                       static_cast<double>(cfg.mlp_matrices()));
  const double forward =
      own_attention + dense_mlps +
      2.0 * static_cast<double>(cfg.d_model) * static_cast<double>(cfg.vocab_size);
  for (std::size_t b = 0; b < chosen.size(); ++b) {
    const auto& k = chosen[b];
    const auto& a = out.allocations[b];
    AcrossResult res;
    res.budget_pct = protocol.budgets_pct[b];
    if (a.chosen >= 0)
      res.calibration_delta_pct = a.tries[static_cast<std::size_t>(a.chosen)].calibration.delta_pct;
    std::vector<double> sums(static_cast<std::size_t>(windows));
    for (Index w = 0; w < windows; ++w)
      sums[static_cast<std::size_t>(w)] = r.window_sum(r.variant[b], w);
    res.eval_ppl = detail::ppl_of(r.variant[b]);
    res.eval_delta_pct = bootstrap_delta_pct(base_sums, sums, ctx - 1, protocol.bootstrap_resamples,
                                             protocol.seed + b);
    double mlp_saved = 0, attention_saved = 0;
    bool linear_attention = false;
    for (std::size_t l = 0; l < static_cast<std::size_t>(layers); ++l) {
      const double f =
          static_cast<double>(r.counts[b][l].linear) / static_cast<double>(windows * ctx);
      res.gate_fractions.push_back(static_cast<double>(k[l]) / static_cast<double>(steps));
      res.eval_layer_linear_fraction.push_back(f);
      res.eval_linear_fraction += f / static_cast<double>(layers);
      if (k[l] > 0)
        mlp_saved += mlp_saving(f);
      const auto* o = chosen_attention(out.options, out.groups, k, l);
      res.attention.push_back(o ? o->conversion : "");
      res.attention_parameter.push_back(o ? o->parameter : 0);
      if (o) {
        attention_saved += o->saving_per_token;
        linear_attention = linear_attention || o->conversion == "linear";
      }
    }
    res.mlp_flops_saved_pct = 100.0 * mlp_saved / dense_mlps;
    res.attention_flops_saved_pct = 100.0 * attention_saved / own_attention;
    res.forward_flops_saved_pct = 100.0 * (mlp_saved + attention_saved) / forward;
    if (mlp_saved + attention_saved > 0)
      res.attention_share = attention_saved / (mlp_saved + attention_saved);
    const Index timed = std::min(protocol.timing_windows, windows);
    res.prefill =
        runner.time_forward(eval_tokens, timed, ctx, variants[b], protocol.timing_repetitions);
    if (!linear_attention) {
      res.decode = runner.time_decode(eval_tokens, std::min(protocol.decode_steps, ctx),
                                      variants[b], protocol.timing_repetitions);
    }
    out.results.push_back(std::move(res));
  }
  return out;
}

}  // namespace nlb
