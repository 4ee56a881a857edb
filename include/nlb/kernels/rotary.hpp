// Rotary position embedding (RoPE) in the convention of Hugging Face's GPT-NeoX
// ("rotate_half"): the first `rotary_dims` of each head are split into halves x1, x2 and
// rotated as pairs (x1_i, x2_i) by the angle pos · inv_freq_i:
//   x1' = x1 cos − x2 sin,   x2' = x2 cos + x1 sin,
//   inv_freq_i = base^(−2i / rotary_dims),  i < rotary_dims / 2,
// optionally rescaled as a checkpoint's "rope_scaling" says (RopeScaling). The Llama family uses
// the same rotate_half form over the whole head. The remaining head dims pass through unchanged
// (partial rotary, `rotary_pct`).
#pragma once

#include <math.h>  // ::pow, also on the device

#include <cmath>
#include <string>
#include <vector>

#include "nlb/core.hpp"

namespace nlb::kernels {

/// How a checkpoint rescales the rotary frequencies (config.json "rope_scaling"), for contexts
/// longer than the model was trained on:
///   none    inv_freq_i unchanged;
///   linear  inv_freq_i / factor (positions divided by factor);
///   llama3  Llama 3.1's frequency-dependent form: with wavelength w_i = 2π / inv_freq_i and the
///           original context L, kept where w_i < L / high_freq_factor, divided by factor where
///           w_i > L / low_freq_factor, and in between (1 − s) inv_freq_i / factor + s inv_freq_i
///           with s = (L / w_i − low_freq_factor) / (high_freq_factor − low_freq_factor).
struct RopeScaling {
  enum class Kind { none, linear, llama3 };
  Kind kind = Kind::none;
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3 only
  double original_max_positions = 8192.0;                // llama3 only: L
};

/// Throws ArgumentError (naming `what`) unless `s` is usable: factor > 0 for linear and llama3,
/// and for llama3 0 < low_freq_factor < high_freq_factor and L > 0. Allocates nothing when it
/// passes (it runs once per layer and decoded token).
inline void check_rope_scaling(const char* what, const RopeScaling& s) {
  using K = RopeScaling::Kind;
  if (s.kind != K::none && !(s.factor > 0.0))
    throw ArgumentError(
        nlb::detail::expected_found(std::string(what) + ": rope scaling factor", "> 0", s.factor));
  if (s.kind == K::llama3 && !(s.low_freq_factor > 0.0 && s.low_freq_factor < s.high_freq_factor &&
                               s.original_max_positions > 0.0))
    throw ArgumentError(nlb::detail::expected_found(
        std::string(what) + ": llama3 rope scaling (low, high frequency factor, original context)",
        "0 < low < high and a positive context",
        std::to_string(s.low_freq_factor) + ", " + std::to_string(s.high_freq_factor) + ", " +
            std::to_string(s.original_max_positions)));
}

/// inv_freq_i = base^(−2i / rotary_dims) rescaled by `s`, in double (host and device: the CPU's
/// angle tables and the device's rotation compute the same value).
NLB_HOST_DEVICE inline double rope_inverse_frequency(Index i, Index rotary_dims, double base,
                                                     const RopeScaling& s) {
  const double inv_freq =
      1.0 / ::pow(base, static_cast<double>(2 * i) / static_cast<double>(rotary_dims));
  if (s.kind == RopeScaling::Kind::linear)
    return inv_freq / s.factor;
  if (s.kind != RopeScaling::Kind::llama3)
    return inv_freq;
  const double wavelength = 2.0 * 3.14159265358979323846 / inv_freq;
  if (wavelength < s.original_max_positions / s.high_freq_factor)
    return inv_freq;  // high frequencies: unchanged
  if (wavelength > s.original_max_positions / s.low_freq_factor)
    return inv_freq / s.factor;  // low frequencies: as linear scaling
  const double smooth = (s.original_max_positions / wavelength - s.low_freq_factor) /
                        (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

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
void rotary_angles(Index first, Index count, Index rotary_dims, double base, RotaryAngles<T>& a,
                   const RopeScaling& scaling = {}) {
  if (rotary_dims % 2 != 0 || rotary_dims < 0) {
    throw ArgumentError(nlb::detail::expected_found("rotary_angles: rotary dims",
                                                    "an even non-negative number", rotary_dims));
  }
  const Index half = rotary_dims / 2;
  a.cos.resize(static_cast<std::size_t>(count * half));
  a.sin.resize(a.cos.size());
  for (Index i = 0; i < half; ++i) {
    const double inv_freq = rope_inverse_frequency(i, rotary_dims, base, scaling);
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
RotaryAngles<T> rotary_angles(Index first, Index count, Index rotary_dims, double base,
                              const RopeScaling& scaling = {}) {
  RotaryAngles<T> a;
  rotary_angles(first, count, rotary_dims, base, a, scaling);
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
