// Training labels for the hyperplane gate from per-position loss differences δ (PAPERS.md §A3),
// and the ROC AUC that reports how well a gate's scores separate such labels (PAPERS.md §A4).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nlb/core/errors.hpp"
#include "nlb/mlp/detail/gate_quantile.hpp"

namespace nlb {

/// Which order statistic of δ set the label threshold (PAPERS.md §A3).
enum class GateLabelRule {
  median,        ///< at least 5% of δ are negative: threshold = median(δ)
  percentile25,  ///< fewer than 5% of δ are negative: threshold = 25th percentile of δ
};

/// "median" or "percentile25", for reports.
inline const char* to_string(GateLabelRule rule) {
  return rule == GateLabelRule::median ? "median" : "percentile25";
}

/// Writes to_string(rule).
inline std::ostream& operator<<(std::ostream& out, GateLabelRule rule) {
  return out << to_string(rule);
}

/// Gate training labels: labels[i] = 1 ("linear OK", the positive class) iff δ_i <= threshold.
struct GateLabels {
  std::vector<std::uint8_t> labels;  // [N], values 0 or 1
  double threshold;                  // the δ cut-off that was applied
  GateLabelRule rule;                // which order statistic `threshold` is
};

/// Labels from δ = L_lin − L_full per position (PAPERS.md §A3): label 1 iff δ <= median(δ);
/// if fewer than 5% of δ are strictly negative (count·20 < N, so exactly 5% uses the median),
/// the 25th percentile replaces the median. Percentiles follow numpy's default: linear
/// interpolation between order statistics at position q (N − 1); the median of an even count is
/// the mean of the two middle values. [ours] The switch keeps the positive class from being
/// half of all positions when almost none gain from the linear path (most then lose by it).
/// Throws NumericError if δ is empty or holds NaN or ±Inf (a non-finite loss difference means
/// the losses themselves are broken). O(N) time (selection, no sort), O(N) extra memory.
inline GateLabels make_gate_labels(std::span<const double> delta) {
  if (delta.empty()) {
    throw NumericError(detail::expected_found("make_gate_labels δ", "at least one value", "none"));
  }
  std::size_t negative = 0;
  for (std::size_t i = 0; i < delta.size(); ++i) {
    if (!std::isfinite(delta[i])) {
      throw NumericError(detail::expected_found("make_gate_labels δ entry " + std::to_string(i),
                                                "a finite value", delta[i]));
    }
    if (delta[i] < 0.0)
      ++negative;
  }
  std::vector<double> work(delta.begin(), delta.end());
  GateLabels out;
  // "fewer than 5%": negative / N < 1/20, in integers so 5% exactly is not "fewer".
  if (negative * 20 < delta.size()) {
    out.rule = GateLabelRule::percentile25;
    out.threshold = mlp::detail::linear_quantile(work, 0.25);
  } else {
    out.rule = GateLabelRule::median;
    out.threshold = mlp::detail::median(work);
  }
  out.labels.resize(delta.size());
  for (std::size_t i = 0; i < delta.size(); ++i) {
    out.labels[i] = delta[i] <= out.threshold ? std::uint8_t{1} : std::uint8_t{0};
  }
  return out;
}

/// Area under the ROC curve of `scores` for binary `labels` (1 = positive, higher score should
/// mean positive): the probability that a random positive scores above a random negative, a tie
/// counting one half (the Mann–Whitney U statistic over P·N). 1 = perfect, 0.5 = chance,
/// 0 = perfectly reversed. Throws ShapeError (sizes differ), NumericError (NaN score),
/// ArgumentError (a label other than 0/1, or only one class present: AUC is undefined).
/// ±Inf scores are ordered normally. O(n log n) time, O(n) memory.
inline double roc_auc(std::span<const double> scores, std::span<const std::uint8_t> labels) {
  check_dim("roc_auc labels (one per score)", static_cast<long long>(scores.size()),
            static_cast<long long>(labels.size()));
  std::vector<std::pair<double, std::uint8_t>> ranked(scores.size());
  std::uint64_t positives = 0;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    if (std::isnan(scores[i])) {
      throw NumericError(
          detail::expected_found("roc_auc score " + std::to_string(i), "a number", "NaN"));
    }
    if (labels[i] > 1) {
      throw ArgumentError(detail::expected_found("roc_auc label " + std::to_string(i), "0 or 1",
                                                 static_cast<int>(labels[i])));
    }
    positives += labels[i];
    ranked[i] = {scores[i], labels[i]};
  }
  const std::uint64_t negatives = scores.size() - positives;
  if (positives == 0 || negatives == 0) {
    throw ArgumentError(detail::expected_found(
        "roc_auc labels", "both classes present",
        std::to_string(positives) + " positive and " + std::to_string(negatives) + " negative"));
  }
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // Walk groups of equal score in ascending order. A positive beats every negative in a lower
  // group and ties (half) with each negative in its own group. Counted doubled, in integers, so
  // the sum is exact.
  std::uint64_t twice_wins = 0;
  std::uint64_t negatives_below = 0;
  for (std::size_t begin = 0; begin < ranked.size();) {
    std::size_t end = begin;
    std::uint64_t group_positives = 0;
    while (end < ranked.size() && ranked[end].first == ranked[begin].first) {
      group_positives += ranked[end].second;
      ++end;
    }
    const std::uint64_t group_negatives = (end - begin) - group_positives;
    twice_wins += 2 * group_positives * negatives_below + group_positives * group_negatives;
    negatives_below += group_negatives;
    begin = end;
  }
  return static_cast<double>(twice_wins) /
         (2.0 * static_cast<double>(positives) * static_cast<double>(negatives));
}

}  // namespace nlb
