// Elementwise maps of the CPU backends (DESIGN.md §4): one functor of nlb/kernels/elementwise.hpp
// applied in place to a matrix by kernels::transform (scalar loop or xsimd batches).
// nlb/cuda/ops.cuh applies the same functors on the device.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include <type_traits>

#include "nlb/core/backend.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/kernels/transform.hpp"

namespace nlb::ops {

/// y = op(y) elementwise on a row-major matrix or block y [m, n] (one pass when its rows are
/// contiguous, one per row otherwise). O(m n).
template <class Backend, class Y, class Op>
requires backend::is_host<Backend>
void transform(const Context<Backend>&, Y&& y, Op op) {
  static_assert(
      std::remove_cvref_t<Y>::IsRowMajor || std::remove_cvref_t<Y>::ColsAtCompileTime == 1,
      "ops::transform: a row-major matrix or block");
  if (y.rows() == 0 || y.cols() == 0)
    return;
  if (y.outerStride() == y.cols() || y.rows() == 1) {
    kernels::transform(Backend{}, y.data(), y.rows() * y.cols(), op);
    return;
  }
  for (Index r = 0; r < y.rows(); ++r)
    kernels::transform(Backend{}, &y(r, 0), y.cols(), op);
}

}  // namespace nlb::ops
