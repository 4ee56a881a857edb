// Elementwise maps of the CPU backends (DESIGN.md §4): one functor of nlb/kernels/elementwise.hpp
// applied in place, in a scalar loop (backend::scalar) or in xsimd batches (backend::simd).
// nlb/cuda/ops.cuh applies the same functors on the device.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (detail/xsimd_include.hpp).
#include "nlb/core/detail/xsimd_include.hpp"

#include "nlb/core/backend.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/kernels/detail/simd_row.hpp"

namespace nlb::ops {

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
  kernels::detail::transform_in_place<Arch>(data, n, T(0), op);
}

}  // namespace nlb::ops
