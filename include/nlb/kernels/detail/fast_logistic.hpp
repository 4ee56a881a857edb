// math::fast building block for gelu_tanh: the logistic 1 / (1 + 2^t) with a cheap 2^t.
// Internal to nlb/kernels; the error analysis is in docs/kernels.md.
//
// 2^t = 2^j * 2^f with j = round(t) and f = t - j in [-1/2, 1/2]. 2^f = e^(f ln 2) is its
// Taylor polynomial of degree 5; the remainder is at most (ln2 / 2)^6 / 6! * sqrt(2)
// = 3.4e-6, i.e. a relative error below 4.8e-6 since 2^f >= 1/sqrt(2). Scaling by 2^j is
// exact (ldexp). t is clamped to +-(max_exponent - 2) (126 for float, 1022 for double) so
// 2^j is a normal number: at the clamp the logistic is already 1 in T, or below 1e-37
// (float) / 1e-307 (double), which the exact tanh form rounds to 0 anyway.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include <limits>

#include "nlb/core/host_device.hpp"
#include "nlb/kernels/elementwise_math.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels::detail {

/// Coefficients (ln 2)^k / k!, k = 0..5, of the Taylor polynomial of 2^f at f = 0.
template <class T>
struct exp2_taylor {
  static constexpr T c0 = T(1);
  static constexpr T c1 = static_cast<T>(0.69314718055994530942);
  static constexpr T c2 = static_cast<T>(0.24022650695910071233);
  static constexpr T c3 = static_cast<T>(0.05550410866482157995);
  static constexpr T c4 = static_cast<T>(0.00961812910762847716);
  static constexpr T c5 = static_cast<T>(0.00133335581464284434);
  /// Largest |t| passed to the power of two: 2^round(t) stays a normal number
  /// (126 for float, 1022 for double).
  static constexpr T clamp = static_cast<T>(std::numeric_limits<T>::max_exponent - 2);
};

/// 2^t for |t| <= clamp, relative error < 5e-6 (plus rounding). Scalar form, also on the CUDA
/// device.
template <class T>
NLB_HOST_DEVICE T fast_exp2(T t) {
  using c = exp2_taylor<T>;
  namespace em = elementwise_math;
  if (t != t) {
    return t;  // NaN propagates (and never reaches the int conversion)
  }
  t = t < -c::clamp ? -c::clamp : (c::clamp < t ? c::clamp : t);  // std::clamp's rule
  const T j = em::nearbyint(t);
  const T f = t - j;
  const T p = c::c0 + f * (c::c1 + f * (c::c2 + f * (c::c3 + f * (c::c4 + f * c::c5))));
  return em::ldexp(p, static_cast<int>(j));
}

/// 2^t for |t| <= clamp, relative error < 5e-6 (plus rounding). Batch form, same steps.
template <class T, class Arch>
xsimd::batch<T, Arch> fast_exp2(xsimd::batch<T, Arch> t) {
  using c = exp2_taylor<T>;
  using batch = xsimd::batch<T, Arch>;
  t = xsimd::min(xsimd::max(t, batch(-c::clamp)), batch(c::clamp));
  const auto j = xsimd::nearbyint_as_int(t);  // int32 lanes for float, int64 for double
  const batch f = t - xsimd::to_float(j);
  batch p = xsimd::fma(f, batch(c::c5), batch(c::c4));
  p = xsimd::fma(f, p, batch(c::c3));
  p = xsimd::fma(f, p, batch(c::c2));
  p = xsimd::fma(f, p, batch(c::c1));
  p = xsimd::fma(f, p, batch(c::c0));
  return xsimd::ldexp(p, j);
}

}  // namespace nlb::kernels::detail

NLB_XSIMD_GUARD_END
