// Row operations of the CPU backends: bias rows, gathers and scatters of token rows
// (DESIGN.md §4). nlb/cuda/ops.cuh has the same operations for backend::cuda.
#pragma once

#include <Eigen/Core>
#include <span>

#include "nlb/core/backend.hpp"
#include "nlb/core/matrix.hpp"

namespace nlb::ops {

/// Y[i, :] += bias for every row i. Y [T, n], bias [1, n] (a row vector or a [1, n] matrix).
/// O(T n).
template <class Backend, class Dst, class Bias>
void add_row(Backend, Dst&& Y, const Eigen::MatrixBase<Bias>& bias) {
  static_assert(backend::is_host<Backend>, "ops::add_row: a CPU backend");
  eigen_assert(bias.rows() == 1 && bias.cols() == Y.cols());
  Y.rowwise() += bias.derived().row(0);
}

/// out[r, :] = X[rows[r], :] for r < rows.size(): the listed rows packed into a contiguous
/// block. out must have rows.size() rows and X's width, and must not alias X. O(n d).
template <class Backend, class Src, class Dst>
void gather_rows(Backend, const Src& X, std::span<const Index> rows, Dst&& out) {
  static_assert(backend::is_host<Backend>, "ops::gather_rows: a CPU backend");
  eigen_assert(out.rows() == static_cast<Index>(rows.size()) && out.cols() == X.cols());
  // Indexed through a span: an Eigen IndexedView keeps its index container by value, and a
  // std::vector there would be copied (allocated) on every gather and scatter.
  out = X(rows, Eigen::all);
}

/// Y[rows[r], :] = block[r, :] for r < rows.size(): the inverse of gather_rows. Rows of Y not
/// listed are left as they are. `rows` must not repeat an index. O(n d).
template <class Backend, class Src, class Dst>
void scatter_rows(Backend, const Src& block, std::span<const Index> rows, Dst&& Y) {
  static_assert(backend::is_host<Backend>, "ops::scatter_rows: a CPU backend");
  eigen_assert(block.rows() == static_cast<Index>(rows.size()) && block.cols() == Y.cols());
  Y(rows, Eigen::all) = block;
}

}  // namespace nlb::ops
