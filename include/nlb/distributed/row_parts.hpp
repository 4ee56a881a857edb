// RowParts over the ranks of a Communicator: a fit (the hyperplane gate's Newton solve) whose
// training rows are spread over ranks, without moving the rows (PAPERS §A3; docs/scaling.md).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "nlb/distributed/communicator.hpp"
#include "nlb/mlp/row_parts.hpp"

namespace nlb::distributed {

/// RowParts whose parts are the ranks of `comm`: each reduction gathers every rank's values and
/// combines them in rank order, so every rank computes the same bits. A sum over K ranks of a
/// vector of length m moves K·m doubles to every rank (the Hessian: (d + 1)² per Newton step).
/// `comm` must outlive the result.
inline RowParts row_parts(const Communicator& comm) {
  auto reduce = [&comm](std::span<double> values, auto combine) {
    const std::vector<double> all = comm.all_gather(values);
    const std::size_t m = values.size();
    for (std::size_t i = 0; i < m; ++i) {
      double acc = all[i];
      for (std::size_t r = 1; r < static_cast<std::size_t>(comm.size()); ++r)
        acc = combine(acc, all[r * m + i]);
      values[i] = acc;
    }
  };
  RowParts parts;
  if (comm.size() == 1)
    return parts;  // one part: nothing to reduce
  parts.sum = [reduce](std::span<double> v) {
    reduce(v, [](double a, double b) { return a + b; });
  };
  parts.max = [reduce](std::span<double> v) {
    reduce(v, [](double a, double b) { return std::max(a, b); });
  };
  return parts;
}

}  // namespace nlb::distributed
