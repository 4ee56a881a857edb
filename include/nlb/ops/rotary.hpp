// Rotary position embedding of one head vector, the operation of the CPU backends (DESIGN.md §4):
// the kernel of nlb/kernels/rotary.hpp (GPT-NeoX's rotate_half form).
#pragma once

#include "nlb/core/backend.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/kernels/rotary.hpp"

namespace nlb::ops {

/// Rotates the first `rotary_dims` entries of `head` in place with one position's cos and sin
/// rows ([rotary_dims / 2] each). O(rotary_dims).
template <class Backend, class T>
void rotate_half(Backend backend, T* head, Index rotary_dims, const T* cos, const T* sin) {
  static_assert(backend::is_host<Backend>, "ops::rotate_half: a CPU backend");
  kernels::rotate_half(backend, head, rotary_dims, cos, sin);
}

}  // namespace nlb::ops
