// Budget allocation across layers ([ours], docs/budget.md "How the budget is calibrated"): each
// layer's measured cost curve on the calibration split (Δ% against linear fraction, that layer
// gated alone), a multiple-choice knapsack that spends the budget where it buys the most FLOPs,
// and joint re-measurement of the chosen gates until the upper end of the 95% bootstrap interval
// of the joint calibration Δ% meets the budget. Per-layer costs do not add up (PAPERS §A7: all
// layers linear cost far more than the sum), so the knapsack's capacity is corrected from what
// the joint measurement finds.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "nlb/analysis/bootstrap.hpp"
#include "nlb/analysis/budget/joint_state.hpp"
#include "nlb/analysis/flops.hpp"
#include "nlb/analysis/model_variant.hpp"
#include "nlb/core.hpp"

namespace nlb {

/// Measures variants on one fixed window set (the calibration split): the VariantLosses of
/// `variants`, with the unmodified model's losses when `with_base`. run_label_stage builds it
/// over the analysis's runner; every call must use the same windows.
template <class T>
using WindowSetMeasure =
    std::function<VariantLosses(const std::vector<ModelVariant<T>>& variants, bool with_base)>;

/// A gated state measured on a window set: Δ% with its paired bootstrap 95% interval (over the
/// set's windows) and the share of MLP rows routed linear.
struct JointMeasurement {
  Interval delta_pct;
  double linear_fraction = 0;                 // all layers' rows
  std::vector<double> layer_linear_fraction;  // [layers]
};

/// Variant `v` of `r` against the unmodified model's per-window loss sums `base_sums` [windows]:
/// bootstrap_delta_pct with `resamples` and `seed`, linear fractions from the route counts (rows
/// of every position of every window). Throws ShapeError when the window counts differ.
inline JointMeasurement joint_measurement(const VariantLosses& r, std::size_t v,
                                          std::span<const double> base_sums, Index resamples,
                                          std::uint64_t seed) {
  std::vector<double> sums(static_cast<std::size_t>(r.windows));
  for (Index w = 0; w < r.windows; ++w)
    sums[static_cast<std::size_t>(w)] = r.window_sum(r.variant[v], w);
  JointMeasurement out;
  out.delta_pct = bootstrap_delta_pct(base_sums, sums, r.context - 1, resamples, seed);
  const double rows = static_cast<double>(r.windows * r.context);
  for (const auto& c : r.counts[v])
    out.layer_linear_fraction.push_back(static_cast<double>(c.linear) / rows);
  out.linear_fraction = linear_share(r.counts[v], rows);
  return out;
}

/// Δ% of variant `v` of `r` against an unmodified loss total `base_total` over the same
/// positions: 100 (exp(mean loss difference) − 1), every window of `r`.
inline double variant_delta_pct(const VariantLosses& r, std::size_t v, double base_total) {
  double total = 0;
  for (Index w = 0; w < r.windows; ++w)
    total += r.window_sum(r.variant[v], w);
  return delta_pct_of_sums(total, base_total, static_cast<double>(r.windows * (r.context - 1)));
}

/// Each layer's cost curve on the calibration windows: layer l alone gated at thresholds[l][k]
/// (k = 1 .. steps; every other layer dense), its Δ% and the share of its rows routed linear.
struct LayerCostCurves {
  Index windows = 0;
  std::vector<double> base_sums;                     // [windows] unmodified loss sum per window
  std::vector<std::vector<double>> delta_pct;        // [layers][steps + 1]; [l][0] = 0
  std::vector<std::vector<double>> linear_fraction;  // [layers][steps + 1]; [l][0] = 0
};

/// Measures the cost curves in one call of `measure` (with the unmodified model): layers · steps
/// variants, each running from its gated layer on (PrefixStreams-style reuse of the unmodified
/// prefix inside the measurement). Throws ArgumentError when a layer does not hold a full MLP.
template <class T, class Backend>
LayerCostCurves measure_cost_curves(
    const Transformer<T, Backend>& model,
    const std::vector<RidgeSurrogate<T, Dynamic, Dynamic, Backend>>& surrogates,
    const std::vector<HyperplaneGate<T, Dynamic, Backend>>& gates,
    const std::vector<std::vector<double>>& thresholds, const WindowSetMeasure<T>& measure) {
  const std::size_t layers = gates.size();
  const std::size_t steps = thresholds.at(0).size() - 1;
  std::vector<ModelVariant<T, Backend>> variants;
  for (std::size_t l = 0; l < layers; ++l) {
    for (std::size_t k = 1; k <= steps; ++k) {
      JointState s;
      s.fractions.assign(layers, 0.0);
      s.thresholds.assign(layers, std::numeric_limits<double>::infinity());
      s.fractions[l] = static_cast<double>(k) / static_cast<double>(steps);
      s.thresholds[l] = thresholds[l][k];
      variants.push_back(joint_variant(model, surrogates, gates, s));
    }
  }
  const VariantLosses r = measure(variants, true);
  LayerCostCurves out;
  out.windows = r.windows;
  for (Index w = 0; w < r.windows; ++w)
    out.base_sums.push_back(r.window_sum(r.base, w));
  double base_total = 0;
  for (double s : out.base_sums)
    base_total += s;
  const double rows = static_cast<double>(r.windows * r.context);
  out.delta_pct.assign(layers, std::vector<double>(steps + 1, 0.0));
  out.linear_fraction.assign(layers, std::vector<double>(steps + 1, 0.0));
  for (std::size_t l = 0; l < layers; ++l) {
    for (std::size_t k = 1; k <= steps; ++k) {
      const std::size_t v = l * steps + (k - 1);
      out.delta_pct[l][k] = variant_delta_pct(r, v, base_total);
      out.linear_fraction[l][k] = static_cast<double>(r.counts[v][l].linear) / rows;
    }
  }
  return out;
}

/// Multiple-choice knapsack: choose one option k per layer (k = 0 is "no change": cost 0,
/// value 0) to maximise Σ value[l][k_l] subject to Σ cost[l][k_l] ≤ capacity, by dynamic
/// programming over a capacity grid of `resolution` units. Costs are rounded *up* to whole units
/// (a negative cost counts as 0), so the chosen total never exceeds `capacity`; the result is
/// exact when every cost is a multiple of capacity / resolution. Among equally valuable choices a
/// layer keeps its lowest k. capacity ≤ 0 (or not finite and < 0) gives all zeros.
/// cost, value: [layers][options] with option 0 first; options may differ per layer.
/// Throws ShapeError when cost and value differ in shape, ArgumentError for resolution < 1.
/// O(layers · options · resolution) time, O(layers · resolution) memory.
inline std::vector<Index> allocate_knapsack(const std::vector<std::vector<double>>& cost,
                                            const std::vector<std::vector<double>>& value,
                                            double capacity, Index resolution = 1000) {
  check_dim("allocate_knapsack: value layers (cost layers)", static_cast<long long>(value.size()),
            static_cast<long long>(cost.size()));
  if (resolution < 1)
    throw ArgumentError(
        detail::expected_found("allocate_knapsack: resolution", "at least 1", resolution));
  const std::size_t layers = cost.size();
  std::vector<Index> out(layers, 0);
  if (!(capacity > 0.0))
    return out;
  const auto units = static_cast<std::size_t>(resolution);
  const double unit = capacity / static_cast<double>(resolution);
  // best[c]: the largest value of the layers so far within c units; choice[l][c]: layer l's k.
  std::vector<double> best(units + 1, 0.0), next(units + 1);
  std::vector<std::vector<Index>> choice(layers, std::vector<Index>(units + 1, 0));
  std::vector<std::vector<std::size_t>> weight(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    check_dim("allocate_knapsack: value options of layer " + std::to_string(l),
              static_cast<long long>(value[l].size()), static_cast<long long>(cost[l].size()));
    for (double c : cost[l]) {
      const double u = std::ceil(std::max(c, 0.0) / unit - 1e-9);  // a cost on the grid stays
      weight[l].push_back(u > static_cast<double>(units) || !std::isfinite(u)
                              ? units + 1
                              : static_cast<std::size_t>(u));
    }
    for (std::size_t c = 0; c <= units; ++c) {
      next[c] = best[c];  // k = 0
      choice[l][c] = 0;
      for (std::size_t k = 1; k < cost[l].size(); ++k) {
        if (weight[l][k] > c)
          continue;
        const double v = best[c - weight[l][k]] + value[l][k];
        if (v > next[c]) {
          next[c] = v;
          choice[l][c] = static_cast<Index>(k);
        }
      }
    }
    std::swap(best, next);
  }
  std::size_t c = units;
  for (std::size_t l = layers; l-- > 0;) {
    out[l] = choice[l][c];
    c -= weight[l][static_cast<std::size_t>(out[l])];
  }
  return out;
}

/// One joint measurement of the allocation search.
struct AllocationTry {
  double capacity_pct = 0;   // the knapsack's capacity
  double predicted_pct = 0;  // Σ of the chosen points of the per-layer curves
  std::vector<Index> steps;  // [layers] chosen k (fraction k / steps)
  JointMeasurement calibration;
  bool meets = false;     // calibration.delta_pct.high ≤ the budget
  bool measured = false;  // false: the same steps as an earlier try (or no gate), not re-run
};

/// The search for one budget: every try in order and the one chosen.
struct BudgetAllocation {
  double budget_pct = 0;
  std::vector<AllocationTry> tries;
  Index chosen = -1;      // index into tries: the meeting try with the most FLOPs saved
  Index evaluations = 0;  // joint calibration passes run
};

/// Settings of the allocation search (BudgetProtocol carries the defaults nlb budget uses).
struct AllocationOptions {
  Index resolution = 1000;  // knapsack capacity grid
  Index max_tries = 10;     // knapsack solves (each at most one joint pass)
  Index resamples = 1000;   // bootstrap resamples of the joint calibration Δ%
  std::uint64_t seed = 0;   // bootstrap draws (the same for every try: comparable bounds)
  double tolerance = 0.02;  // stop when the capacity bracket is this narrow (relative)
};

/// Allocates `budget_pct` across layers (docs/budget.md): solve the knapsack over `curves` with
/// values `value[l][k]` (FLOPs saved per token by layer l at option k) at a capacity, measure the
/// chosen gates jointly (`measure_state(steps)` → JointMeasurement), and correct the capacity:
/// grow it while the joint upper 95% bound stays within the budget, shrink it when it does not,
/// then bisect between the largest capacity that met and the smallest that failed. The chosen
/// try is the one that met the budget with the most FLOPs saved (Σ over the groups l with an
/// option k_l > 0 of `saving(l, k_l, joint)`, e.g. a gate's saving at its joint linear
/// fraction); none met → chosen = −1 (no gates, Δ% 0). A group is a layer's MLP gate or, in the
/// search across MLP and attention, a layer's attention conversion (across.hpp).
/// Deterministic: the same inputs give the same tries.
inline BudgetAllocation allocate_budget(
    const LayerCostCurves& curves, const std::vector<std::vector<double>>& value, double budget_pct,
    const std::function<JointMeasurement(const std::vector<Index>&)>& measure_state,
    const std::function<double(std::size_t, Index, const JointMeasurement&)>& saving,
    const AllocationOptions& options = {}) {
  BudgetAllocation out;
  out.budget_pct = budget_pct;
  const std::size_t layers = curves.delta_pct.size();
  double capacity = budget_pct;
  double met = -1, failed = std::numeric_limits<double>::infinity();
  double best_saving = -std::numeric_limits<double>::infinity();
  for (Index t = 0; t < options.max_tries; ++t) {
    AllocationTry a;
    a.capacity_pct = capacity;
    a.steps = allocate_knapsack(curves.delta_pct, value, capacity, options.resolution);
    for (std::size_t l = 0; l < layers; ++l)
      a.predicted_pct += curves.delta_pct[l][static_cast<std::size_t>(a.steps[l])];
    const bool none = std::all_of(a.steps.begin(), a.steps.end(), [](Index k) { return k == 0; });
    const auto same = std::find_if(out.tries.begin(), out.tries.end(),
                                   [&](const AllocationTry& b) { return b.steps == a.steps; });
    if (same != out.tries.end()) {
      a.calibration = same->calibration;
    } else if (none) {
      a.calibration.layer_linear_fraction.assign(layers, 0.0);
    } else {
      a.calibration = measure_state(a.steps);
      a.measured = true;
      ++out.evaluations;
    }
    a.meets = a.calibration.delta_pct.high <= budget_pct;
    if (a.meets) {
      double s = 0;
      for (std::size_t l = 0; l < layers; ++l)
        if (a.steps[l] > 0)
          s += saving(l, a.steps[l], a.calibration);
      if (s > best_saving) {
        best_saving = s;
        out.chosen = static_cast<Index>(out.tries.size());
      }
      met = std::max(met, capacity);
    } else {
      failed = std::min(failed, capacity);
    }
    out.tries.push_back(a);
    // The next capacity: scale by how far the joint bound is from the budget while only one
    // side is known (at most ×4 up, ×0.25 down), then bisect the bracket.
    const double high = a.calibration.delta_pct.high;
    if (std::isinf(failed)) {
      // Every option already taken: a larger capacity changes nothing.
      bool saturated = true;
      for (std::size_t l = 0; l < layers && saturated; ++l) {
        const auto k = static_cast<std::size_t>(a.steps[l]);
        for (std::size_t j = 0; j < value[l].size(); ++j)
          saturated = saturated && !(value[l][j] > value[l][k]);
      }
      if (saturated)
        break;
      capacity *= high > 0 ? std::clamp(budget_pct / high, 1.25, 4.0) : 4.0;
    } else if (met < 0) {
      capacity *= high > 0 ? std::clamp(budget_pct / high, 0.25, 0.8) : 0.5;
    } else {
      if (failed - met <= options.tolerance * failed)
        break;
      capacity = 0.5 * (met + failed);
    }
  }
  return out;
}

}  // namespace nlb
