// Causal products of factored bilinear forms: a score s_ij = a_i · b_j with a_i, b_j the rows
// of two feature matrices, computed only where query i may attend to key j. Internal to
// nlb/attention (SkewSymmetricRouting, DiagonalFilter and SDAttention share it).
#pragma once

#include <algorithm>

#include "nlb/core.hpp"

namespace nlb::detail {

/// Query rows per GEMM panel of causal_product.
inline constexpr Index causal_panel = 64;

/// Feature widths up to this use the row-wise kernel of causal_product (each output row built
/// from k scaled rows of bᵀ while it sits in L1); wider ones go through GEMM panels (measured,
/// bench_attention: at k = 8 the GEMM panels are already ~1.4x faster than k row passes).
inline constexpr Index causal_rowwise_max_k = 4;

/// out(i, j) = a.row(i) · b.row(j) (or out(i, j) += … with accumulate) for 0 <= j <= past + i,
/// with a [T, k] the queries' features (query i sits at position past + i) and b [past + T, k]
/// the keys'. Entries with j > past + i are not written.
/// k <= 4 (low-rank routing, Rank <= 4): row by row, out(i, :n) = Σ_c a(i, c) · bᵀ(c, :n) with
/// n = past + i + 1, k vectorized passes over a row in L1, so the result is written to memory
/// once.
/// Larger k: panels of 64 query rows, the keys strictly before the panel's first position in
/// one GEMM, the panel's own 64 x 64 triangle through a small stack buffer.
/// Cost: about (past + T/2)·T·k multiply-adds, T·(past + T/2) entries written.
template <class T>
void causal_product(const Eigen::Ref<const RowMatrix<T>>& a,
                    const Eigen::Ref<const RowMatrix<T>>& b, Eigen::Ref<RowMatrix<T>> out,
                    Index past, bool accumulate = false) {
  const Index rows = a.rows(), k = a.cols();
  if (k <= causal_rowwise_max_k) {
    const RowMatrix<T> bt = b.transpose();  // [k, past + T]
    for (Index i = 0; i < rows; ++i) {
      const Index n = past + i + 1;
      auto row = out.row(i).head(n);
      Index c = 0;
      if (!accumulate) {
        if (k == 0) {
          row.setZero();
          continue;
        }
        row = a(i, 0) * bt.row(0).head(n);
        c = 1;
      }
      for (; c < k; ++c)
        row += a(i, c) * bt.row(c).head(n);
    }
    return;
  }
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

/// out(j, i) = −out(i, j) for every j < i of the square out: the strict upper triangle as the
/// negation of the strict lower one (exact). By 32 x 32 tiles through a stack buffer: a tile of
/// the lower triangle is read row by row, transposed in the buffer, and written row by row.
/// (Writing columns directly would put 32 lines at a power-of-two stride into the same cache
/// set: ~40x slower at T = 1024.)
template <class T>
void mirror_negated(Eigen::Ref<RowMatrix<T>> out) {
  constexpr Index tile = 32;
  Eigen::Matrix<T, tile, tile, Eigen::RowMajor> buffer;
  const Index n = out.rows();
  for (Index i0 = 0; i0 < n; i0 += tile) {
    const Index ni = std::min(tile, n - i0);
    for (Index j0 = 0; j0 <= i0; j0 += tile) {
      const Index nj = std::min(tile, n - j0);
      // buffer(c, r) = −out(i0 + r, j0 + c): the tile transposed and negated.
      for (Index r = 0; r < ni; ++r) {
        for (Index c = 0; c < nj; ++c)
          buffer(c, r) = -out(i0 + r, j0 + c);
      }
      // Write out(j0 + c, i0 + r) for j < i only (the diagonal tile is half).
      for (Index c = 0; c < nj; ++c) {
        const Index j = j0 + c;
        const Index first = std::max(i0, j + 1) - i0;  // columns i > j
        if (first < ni)
          out.row(j).segment(i0 + first, ni - first) = buffer.row(c).segment(first, ni - first);
      }
    }
  }
}

}  // namespace nlb::detail
