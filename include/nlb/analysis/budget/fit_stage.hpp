// Stage 2 of the MLP budget pipeline (PAPERS §A1): one ridge surrogate per layer, fitted on the
// fit tokens' MLP inputs and outputs.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nlb/analysis/budget/protocol.hpp"
#include "nlb/analysis/budget/tap_collection.hpp"
#include "nlb/analysis/variant_runner.hpp"
#include "nlb/mlp/ridge_surrogate.hpp"

namespace nlb {

/// The per-layer surrogates and their fits.
template <class T>
struct SurrogateFit {
  std::vector<RidgeSurrogate<T>> surrogates;  // [layers]
  std::vector<RidgeFitReport> reports;        // [layers]
};

/// Stage 2 (PAPERS §A1): RidgeStats on the MLP taps of the first protocol.fit_tokens positions
/// of `fit_tokens` (collect_ridge_stats, the unmodified passes run by `runner`), fitted with
/// protocol.lambda in double on the host, applied in T. Throws ArgumentError (too few tokens,
/// naming `what`), FormatError (taps missing).
template <class T>
SurrogateFit<T> fit_surrogates(VariantRunner<T>& runner, std::span<const std::int32_t> fit_tokens,
                               const BudgetProtocol& protocol,
                               const std::string& what = "fit tokens",
                               const std::function<void(Index, Index)>& progress = {}) {
  require_windows(what, fit_tokens, protocol.fit_windows(), protocol.context,
                  std::to_string(protocol.fit_tokens) + " fit positions");
  const auto stats =
      collect_ridge_stats(runner, fit_tokens, protocol.context, protocol.fit_tokens, progress);
  SurrogateFit<T> out;
  for (const auto& s : stats) {
    RidgeSurrogate<T> r;
    out.reports.push_back(r.fit(s, protocol.lambda));
    out.surrogates.push_back(std::move(r));
  }
  return out;
}

}  // namespace nlb
