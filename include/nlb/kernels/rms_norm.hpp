// Root-mean-square normalization of one row, and of every row of a row-major [T, d] matrix: the
// norm of the Llama family's blocks (before attention, before the MLP, and before the head).
//
//   y_i = (x_i / sqrt(mean_j x_j² + eps)) · weight_i          (eps inside the sqrt)
//
// as Hugging Face's LlamaRMSNorm computes it: no mean is subtracted and there is no bias, the
// row is scaled by the reciprocal root first and by the weight second. One pass accumulates the
// squares in T (one partial sum per SIMD lane, reduced once), a second writes y. Scalar reference
// and xsimd form chosen by the backend tag, as for LayerNorm (nlb/kernels/layer_norm.hpp).
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include <Eigen/Core>
#include <cmath>
#include <type_traits>

#include "nlb/core.hpp"
#include "nlb/kernels/detail/row_checks.hpp"
#include "nlb/kernels/detail/simd_row.hpp"
#include "nlb/kernels/layer_norm.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels {

namespace detail {

/// Throws ArgumentError unless n >= 1 and eps >= 0 (NaN eps is rejected too).
template <class T>
void check_rms_norm_arguments(Index n, T eps) {
  check_row_length("rms_norm: n", n, 1);
  if (!(eps >= T(0))) {
    throw ArgumentError(nlb::detail::expected_found("rms_norm: eps", "a value >= 0", eps));
  }
}

}  // namespace detail

/// Normalizes one row: y[0, n) = x / sqrt(mean(x²) + eps) · weight. Scalar reference. `y` may
/// be `x` (in place) but must not otherwise overlap it; `weight` may be nullptr (all ones).
/// O(n), 2 passes. Throws ArgumentError if n < 1 or eps < 0.
template <class T>
void rms_norm(backend::scalar, const T* x, T* y, const detail::same_t<T>* weight, Index n,
              detail::same_t<T> eps) {
  detail::check_rms_norm_arguments(n, eps);
  T squares = T(0);
  for (Index i = 0; i < n; ++i)
    squares += x[i] * x[i];
  const T inv_rms = T(1) / std::sqrt(squares / static_cast<T>(n) + eps);
  for (Index i = 0; i < n; ++i)
    y[i] = weight != nullptr ? x[i] * inv_rms * weight[i] : x[i] * inv_rms;
}

/// The same with xsimd batches for Arch: n / W full batches and one padded tail batch
/// (W = xsimd::batch<T, Arch>::size), one partial sum of squares per lane. Same aliasing rules
/// and errors. O(n), 2 passes.
template <class T, class Arch, class Gemm>
void rms_norm(backend::simd<Arch, Gemm>, const T* x, T* y, const detail::same_t<T>* weight, Index n,
              detail::same_t<T> eps) {
  detail::check_rms_norm_arguments(n, eps);
  using batch = xsimd::batch<T, Arch>;
  constexpr Index width = detail::batch_width<T, Arch>;
  const Index full = n - n % width;  // [0, full) in whole batches, [full, n) the tail
  const Index tail = n - full;

  batch squares(T(0));  // padding lanes hold 0 and add nothing
  for (Index i = 0; i < full; i += width) {
    const batch values = batch::load_unaligned(x + i);
    squares = xsimd::fma(values, values, squares);
  }
  if (tail > 0) {
    const batch values = detail::load_partial<Arch>(x + full, tail, T(0));
    squares = xsimd::fma(values, values, squares);
  }
  const batch inv_rms(T(1) / std::sqrt(detail::reduce_sum(squares) / static_cast<T>(n) + eps));
  const auto scaled = [&](batch values, Index i, Index lanes) {
    if (weight == nullptr)
      return values * inv_rms;
    return values * inv_rms *
           (lanes == width ? batch::load_unaligned(weight + i)
                           : detail::load_partial<Arch>(weight + i, lanes, T(1)));
  };
  for (Index i = 0; i < full; i += width)
    scaled(batch::load_unaligned(x + i), i, width).store_unaligned(y + i);
  if (tail > 0) {
    const batch values = detail::load_partial<Arch>(x + full, tail, T(0));
    detail::store_partial<Arch>(scaled(values, full, tail), y + full, tail);
  }
}

/// Normalizes every row of X into Y: Y[t, :] = rms_norm(X[t, :]) for t in [0, T), with the
/// operands layer_norm_rows takes (row-major, direct access, contiguous rows; Y may be X; a plain
/// matrix Y is resized) and weight [d] a contiguous vector. O(T d). Throws ShapeError on
/// mismatched sizes, ArgumentError on non-contiguous rows, d < 1 or eps < 0.
template <class Backend, class XDerived, class YDerived, class WeightDerived>
void rms_norm_rows(Backend backend, const Eigen::MatrixBase<XDerived>& X,
                   const Eigen::MatrixBase<YDerived>& Y,
                   const Eigen::MatrixBase<WeightDerived>& weight, typename XDerived::Scalar eps) {
  using T = typename XDerived::Scalar;
  static_assert(std::is_same_v<T, typename WeightDerived::Scalar>,
                "rms_norm_rows: weight must have X's scalar type");
  const T* w = detail::affine_data("rms_norm_rows: weight", weight, X.cols());
  detail::for_each_row_pair("rms_norm_rows", X, Y,
                            [&](const T* x, T* y, Index d) { rms_norm(backend, x, y, w, d, eps); });
}

}  // namespace nlb::kernels

NLB_XSIMD_GUARD_END
