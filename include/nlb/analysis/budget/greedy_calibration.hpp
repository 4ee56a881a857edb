// Greedy joint calibration on the label set (PAPERS §A7, [ours]; docs/budget.md): per-layer
// gate thresholds on a fraction grid, then one layer raised at a time by the step whose joint
// label cost is smallest, until a budget is exceeded. Every joint state is measured through the
// analysis's runner (variant_runner.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "nlb/analysis/budget/joint_state.hpp"
#include "nlb/analysis/budget/label_rows.hpp"
#include "nlb/analysis/variant_runner.hpp"
#include "nlb/core.hpp"

namespace nlb {

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
/// With `rows` split (nlb/analysis/budget/label_rows.hpp) label_x holds this process's rows only
/// and the scores of all holders are gathered first (every holder calls together). O(L N d + L
/// steps N log N).
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
/// first N label losses) define Δ% = 100 (exp((Σ L_joint − Σ L_base) / N) − 1). Each state is
/// one runner.measure of its variant without the unmodified model, so the runner's kept prefix
/// streams let a state run from its first gated layer. The label linear fraction counts the rows
/// of every label window (all positions).
template <class T>
JointCalibration calibrate_joint(VariantRunner<T>& runner,
                                 std::span<const std::int32_t> label_tokens, Index windows,
                                 Index context, std::span<const double> base_losses,
                                 const std::vector<RidgeSurrogate<T>>& surrogates,
                                 const std::vector<HyperplaneGate<T>>& gates,
                                 const std::vector<std::vector<double>>& thresholds,
                                 double max_budget_pct,
                                 const std::function<void(Index, double)>& progress = {}) {
  const auto layers = gates.size();
  const auto n = base_losses.size();
  double base_sum = 0;
  for (double v : base_losses)
    base_sum += v;
  const Index steps = static_cast<Index>(thresholds.at(0).size()) - 1;
  JointCalibration out;
  auto measure = [&](const std::vector<Index>& k, JointState& s) {
    s.fractions.assign(layers, 0.0);
    s.thresholds.assign(layers, std::numeric_limits<double>::infinity());
    for (std::size_t l = 0; l < layers; ++l) {
      s.fractions[l] = static_cast<double>(k[l]) / static_cast<double>(steps);
      s.thresholds[l] = thresholds[l][static_cast<std::size_t>(k[l])];
    }
    const VariantLosses r =
        runner.measure(label_tokens, windows, context,
                       {joint_variant(runner.model(), surrogates, gates, s)}, false);
    double sum = 0;
    for (std::size_t i = 0; i < r.variant[0].size() && i < n; ++i)
      sum += r.variant[0][i];
    s.label_delta_pct = delta_pct_of_sums(sum, base_sum, static_cast<double>(n));
    s.label_linear_fraction = linear_share(r.counts[0], static_cast<double>(windows * context));
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

}  // namespace nlb
