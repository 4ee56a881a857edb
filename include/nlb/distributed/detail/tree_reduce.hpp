// The one reduction tree of nlb/distributed: ranks' values combined pairwise in a fixed binomial
// tree, then broadcast from rank 0 (ridge statistics, the gate's Newton sums).
#pragma once

#include <string>
#include <vector>

#include "nlb/core.hpp"
#include "nlb/distributed/communicator.hpp"

namespace nlb::distributed::detail {

/// Replaces `values` on every rank by the combination of every rank's `values`: in round
/// k = 1, 2, 4, …, rank r with r mod 2k = 0 takes in rank r + k's values with
/// combine(left, right) (left: r's values, replaced; right: those of the ranks after r's, so
/// every combination is left part ⊕ right part in rank order), then rank 0 broadcasts the
/// result. The same ranks and inputs give the same bits on every rank. Every rank passes values
/// of the same length (ShapeError naming the rank otherwise) and calls together. Messages: at
/// most ⌈log₂ K⌉ of m doubles into a rank, then the broadcast.
template <class Combine>
void tree_reduce(const Communicator& comm, std::vector<double>& values, Combine combine) {
  const int rank = comm.rank();
  const int ranks = comm.size();
  for (int step = 1; step < ranks; step *= 2) {
    if (rank % (2 * step) == step) {
      comm.send(values, rank - step);
      break;  // this rank's part now lives on rank − step
    }
    if (rank % (2 * step) == 0 && rank + step < ranks) {
      const std::vector<double> right = comm.receive(rank + step);
      if (right.size() != values.size()) {
        throw ShapeError(nlb::detail::expected_found(
            "tree_reduce: values from rank " + std::to_string(rank + step),
            std::to_string(values.size()) + " doubles", right.size()));
      }
      combine(values, right);
    }
  }
  comm.broadcast(values, 0);
}

}  // namespace nlb::distributed::detail
