// Ridge statistics accumulated on several ranks, combined into those of all their rows
// (PAPERS §A1: the statistics merge exactly, up to rounding).
#pragma once

#include <vector>

#include "nlb/distributed/communicator.hpp"
#include "nlb/distributed/detail/tree_reduce.hpp"
#include "nlb/mlp/ridge_stats.hpp"

namespace nlb::distributed {

/// Replaces `stats` on every rank by the merge of every rank's `stats`, in the fixed binomial
/// tree of detail::tree_reduce (every merge is left part ⊕ right part in window order), then
/// rank 0 broadcasts the result. The same ranks and inputs give the same bits;
/// against one pass over all rows the result differs only by the rounding of the pairwise
/// merges (RidgeStats::merge). Every rank passes statistics of the same widths. Messages:
/// ⌈log₂ K⌉ rounds of one packed RidgeStats (d_in² + d_in d_out doubles) per pair, then the
/// broadcast. Every rank must call it together.
template <int DIn, int DOut>
void reduce_ridge_stats(const Communicator& comm, RidgeStats<DIn, DOut>& stats) {
  if (comm.size() == 1)
    return;
  const Index d_in = stats.features();
  const Index d_out = stats.out_features();
  std::vector<double> packed = stats.packed();
  detail::tree_reduce(comm, packed,
                      [&](std::vector<double>& left, const std::vector<double>& right) {
                        auto merged = RidgeStats<DIn, DOut>::unpacked(left, d_in, d_out);
                        merged.merge(RidgeStats<DIn, DOut>::unpacked(right, d_in, d_out));
                        left = merged.packed();
                      });
  stats = RidgeStats<DIn, DOut>::unpacked(packed, d_in, d_out);
}

/// reduce_ridge_stats for each entry (e.g. one RidgeStats per layer), one after another: at most
/// one layer's statistics are in flight at a time.
template <int DIn, int DOut>
void reduce_ridge_stats(const Communicator& comm, std::vector<RidgeStats<DIn, DOut>>& stats) {
  for (auto& s : stats)
    reduce_ridge_stats(comm, s);
}

}  // namespace nlb::distributed
