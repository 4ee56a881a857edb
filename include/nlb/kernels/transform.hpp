// One elementwise functor of nlb/kernels/elementwise.hpp applied in place over contiguous values,
// in a scalar loop (backend::scalar) or in xsimd batches (backend::simd). ops::transform applies
// it to a matrix on the CPU backends (nlb/ops/elementwise.hpp).
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include "nlb/core/backend.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/kernels/detail/row_checks.hpp"
#include "nlb/kernels/detail/simd_row.hpp"

namespace nlb::kernels {

/// data[i] = op(data[i]) for i < n, with the scalar loop of backend::scalar. O(n).
template <class T, class Op>
void transform(backend::scalar, T* data, Index n, Op op) {
  for (Index i = 0; i < n; ++i)
    data[i] = op(data[i]);
}

/// data[i] = op(data[i]) for i < n, in xsimd batches of Arch (full batches, then one padded tail
/// batch whose unused lanes hold 0). O(n).
template <class T, class Op, class Arch, class Gemm>
void transform(backend::simd<Arch, Gemm>, T* data, Index n, Op op) {
  detail::transform_in_place<Arch>(data, n, T(0), op);
}

namespace detail {
/// transform() after the length check of the named in-place kernels (gelu_tanh, gelu_erf,
/// softplus, elu_feature): ArgumentError naming `what` if n < 0. The backend tag picks the
/// overload as a direct call would (simd<Arch> batches, any other CPU tag the scalar loop).
template <class Backend, class T, class Op>
void checked_transform(const char* what, Backend backend, T* data, Index n, Op op) {
  check_row_length(what, n, 0);
  transform(backend, data, n, op);
}
}  // namespace detail

}  // namespace nlb::kernels
