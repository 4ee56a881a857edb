// Ridge statistics accumulated on several ranks, combined into those of all their rows
// (PAPERS §A1: the statistics merge exactly, up to rounding).
#pragma once

#include <vector>

#include "nlb/distributed/communicator.hpp"
#include "nlb/mlp/ridge_stats.hpp"

namespace nlb::distributed {

/// Replaces `stats` on every rank by the merge of every rank's `stats`, in a fixed binomial
/// tree: in round k = 1, 2, 4, …, rank r with r mod 2k = 0 merges in the statistics of rank
/// r + k (the windows after its own, so every merge is left part ⊕ right part in window
/// order), then rank 0 broadcasts the result. The same ranks and inputs give the same bits;
/// against one pass over all rows the result differs only by the rounding of the pairwise
/// merges (RidgeStats::merge). Every rank passes statistics of the same widths. Messages:
/// ⌈log₂ K⌉ rounds of one packed RidgeStats (d_in² + d_in d_out doubles) per pair, then the
/// broadcast. Every rank must call it together.
template <int DIn, int DOut>
void reduce_ridge_stats(const Communicator& comm, RidgeStats<DIn, DOut>& stats) {
  const int rank = comm.rank();
  const int ranks = comm.size();
  if (ranks == 1)
    return;
  const Index d_in = stats.features();
  const Index d_out = stats.out_features();
  for (int step = 1; step < ranks; step *= 2) {
    if (rank % (2 * step) == step) {
      comm.send(stats.packed(), rank - step);
      break;  // this rank's rows now live on rank − step
    }
    if (rank % (2 * step) == 0 && rank + step < ranks) {
      const std::vector<double> right = comm.receive(rank + step);
      stats.merge(RidgeStats<DIn, DOut>::unpacked(right, d_in, d_out));
    }
  }
  std::vector<double> all;
  if (rank == 0)
    all = stats.packed();
  comm.broadcast(all, 0);
  stats = RidgeStats<DIn, DOut>::unpacked(all, d_in, d_out);
}

/// reduce_ridge_stats for each entry (e.g. one RidgeStats per layer), one after another: at most
/// one layer's statistics are in flight at a time.
template <int DIn, int DOut>
void reduce_ridge_stats(const Communicator& comm, std::vector<RidgeStats<DIn, DOut>>& stats) {
  for (auto& s : stats)
    reduce_ridge_stats(comm, s);
}

}  // namespace nlb::distributed
