// Layer normalization of one row, and of every row of a row-major [T, d] matrix
// (PAPERS.md §A1: the MLP input is the output of the pre-MLP LayerNorm).
//
//   mean = (1/n) sum_i x_i,   var = (1/n) sum_i (x_i - mean)^2     (biased, as PyTorch)
//   y_i  = (x_i - mean) / sqrt(var + eps) * gamma_i + beta_i        (eps inside the sqrt)
//
// Corrected two-pass moments (detail::finish_moments): pass 1 a rough mean, pass 2 the sum
// and the sum of squares of x - rough mean, so the variance never suffers the cancellation
// of E[x^2] - mean^2 and the mean's own rounding error is corrected; pass 3 writes y.
// Accumulation is in T. Scalar reference and xsimd form chosen by the backend tag (see
// gelu.hpp); the SIMD form keeps one partial sum per lane and reduces them after each pass.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "nlb/core.hpp"
#include "nlb/kernels/detail/row_checks.hpp"
#include "nlb/kernels/detail/simd_row.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels {

namespace detail {

/// T in a non-deduced context: gamma/beta (which may be nullptr) and eps (which may be a
/// double literal for a float row) take their type from x and y.
template <class T>
using same_t = std::type_identity_t<T>;

/// Throws ArgumentError unless n >= 1 and eps >= 0 (NaN eps is rejected too).
template <class T>
void check_layer_norm_arguments(Index n, T eps) {
  check_row_length("layer_norm: n", n, 1);
  if (!(eps >= T(0))) {
    throw ArgumentError(nlb::detail::expected_found("layer_norm: eps", "a value >= 0", eps));
  }
}

/// Mean and 1 / sqrt(var + eps) of a row.
template <class T>
struct RowMoments {
  T mean;
  T inv_std;
};

/// Finishes the corrected two-pass algorithm (Chan, Golub & LeVeque 1983): with
/// c_i = x_i - rough_mean, the rounding error of the rough mean is d = sum(c_i) / n, so
/// mean = rough_mean + d and var = sum(c_i^2) / n - d^2 (>= 0 in exact arithmetic; clamped
/// against rounding). The correction makes the mean's error O(eps |mean|) instead of
/// O(n eps |mean|), which is what bounds (x - mean) when |mean| >> std.
template <class T>
RowMoments<T> finish_moments(T rough_mean, T centered_sum, T centered_squares, Index n, T eps) {
  const T count = static_cast<T>(n);
  const T correction = centered_sum / count;
  const T variance = std::max(centered_squares / count - correction * correction, T(0));
  return {rough_mean + correction, T(1) / std::sqrt(variance + eps)};
}

}  // namespace detail

/// Normalizes one row: y[0, n) = (x - mean) / sqrt(var + eps) * gamma + beta, with the
/// biased variance. Scalar reference. `y` may be `x` (in place) but must not otherwise
/// overlap it; `gamma`/`beta` may be nullptr, meaning all ones / all zeros. O(n), 3 passes.
/// Throws ArgumentError if n < 1 or eps < 0.
template <class T>
void layer_norm(backend::scalar, const T* x, T* y, const detail::same_t<T>* gamma,
                const detail::same_t<T>* beta, Index n, detail::same_t<T> eps) {
  detail::check_layer_norm_arguments(n, eps);
  T sum = T(0);
  for (Index i = 0; i < n; ++i) {
    sum += x[i];
  }
  const T rough_mean = sum / static_cast<T>(n);
  T centered_sum = T(0);
  T centered_squares = T(0);
  for (Index i = 0; i < n; ++i) {
    const T centered = x[i] - rough_mean;
    centered_sum += centered;
    centered_squares += centered * centered;
  }
  const auto m = detail::finish_moments(rough_mean, centered_sum, centered_squares, n, eps);
  for (Index i = 0; i < n; ++i) {
    T value = (x[i] - m.mean) * m.inv_std;
    if (gamma != nullptr) {
      value *= gamma[i];
    }
    if (beta != nullptr) {
      value += beta[i];
    }
    y[i] = value;
  }
}

/// Normalizes one row as the scalar overload does, with xsimd batches for Arch: each pass
/// runs n / W full batches and one padded tail batch (W = xsimd::batch<T, Arch>::size), with
/// one partial sum per lane. The last pass is y = fma(x - mean, inv_std * gamma, beta).
/// Same aliasing rules and errors. O(n), 3 passes.
template <class T, class Arch, class Gemm>
void layer_norm(backend::simd<Arch, Gemm>, const T* x, T* y, const detail::same_t<T>* gamma,
                const detail::same_t<T>* beta, Index n, detail::same_t<T> eps) {
  detail::check_layer_norm_arguments(n, eps);
  using batch = xsimd::batch<T, Arch>;
  constexpr Index width = detail::batch_width<T, Arch>;
  const Index full = n - n % width;  // [0, full) in whole batches, [full, n) the tail
  const Index tail = n - full;

  // Pass 1: rough mean. Padding lanes add 0.
  batch sums(T(0));
  for (Index i = 0; i < full; i += width) {
    sums += batch::load_unaligned(x + i);
  }
  if (tail > 0) {
    sums += detail::load_partial<Arch>(x + full, tail, T(0));
  }
  const T rough_mean = detail::reduce_sum(sums) / static_cast<T>(n);

  // Pass 2: centered sum (the rough mean's error) and centered squares. Padding lanes hold
  // the rough mean, so they add exactly 0 to both.
  const batch rough(rough_mean);
  batch centered_sums(T(0));
  batch centered_squares(T(0));
  const auto accumulate = [&](batch values) {
    const batch centered = values - rough;
    centered_sums += centered;
    centered_squares = xsimd::fma(centered, centered, centered_squares);
  };
  for (Index i = 0; i < full; i += width) {
    accumulate(batch::load_unaligned(x + i));
  }
  if (tail > 0) {
    accumulate(detail::load_partial<Arch>(x + full, tail, rough_mean));
  }
  const auto m = detail::finish_moments(rough_mean, detail::reduce_sum(centered_sums),
                                        detail::reduce_sum(centered_squares), n, eps);

  // Pass 3: y = (x - mean) * (inv_std * gamma) + beta.
  const batch mean(m.mean);
  const batch inv_std(m.inv_std);
  const auto normalize = [&](batch values, Index i, Index lanes) {
    const bool whole = lanes == width;
    batch scale = inv_std;
    batch shift(T(0));
    if (gamma != nullptr) {
      scale *= whole ? batch::load_unaligned(gamma + i)
                     : detail::load_partial<Arch>(gamma + i, lanes, T(1));
    }
    if (beta != nullptr) {
      shift = whole ? batch::load_unaligned(beta + i)
                    : detail::load_partial<Arch>(beta + i, lanes, T(0));
    }
    return xsimd::fma(values - mean, scale, shift);
  };
  for (Index i = 0; i < full; i += width) {
    normalize(batch::load_unaligned(x + i), i, width).store_unaligned(y + i);
  }
  if (tail > 0) {
    const batch values = detail::load_partial<Arch>(x + full, tail, T(0));
    detail::store_partial<Arch>(normalize(values, full, tail), y + full, tail);
  }
}

namespace detail {

/// Row-major (or a single column) with direct access: rows are contiguous runs of d values.
template <class Derived>
inline constexpr bool has_contiguous_rows =
    (static_cast<int>(Derived::Flags) & Eigen::DirectAccessBit) != 0 &&
    ((static_cast<int>(Derived::Flags) & Eigen::RowMajorBit) != 0 ||
     Derived::ColsAtCompileTime == 1);

template <class Derived>
inline constexpr bool is_direct_vector = (static_cast<int>(Derived::Flags) &
                                          Eigen::DirectAccessBit) != 0 &&
                                         Derived::IsVectorAtCompileTime;

/// Throws ArgumentError unless consecutive entries of `m` along `what` are adjacent in memory.
inline void check_unit_stride(const char* what, Index length, Index stride) {
  if (length > 1 && stride != 1) {
    throw ArgumentError(nlb::detail::expected_found(std::string(what), "stride 1", stride));
  }
}

/// Runs row(x, y, d) on every row of X and its row of Y, after the checks both row-normalizing
/// kernels share (layer_norm_rows, rms_norm_rows); `kernel` names the caller in the messages.
template <class XDerived, class YDerived, class Row>
void for_each_row_pair(const char* kernel, const Eigen::MatrixBase<XDerived>& X,
                       const Eigen::MatrixBase<YDerived>& Y_const, Row row) {
  using T = typename XDerived::Scalar;
  static_assert(std::is_same_v<T, typename YDerived::Scalar>,
                "layer_norm_rows, rms_norm_rows: X and Y must have the same scalar type");
  static_assert(has_contiguous_rows<XDerived> && has_contiguous_rows<YDerived>,
                "layer_norm_rows, rms_norm_rows: X and Y must be row-major with direct access "
                "(RowMatrix, Activations, a Map, or a block of rows of one)");
  // Eigen's idiom for an output that may be an expression such as a block of rows.
  auto& Y = const_cast<Eigen::MatrixBase<YDerived>&>(Y_const);
  const Index rows = X.rows();
  const Index d = X.cols();
  // The messages are built only on a failure: a decoded token normalizes one row per call.
  const auto named = [kernel](const char* what) { return std::string(kernel) + ": " + what; };
  if (d < 1)
    check_row_length(named("X.cols()").c_str(), d, 1);
  if constexpr (std::is_base_of_v<Eigen::PlainObjectBase<YDerived>, YDerived>) {
    if (Y.rows() != rows || Y.cols() != d) {
      Y.derived().resize(rows, d);  // a plain matrix is resized; an expression must fit
    }
  }
  if (Y.rows() != rows || Y.cols() != d) {
    check_dim(named("Y.rows()"), rows, Y.rows());
    check_dim(named("Y.cols()"), d, Y.cols());
  }
  if (d > 1 && (X.colStride() != 1 || Y.colStride() != 1)) {
    check_unit_stride(named("X column stride").c_str(), d, X.colStride());
    check_unit_stride(named("Y column stride").c_str(), d, Y.colStride());
  }
  for (Index t = 0; t < rows; ++t) {
    const T* x = X.derived().data() + t * X.rowStride();  // X[t, :]
    T* y = Y.derived().data() + t * Y.rowStride();        // Y[t, :]
    row(x, y, d);
  }
}

/// Shared body of both layer_norm_rows overloads; gamma/beta are nullptr or checked pointers.
template <class Backend, class XDerived, class YDerived>
void layer_norm_rows_impl(Backend backend, const Eigen::MatrixBase<XDerived>& X,
                          const Eigen::MatrixBase<YDerived>& Y,
                          const typename XDerived::Scalar* gamma,
                          const typename XDerived::Scalar* beta, typename XDerived::Scalar eps) {
  using T = typename XDerived::Scalar;
  for_each_row_pair("layer_norm_rows", X, Y, [&](const T* x, T* y, Index d) {
    layer_norm(backend, x, y, gamma, beta, d, eps);
  });
}

/// Checks an affine parameter vector of d entries and returns its data.
template <class Derived>
const typename Derived::Scalar* affine_data(const char* what, const Eigen::MatrixBase<Derived>& v,
                                            Index d) {
  static_assert(is_direct_vector<Derived>,
                "layer_norm_rows: gamma and beta must be vectors with direct access");
  if (v.size() != d)  // the message only on a mismatch: this runs twice per LayerNorm call
    check_dim(std::string(what) + " size", d, v.size());
  check_unit_stride(what, v.size(), v.innerStride());
  return v.derived().data();
}

}  // namespace detail

/// Normalizes every row of X into Y: Y[t, :] = layer_norm(X[t, :]) for t in [0, T).
///
/// X [T, d] and Y [T, d] are row-major Eigen objects with direct access and contiguous rows
/// (RowMatrix, Activations, a Map, or a block of consecutive rows of one), with any
/// compile-time or Dynamic d. Y is taken by const reference and written through Eigen's
/// const_cast idiom, so an expression such as `Z.middleRows(a, b)` can be passed directly; a
/// plain matrix Y is resized to [T, d], an expression must already have that shape. Y may be
/// X itself (in place). gamma [d] and beta [d] are contiguous vectors (row or column).
/// `backend` is any CPU backend tag; each row goes to the matching layer_norm overload.
/// O(T d). Throws ShapeError on mismatched sizes, ArgumentError on non-contiguous rows,
/// d < 1 or eps < 0.
template <class Backend, class XDerived, class YDerived, class GammaDerived, class BetaDerived>
void layer_norm_rows(Backend backend, const Eigen::MatrixBase<XDerived>& X,
                     const Eigen::MatrixBase<YDerived>& Y,
                     const Eigen::MatrixBase<GammaDerived>& gamma,
                     const Eigen::MatrixBase<BetaDerived>& beta, typename XDerived::Scalar eps) {
  using T = typename XDerived::Scalar;
  static_assert(std::is_same_v<T, typename GammaDerived::Scalar> &&
                    std::is_same_v<T, typename BetaDerived::Scalar>,
                "layer_norm_rows: gamma and beta must have X's scalar type");
  const T* g = detail::affine_data("layer_norm_rows: gamma", gamma, X.cols());
  const T* b = detail::affine_data("layer_norm_rows: beta", beta, X.cols());
  detail::layer_norm_rows_impl(backend, X, Y, g, b, eps);
}

/// layer_norm_rows without the affine step (gamma = 1, beta = 0). Same contract.
template <class Backend, class XDerived, class YDerived>
void layer_norm_rows(Backend backend, const Eigen::MatrixBase<XDerived>& X,
                     const Eigen::MatrixBase<YDerived>& Y, typename XDerived::Scalar eps) {
  detail::layer_norm_rows_impl(backend, X, Y, nullptr, nullptr, eps);
}

}  // namespace nlb::kernels

NLB_XSIMD_GUARD_END
