// The ELU+1 feature map of linear attention (PAPERS.md §B3), in place on contiguous values:
//
//   φ(x) = elu(x) + 1 = x + 1   for x > 0,
//                       e^x     for x <= 0,
//
// always > 0, so the normaliser φ(q)ᵀ Σ φ(k) of linear attention is positive. One formula
// (EluFeatureOp, nlb/kernels/elementwise.hpp: both branches evaluated and selected, the exponent
// clamped to <= 0 so nothing overflows) in a scalar loop and in xsimd batches, chosen by the
// backend tag (see gelu.hpp).
// O(n).
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include "nlb/core.hpp"
#include "nlb/kernels/detail/row_checks.hpp"
#include "nlb/kernels/detail/simd_row.hpp"
#include "nlb/kernels/elementwise.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels {

/// φ(x) = elu(x) + 1 in place on data[0, n). Scalar reference. O(n).
/// Throws ArgumentError if n < 0.
template <class T>
void elu_feature(backend::scalar, T* data, Index n) {
  detail::check_row_length("elu_feature: n", n, 0);
  for (Index i = 0; i < n; ++i)
    data[i] = EluFeatureOp{}(data[i]);
}

/// φ(x) = elu(x) + 1 in place on data[0, n), with xsimd batches for Arch: n / W full batches
/// and one padded tail batch (W = xsimd::batch<T, Arch>::size). O(n).
/// Throws ArgumentError if n < 0.
template <class T, class Arch, class Gemm>
void elu_feature(backend::simd<Arch, Gemm>, T* data, Index n) {
  detail::check_row_length("elu_feature: n", n, 0);
  detail::transform_in_place<Arch>(data, n, T(0), EluFeatureOp{});
}

}  // namespace nlb::kernels

NLB_XSIMD_GUARD_END
