// The protocol of the MLP budget pipeline (PAPERS §A1–§A7): every setting a budget report
// states, and how the fit, label and evaluation token sets are cut into windows.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nlb/core.hpp"

namespace nlb {

/// How the joint calibration chooses per-layer gate thresholds for a budget (docs/budget.md).
/// - allocation: per-layer cost curves on the calibration split, a knapsack over them, corrected
///   by joint measurement until the upper end of the joint calibration Δ%'s 95% bootstrap
///   interval meets the budget (analysis/budget/allocation.hpp). The default.
/// - greedy: the earlier search — raise the layer whose step costs least, on the label set, until
///   the joint label Δ% (a point estimate) would exceed the budget
///   (analysis/budget/greedy_calibration.hpp).
enum class CalibrationSearch { allocation, greedy };

inline const char* to_string(CalibrationSearch s) {
  return s == CalibrationSearch::allocation ? "allocation" : "greedy";
}

/// Where the label stage's gate features live when the passes are spread over processes
/// (a VariantRunner whose held_windows is a subset, e.g. MPI ranks; docs/scaling.md).
/// - replicated: every process collects every label position's features and fits every gate
///   itself: the report equals one process's bit for bit. The default.
/// - split: each process collects the features of its own label windows only (memory and the
///   collection pass divided by the process count); the gates' Newton sums are reduced over the
///   processes and one score per row is gathered, so the gates equal one process's to within
///   the reduction's rounding (~1e-10) and a row at a threshold can route differently.
/// With one process both are the same computation.
enum class GateFeatures { replicated, split };

inline const char* to_string(GateFeatures g) {
  return g == GateFeatures::replicated ? "replicated" : "split";
}

/// Every setting of the MLP budget pipeline (analysis/budget/pipeline.hpp). The defaults are the
/// `nlb budget` defaults; docs/budget.md explains each one.
///
/// Token sets (each from its own file, never mixed, PAPERS §A7):
///  - fit: the first `fit_tokens` positions (rows) of consecutive non-overlapping windows of
///    `context` tokens from the file start; every row of a window is a position; the taps come
///    from whole windows of the unmodified model (fit_windows() windows are run).
///  - label: the first `label_tokens` *predicted* positions (rows 0 .. context − 2 of each window,
///    in window order) of label_windows() windows: each needs a next token for δ.
///  - calibration: the calibration_windows() windows of the label file that follow the label
///    windows (disjoint from every position the gates were fitted on); every predicted position
///    (rows 0 .. context − 2) of each of them.
///  - eval: every full window of the eval file (a shorter last window is dropped).
struct BudgetProtocol {
  Index context = 128;         ///< window length (tokens), 2 ≤ context ≤ n_positions
  Index fit_tokens = 10000;    ///< ridge fitting rows (PAPERS §A1: N = 10,000)
  Index label_tokens = 25000;  ///< gate label positions (PAPERS §A3: 25k–50k)
  double lambda = 0.01;        ///< ridge penalty, absolute (PAPERS §A1)
  std::vector<double> budgets_pct{1.0, 3.0};  ///< joint PPL budgets in % (PAPERS §A7), each > 0
  std::uint64_t seed = 0;                     ///< every random choice (the bootstrap)
  Index bootstrap_resamples = 1000;           ///< paired window resamples for 95% intervals
  /// The last share of label positions is held out of gate fitting and gives the gate AUC.
  double holdout_fraction = 0.2;
  /// Calibration positions, from the label file after the label windows: 3 × label_tokens by
  /// default (nlb budget), a larger and more varied sample of text than the label set, so that
  /// the calibration Δ% is close to what other text costs (docs/budget.md, "Does the budget
  /// hold?").
  Index calibration_tokens = 75000;
  CalibrationSearch calibration_search = CalibrationSearch::allocation;
  /// Linear-fraction grid of the calibration: thresholds for fractions k · step of the label rows.
  double calibration_step = 0.05;
  /// Also spend each budget across MLP gates and attention conversions (run_across_stage,
  /// `nlb budget --attention`); needs the allocation search.
  bool across_attention = false;
  /// Label features on every process or each process's own (only with a VariantRunner that
  /// holds a subset of the windows; otherwise every row is here either way).
  GateFeatures gate_features = GateFeatures::replicated;
  Index allocation_tries = 10;   ///< knapsack solves per budget (each ≤ 1 joint calibration pass)
  double no_fly_delta = 0.05;    ///< a token is "no-fly" if its mean δ exceeds this (PAPERS §A4)
  Index no_fly_min_count = 10;   ///< ... over at least this many occurrences (PAPERS §A4)
  Index timing_windows = 32;     ///< eval windows per timed forward (dense vs gated)
  Index timing_repetitions = 7;  ///< alternating repetitions of each timed forward (median)
  /// Tokens decoded one at a time through the KV cache per timed decode (dense vs gated): the
  /// first min(decode_steps, context) eval tokens, at positions [0, that).
  Index decode_steps = 64;

  /// Throws ArgumentError naming the setting, what was expected and what was found.
  void validate() const {
    auto fail = [](const std::string& what, const std::string& expected, auto found) {
      throw ArgumentError(detail::expected_found("budget protocol: " + what, expected, found));
    };
    if (context < 2)
      fail("context", "at least 2", context);
    if (fit_tokens < 2)
      fail("fit_tokens", "at least 2", fit_tokens);
    if (label_tokens < 10)
      fail("label_tokens", "at least 10", label_tokens);
    if (!(lambda > 0.0) || !std::isfinite(lambda))
      fail("lambda", "a finite value > 0", lambda);
    if (budgets_pct.empty())
      fail("budgets_pct", "at least one budget", "none");
    for (double b : budgets_pct) {
      if (!(b > 0.0) || !std::isfinite(b))
        fail("budget_pct", "a finite value > 0", b);
    }
    if (bootstrap_resamples < 10)
      fail("bootstrap_resamples", "at least 10", bootstrap_resamples);
    if (!(holdout_fraction > 0.0 && holdout_fraction < 1.0))
      fail("holdout_fraction", "a value in (0, 1)", holdout_fraction);
    if (calibration_tokens < 10)
      fail("calibration_tokens", "at least 10", calibration_tokens);
    if (allocation_tries < 1)
      fail("allocation_tries", "at least 1", allocation_tries);
    if (!(calibration_step > 0.0 && calibration_step <= 1.0))
      fail("calibration_step", "a value in (0, 1]", calibration_step);
    if (no_fly_min_count < 1)
      fail("no_fly_min_count", "at least 1", no_fly_min_count);
    if (timing_windows < 1 || timing_repetitions < 1)
      fail("timing_windows and timing_repetitions", "at least 1",
           std::to_string(timing_windows) + " and " + std::to_string(timing_repetitions));
    if (decode_steps < 1)
      fail("decode_steps", "at least 1", decode_steps);
    if (across_attention && calibration_search != CalibrationSearch::allocation)
      fail("across_attention", "the allocation search", "the greedy search");
  }

  /// Windows run for the fit set: ceil(fit_tokens / context).
  Index fit_windows() const { return (fit_tokens + context - 1) / context; }
  /// Windows run for the label set: ceil(label_tokens / (context − 1)).
  Index label_windows() const { return (label_tokens + context - 2) / (context - 1); }
  /// Windows of the calibration split: ceil(calibration_tokens / (context − 1)), after the
  /// label windows in the label file.
  Index calibration_windows() const { return (calibration_tokens + context - 2) / (context - 1); }
  /// Label positions used to fit gates: the first floor((1 − holdout) · label_tokens).
  Index label_train_positions() const {
    return static_cast<Index>(
        std::floor((1.0 - holdout_fraction) * static_cast<double>(label_tokens)));
  }
};

/// Throws ArgumentError unless `tokens` has at least `windows` full windows of `context`:
/// "<what>: expected at least N tokens (<why>), found M".
inline void require_windows(const std::string& what, std::span<const std::int32_t> tokens,
                            Index windows, Index context, const std::string& why) {
  const Index needed = windows * context;
  if (static_cast<Index>(tokens.size()) < needed) {
    throw ArgumentError(detail::expected_found(what,
                                               "at least " + std::to_string(needed) + " tokens (" +
                                                   std::to_string(windows) + " windows of " +
                                                   std::to_string(context) + " for " + why + ")",
                                               std::to_string(tokens.size()) + " tokens"));
  }
}

/// The first `windows` windows of `context` tokens of `tokens` (no copy). Throws ArgumentError
/// (require_windows) when there are fewer.
inline std::span<const std::int32_t> leading_windows(std::span<const std::int32_t> tokens,
                                                     Index windows, Index context,
                                                     const std::string& what) {
  require_windows(what, tokens, windows, context, "the protocol");
  return tokens.first(static_cast<std::size_t>(windows * context));
}

}  // namespace nlb
