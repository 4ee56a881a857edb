// The ELU+1 feature map of linear attention (PAPERS.md §B3), in place on contiguous values:
//
//   φ(x) = elu(x) + 1 = x + 1   for x > 0,
//                       e^x     for x <= 0,
//
// always > 0, so the normaliser φ(q)ᵀ Σ φ(k) of linear attention is positive. Scalar reference
// (std::exp) and xsimd form (xsimd::exp, both branches evaluated and selected per lane, the
// exponent clamped to <= 0 so no lane overflows) chosen by the backend tag (see gelu.hpp).
// O(n).
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (detail/xsimd_include.hpp).
#include "nlb/core/detail/xsimd_include.hpp"

#include <cmath>

#include "nlb/core.hpp"
#include "nlb/kernels/detail/row_checks.hpp"
#include "nlb/kernels/detail/simd_row.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels {

/// φ(x) = elu(x) + 1 in place on data[0, n). Scalar reference. O(n).
/// Throws ArgumentError if n < 0.
template <class T>
void elu_feature(backend::scalar, T* data, Index n) {
  detail::check_row_length("elu_feature: n", n, 0);
  for (Index i = 0; i < n; ++i) {
    const T x = data[i];
    data[i] = x > T(0) ? x + T(1) : std::exp(x);
  }
}

/// φ(x) = elu(x) + 1 in place on data[0, n), with xsimd batches for Arch: n / W full batches
/// and one padded tail batch (W = xsimd::batch<T, Arch>::size). O(n).
/// Throws ArgumentError if n < 0.
template <class T, class Arch, class Gemm>
void elu_feature(backend::simd<Arch, Gemm>, T* data, Index n) {
  detail::check_row_length("elu_feature: n", n, 0);
  using batch = xsimd::batch<T, Arch>;
  detail::transform_in_place<Arch>(data, n, T(0), [](batch x) {
    const batch zero(T(0));
    return xsimd::select(x > zero, x + batch(T(1)), xsimd::exp(xsimd::min(x, zero)));
  });
}

}  // namespace nlb::kernels

NLB_XSIMD_GUARD_END
