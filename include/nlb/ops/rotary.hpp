// Rotary positions on the queries and keys of a projection, the operation of the CPU backends
// (DESIGN.md §4): the kernel of nlb/kernels/rotary.hpp (GPT-NeoX's rotate_half form) on every
// head. nlb/cuda/ops.cuh has the same operation for backend::cuda.
#pragma once

#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/kernels/rotary.hpp"

namespace nlb::ops {

namespace detail {
// ShapeError / ArgumentError unless qk [T, 2d] holds `heads` heads of Q and of K with room for
// rotary_dims per head; returns d.
inline Index check_rotary(Index qk_cols, Index heads, Index rotary_dims) {
  if (heads <= 0 || qk_cols % (2 * heads) != 0)
    throw ShapeError(nlb::detail::expected_found("ops::rotate_queries_keys: width of [Q K]",
                                                 "2 · d with d a multiple of the head count",
                                                 qk_cols));
  const Index d = qk_cols / 2;
  if (rotary_dims < 0 || rotary_dims % 2 != 0 || rotary_dims > d / heads)
    throw ArgumentError(nlb::detail::expected_found(
        "ops::rotate_queries_keys: rotary dims", "an even number in [0, head dim]", rotary_dims));
  return d;
}
}  // namespace detail

/// Rotates the first rotary_dims of every head of the queries and keys qk [T, 2d] = [Q K] (head
/// h of Q in columns [h·d_h, (h+1)·d_h), of K in d + those), rows at positions [past, past + T),
/// by the angles of kernels::rotary_angles (computed in double into the scratch's tables), the
/// frequencies rescaled by `scaling` (none by default). O(T · heads · rotary_dims).
template <class Backend, class QK, class Scratch>
requires backend::is_host<Backend>
void rotate_queries_keys(const Context<Backend>&, QK&& qk, Index heads, Index rotary_dims,
                         Index past, double base, Scratch& scratch,
                         const kernels::RopeScaling& scaling = {}) {
  using T = typename std::remove_cvref_t<QK>::Scalar;
  const Index d = detail::check_rotary(qk.cols(), heads, rotary_dims);
  kernels::check_rope_scaling("ops::rotate_queries_keys", scaling);
  if (rotary_dims == 0 || qk.rows() == 0)
    return;
  const Index dh = d / heads, half = rotary_dims / 2;
  kernels::rotary_angles<T>(past, qk.rows(), rotary_dims, base, scratch.angles, scaling);
  for (Index t = 0; t < qk.rows(); ++t) {
    const T* cos = scratch.angles.cos.data() + t * half;
    const T* sin = scratch.angles.sin.data() + t * half;
    for (Index h = 0; h < heads; ++h) {
      kernels::rotate_half(Backend{}, &qk(t, h * dh), rotary_dims, cos, sin);      // Q
      kernels::rotate_half(Backend{}, &qk(t, d + h * dh), rotary_dims, cos, sin);  // K
    }
  }
}

}  // namespace nlb::ops
