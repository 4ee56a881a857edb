// RowParts over the ranks of a Communicator: a fit (the hyperplane gate's Newton solve) whose
// training rows are spread over ranks, without moving the rows (PAPERS §A3; docs/scaling.md).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "nlb/core.hpp"
#include "nlb/distributed/communicator.hpp"
#include "nlb/mlp/row_parts.hpp"

namespace nlb::distributed {

namespace detail {

/// Replaces `values` on every rank by combine over every rank's `values`, in the fixed binomial
/// tree of reduce_ridge_stats (round k = 1, 2, 4, …: rank r with r mod 2k = 0 takes in rank
/// r + k's values, combine(left, right)), then rank 0 broadcasts the result: the same bits on
/// every rank, ⌈log₂ K⌉ messages of m doubles into a rank at most, then the broadcast.
template <class Combine>
void tree_reduce(const Communicator& comm, std::span<double> values, Combine combine) {
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
            "row_parts: values from rank " + std::to_string(rank + step),
            std::to_string(values.size()) + " doubles", right.size()));
      }
      for (std::size_t i = 0; i < values.size(); ++i)
        values[i] = combine(values[i], right[i]);
    }
  }
  std::vector<double> all;
  if (rank == 0)
    all.assign(values.begin(), values.end());
  comm.broadcast(all, 0);
  std::copy(all.begin(), all.end(), values.begin());
}

}  // namespace detail

/// RowParts whose parts are the ranks of `comm`: each reduction combines the ranks' values in a
/// fixed binomial tree and broadcasts the result (detail::tree_reduce), so every rank computes
/// the same bits. A sum of m values moves at most ⌈log₂ K⌉ · m doubles into a rank plus the
/// broadcast (the Hessian: m = (d + 1)² per Newton step). `comm` must outlive the result.
inline RowParts row_parts(const Communicator& comm) {
  RowParts parts;
  if (comm.size() == 1)
    return parts;  // one part: nothing to reduce
  parts.sum = [&comm](std::span<double> v) {
    detail::tree_reduce(comm, v, [](double a, double b) { return a + b; });
  };
  parts.max = [&comm](std::span<double> v) {
    detail::tree_reduce(comm, v, [](double a, double b) { return std::max(a, b); });
  };
  return parts;
}

}  // namespace nlb::distributed
