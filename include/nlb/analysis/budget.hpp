// The MLP budget pipeline of PAPERS §A (issue 4): surrogates, per-layer all-linear cost, gates,
// probes, joint gating with measured savings. Each stage is a function of explicit token spans,
// so which data a stage reads is visible in its signature (split discipline, PAPERS §A7).
//
//   fit_surrogates      fit tokens   → per-layer RidgeSurrogate + R²              (stage 2)
//   run_label_stage     label tokens → δ, gates + held-out AUC, probes, joint thresholds
//                                                                         (stages 4, 5, 6)
//   run_eval_stage      eval tokens  → baseline PPL, per-layer all-linear and gated Δ%, all
//                                      layers linear, joint Δ% per budget (stages 1, 3, 4, 6)
//   run_no_fly          eval + cross tokens → per-token δ lists compared    (stage 5)
//   time_joint          eval tokens  → wall-clock dense vs gated                 (stage 6)
//   run_budget          all of the above → BudgetReport
#pragma once

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nlb/analysis/bootstrap.hpp"
#include "nlb/analysis/budget_across.hpp"
#include "nlb/analysis/budget_allocation.hpp"
#include "nlb/analysis/budget_protocol.hpp"
#include "nlb/analysis/flops.hpp"
#include "nlb/analysis/gate_training.hpp"
#include "nlb/analysis/joint_gating.hpp"
#include "nlb/analysis/label_rows.hpp"
#include "nlb/analysis/mlp_variants.hpp"
#include "nlb/analysis/probes.hpp"
#include "nlb/analysis/tap_collection.hpp"
#include "nlb/analysis/variant_engine.hpp"
#include "nlb/mlp/ridge_surrogate.hpp"
#include "nlb/model/transformer.hpp"

namespace nlb {

/// Stage hooks for progress reporting: begin(stage name), counter(done, total) while a stage
/// runs, end(stage name, seconds). Any may be empty.
struct BudgetObserver {
  std::function<void(const std::string&)> begin;
  std::function<void(long long, long long)> counter;
  std::function<void(const std::string&, double)> end;
};

namespace detail {
// Runs f() as a named stage: begin/end hooks and the stage's wall-clock seconds in `times`.
template <class F>
auto budget_stage(const BudgetObserver& obs, std::vector<std::pair<std::string, double>>& times,
                  const std::string& name, F&& f) {
  if (obs.begin)
    obs.begin(name);
  const auto t0 = std::chrono::steady_clock::now();
  auto finish = [&] {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    times.emplace_back(name, s);
    if (obs.end)
      obs.end(name, s);
  };
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    finish();
  } else {
    auto r = f();
    finish();
    return r;
  }
}

inline std::function<void(Index, Index)> counter_of(const BudgetObserver& obs) {
  if (!obs.counter)
    return {};
  return [&obs](Index done, Index total) { obs.counter(done, total); };
}

inline double ppl_of(std::span<const double> losses) {
  double s = 0;
  for (double v : losses)
    s += v;
  return std::exp(s / static_cast<double>(losses.size()));
}
}  // namespace detail

// ---- stage 2 ------------------------------------------------------------------------------

/// The per-layer surrogates and their fits.
template <class T, class Backend = backend::cpu>
struct SurrogateFit {
  std::vector<RidgeSurrogate<T, Dynamic, Dynamic, Backend>> surrogates;  // [layers]
  std::vector<RidgeFitReport> reports;                                   // [layers]
};

/// Stage 2 (PAPERS §A1): RidgeStats on the MLP taps of the first protocol.fit_tokens positions
/// of `fit_tokens` (collect_ridge_stats), fitted with protocol.lambda in double, applied in T.
/// Throws ArgumentError (too few tokens, naming `what`), FormatError (taps missing).
template <class T, class Backend>
SurrogateFit<T, Backend> fit_surrogates(const Transformer<T, Backend>& model,
                                        std::span<const std::int32_t> fit_tokens,
                                        const BudgetProtocol& protocol,
                                        const std::string& what = "fit tokens",
                                        const std::function<void(Index, Index)>& progress = {}) {
  require_windows(what, fit_tokens, protocol.fit_windows(), protocol.context,
                  std::to_string(protocol.fit_tokens) + " fit positions");
  const auto stats =
      collect_ridge_stats(model, fit_tokens, protocol.context, protocol.fit_tokens, progress);
  SurrogateFit<T, Backend> out;
  for (const auto& s : stats) {
    RidgeSurrogate<T, Dynamic, Dynamic, Backend> r;
    out.reports.push_back(r.fit(s, protocol.lambda));
    out.surrogates.push_back(std::move(r));
  }
  return out;
}

// ---- stages 4, 5, 6 on the label set ---------------------------------------------------------

/// Everything computed from the label tokens.
template <class T, class Backend = backend::cpu>
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
  std::vector<HyperplaneGate<T, Dynamic, Backend>> plain_gates() const {
    std::vector<HyperplaneGate<T, Dynamic, Backend>> g;
    for (const auto& t : gates)
      g.push_back(t.gate);
    return g;
  }
};

namespace detail {

// Measures variants on the calibration split (the calibration_windows() windows of
// `label_tokens` after the `label_windows` label windows): through `engine` when active, else on
// the host model, runs without the unmodified model continuing from its kept prefix streams
// (PrefixStreams, kept on first use when they fit in 1 GiB). Runs with the unmodified model
// report progress through `obs`.
template <class T, class Backend>
WindowSetMeasure<T, Backend> calibration_measure(const Transformer<T, Backend>& model,
                                                 std::span<const std::int32_t> label_tokens,
                                                 Index label_windows,
                                                 const BudgetProtocol& protocol,
                                                 const BudgetObserver& obs,
                                                 const VariantEngine<T, Backend>& engine) {
  const Index ctx = protocol.context;
  const Index cal_windows = protocol.calibration_windows();
  const auto cal_tokens = label_tokens.subspan(static_cast<std::size_t>(label_windows * ctx));
  auto prefix = std::make_shared<PrefixStreams<T, Backend>>();
  return [&model, &engine, obs, cal_tokens, cal_windows, ctx, prefix](
             const std::vector<MlpVariant<T, Backend>>& variants, bool with_base) {
    std::function<void(Index, Index)> progress;
    if (with_base)
      progress = counter_of(obs);
    if (engine.active())
      return engine.measure(cal_tokens, cal_windows, ctx, variants, with_base, progress);
    const double cache_bytes = static_cast<double>(std::size_t{1} << 30);
    if (!with_base && prefix->kept.empty() &&
        PrefixStreams<T, Backend>::bytes_needed(model, cal_windows, ctx) <= cache_bytes)
      *prefix = PrefixStreams<T, Backend>::keep(model, cal_tokens, cal_windows, ctx);
    return measure_variants(model, cal_tokens, cal_windows, ctx, variants, with_base, NoTaps{},
                            progress, prefix->kept.empty() ? nullptr : prefix.get());
  };
}

// The joint calibration of run_label_stage (PAPERS §A7, docs/budget.md): with the allocation
// search, the per-layer cost curves on the calibration split and a knapsack allocation per budget
// corrected by joint measurement (budget_allocation.hpp), each chosen state then measured on the
// label windows; with the greedy search, the greedy path on the label set (joint_gating.hpp),
// each chosen state then measured on the calibration split. Either way every chosen state has
// its label and calibration Δ%. Needs out.gates, out.base_losses and label_tokens holding the
// label windows followed by the calibration windows; label_x holds the label rows of `rows`.
template <class T, class Backend>
void run_joint_calibration(const Transformer<T, Backend>& model,
                           const SurrogateFit<T, Backend>& fit,
                           std::span<const std::int32_t> label_tokens,
                           const std::vector<Activations<T>>& label_x,
                           const BudgetProtocol& protocol, const BudgetObserver& obs,
                           const VariantEngine<T, Backend>& engine, LabelStage<T, Backend>& out,
                           const LabelRows& rows = {}) {
  using Variants = std::vector<MlpVariant<T, Backend>>;
  const Index layers = model.layer_count();
  const Index ctx = protocol.context;
  const auto steps = static_cast<Index>(std::llround(1.0 / protocol.calibration_step));
  const auto gates = out.plain_gates();
  out.thresholds = fraction_thresholds(gates, label_x, steps, rows);
  const auto& thresholds = out.thresholds;
  out.calibration_windows = protocol.calibration_windows();
  const std::size_t cache_bytes = std::size_t{1} << 30;
  const WindowSetMeasure<T, Backend> measure_cal =
      calibration_measure(model, label_tokens, out.windows, protocol, obs, engine);
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
    std::function<VariantLosses(const MlpVariant<T, Backend>&)> elsewhere;
    if (engine.active()) {
      elsewhere = [&](const MlpVariant<T, Backend>& v) {
        return engine.measure(label_tokens, out.windows, ctx, {v}, false, {});
      };
    }
    out.calibration = calibrate_joint(
        model, label_tokens, out.windows, ctx, out.base_losses, fit.surrogates, gates, thresholds,
        max_budget,
        [&](Index step, double) {
          if (obs.counter)
            obs.counter(step, steps * layers);
        },
        cache_bytes, elsewhere);
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
                                       static_cast<double>(cfg.d_hidden), f);
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
    const VariantLosses r =
        engine.active() ? engine.measure(label_tokens, out.windows, ctx, chosen, false, {})
                        : measure_variants(model, label_tokens, out.windows, ctx, chosen, false);
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
/// surrogates). Throws ArgumentError naming `what` when there are too few tokens. With
/// protocol.gate_features = split and an engine with label_rows, this process collects the
/// features of its own label windows only and the gates are fitted over all processes
/// (docs/scaling.md); every process must call together.
template <class T, class Backend>
LabelStage<T, Backend> run_label_stage(const Transformer<T, Backend>& model,
                                       const SurrogateFit<T, Backend>& fit,
                                       std::span<const std::int32_t> label_tokens,
                                       const BudgetProtocol& protocol, const BudgetObserver& obs,
                                       std::vector<std::pair<std::string, double>>& times,
                                       const std::string& what = "label tokens",
                                       const VariantEngine<T, Backend>& engine = {}) {
  const Index layers = model.layer_count();
  const Index n = protocol.label_tokens;
  const Index ctx = protocol.context;
  LabelStage<T, Backend> out;
  out.positions = n;
  out.windows = protocol.label_windows();
  require_windows(what, label_tokens, out.windows + protocol.calibration_windows(), ctx,
                  std::to_string(n) + " label positions and " +
                      std::to_string(protocol.calibration_tokens) + " calibration positions");
  // The label rows whose gate features this process collects: all of them, or with
  // gate_features = split and an engine that offers it, those of its own windows.
  LabelRows rows;
  if (protocol.gate_features == GateFeatures::split && engine.label_rows)
    rows = engine.label_rows(out.windows);
  const Index rows_here = rows.place(ctx, n);
  LabelTapCollector<T> taps(layers, model.config().d_model, ctx, rows_here);
  detail::budget_stage(obs, times, "label: delta per position", [&] {
    const auto variants = one_layer_linear_variants(fit.surrogates);
    VariantLosses r;
    if (rows.split()) {
      // This process's windows, their features collected in the same pass; every window's
      // losses then gathered in window order (the holders' blocks, as the engine gathers them).
      // Only the losses are read below, so the route counts are not gathered.
      const auto mine = label_tokens.subspan(static_cast<std::size_t>(rows.first_window * ctx),
                                             static_cast<std::size_t>(rows.windows * ctx));
      r = measure_variants(model, mine, rows.windows, ctx, variants, true, taps,
                           detail::counter_of(obs));
      r.windows = out.windows;
      r.base = rows.all(r.base);
      for (auto& v : r.variant)
        v = rows.all(v);
      r.counts.clear();
    } else if (engine.active()) {
      // The taps read activations on the host: one unmodified pass here, the losses there.
      measure_variants(model, label_tokens, out.windows, ctx, {}, true, taps);
      r = engine.measure(label_tokens, out.windows, ctx, variants, true, detail::counter_of(obs));
    } else {
      r = measure_variants(model, label_tokens, out.windows, ctx, variants, true, taps,
                           detail::counter_of(obs));
    }
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
      out.gates.push_back(train_gate<T>(acts.x[ls], out.delta[ls], n_train, rows));
      out.probes.push_back(probe_aucs<T>(acts.x[ls], acts.e, out.delta[ls], n_train,
                                         out.gates.back().holdout_auc, rows));
      if (obs.counter)
        obs.counter(l + 1, layers);
    }
  });
  detail::budget_stage(obs, times, "label: joint calibration", [&] {
    detail::run_joint_calibration(model, fit, label_tokens, acts.x, protocol, obs, engine, out,
                                  rows);
  });
  return out;
}

// ---- stages 1, 3, 4, 6 on the eval set -------------------------------------------------------

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
template <class T, class Backend>
EvalStage run_eval_stage(const Transformer<T, Backend>& model, const SurrogateFit<T, Backend>& fit,
                         const std::type_identity_t<LabelStage<T, Backend>>* label,
                         std::span<const std::int32_t> eval_tokens, const BudgetProtocol& protocol,
                         const std::function<void(Index, Index)>& progress = {},
                         const std::string& what = "eval tokens",
                         const VariantEngine<T, Backend>& engine = {}) {
  const Index layers = model.layer_count();
  const Index ctx = protocol.context;
  EvalStage out;
  out.windows = static_cast<Index>(eval_tokens.size()) / ctx;
  require_windows(what, eval_tokens, std::max<Index>(out.windows, 1), ctx, "one eval window");
  out.predicted_tokens = out.windows * (ctx - 1);
  auto variants = one_layer_linear_variants(fit.surrogates);
  {
    MlpVariant<T, Backend> all;
    for (Index l = 0; l < layers; ++l)
      all.add_linear(l, fit.surrogates[static_cast<std::size_t>(l)]);
    variants.push_back(std::move(all));
  }
  if (label) {
    for (Index l = 0; l < layers; ++l) {
      const auto ls = static_cast<std::size_t>(l);
      MlpVariant<T, Backend> v;
      v.add_gated(l, fit.surrogates[ls], label->gates[ls].gate);
      variants.push_back(std::move(v));
    }
    const auto gates = label->plain_gates();
    for (const auto& state : label->joint)
      variants.push_back(joint_variant(model, fit.surrogates, gates, state));
  }
  const VariantLosses r =
      engine.active() ? engine.measure(eval_tokens, out.windows, ctx, variants, true, progress)
                      : measure_variants(model, eval_tokens, out.windows, ctx, variants, true,
                                         NoTaps{}, progress);
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
        static_cast<double>(cfg.d_model), static_cast<double>(cfg.d_hidden),
        static_cast<double>(layers), 0.5 * static_cast<double>(ctx + 1),
        static_cast<double>(cfg.vocab_size)};
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

// ---- stage 5: no-fly lists --------------------------------------------------------------------

/// Per layer, the no-fly comparison of the eval file (δ from run_eval_stage) and the cross file.
struct NoFlyStage {
  Index cross_windows = 0;
  double cross_baseline_ppl = 0;
  std::vector<NoFlyComparison> layers;  // [layers]: a = eval file, b = cross file
};

/// δ per position on every full window of `cross_tokens` (each layer linear alone), then per
/// layer compare_no_fly(eval, cross) with the protocol's threshold and minimum count
/// (PAPERS §A4). Reads `cross_tokens` and the eval stage's δ.
template <class T, class Backend>
NoFlyStage run_no_fly(const Transformer<T, Backend>& model, const SurrogateFit<T, Backend>& fit,
                      std::span<const std::int32_t> eval_tokens, const EvalStage& eval,
                      std::span<const std::int32_t> cross_tokens, const BudgetProtocol& protocol,
                      const std::function<void(Index, Index)>& progress = {},
                      const std::string& what = "cross tokens",
                      const VariantEngine<T, Backend>& engine = {}) {
  const Index layers = model.layer_count();
  const Index ctx = protocol.context;
  NoFlyStage out;
  out.cross_windows = static_cast<Index>(cross_tokens.size()) / ctx;
  require_windows(what, cross_tokens, std::max<Index>(out.cross_windows, 1), ctx,
                  "one window of the second corpus");
  const auto variants = one_layer_linear_variants(fit.surrogates);
  const VariantLosses r =
      engine.active()
          ? engine.measure(cross_tokens, out.cross_windows, ctx, variants, true, progress)
          : measure_variants(model, cross_tokens, out.cross_windows, ctx, variants, true, NoTaps{},
                             progress);
  out.cross_baseline_ppl = detail::ppl_of(r.base);
  const Index cross_positions = out.cross_windows * (ctx - 1);
  for (Index l = 0; l < layers; ++l) {
    const auto ls = static_cast<std::size_t>(l);
    const auto a = token_delta_means(eval_tokens, eval.delta[ls], ctx);
    const auto b =
        token_delta_means(cross_tokens, loss_delta(r.variant[ls], r.base, cross_positions), ctx);
    out.layers.push_back(compare_no_fly(a, b, protocol.no_fly_delta, protocol.no_fly_min_count));
  }
  return out;
}

// ---- one budget across MLP and attention ------------------------------------------------------

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
template <class T, class Backend = backend::cpu>
struct AcrossStage {
  std::vector<LayerAttentionOptions<T, Backend>> options;  // [layers] every conversion, costed
  AcrossGroups groups;                                     // offered options and cost curves
  std::vector<BudgetAllocation> allocations;               // [budgets]
  std::vector<AcrossResult> results;                       // [budgets]
};

/// Spends each budget across the layers' gates and attention conversions (attention_options at
/// the protocol's context): the gates' cost curves of the label stage's allocation search
/// (label.cost_curves) and each offered conversion's cost alone, both on the calibration split,
/// one knapsack over both (allocate_across) corrected by joint measurement on the calibration
/// split; then each chosen state on every eval window (Δ% with interval, linear fractions,
/// FLOPs saved) and timed against the unmodified model (prefill over timing_windows eval
/// windows, batch-1 decode of decode_steps tokens). Runs on the host. Throws ArgumentError when
/// the label stage ran the greedy search (no cost curves).
template <class T, class Backend>
AcrossStage<T, Backend> run_across_stage(const Transformer<T, Backend>& model,
                                         const SurrogateFit<T, Backend>& fit,
                                         const LabelStage<T, Backend>& label,
                                         std::span<const std::int32_t> label_tokens,
                                         std::span<const std::int32_t> eval_tokens,
                                         const BudgetProtocol& protocol,
                                         const BudgetObserver& obs = {}) {
  if (label.cost_curves.delta_pct.empty()) {
    throw ArgumentError(detail::expected_found("run_across_stage: the label stage's search",
                                               "allocation (per-layer cost curves)", "greedy"));
  }
  const Index layers = model.layer_count();
  const Index ctx = protocol.context;
  const auto& cfg = model.config();
  const auto steps = static_cast<Index>(std::llround(1.0 / protocol.calibration_step));
  AcrossStage<T, Backend> out;
  out.options = attention_options(model, ctx);
  const VariantEngine<T, Backend> host;
  const WindowSetMeasure<T, Backend> measure_cal =
      detail::calibration_measure(model, label_tokens, label.windows, protocol, obs, host);
  const std::function<double(double)> mlp_saving = [&](double f) {
    return flops::mlp_saving_per_token(static_cast<double>(cfg.d_model),
                                       static_cast<double>(cfg.d_hidden), f);
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
  std::vector<MlpVariant<T, Backend>> variants;
  for (double b : protocol.budgets_pct) {
    out.allocations.push_back(
        allocate_across(out.groups, out.options, mlp_saving, b, measure_state, settings));
    const auto& a = out.allocations.back();
    chosen.push_back(a.chosen < 0 ? none : a.tries[static_cast<std::size_t>(a.chosen)].steps);
    variants.push_back(variant_of(chosen.back()));
  }
  // Every chosen state on every eval window, then timed.
  const Index windows = static_cast<Index>(eval_tokens.size()) / ctx;
  const VariantLosses r = measure_variants(model, eval_tokens, windows, ctx, variants, true);
  std::vector<double> base_sums(static_cast<std::size_t>(windows));
  for (Index w = 0; w < windows; ++w)
    base_sums[static_cast<std::size_t>(w)] = r.window_sum(r.base, w);
  double own_attention = 0;
  for (const auto& o : out.options)
    own_attention += o.flops_per_token;
  const double dense_mlps =
      static_cast<double>(layers) * flops::dense_mlp_per_token(static_cast<double>(cfg.d_model),
                                                               static_cast<double>(cfg.d_hidden));
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
        time_forward(model, eval_tokens, timed, ctx, variants[b], protocol.timing_repetitions);
    if (!linear_attention) {
      res.decode = time_decode(model, eval_tokens, std::min(protocol.decode_steps, ctx),
                               variants[b], protocol.timing_repetitions);
    }
    out.results.push_back(std::move(res));
  }
  return out;
}

// ---- the whole pipeline -----------------------------------------------------------------------

/// Everything `nlb budget` reports. Fields under `timing`, `forward_timing` and `decode_timing`
/// are wall-clock
/// measurements (not deterministic); everything else is a function of the inputs and the seed.
template <class T, class Backend = backend::cpu>
struct BudgetReport {
  BudgetProtocol protocol;
  ModelConfig config;
  SurrogateFit<T, Backend> fit;
  LabelStage<T, Backend> label;
  EvalStage eval;
  NoFlyStage no_fly;
  std::vector<ForwardTiming> forward_timing;           // [budgets] prefill: eval windows
  std::vector<ForwardTiming> decode_timing;            // [budgets] batch-1 decoding
  std::optional<AcrossStage<T, Backend>> across;       // protocol.across_attention only
  std::vector<std::pair<std::string, double>> timing;  // (stage, seconds)
};

/// The whole pipeline (stages 1–6) on explicit token sets. The model is only read: every
/// replaced or gated MLP runs as a per-layer override (MlpOverride). With an active `engine`
/// (e.g. the CUDA backend's) the forward passes of every stage but the surrogates' fit, and the
/// timings, run there; the label stage's activation taps still come from one unmodified host
/// pass, and everything fitted or searched stays on the host in double. Throws ArgumentError
/// (protocol, too few tokens: the message names the set by `names` = {fit, label, eval, cross}),
/// FormatError (taps missing).
template <class T, class Backend>
BudgetReport<T, Backend> run_budget(
    const Transformer<T, Backend>& model, std::span<const std::int32_t> fit_tokens,
    std::span<const std::int32_t> label_tokens, std::span<const std::int32_t> eval_tokens,
    std::span<const std::int32_t> cross_tokens, const BudgetProtocol& protocol,
    const BudgetObserver& obs = {},
    const std::array<std::string, 4>& names = {"fit tokens", "label tokens", "eval tokens",
                                               "cross tokens"},
    const VariantEngine<T, Backend>& engine = {}) {
  protocol.validate();
  if (protocol.context > model.config().n_positions) {
    throw ArgumentError(detail::expected_found(
        "budget protocol: context",
        "at most n_positions = " + std::to_string(model.config().n_positions), protocol.context));
  }
  // Check every token set's length before the first long stage.
  require_windows(names[0], fit_tokens, protocol.fit_windows(), protocol.context,
                  std::to_string(protocol.fit_tokens) + " fit positions");
  require_windows(names[1], label_tokens, protocol.label_windows() + protocol.calibration_windows(),
                  protocol.context,
                  std::to_string(protocol.label_tokens) + " label positions and " +
                      std::to_string(protocol.calibration_tokens) + " calibration positions");
  require_windows(names[2], eval_tokens, 1, protocol.context, "one eval window");
  require_windows(names[3], cross_tokens, 1, protocol.context, "one window");
  BudgetReport<T, Backend> rep;
  rep.protocol = protocol;
  rep.config = model.config();
  auto& times = rep.timing;
  rep.fit = detail::budget_stage(obs, times, "fit: surrogates", [&] {
    return fit_surrogates(model, fit_tokens, protocol, names[0], detail::counter_of(obs));
  });
  rep.label = run_label_stage(model, rep.fit, label_tokens, protocol, obs, times, names[1], engine);
  rep.eval = detail::budget_stage(obs, times, "eval: baseline, linear, gated, joint", [&] {
    return run_eval_stage(model, rep.fit, &rep.label, eval_tokens, protocol,
                          detail::counter_of(obs), names[2], engine);
  });
  rep.no_fly = detail::budget_stage(obs, times, "cross: no-fly lists", [&] {
    return run_no_fly(model, rep.fit, eval_tokens, rep.eval, cross_tokens, protocol,
                      detail::counter_of(obs), names[3], engine);
  });
  detail::budget_stage(obs, times, "timing: dense vs gated forward and decode", [&] {
    const auto gates = rep.label.plain_gates();
    const Index windows = std::min(protocol.timing_windows, rep.eval.windows);
    for (const auto& state : rep.label.joint) {
      const auto v = joint_variant(model, rep.fit.surrogates, gates, state);
      const Index steps = std::min(protocol.decode_steps, protocol.context);
      if (engine.active()) {
        rep.forward_timing.push_back(engine.time_forward(eval_tokens, windows, protocol.context, v,
                                                         protocol.timing_repetitions));
        rep.decode_timing.push_back(
            engine.time_decode(eval_tokens, steps, v, protocol.timing_repetitions));
      } else {
        rep.forward_timing.push_back(time_forward(model, eval_tokens, windows, protocol.context, v,
                                                  protocol.timing_repetitions));
        rep.decode_timing.push_back(
            time_decode(model, eval_tokens, steps, v, protocol.timing_repetitions));
      }
    }
  });
  if (protocol.across_attention) {
    rep.across = detail::budget_stage(obs, times, "across: MLP gates and attention", [&] {
      return run_across_stage(model, rep.fit, rep.label, label_tokens, eval_tokens, protocol, obs);
    });
  }
  return rep;
}

}  // namespace nlb

// The pipeline's stages for float on the CPU backend, written once: `template` in an instances
// file that compiles them (tools/instances/analysis_instances.cpp), `extern template` in every
// translation unit built with NLB_EXTERN_ANALYSIS_INSTANCES, which then links them instead of
// compiling them again (docs/architecture.md, "Compile time"). Without the macro the library
// stays header-only and nothing changes.
#define NLB_BUDGET_STAGE_INSTANCES(DECLARE, T, B)                                                 \
  DECLARE SurrogateFit<T, B> fit_surrogates<T, B>(                                                \
      const Transformer<T, B>&, std::span<const std::int32_t>, const BudgetProtocol&,             \
      const std::string&, const std::function<void(Index, Index)>&);                              \
  DECLARE WindowSetMeasure<T, B> detail::calibration_measure<T, B>(                               \
      const Transformer<T, B>&, std::span<const std::int32_t>, Index, const BudgetProtocol&,      \
      const BudgetObserver&, const VariantEngine<T, B>&);                                         \
  DECLARE LabelStage<T, B> run_label_stage<T, B>(                                                 \
      const Transformer<T, B>&, const SurrogateFit<T, B>&, std::span<const std::int32_t>,         \
      const BudgetProtocol&, const BudgetObserver&, std::vector<std::pair<std::string, double>>&, \
      const std::string&, const VariantEngine<T, B>&);                                            \
  DECLARE EvalStage run_eval_stage<T, B>(                                                         \
      const Transformer<T, B>&, const SurrogateFit<T, B>&, const LabelStage<T, B>*,               \
      std::span<const std::int32_t>, const BudgetProtocol&,                                       \
      const std::function<void(Index, Index)>&, const std::string&, const VariantEngine<T, B>&);  \
  DECLARE NoFlyStage run_no_fly<T, B>(                                                            \
      const Transformer<T, B>&, const SurrogateFit<T, B>&, std::span<const std::int32_t>,         \
      const EvalStage&, std::span<const std::int32_t>, const BudgetProtocol&,                     \
      const std::function<void(Index, Index)>&, const std::string&, const VariantEngine<T, B>&);  \
  DECLARE AcrossStage<T, B> run_across_stage<T, B>(                                               \
      const Transformer<T, B>&, const SurrogateFit<T, B>&, const LabelStage<T, B>&,               \
      std::span<const std::int32_t>, std::span<const std::int32_t>, const BudgetProtocol&,        \
      const BudgetObserver&);                                                                     \
  DECLARE BudgetReport<T, B> run_budget<T, B>(                                                    \
      const Transformer<T, B>&, std::span<const std::int32_t>, std::span<const std::int32_t>,     \
      std::span<const std::int32_t>, std::span<const std::int32_t>, const BudgetProtocol&,        \
      const BudgetObserver&, const std::array<std::string, 4>&, const VariantEngine<T, B>&);

#ifdef NLB_EXTERN_ANALYSIS_INSTANCES
namespace nlb {
NLB_BUDGET_STAGE_INSTANCES(extern template, float, backend::cpu)
}  // namespace nlb
#endif
