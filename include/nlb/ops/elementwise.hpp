// Elementwise maps of the CPU backends (DESIGN.md §4): one functor of nlb/kernels/elementwise.hpp
// applied in place, in a scalar loop (backend::scalar) or in xsimd batches (backend::simd).
// nlb/cuda/ops.cuh applies the same functors on the device.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (detail/xsimd_include.hpp).
#include "nlb/core/detail/xsimd_include.hpp"

#include <type_traits>

#include "nlb/core/backend.hpp"
#include "nlb/core/context.hpp"
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

/// y = op(y) elementwise on a row-major matrix or block y [m, n] (one pass when its rows are
/// contiguous, one per row otherwise). O(m n).
template <class Backend, class Y, class Op>
requires backend::is_host<Backend>
void transform(const Context<Backend>&, Y&& y, Op op) {
  static_assert(std::remove_cvref_t<Y>::IsRowMajor || std::remove_cvref_t<Y>::ColsAtCompileTime == 1,
                "ops::transform: a row-major matrix or block");
  if (y.rows() == 0 || y.cols() == 0)
    return;
  if (y.outerStride() == y.cols() || y.rows() == 1) {
    transform(Backend{}, y.data(), y.rows() * y.cols(), op);
    return;
  }
  for (Index r = 0; r < y.rows(); ++r)
    transform(Backend{}, &y(r, 0), y.cols(), op);
}

}  // namespace nlb::ops
