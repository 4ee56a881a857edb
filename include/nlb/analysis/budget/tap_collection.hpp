// Collecting a model's MLP taps for the budget pipeline: ridge statistics of (x, y) on the fit
// positions (PAPERS §A1) and the MLP inputs x and embeddings e on the label positions (§A3, §A4).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nlb/analysis/variant_runner.hpp"
#include "nlb/core.hpp"
#include "nlb/mlp/ridge_stats.hpp"
#include "nlb/model/taps.hpp"

namespace nlb {

/// Per layer, RidgeStats of x = Tap::mlp_input and y = Tap::mlp_output over the first
/// `positions` rows of consecutive non-overlapping windows of `context` tokens of `tokens`:
/// every row of a window is a position; whole windows of the unmodified model are run (by
/// `runner`, on this process: VariantRunner::collect) and the last window contributes only its
/// first rows (PAPERS §A1: x after the pre-MLP LayerNorm, y before the residual add). Statistics
/// accumulate in double from the model's scalar. Throws ArgumentError when `tokens` holds fewer
/// than ceil(positions / context) windows, FormatError naming the layer when the model's MLP taps
/// did not deliver exactly `positions` (x, y) rows for every layer ("MLP taps cannot be found").
/// Cost: ceil(positions / context) forward passes + positions · (d² + d²) FLOPs per layer.
template <class T>
std::vector<RidgeStats<>> collect_ridge_stats(
    VariantRunner<T>& runner, std::span<const std::int32_t> tokens, Index context, Index positions,
    const std::function<void(Index, Index)>& progress = {}) {
  const Index windows = (positions + context - 1) / context;
  if (static_cast<Index>(tokens.size()) < windows * context) {
    throw ArgumentError(detail::expected_found("collect_ridge_stats: tokens",
                                               "at least " + std::to_string(windows * context),
                                               tokens.size()));
  }
  const Index layers = runner.model().layer_count();
  const Index d = runner.model().config().d_model;
  std::vector<RidgeStats<>> stats(static_cast<std::size_t>(layers), RidgeStats<>(d, d));
  std::vector<Activations<T>> pending(static_cast<std::size_t>(layers));
  std::vector<Index> pending_rows(static_cast<std::size_t>(layers), 0);
  Index window = -1, rows = 0;
  const auto taps = [&](Tap tap, Index layer, const RowMatrix<T>& m) {
    if (tap == Tap::embedding) {  // fires first in every window
      ++window;
      rows = std::min(context, positions - window * context);
      return;
    }
    if (layer < 0 || layer >= layers)
      return;
    const auto l = static_cast<std::size_t>(layer);
    if (tap == Tap::mlp_input) {
      pending[l] = m.topRows(std::min<Index>(rows, m.rows()));
      pending_rows[l] = pending[l].rows();
    } else if (tap == Tap::mlp_output && pending_rows[l] > 0) {
      stats[l].add(pending[l], m.topRows(pending_rows[l]));
      pending_rows[l] = 0;
    }
  };
  runner.collect(tokens, windows, context, taps, progress);
  for (Index l = 0; l < layers; ++l) {
    if (stats[static_cast<std::size_t>(l)].count() != positions) {
      throw FormatError(detail::expected_found(
          "model: MLP taps (input after the pre-MLP LayerNorm, output before the residual add) "
          "of layer " +
              std::to_string(l),
          std::to_string(positions) + " (x, y) rows", stats[static_cast<std::size_t>(l)].count()));
    }
  }
  return stats;
}

/// The label positions' activations: x [N, d] per layer (Tap::mlp_input) and the embedding
/// e [N, d] (Tap::embedding, token + position), N = label positions, in window order.
template <class T>
struct LabelActivations {
  std::vector<Activations<T>> x;  // [layers][N, d]
  Activations<T> e;               // [N, d]
};

/// A tap functor that fills LabelActivations from the base runs of consecutive windows: window
/// w contributes its rows 0 .. min(context − 1, N − w (context − 1)) − 1 — the predicted
/// positions, which have a next token and so a δ. Pass it as the base taps of a runner's
/// measure (analysis/variant_runner.hpp). Call check() afterwards.
template <class T>
class LabelTapCollector {
 public:
  LabelTapCollector(Index layers, Index d, Index context, Index positions)
      : context_(context), positions_(positions) {
    acts_.x.assign(static_cast<std::size_t>(layers), Activations<T>(positions, d));
    acts_.e.resize(positions, d);
  }

  template <class Matrix>
  void operator()(Tap tap, Index layer, const Matrix& m) {
    if (tap == Tap::embedding) {
      ++window_;  // the embedding fires first in every window
      offset_ = window_ * (context_ - 1);
      rows_ = std::max<Index>(0, std::min(context_ - 1, positions_ - offset_));
      rows_ = std::min(rows_, m.rows());
      if (rows_ > 0)
        acts_.e.middleRows(offset_, rows_) = m.topRows(rows_);
      return;
    }
    if (tap != Tap::mlp_input || rows_ <= 0 || layer < 0 ||
        layer >= static_cast<Index>(acts_.x.size()))
      return;
    acts_.x[static_cast<std::size_t>(layer)].middleRows(offset_, rows_) = m.topRows(rows_);
    filled_ += rows_;
  }

  /// Throws FormatError unless every layer's x was delivered for every label position.
  void check() const {
    const Index expected = positions_ * static_cast<Index>(acts_.x.size());
    if (filled_ != expected) {
      throw FormatError(detail::expected_found(
          "model: MLP input taps on the label positions (layers x positions)",
          std::to_string(expected), filled_));
    }
  }

  LabelActivations<T>& activations() { return acts_; }

 private:
  Index context_, positions_;
  Index window_ = -1, offset_ = 0, rows_ = 0, filled_ = 0;
  LabelActivations<T> acts_;
};

}  // namespace nlb
