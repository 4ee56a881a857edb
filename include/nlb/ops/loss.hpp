// Next-token losses of a window of logits, the operation of the CPU backends (DESIGN.md §4):
// the log-sum-exp kernel of nlb/kernels/log_sum_exp.hpp per row. nlb/cuda/ops.cuh has the same
// operation for backend::cuda, which reads back only the losses.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <span>
#include <vector>

#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/kernels/log_sum_exp.hpp"

namespace nlb::ops {

/// Appends to `losses` the next-token loss of every position t < T − 1 of one window:
/// logsumexp(logits[t, :]) − logits[t, ids[t + 1]], in double (the scalar backend's kernel sums
/// in double, the SIMD one in the logits' type with double sums). logits [T, vocab] (row-major;
/// anything else is copied into one), ids [T] in [0, vocab). The scratch is unused on the CPU.
/// O(T · vocab). ShapeError when the row count is not the id count.
template <class Backend, class Logits, class Scratch>
requires backend::is_host<Backend>
void next_token_losses(const Context<Backend>&, const Logits& logits,
                       std::span<const std::int32_t> ids, std::vector<double>& losses, Scratch&) {
  using T = typename Logits::Scalar;
  check_dim("next_token_losses: logits rows (tokens)", static_cast<Index>(ids.size()),
            logits.rows());
  if (ids.size() < 2)
    return;
  const Eigen::Ref<const RowMatrix<T>> rows(logits);
  losses.reserve(losses.size() + ids.size() - 1);
  for (Index t = 0; t + 1 < rows.rows(); ++t) {
    const T* row = rows.data() + t * rows.outerStride();
    const double lse = kernels::log_sum_exp(Backend{}, row, rows.cols());
    losses.push_back(lse - static_cast<double>(row[ids[static_cast<std::size_t>(t + 1)]]));
  }
}

}  // namespace nlb::ops
