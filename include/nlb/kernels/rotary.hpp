// Rotary position embedding (RoPE) in the convention of Hugging Face's GPT-NeoX
// ("rotate_half"): the first `rotary_dims` of each head are split into halves x1, x2 and
// rotated as pairs (x1_i, x2_i) by the angle pos · inv_freq_i:
//   x1' = x1 cos − x2 sin,   x2' = x2 cos + x1 sin,
//   inv_freq_i = base^(−2i / rotary_dims),  i < rotary_dims / 2.
// The remaining head dims pass through unchanged (partial rotary, `rotary_pct`).
#pragma once

#include <cmath>
#include <vector>

#include "nlb/core.hpp"

namespace nlb::kernels {

/// cos and sin of pos · inv_freq_i for one position: [rotary_dims / 2] each, computed in double.
template <class T>
struct RotaryAngles {
  std::vector<T> cos, sin;
};

/// The angles for positions [first, first + count) into `a`: row t of each table is position
/// first + t, laid out [count, rotary_dims / 2]. The tables keep their capacity, so a reused
/// `a` allocates only when count · rotary_dims / 2 exceeds every earlier call (a decoded token
/// allocates nothing). O(count · rotary_dims).
template <class T>
void rotary_angles(Index first, Index count, Index rotary_dims, double base, RotaryAngles<T>& a) {
  if (rotary_dims % 2 != 0 || rotary_dims < 0) {
    throw ArgumentError(nlb::detail::expected_found("rotary_angles: rotary dims",
                                                    "an even non-negative number", rotary_dims));
  }
  const Index half = rotary_dims / 2;
  a.cos.resize(static_cast<std::size_t>(count * half));
  a.sin.resize(a.cos.size());
  for (Index i = 0; i < half; ++i) {
    const double inv_freq =
        1.0 / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(rotary_dims));
    for (Index t = 0; t < count; ++t) {
      const double angle = static_cast<double>(first + t) * inv_freq;
      const auto k = static_cast<std::size_t>(t * half + i);
      a.cos[k] = static_cast<T>(std::cos(angle));
      a.sin[k] = static_cast<T>(std::sin(angle));
    }
  }
}

/// The angles for positions [first, first + count) as new tables (see above).
template <class T>
RotaryAngles<T> rotary_angles(Index first, Index count, Index rotary_dims, double base) {
  RotaryAngles<T> a;
  rotary_angles(first, count, rotary_dims, base, a);
  return a;
}

/// Rotates the first `rotary_dims` entries of one head vector in place with one position's
/// cos/sin rows ([rotary_dims / 2] each). O(rotary_dims). Scalar only: rotary is O(d) per
/// token, noise next to the O(d²) projections, so SIMD backends fall back to this.
template <class T>
void rotate_half(backend::scalar, T* head, Index rotary_dims, const T* cos, const T* sin) {
  const Index half = rotary_dims / 2;
  for (Index i = 0; i < half; ++i) {
    const T x1 = head[i];
    const T x2 = head[i + half];
    head[i] = x1 * cos[i] - x2 * sin[i];
    head[i + half] = x2 * cos[i] + x1 * sin[i];
  }
}

}  // namespace nlb::kernels
