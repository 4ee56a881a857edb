// Matrix aliases. Activations are row-major [T, d] (PAPERS.md conventions):
// one token per row, so a token's features are contiguous and row kernels
// (LayerNorm, GELU, softmax) run on contiguous memory.
#pragma once

#include <Eigen/Core>

#include "nlb/core/dims.hpp"

namespace nlb {

namespace detail {
// Eigen forbids RowMajor on a single-column matrix; fall back to ColMajor there.
template <int Cols>
inline constexpr int row_major_options = (Cols == 1) ? Eigen::ColMajor : Eigen::RowMajor;
}  // namespace detail

/// A batch of T tokens of width D, row-major: [T, D].
template <class T, int D = Dynamic>
using Activations = Eigen::Matrix<T, Dynamic, D, detail::row_major_options<D>>;

/// A dense row-major matrix with compile-time or Dynamic sizes, e.g. weights [d_in, d_out].
template <class T, int Rows = Dynamic, int Cols = Dynamic>
using RowMatrix = Eigen::Matrix<T, Rows, Cols, detail::row_major_options<Cols>>;

/// A row vector [1, N]: biases and per-feature statistics.
template <class T, int N = Dynamic>
using RowVector = Eigen::Matrix<T, 1, N, Eigen::RowMajor>;

/// A column vector [N]: per-token values (gate scores, losses).
template <class T, int N = Dynamic>
using ColVector = Eigen::Matrix<T, N, 1>;

/// Index type used for sizes and row indices.
using Index = Eigen::Index;

}  // namespace nlb
