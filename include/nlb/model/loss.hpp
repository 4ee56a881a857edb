// Next-token cross-entropy and the perplexity protocol of `nlb eval` (PAPERS §A2).
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nlb/core.hpp"
#include "nlb/kernels/log_sum_exp.hpp"
#include "nlb/ops/loss.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

/// Per-position next-token loss of one window: for t in [0, T−1),
/// loss[t] = logsumexp(logits[t, :]) − logits[t, tokens[t + 1]], returned in double; the
/// log-sum-exp is kernels::log_sum_exp for `Backend` (the scalar backend computes in double,
/// the SIMD one in the logits' type with double sums). logits [T, vocab] on the host (a row-major
/// matrix is read in place, anything else is copied into one); returns [T − 1]. O(T · vocab).
/// ops::next_token_losses is the same on every backend's own logits.
template <class Backend = backend::cpu, class Derived>
std::vector<double> next_token_losses(const Eigen::MatrixBase<Derived>& logits,
                                      std::span<const std::int32_t> tokens) {
  std::vector<double> loss;
  ops::HostScratch<typename Derived::Scalar> unused;
  ops::next_token_losses(Context<Backend>{}, logits.derived(), tokens, loss, unused);
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

/// The `nlb eval` protocol: split `tokens` into consecutive non-overlapping windows of `context`
/// tokens (a shorter last window is dropped), keep the first `max_windows` (all if ≤ 0), predict
/// every position but the first of each window; PPL = exp(mean cross-entropy). `progress(done,
/// total)` is called after each window. Every window runs in one workspace, and its losses are
/// computed where the model runs (on a device only they are read back: one wait per window).
/// Throws ArgumentError when no full window fits.
template <class Model>
PerplexityResult evaluate_perplexity(Context<typename Model::backend_type>& ctx, const Model& model,
                                     std::span<const std::int32_t> tokens, Index context,
                                     Index max_windows = 0,
                                     const std::function<void(Index, Index)>& progress = {}) {
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
  typename Model::Workspace ws;
  typename Model::Logits logits;
  std::vector<double> loss;
  double total = 0;
  for (Index w = 0; w < windows; ++w) {
    const auto window =
        tokens.subspan(static_cast<std::size_t>(w * context), static_cast<std::size_t>(context));
    model.forward(ctx, window, logits, ws);
    loss.clear();
    ops::next_token_losses(ctx, logits, window, loss, ws.head);
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

}  // namespace nlb
