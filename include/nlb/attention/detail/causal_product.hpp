// Causal products of factored bilinear forms: a score s_ij = a_i · b_j with a_i, b_j the rows
// of two feature matrices, computed only where query i may attend to key j. Internal to
// nlb/attention (SkewSymmetricRouting, DiagonalFilter and SDAttention share it).
#pragma once

#include <algorithm>

#include "nlb/core.hpp"

namespace nlb::detail {

/// Query rows per GEMM panel of causal_product.
inline constexpr Index causal_panel = 64;

/// out(i, j) = a.row(i) · b.row(j) (or out(i, j) += … with accumulate) for 0 <= j <= past + i, with
/// a [T, k] the queries' features (query i sits at position past + i) and b [past + T, k] the
/// keys'. Entries with j > past + i are not written. Panels of 64 query rows: the keys strictly
/// before the panel's first position in one GEMM, the panel's own 64 x 64 triangle through a small
/// stack buffer. Cost: about (past + T/2)·T·k multiply-adds, T·(past + T/2) entries written.
template <class T>
void causal_product(const Eigen::Ref<const RowMatrix<T>>& a,
                    const Eigen::Ref<const RowMatrix<T>>& b, Eigen::Ref<RowMatrix<T>> out,
                    Index past, bool accumulate = false) {
  const Index rows = a.rows();
  using Panel = Eigen::Matrix<T, Dynamic, Dynamic, Eigen::RowMajor, causal_panel, causal_panel>;
  Panel diag;
  for (Index i0 = 0; i0 < rows; i0 += causal_panel) {
    const Index n = std::min(causal_panel, rows - i0);
    const Index first = past + i0;  // the panel's first position
    const auto panel = a.middleRows(i0, n);
    if (first > 0) {
      if (accumulate)
        out.block(i0, 0, n, first).noalias() += panel * b.topRows(first).transpose();
      else
        out.block(i0, 0, n, first).noalias() = panel * b.topRows(first).transpose();
    }
    diag.resize(n, n);
    diag.noalias() = panel * b.middleRows(first, n).transpose();
    for (Index r = 0; r < n; ++r) {
      if (accumulate)
        out.row(i0 + r).segment(first, r + 1) += diag.row(r).head(r + 1);
      else
        out.row(i0 + r).segment(first, r + 1) = diag.row(r).head(r + 1);
    }
  }
}

}  // namespace nlb::detail
