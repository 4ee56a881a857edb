// Rotary positions on the query and key heads of a projection, the operation of the CPU backends
// (DESIGN.md §4): the kernel of nlb/kernels/rotary.hpp (GPT-NeoX's rotate_half form) on every
// head. nlb/cuda/row_ops.cuh has the same operation for backend::cuda.
#pragma once

#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/kernels/rotary.hpp"

namespace nlb::ops {

namespace detail {
// ShapeError / ArgumentError unless x [T, heads·d_h] holds `heads` heads with room for
// rotary_dims per head; returns d_h.
inline Index check_rotary(Index cols, Index heads, Index rotary_dims) {
  if (heads <= 0 || cols % heads != 0)
    throw ShapeError(nlb::detail::expected_found("ops::rotate_heads: width of the heads",
                                                 "a multiple of the head count", cols));
  const Index head_dim = cols / heads;
  if (rotary_dims < 0 || rotary_dims % 2 != 0 || rotary_dims > head_dim)
    throw ArgumentError(nlb::detail::expected_found(
        "ops::rotate_heads: rotary dims", "an even number in [0, head dim]", rotary_dims));
  return head_dim;
}
}  // namespace detail

/// Rotates the first rotary_dims of every head of x [T, heads·d_h] (head h in columns
/// [h·d_h, (h+1)·d_h): the query heads and the key heads of a projection side by side, [Q K]),
/// rows at positions [past, past + T), by the angles of kernels::rotary_angles (computed in
/// double into the scratch's tables), the frequencies rescaled by `scaling` (none by default).
/// O(T · heads · rotary_dims).
template <class Backend, class X, class Scratch>
requires backend::is_host<Backend>
void rotate_heads(const Context<Backend>&, X&& x, Index heads, Index rotary_dims, Index past,
                  double base, Scratch& scratch, const kernels::RopeScaling& scaling = {}) {
  using T = typename std::remove_cvref_t<X>::Scalar;
  const Index dh = detail::check_rotary(x.cols(), heads, rotary_dims);
  kernels::check_rope_scaling("ops::rotate_heads", scaling);
  if (rotary_dims == 0 || x.rows() == 0)
    return;
  const Index half = rotary_dims / 2;
  kernels::rotary_angles<T>(past, x.rows(), rotary_dims, base, scratch.angles, scaling);
  for (Index t = 0; t < x.rows(); ++t) {
    const T* cos = scratch.angles.cos.data() + t * half;
    const T* sin = scratch.angles.sin.data() + t * half;
    for (Index h = 0; h < heads; ++h)
      kernels::rotate_half(Backend{}, &x(t, h * dh), rotary_dims, cos, sin);
  }
}

}  // namespace nlb::ops
