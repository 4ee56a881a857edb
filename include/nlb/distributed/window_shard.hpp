// Which windows of a token set each rank measures: the fixed assignment every distributed
// analysis uses (docs/scaling.md), so a run's per-window results can be put back in window order.
#pragma once

#include "nlb/core.hpp"

namespace nlb::distributed {

/// A contiguous range of windows: [first, first + count).
struct WindowShard {
  Index first = 0;
  Index count = 0;
};

/// The windows of rank `rank` of `ranks` when `windows` windows are shared: contiguous blocks in
/// rank order, rank r taking [⌊r·W/K⌋, ⌊(r+1)·W/K⌋) — sizes differ by at most one, a rank may
/// get none when K > W, and concatenating the shards in rank order gives 0 .. W − 1.
/// ArgumentError for ranks < 1, a rank outside [0, ranks) or windows < 0.
inline WindowShard window_shard(Index windows, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks || windows < 0) {
    throw ArgumentError(nlb::detail::expected_found(
        "window_shard: (windows, rank, ranks)", "windows >= 0 and 0 <= rank < ranks",
        "(" + std::to_string(windows) + ", " + std::to_string(rank) + ", " + std::to_string(ranks) +
            ")"));
  }
  const Index first = windows * rank / ranks;
  const Index last = windows * (rank + 1) / ranks;
  return WindowShard{first, last - first};
}

}  // namespace nlb::distributed
