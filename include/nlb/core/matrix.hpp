// Matrix aliases. Activations are row-major [T, d] (PAPERS.md conventions):
// one token per row, so a token's features are contiguous and row kernels
// (LayerNorm, GELU, softmax) run on contiguous memory.
#pragma once

#include <Eigen/Core>

#include "nlb/core/dims.hpp"

namespace nlb {

/// Index type used for sizes and row indices.
using Index = Eigen::Index;

namespace detail {
// Eigen forbids RowMajor on a single-column matrix; fall back to ColMajor there.
template <int Cols>
inline constexpr int row_major_options = (Cols == 1) ? Eigen::ColMajor : Eigen::RowMajor;
}  // namespace detail

/// A batch of T tokens of width D, row-major: [T, D].
template <class T, int D = Dynamic>
using Activations = Eigen::Matrix<T, Dynamic, D, detail::row_major_options<D>>;

namespace detail {
// Fixed-size Eigen objects live inline (on the stack for locals); Eigen refuses those over
// 128 KiB, and a GPT-2 weight matrix is megabytes. Objects over this size keep Dynamic
// storage even when their sizes are compile-time constants; components then check the
// compile-time sizes at construction (DESIGN.md §3: the sizes stay part of the type).
inline constexpr long long max_inline_bytes = 16 * 1024;

template <class T, int Rows, int Cols>
inline constexpr bool store_inline =
    Rows != Dynamic&& Cols !=
    Dynamic&& static_cast<long long>(Rows) * Cols* static_cast<long long>(sizeof(T)) <=
        max_inline_bytes;

template <class T, int Rows, int Cols>
inline constexpr int storage_rows = store_inline<T, Rows, Cols> ? Rows : (Rows == 1 ? 1 : Dynamic);
template <class T, int Rows, int Cols>
inline constexpr int storage_cols = store_inline<T, Rows, Cols> ? Cols : (Cols == 1 ? 1 : Dynamic);
}  // namespace detail

/// A dense row-major matrix, e.g. weights [d_in, d_out]. Sizes are compile-time constants or
/// Dynamic; above 16 KiB the storage is Dynamic (see detail::max_inline_bytes), so always
/// construct with explicit sizes: `RowMatrix<T, R, C>::Zero(rows, cols)`.
template <class T, int Rows = Dynamic, int Cols = Dynamic>
using RowMatrix =
    Eigen::Matrix<T, detail::storage_rows<T, Rows, Cols>, detail::storage_cols<T, Rows, Cols>,
                  detail::row_major_options<detail::storage_cols<T, Rows, Cols>>>;

/// A row vector [1, N]: biases and per-feature statistics (storage as RowMatrix).
template <class T, int N = Dynamic>
using RowVector = RowMatrix<T, 1, N>;

/// A column vector [N]: per-token values (gate scores, losses) and gate weights.
template <class T, int N = Dynamic>
using ColVector = Eigen::Matrix<T, detail::storage_rows<T, N, 1>, 1>;

/// The size of a dimension as the component sees it: the compile-time value when fixed,
/// else `runtime`. Used to check that run-time data matches compile-time sizes.
template <int N>
constexpr Index size_or(Index runtime) {
  return N == Dynamic ? runtime : Index{N};
}

}  // namespace nlb
