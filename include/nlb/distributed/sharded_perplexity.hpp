// The `nlb eval` protocol with its windows spread over ranks (docs/scaling.md).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nlb/analysis/attention_conversions.hpp"
#include "nlb/distributed/communicator.hpp"
#include "nlb/distributed/window_shard.hpp"
#include "nlb/model/loss.hpp"

namespace nlb::distributed {

/// The `nlb eval` protocol over `tokens` with each window's logits from `forward(window,
/// logits)`, the windows shared over the ranks of `comm` (window_shard): each rank runs its shard,
/// the per-window loss sums are gathered in window order and summed in that order, so every
/// field equals detail::windowed_perplexity on one process bit for bit (at the same threads per
/// process), on every rank. The same ArgumentErrors, thrown on every rank. `progress(done,
/// total)` reports this rank's share, scaled to the whole set. Every rank must call it together.
template <class T, class Forward>
PerplexityResult sharded_windows(std::span<const std::int32_t> tokens, Index context,
                                 Index max_windows, const Communicator& comm,
                                 const std::function<void(Index, Index)>& progress,
                                 Forward&& forward) {
  if (context < 2) {
    throw ArgumentError(
        nlb::detail::expected_found("evaluate_perplexity: context", "at least 2", context));
  }
  Index windows = static_cast<Index>(tokens.size()) / context;
  if (max_windows > 0)
    windows = std::min(windows, max_windows);
  if (windows == 0) {
    throw ArgumentError(nlb::detail::expected_found(
        "evaluate_perplexity: tokens", "at least one window of " + std::to_string(context),
        tokens.size()));
  }
  const WindowShard shard = window_shard(windows, comm.rank(), comm.size());
  std::vector<double> mine;
  if (shard.count > 0) {
    std::function<void(Index, Index)> scaled;
    if (progress)
      scaled = [&](Index done, Index count) { progress(done * windows / count, windows); };
    mine = nlb::detail::windowed_perplexity<T>(
               tokens.subspan(static_cast<std::size_t>(shard.first * context),
                              static_cast<std::size_t>(shard.count * context)),
               context, shard.count, scaled, forward)
               .window_loss_sums;
  }
  PerplexityResult r;
  r.windows = windows;
  r.context = context;
  r.window_loss_sums = comm.all_gather(mine);
  double total = 0;  // in window order, as windowed_perplexity sums
  for (double s : r.window_loss_sums)
    total += s;
  r.predicted_tokens = windows * (context - 1);
  r.mean_loss = total / static_cast<double>(r.predicted_tokens);
  r.ppl = std::exp(r.mean_loss);
  return r;
}

/// evaluate_perplexity (model/loss.hpp) with the windows shared over the ranks of `comm`
/// (sharded_windows): every field equals the single-process result bit for bit, on every rank.
template <class Model>
PerplexityResult sharded_perplexity(const Model& model, std::span<const std::int32_t> tokens,
                                    Index context, const Communicator& comm, Index max_windows = 0,
                                    const std::function<void(Index, Index)>& progress = {}) {
  using T = typename Model::Scalar;
  if constexpr (requires { typename Model::Workspace; }) {
    typename Model::Workspace ws;
    return sharded_windows<T>(tokens, context, max_windows, comm, progress,
                              [&](std::span<const std::int32_t> window, RowMatrix<T>& logits) {
                                model.forward(window, logits, ws);
                              });
  } else {
    return sharded_windows<T>(tokens, context, max_windows, comm, progress,
                              [&](std::span<const std::int32_t> window, RowMatrix<T>& logits) {
                                model.forward(window, logits);
                              });
  }
}

/// A WindowedPerplexity (analysis/attention_conversions.hpp) over the ranks of `comm`
/// (sharded_windows), e.g. for measure_attention_conversions. `comm` must outlive it.
template <class T>
WindowedPerplexity<T> sharded_windowed_perplexity(const Communicator& comm) {
  return [&comm](std::span<const std::int32_t> tokens, Index context, Index max_windows,
                 const std::function<void(Index, Index)>& progress,
                 const std::function<void(std::span<const std::int32_t>, RowMatrix<T>&)>& forward) {
    return sharded_windows<T>(tokens, context, max_windows, comm, progress, forward);
  };
}

}  // namespace nlb::distributed
