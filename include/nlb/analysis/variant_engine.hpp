// Where the budget pipeline runs its forward passes: the host model by default, or another
// engine (the CUDA backend's, nlb/cuda/variant_engine.cuh) that measures the same variants
// elsewhere. The fitting, the gate training, the calibration's search and the bootstrap stay on
// the host, in double; only the passes move.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nlb/analysis/joint_gating.hpp"
#include "nlb/analysis/label_rows.hpp"
#include "nlb/analysis/mlp_variants.hpp"

namespace nlb {

/// The forward passes of an analysis, as three replaceable functions over host variants
/// (MlpVariant<T, Backend> of the host model's surrogates and gates):
/// - `measure`: measure_variants without taps (same arguments, same VariantLosses: per-position
///   losses in window order and summed RouteCounts);
/// - `time_forward`, `time_decode`: the dense-vs-gated timings of joint_gating.hpp, measured
///   where the engine runs.
/// An empty engine (the default) means the host model's own functions. An engine's results equal
/// the host's within the tolerance table (its tests say which).
template <class T, class Backend = backend::cpu>
struct VariantEngine {
  using Tokens = std::span<const std::int32_t>;
  using Variants = std::vector<MlpVariant<T, Backend>>;
  using Progress = std::function<void(Index, Index)>;

  std::string name = "cpu";  // where the passes run, for reports
  std::function<VariantLosses(Tokens tokens, Index windows, Index context, const Variants& variants,
                              bool with_base, const Progress& progress)>
      measure;
  std::function<ForwardTiming(Tokens tokens, Index windows, Index context,
                              const MlpVariant<T, Backend>& variant, Index repetitions)>
      time_forward;
  std::function<ForwardTiming(Tokens tokens, Index steps, const MlpVariant<T, Backend>& variant,
                              Index repetitions)>
      time_decode;
  /// Optional: which label windows' gate features this process holds when the label stage
  /// splits them (BudgetProtocol::gate_features = split) — first_window, windows, the fit's
  /// reductions and the gathering of the LabelRows (analysis/label_rows.hpp) for `windows` label
  /// windows. Empty: every process holds every row.
  std::function<LabelRows(Index windows)> label_rows;

  /// True when the passes run elsewhere than on the host model.
  bool active() const { return static_cast<bool>(measure); }
};

}  // namespace nlb
