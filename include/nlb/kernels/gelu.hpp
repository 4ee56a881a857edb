// GELU activations, in place on contiguous values (PAPERS.md §A1: the MLP's nonlinearity).
//
//   gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   GPT-2 "gelu_new"
//   gelu_erf(x)  = 0.5 x (1 + erf(x / sqrt(2)))                       GPT-NeoX "gelu"
//
// Each has a scalar reference (std::tanh / std::erf) and an xsimd form (xsimd::tanh /
// xsimd::erf) chosen by the backend tag: `backend::simd<Arch>` is an exact match for the
// SIMD overload; any other CPU tag converts to `backend::scalar`. The math policy picks the
// transcendental: math::exact (default) as above; math::fast for gelu_tanh evaluates the
// identical function 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)) with a cheap 2^t
// (detail/fast_logistic.hpp): measured relative error <= 1.1e-5 in float, 3.2e-6 in double
// (docs/kernels.md); for gelu_erf math::fast is math::exact. Tail handling, error bounds
// and cost: docs/kernels.md.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (detail/xsimd_include.hpp).
#include "nlb/core/detail/xsimd_include.hpp"

#include <cmath>
#include <type_traits>

#include "nlb/core.hpp"
#include "nlb/kernels/detail/fast_logistic.hpp"
#include "nlb/kernels/detail/row_checks.hpp"
#include "nlb/kernels/detail/simd_row.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels {

namespace detail {

/// Constants of the tanh form, rounded once to T.
template <class T>
struct gelu_constants {
  static constexpr T half = T(0.5);
  static constexpr T one = T(1);
  static constexpr T sqrt_2_over_pi = static_cast<T>(0.79788456080286535588);  // sqrt(2/pi)
  static constexpr T cubic = static_cast<T>(0.044715);
  static constexpr T inv_sqrt2 = static_cast<T>(0.70710678118654752440);  // 1/sqrt(2)
  // -2 log2(e): e^(-2u) = 2^(u * minus_two_log2e).
  static constexpr T minus_two_log2e = static_cast<T>(-2.88539008177792681472);
};

}  // namespace detail

/// GPT-2 "gelu_new", in place on data[0, n). Scalar reference. O(n).
/// Throws ArgumentError if n < 0.
template <class Math = math::exact, class T>
void gelu_tanh(backend::scalar, T* data, Index n) {
  static_assert(detail::is_math_policy<Math>, "gelu_tanh: Math must be math::exact or math::fast");
  detail::check_row_length("gelu_tanh: n", n, 0);
  using c = detail::gelu_constants<T>;
  for (Index i = 0; i < n; ++i) {
    const T x = data[i];
    const T u = c::sqrt_2_over_pi * (x + c::cubic * x * x * x);
    if constexpr (std::is_same_v<Math, math::fast>) {
      data[i] = x / (c::one + detail::fast_exp2(u * c::minus_two_log2e));
    } else {
      data[i] = c::half * x * (c::one + std::tanh(u));
    }
  }
}

/// GPT-2 "gelu_new", in place on data[0, n), with xsimd batches for Arch: n / W full
/// batches and one padded tail batch (W = xsimd::batch<T, Arch>::size). O(n).
/// Throws ArgumentError if n < 0.
template <class Math = math::exact, class T, class Arch, class Gemm>
void gelu_tanh(backend::simd<Arch, Gemm>, T* data, Index n) {
  static_assert(detail::is_math_policy<Math>, "gelu_tanh: Math must be math::exact or math::fast");
  detail::check_row_length("gelu_tanh: n", n, 0);
  using c = detail::gelu_constants<T>;
  using batch = xsimd::batch<T, Arch>;
  detail::transform_in_place<Arch>(data, n, T(0), [](batch x) {
    const batch u = batch(c::sqrt_2_over_pi) * (x + batch(c::cubic) * x * x * x);
    if constexpr (std::is_same_v<Math, math::fast>) {
      return x / (batch(c::one) + detail::fast_exp2(u * batch(c::minus_two_log2e)));
    } else {
      return batch(c::half) * x * (batch(c::one) + xsimd::tanh(u));
    }
  });
}

/// Exact GELU (GPT-NeoX "gelu"), in place on data[0, n). Scalar reference. O(n).
/// math::fast is the same as math::exact here. Throws ArgumentError if n < 0.
template <class Math = math::exact, class T>
void gelu_erf(backend::scalar, T* data, Index n) {
  static_assert(detail::is_math_policy<Math>, "gelu_erf: Math must be math::exact or math::fast");
  detail::check_row_length("gelu_erf: n", n, 0);
  using c = detail::gelu_constants<T>;
  for (Index i = 0; i < n; ++i) {
    const T x = data[i];
    data[i] = c::half * x * (c::one + std::erf(x * c::inv_sqrt2));
  }
}

/// Exact GELU (GPT-NeoX "gelu"), in place on data[0, n), with xsimd batches for Arch
/// (full batches, then one padded tail batch). math::fast is the same as math::exact.
/// O(n). Throws ArgumentError if n < 0.
template <class Math = math::exact, class T, class Arch, class Gemm>
void gelu_erf(backend::simd<Arch, Gemm>, T* data, Index n) {
  static_assert(detail::is_math_policy<Math>, "gelu_erf: Math must be math::exact or math::fast");
  detail::check_row_length("gelu_erf: n", n, 0);
  using c = detail::gelu_constants<T>;
  using batch = xsimd::batch<T, Arch>;
  detail::transform_in_place<Arch>(data, n, T(0), [](batch x) {
    return batch(c::half) * x * (batch(c::one) + xsimd::erf(x * batch(c::inv_sqrt2)));
  });
}

}  // namespace nlb::kernels

NLB_XSIMD_GUARD_END
