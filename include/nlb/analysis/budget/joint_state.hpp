// A joint gating state (PAPERS §A7: every layer's gate on at once, per-layer thresholds) and how
// its measured losses are read: Δ% of loss sums, the share of rows routed linear, and the
// variant that runs it. Shared by the greedy calibration (greedy_calibration.hpp) and the
// allocation search (allocation.hpp).
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "nlb/analysis/bootstrap.hpp"
#include "nlb/analysis/model_variant.hpp"
#include "nlb/core.hpp"
#include "nlb/mlp/route_counts.hpp"

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

/// The variant of a joint state: every layer with a fraction > 0 gated at its threshold
/// (the gate copied with that threshold; the surrogates and the model's MLPs referred to).
/// Throws ArgumentError when a gated layer of `model` does not hold a full MLP.
template <class T, class Backend>
ModelVariant<T, Backend> joint_variant(
    const Transformer<T, Backend>& model,
    const std::vector<RidgeSurrogate<T, Dynamic, Dynamic, Backend>>& surrogates,
    const std::vector<HyperplaneGate<T, Dynamic, Backend>>& gates, const JointState& state) {
  ModelVariant<T, Backend> v;
  for (std::size_t l = 0; l < gates.size(); ++l) {
    if (state.fractions[l] <= 0.0)
      continue;
    if (!model.layers()[l].has_full_mlp()) {
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

}  // namespace nlb
