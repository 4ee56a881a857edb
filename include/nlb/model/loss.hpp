// Next-token cross-entropy and the perplexity protocol of `nlb eval` (PAPERS §A2).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nlb/core.hpp"
#include "nlb/kernels/log_sum_exp.hpp"

namespace nlb {

/// Per-position next-token loss of one window: for t in [0, T−1),
/// loss[t] = logsumexp(logits[t, :]) − logits[t, tokens[t + 1]], returned in double; the
/// log-sum-exp is kernels::log_sum_exp for `Backend` (the scalar backend computes in double,
/// the SIMD one in the logits' type with double sums). logits [T, vocab] (a row-major matrix is
/// read in place, anything else is copied into one); returns [T − 1]. O(T · vocab).
template <class Backend = backend::cpu, class Derived>
std::vector<double> next_token_losses(const Eigen::MatrixBase<Derived>& logits,
                                      std::span<const std::int32_t> tokens) {
  using T = typename Derived::Scalar;
  check_dim("next_token_losses: logits rows (tokens)", static_cast<Index>(tokens.size()),
            logits.rows());
  std::vector<double> loss;
  if (tokens.size() < 2)
    return loss;
  const Eigen::Ref<const RowMatrix<T>> rows(logits.derived());
  loss.reserve(tokens.size() - 1);
  for (Index t = 0; t + 1 < rows.rows(); ++t) {
    const T* row = rows.data() + t * rows.outerStride();
    const double lse = kernels::log_sum_exp(Backend{}, row, rows.cols());
    loss.push_back(lse - static_cast<double>(row[tokens[static_cast<std::size_t>(t + 1)]]));
  }
  return loss;
}

/// The result of the windowed perplexity protocol.
struct PerplexityResult {
  double ppl = 0;              // exp(mean_loss)
  double mean_loss = 0;        // mean cross-entropy over predicted positions (nats)
  Index predicted_tokens = 0;  // windows · (context − 1)
  Index windows = 0;
  Index context = 0;
  std::vector<double> window_loss_sums;  // per window, for bootstrap intervals
};

namespace detail {
// The `nlb eval` protocol (below) with the logits of a window from forward(window, logits).
template <class T, class Forward>
PerplexityResult windowed_perplexity(std::span<const std::int32_t> tokens, Index context,
                                     Index max_windows,
                                     const std::function<void(Index, Index)>& progress,
                                     Forward&& forward) {
  if (context < 2) {
    throw ArgumentError(
        detail::expected_found("evaluate_perplexity: context", "at least 2", context));
  }
  Index windows = static_cast<Index>(tokens.size()) / context;
  if (max_windows > 0)
    windows = std::min(windows, max_windows);
  if (windows == 0) {
    throw ArgumentError(detail::expected_found("evaluate_perplexity: tokens",
                                               "at least one window of " + std::to_string(context),
                                               tokens.size()));
  }
  PerplexityResult r;
  r.windows = windows;
  r.context = context;
  RowMatrix<T> logits;
  double total = 0;
  for (Index w = 0; w < windows; ++w) {
    const auto window =
        tokens.subspan(static_cast<std::size_t>(w * context), static_cast<std::size_t>(context));
    forward(window, logits);
    const auto loss = next_token_losses(logits, window);
    double sum = 0;
    for (double l : loss)
      sum += l;
    r.window_loss_sums.push_back(sum);
    total += sum;
    r.predicted_tokens += static_cast<Index>(loss.size());
    if (progress)
      progress(w + 1, windows);
  }
  r.mean_loss = total / static_cast<double>(r.predicted_tokens);
  r.ppl = std::exp(r.mean_loss);
  return r;
}
}  // namespace detail

/// The `nlb eval` protocol: split `tokens` into consecutive non-overlapping windows of `context`
/// tokens (a shorter last window is dropped), keep the first `max_windows` (all if ≤ 0), predict
/// every position but the first of each window; PPL = exp(mean cross-entropy). `progress(done,
/// total)` is called after each window. Throws ArgumentError when no full window fits.
/// A model with a Workspace type (Transformer) runs every window in one workspace.
template <class Model>
PerplexityResult evaluate_perplexity(const Model& model, std::span<const std::int32_t> tokens,
                                     Index context, Index max_windows = 0,
                                     const std::function<void(Index, Index)>& progress = {}) {
  using T = typename Model::Scalar;
  if constexpr (requires { typename Model::Workspace; }) {
    typename Model::Workspace ws;
    return detail::windowed_perplexity<T>(
        tokens, context, max_windows, progress,
        [&](std::span<const std::int32_t> window, RowMatrix<T>& logits) {
          model.forward(window, logits, ws);
        });
  } else {
    return detail::windowed_perplexity<T>(
        tokens, context, max_windows, progress,
        [&](std::span<const std::int32_t> window, RowMatrix<T>& logits) {
          model.forward(window, logits);
        });
  }
}

}  // namespace nlb
