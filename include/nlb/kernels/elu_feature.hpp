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
#include "nlb/kernels/elementwise.hpp"
#include "nlb/kernels/transform.hpp"

namespace nlb::kernels {

/// φ(x) = elu(x) + 1 in place on data[0, n), with the backend's loop (kernels::transform: the
/// scalar reference for backend::scalar; for backend::simd<Arch>, n / W full xsimd batches and
/// one padded tail batch, W = xsimd::batch<T, Arch>::size). O(n). Throws ArgumentError if n < 0.
template <class T, class Backend>
requires backend::is_host<Backend>
void elu_feature(Backend backend, T* data, Index n) {
  detail::checked_transform("elu_feature: n", backend, data, n, EluFeatureOp{});
}

}  // namespace nlb::kernels
