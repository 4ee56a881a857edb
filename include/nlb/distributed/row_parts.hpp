// RowParts over the ranks of a Communicator: a fit (the hyperplane gate's Newton solve) whose
// training rows are spread over ranks, without moving the rows (PAPERS §A3; docs/scaling.md).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "nlb/distributed/communicator.hpp"
#include "nlb/distributed/detail/tree_reduce.hpp"
#include "nlb/mlp/row_parts.hpp"

namespace nlb::distributed {

/// RowParts whose parts are the ranks of `comm`: each reduction combines the ranks' values in the
/// fixed binomial tree of detail::tree_reduce and broadcasts the result, so every rank computes
/// the same bits. A sum of m values moves at most ⌈log₂ K⌉ · m doubles into a rank plus the
/// broadcast (the Hessian: m = (d + 1)² per Newton step). `comm` must outlive the result.
inline RowParts row_parts(const Communicator& comm) {
  RowParts parts;
  if (comm.size() == 1)
    return parts;  // one part: nothing to reduce
  auto reduce = [&comm](std::span<double> v, auto combine) {
    std::vector<double> values(v.begin(), v.end());
    detail::tree_reduce(comm, values,
                        [&](std::vector<double>& left, const std::vector<double>& right) {
                          for (std::size_t i = 0; i < left.size(); ++i)
                            left[i] = combine(left[i], right[i]);
                        });
    std::copy(values.begin(), values.end(), v.begin());
  };
  parts.sum = [reduce](std::span<double> v) {
    reduce(v, [](double a, double b) { return a + b; });
  };
  parts.max = [reduce](std::span<double> v) {
    reduce(v, [](double a, double b) { return std::max(a, b); });
  };
  return parts;
}

}  // namespace nlb::distributed
