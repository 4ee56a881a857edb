// Training a layer's hyperplane gate from per-position loss differences δ (PAPERS §A3), with
// its ROC AUC on held-out label positions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "nlb/analysis/budget/label_rows.hpp"
#include "nlb/core.hpp"
#include "nlb/mlp/gate_labels.hpp"
#include "nlb/mlp/hyperplane_gate.hpp"

namespace nlb {

/// δ_i = L_lin,i − L_full,i for the first n positions (PAPERS §A3), in double.
/// Throws ShapeError if either loss list is shorter than n.
inline std::vector<double> loss_delta(std::span<const double> linear_losses,
                                      std::span<const double> full_losses, Index n) {
  if (static_cast<Index>(linear_losses.size()) < n || static_cast<Index>(full_losses.size()) < n) {
    throw ShapeError(detail::expected_found("loss_delta: losses", "at least " + std::to_string(n),
                                            std::min(linear_losses.size(), full_losses.size())));
  }
  std::vector<double> delta(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < delta.size(); ++i)
    delta[i] = linear_losses[i] - full_losses[i];
  return delta;
}

/// A gate fitted on the first label positions and scored on the held-out rest.
template <class T>
struct TrainedGate {
  HyperplaneGate<T> gate;  // threshold 0: linear iff p > 0.5 (PAPERS §A3)
  GateLabelRule rule = GateLabelRule::median;
  double label_threshold = 0;   // the δ cut-off from the training positions
  Index train_positions = 0;    // rows the gate was fitted on
  Index holdout_positions = 0;  // rows the AUC is computed on
  double holdout_auc = std::numeric_limits<double>::quiet_NaN();  // NaN: one class held out
  GateFitReport fit{};
};

/// Fits HyperplaneGate on features rows [0, n_train) with labels make_gate_labels(δ[0, n_train))
/// (label 1 = "linear OK" iff δ ≤ the median, or the 25th percentile when < 5% of δ are
/// negative — PAPERS §A3), then scores rows [n_train, N) and reports their ROC AUC against
/// labels δ ≤ the same cut-off (held-out positions never influence the fit or the cut-off).
/// features [N, d] (x, e or c of PAPERS §A4), delta [N]. The AUC is NaN when the held-out
/// labels are of one class. Throws ShapeError (sizes), ArgumentError (training labels of one
/// class, 0 < n_train < N violated). Cost: a Newton fit, O(n_train d²) per step.
/// With `rows` split (nlb/analysis/budget/label_rows.hpp) `features` holds only the label rows
/// [rows.first_row, rows.first_row + features.rows()) of the N = δ.size() positions: every
/// holder calls together, the fit reduces its sums over them and the held-out scores are
/// gathered, so every holder ends with the same gate and AUC — the one-process gate to within
/// the reduction's rounding (docs/scaling.md).
template <class T>
TrainedGate<T> train_gate(const Activations<T>& features, std::span<const double> delta,
                          Index n_train, const LabelRows& rows = {}) {
  const Index here = features.rows();
  const Index first = rows.split() ? rows.first_row : 0;
  const Index n = rows.split() ? static_cast<Index>(delta.size()) : here;
  if (rows.split()) {
    if (first < 0 || first + here > n) {
      throw ShapeError(detail::expected_found(
          "train_gate: label rows held here", "within the " + std::to_string(n) + " δ values",
          "rows [" + std::to_string(first) + ", " + std::to_string(first + here) + ")"));
    }
  } else {
    check_dim("train_gate: δ values (feature rows)", n, static_cast<long long>(delta.size()));
  }
  if (n_train < 1 || n_train >= n) {
    throw ArgumentError(detail::expected_found("train_gate: training positions",
                                               "in [1, " + std::to_string(n - 1) + "]", n_train));
  }
  TrainedGate<T> out;
  const auto labels = make_gate_labels(delta.first(static_cast<std::size_t>(n_train)));
  out.rule = labels.rule;
  out.label_threshold = labels.threshold;
  out.train_positions = n_train;
  out.holdout_positions = n - n_train;
  // Training rows held here: [first, first + train_here); held-out ones: the rest.
  const Index train_here = std::clamp<Index>(n_train - first, 0, here);
  std::span<const std::uint8_t> train_labels;
  if (train_here > 0) {
    train_labels =
        std::span<const std::uint8_t>(labels.labels)
            .subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(train_here));
  }
  out.fit = out.gate.fit(features.topRows(train_here), train_labels, {}, rows.parts);
  const ColVector<T> scores_here = out.gate.score(features.bottomRows(here - train_here));
  std::vector<double> mine(static_cast<std::size_t>(scores_here.size()));
  for (std::size_t i = 0; i < mine.size(); ++i)
    mine[i] = static_cast<double>(scores_here(static_cast<Index>(i)));
  const std::vector<double> s = rows.all(mine);
  check_dim("train_gate: held-out scores gathered", n - n_train, static_cast<long long>(s.size()));
  std::vector<std::uint8_t> y(s.size());
  std::size_t positives = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    y[i] = delta[static_cast<std::size_t>(n_train) + i] <= labels.threshold ? 1 : 0;
    positives += y[i];
  }
  if (positives > 0 && positives < y.size())
    out.holdout_auc = roc_auc(s, y);
  return out;
}

}  // namespace nlb
