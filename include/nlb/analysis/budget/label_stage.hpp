// Stages 4–6 of the MLP budget pipeline on the label set (PAPERS §A3, §A4, §A7): δ per position
// per layer, a gate per layer with its held-out AUC, the probes, and the joint calibration of the
// gates' thresholds for every budget (greedy path or per-layer cost curves and a knapsack).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nlb/analysis/budget/allocation.hpp"
#include "nlb/analysis/budget/fit_stage.hpp"
#include "nlb/analysis/budget/gate_training.hpp"
#include "nlb/analysis/budget/greedy_calibration.hpp"
#include "nlb/analysis/budget/joint_state.hpp"
#include "nlb/analysis/budget/label_rows.hpp"
#include "nlb/analysis/budget/observer.hpp"
#include "nlb/analysis/budget/probes.hpp"
#include "nlb/analysis/budget/protocol.hpp"
#include "nlb/analysis/budget/tap_collection.hpp"
#include "nlb/analysis/flops.hpp"
#include "nlb/analysis/variant_runner.hpp"

namespace nlb {

/// Everything computed from the label tokens.
template <class T>
struct LabelStage {
  Index positions = 0;  // N label positions
  Index windows = 0;
  double baseline_ppl = 0;                      // unmodified model on the N label positions
  std::vector<double> base_losses;              // [N] unmodified model's losses
  std::vector<double> all_linear_ppl;           // [layers] one layer linear, label positions
  std::vector<std::vector<double>> delta;       // [layers][N] δ = L_lin − L_full
  std::vector<TrainedGate<T>> gates;            // [layers] fitted on the first positions
  std::vector<ProbeAucs> probes;                // [layers] (PAPERS §A4)
  Index calibration_windows = 0;                // windows of the calibration split
  JointCalibration calibration;                 // the greedy path (greedy search only, PAPERS §A7)
  LayerCostCurves cost_curves;                  // per-layer curves (allocation search only)
  std::vector<BudgetAllocation> allocations;    // [budgets] (allocation search only)
  std::vector<JointState> joint;                // [budgets] the chosen states
  std::vector<std::vector<double>> thresholds;  // [layers][steps + 1] gate threshold of fraction k
  /// The gates alone (threshold 0), for building variants.
  std::vector<HyperplaneGate<T>> plain_gates() const {
    std::vector<HyperplaneGate<T>> g;
    for (const auto& t : gates)
      g.push_back(t.gate);
    return g;
  }
};

namespace detail {

// Measures variants on the calibration split (the calibration_windows() windows of
// `label_tokens` after the `label_windows` label windows) through `runner`; runs with the
// unmodified model report progress through `obs`.
template <class T>
WindowSetMeasure<T> calibration_measure(VariantRunner<T>& runner,
                                        std::span<const std::int32_t> label_tokens,
                                        Index label_windows, const BudgetProtocol& protocol,
                                        const BudgetObserver& obs) {
  const Index ctx = protocol.context;
  const Index cal_windows = protocol.calibration_windows();
  const auto cal_tokens = label_tokens.subspan(static_cast<std::size_t>(label_windows * ctx));
  return [&runner, obs, cal_tokens, cal_windows, ctx](const std::vector<ModelVariant<T>>& variants,
                                                      bool with_base) {
    return runner.measure(cal_tokens, cal_windows, ctx, variants, with_base,
                          with_base ? counter_of(obs) : std::function<void(Index, Index)>{});
  };
}

// The joint calibration of run_label_stage (PAPERS §A7, docs/budget.md): with the allocation
// search, the per-layer cost curves on the calibration split and a knapsack allocation per budget
// corrected by joint measurement (allocation.hpp), each chosen state then measured on the
// label windows; with the greedy search, the greedy path on the label set (greedy_calibration.hpp),
// each chosen state then measured on the calibration split. Either way every chosen state has
// its label and calibration Δ%. Needs out.gates, out.base_losses and label_tokens holding the
// label windows followed by the calibration windows; label_x holds the label rows of `rows`.
template <class T>
void run_joint_calibration(VariantRunner<T>& runner, const SurrogateFit<T>& fit,
                           std::span<const std::int32_t> label_tokens,
                           const std::vector<Activations<T>>& label_x,
                           const BudgetProtocol& protocol, const BudgetObserver& obs,
                           LabelStage<T>& out, const LabelRows& rows = {}) {
  using Variants = std::vector<ModelVariant<T>>;
  const auto& model = runner.model();
  const Index layers = model.layer_count();
  const Index ctx = protocol.context;
  const auto steps = static_cast<Index>(std::llround(1.0 / protocol.calibration_step));
  const auto gates = out.plain_gates();
  out.thresholds = fraction_thresholds(gates, label_x, steps, rows);
  const auto& thresholds = out.thresholds;
  out.calibration_windows = protocol.calibration_windows();
  const WindowSetMeasure<T> measure_cal =
      calibration_measure(runner, label_tokens, out.windows, protocol, obs);
  const auto state_of = [&](const std::vector<Index>& k) {
    JointState s;
    s.fractions.assign(static_cast<std::size_t>(layers), 0.0);
    s.thresholds.assign(static_cast<std::size_t>(layers), std::numeric_limits<double>::infinity());
    for (std::size_t l = 0; l < k.size(); ++l) {
      s.fractions[l] = static_cast<double>(k[l]) / static_cast<double>(steps);
      s.thresholds[l] = thresholds[l][static_cast<std::size_t>(k[l])];
    }
    return s;
  };
  const auto gated = [](const JointState& s) {
    return std::any_of(s.fractions.begin(), s.fractions.end(), [](double f) { return f > 0; });
  };
  const std::uint64_t seed = protocol.seed;
  if (protocol.calibration_search == CalibrationSearch::greedy) {
    double max_budget = 0;
    for (double b : protocol.budgets_pct)
      max_budget = std::max(max_budget, b);
    out.calibration =
        calibrate_joint(runner, label_tokens, out.windows, ctx, out.base_losses, fit.surrogates,
                        gates, thresholds, max_budget, [&](Index step, double) {
                          if (obs.counter)
                            obs.counter(step, steps * layers);
                        });
    Variants chosen;
    for (double b : protocol.budgets_pct) {
      out.joint.push_back(out.calibration.for_budget(b));
      chosen.push_back(joint_variant(model, fit.surrogates, gates, out.joint.back()));
    }
    const VariantLosses r = measure_cal(chosen, true);
    std::vector<double> base_sums;
    for (Index w = 0; w < r.windows; ++w)
      base_sums.push_back(r.window_sum(r.base, w));
    for (std::size_t b = 0; b < out.joint.size(); ++b) {
      const auto m = joint_measurement(r, b, base_sums, protocol.bootstrap_resamples, seed);
      out.joint[b].calibration_delta_pct = m.delta_pct;
      out.joint[b].calibration_linear_fraction = m.linear_fraction;
    }
    return;
  }
  // Allocation: cost curves, then one knapsack search per budget.
  out.calibration.path.push_back(state_of(std::vector<Index>(static_cast<std::size_t>(layers), 0)));
  out.cost_curves = measure_cost_curves(model, fit.surrogates, gates, thresholds, measure_cal);
  const auto& cfg = model.config();
  const auto mlp_saving = [&](double f) {
    return flops::mlp_saving_per_token(static_cast<double>(cfg.d_model),
                                       static_cast<double>(cfg.d_hidden), f,
                                       static_cast<double>(cfg.mlp_matrices()));
  };
  const auto saving = [&](std::size_t l, Index, const JointMeasurement& m) {
    return mlp_saving(m.layer_linear_fraction[l]);
  };
  std::vector<std::vector<double>> value(static_cast<std::size_t>(layers));
  for (std::size_t l = 0; l < value.size(); ++l) {
    value[l].push_back(0.0);
    for (std::size_t k = 1; k < out.cost_curves.linear_fraction[l].size(); ++k)
      value[l].push_back(mlp_saving(out.cost_curves.linear_fraction[l][k]));
  }
  AllocationOptions options;
  options.max_tries = protocol.allocation_tries;
  options.resamples = protocol.bootstrap_resamples;
  options.seed = seed;
  const auto measure_state = [&](const std::vector<Index>& k) {
    const VariantLosses r =
        measure_cal({joint_variant(model, fit.surrogates, gates, state_of(k))}, false);
    return joint_measurement(r, 0, out.cost_curves.base_sums, options.resamples, options.seed);
  };
  Variants chosen;
  std::vector<std::size_t> chosen_budget;
  for (double b : protocol.budgets_pct) {
    out.allocations.push_back(
        allocate_budget(out.cost_curves, value, b, measure_state, saving, options));
    const auto& a = out.allocations.back();
    out.calibration.evaluations += a.evaluations;
    const std::vector<Index> none(static_cast<std::size_t>(layers), 0);
    JointState s =
        state_of(a.chosen < 0 ? none : a.tries[static_cast<std::size_t>(a.chosen)].steps);
    const JointMeasurement m =
        a.chosen < 0 ? JointMeasurement{} : a.tries[static_cast<std::size_t>(a.chosen)].calibration;
    s.calibration_delta_pct = m.delta_pct;
    s.calibration_linear_fraction = m.linear_fraction;
    if (gated(s)) {
      chosen.push_back(joint_variant(model, fit.surrogates, gates, s));
      chosen_budget.push_back(out.joint.size());
    }
    out.joint.push_back(s);
  }
  // The chosen states on the label windows (the positions the gates were fitted on), for the
  // label / calibration / eval comparison: the first N label positions, every row counted.
  if (!chosen.empty()) {
    const VariantLosses r = runner.measure(label_tokens, out.windows, ctx, chosen, false);
    const std::size_t n = out.base_losses.size();
    double base_sum = 0;
    for (double v : out.base_losses)
      base_sum += v;
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      double sum = 0;
      for (std::size_t p = 0; p < n; ++p)
        sum += r.variant[i][p];
      auto& s = out.joint[chosen_budget[i]];
      s.label_delta_pct = delta_pct_of_sums(sum, base_sum, static_cast<double>(n));
      s.label_linear_fraction = linear_share(r.counts[i], static_cast<double>(out.windows * ctx));
    }
  }
}

}  // namespace detail

/// Stages 4–6 on the label set: δ per position per layer (one layer linear vs the unmodified
/// model, PAPERS §A3), gate per layer trained on the first label_train_positions() with
/// held-out AUC, the probes on e and c = x − e (§A4), and the joint calibration for every
/// budget (§A7; protocol.calibration_search, on the calibration split: the calibration_windows()
/// windows of `label_tokens` after the label windows). Reads only `label_tokens` (and the
/// surrogates); every forward pass runs through `runner`. Throws ArgumentError naming `what`
/// when there are too few tokens. With protocol.gate_features = split and a runner whose
/// windows are spread over processes (held_windows), this process collects the features of its
/// own label windows only and the gates are fitted over all processes (docs/scaling.md); every
/// process must call together.
template <class T>
LabelStage<T> run_label_stage(VariantRunner<T>& runner, const SurrogateFit<T>& fit,
                              std::span<const std::int32_t> label_tokens,
                              const BudgetProtocol& protocol, const BudgetObserver& obs,
                              std::vector<std::pair<std::string, double>>& times,
                              const std::string& what = "label tokens") {
  const Index layers = runner.model().layer_count();
  const Index n = protocol.label_tokens;
  const Index ctx = protocol.context;
  LabelStage<T> out;
  out.positions = n;
  out.windows = protocol.label_windows();
  require_windows(what, label_tokens, out.windows + protocol.calibration_windows(), ctx,
                  std::to_string(n) + " label positions and " +
                      std::to_string(protocol.calibration_tokens) + " calibration positions");
  // The label rows whose gate features this process collects: the windows the runner measures
  // here when the features are split, else every one (collected in a pass of their own when the
  // runner measures only some windows here).
  const LabelRows held = runner.held_windows(out.windows);
  const LabelRows rows = protocol.gate_features == GateFeatures::split ? held : LabelRows{};
  LabelRows placed = rows;
  const Index rows_here = placed.place(ctx, n);
  LabelTapCollector<T> taps(layers, runner.model().config().d_model, ctx, rows_here);
  const auto collector = [&taps](Tap tap, Index layer, const RowMatrix<T>& m) {
    taps(tap, layer, m);
  };
  detail::budget_stage(obs, times, "label: delta per position", [&] {
    const bool fused = rows.split() == held.split();  // the measured windows are the rows'
    if (!fused)
      runner.collect(label_tokens, out.windows, ctx, collector);
    const VariantLosses r =
        runner.measure(label_tokens, out.windows, ctx, one_layer_linear_variants(fit.surrogates),
                       true, detail::counter_of(obs),
                       fused ? typename VariantRunner<T>::HostTaps(collector)
                             : typename VariantRunner<T>::HostTaps{});
    taps.check();
    const std::span<const double> base(r.base.data(), static_cast<std::size_t>(n));
    out.baseline_ppl = detail::ppl_of(base);
    out.base_losses.assign(base.begin(), base.end());
    for (Index l = 0; l < layers; ++l) {
      const auto& lin = r.variant[static_cast<std::size_t>(l)];
      out.all_linear_ppl.push_back(
          detail::ppl_of(std::span<const double>(lin.data(), static_cast<std::size_t>(n))));
      out.delta.push_back(loss_delta(lin, r.base, n));
    }
  });
  const auto& acts = taps.activations();
  const Index n_train = protocol.label_train_positions();
  detail::budget_stage(obs, times, "label: gates and probes", [&] {
    for (Index l = 0; l < layers; ++l) {
      const auto ls = static_cast<std::size_t>(l);
      out.gates.push_back(train_gate<T>(acts.x[ls], out.delta[ls], n_train, placed));
      out.probes.push_back(probe_aucs<T>(acts.x[ls], acts.e, out.delta[ls], n_train,
                                         out.gates.back().holdout_auc, placed));
      if (obs.counter)
        obs.counter(l + 1, layers);
    }
  });
  detail::budget_stage(obs, times, "label: joint calibration", [&] {
    detail::run_joint_calibration(runner, fit, label_tokens, acts.x, protocol, obs, out, placed);
  });
  return out;
}

}  // namespace nlb
