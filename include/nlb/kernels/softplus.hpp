// softplus(x) = log(1 + e^x), in place on contiguous values: the map from a filter's free
// parameter θ to its non-negative diagonal (PAPERS.md §B2, D = diag(softplus θ)).
//
// Evaluated stably as max(x, 0) + log1p(e^(−|x|)): the exponent is <= 0, so nothing overflows
// for large x (softplus(x) = x + log1p(e^−x) -> x) and no precision is lost for very negative
// x (softplus(x) = log1p(e^x) ≈ e^x, not 1 + e^x rounded to 1). No threshold shortcut (unlike
// torch.nn.functional.softplus), so the value is correctly rounded up to a few ulp everywhere.
// One formula (SoftplusOp, nlb/kernels/elementwise.hpp) in a scalar loop and in xsimd batches,
// chosen by the backend tag. O(n).
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include "nlb/core.hpp"
#include "nlb/kernels/elementwise.hpp"
#include "nlb/kernels/transform.hpp"

namespace nlb::kernels {

/// softplus(x) for one value (the scalar reference's formula, SoftplusOp).
template <class T>
T softplus(T x) {
  return SoftplusOp{}(x);
}

/// softplus in place on data[0, n), with the backend's loop (kernels::transform: the scalar
/// reference, or full xsimd batches and one padded tail batch). O(n). Throws ArgumentError if
/// n < 0.
template <class T, class Backend>
requires backend::is_host<Backend>
void softplus(Backend backend, T* data, Index n) {
  detail::checked_transform("softplus: n", backend, data, n, SoftplusOp{});
}

}  // namespace nlb::kernels
