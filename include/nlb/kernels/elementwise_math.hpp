// The math functions of the elementwise functors, for one value and for an xsimd batch.
// Public: the CUDA backend's kernels call them too (nlb/cuda/), so host and device share them.
//
// The functors of nlb/kernels/elementwise.hpp are templates over the value type V: a float or
// double (scalar loops, CUDA kernels) or an xsimd batch (SIMD kernels). Each function here has
// both forms. The scalar forms call the C library's functions by their typed names (tanhf, tanh,
// ...): those are what std::tanh(float) evaluates on the host, and the names the CUDA device
// library provides, so host and device run the same formulas. The batch forms are xsimd's.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include <math.h>  // the C functions by their typed names (tanhf, ...), also on the CUDA device
#include <type_traits>

#include "nlb/core/host_device.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels::elementwise_math {

template <class T>
inline constexpr bool is_real = std::is_same_v<T, float> || std::is_same_v<T, double>;

/// The scalar type of V (V itself, or a batch's value type).
template <class V, class = void>
struct scalar_of {
  using type = V;
};
template <class V>
struct scalar_of<V, std::void_t<typename V::value_type>> {
  using type = typename V::value_type;
};
template <class V>
using scalar_of_t = typename scalar_of<V>::type;

// ---- one value (host and device) -------------------------------------------------------
template <class T, std::enable_if_t<is_real<T>, int> = 0>
NLB_HOST_DEVICE inline T tanh(T x) {
  if constexpr (std::is_same_v<T, float>)
    return ::tanhf(x);
  else
    return ::tanh(x);
}
template <class T, std::enable_if_t<is_real<T>, int> = 0>
NLB_HOST_DEVICE inline T erf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return ::erff(x);
  else
    return ::erf(x);
}
template <class T, std::enable_if_t<is_real<T>, int> = 0>
NLB_HOST_DEVICE inline T exp(T x) {
  if constexpr (std::is_same_v<T, float>)
    return ::expf(x);
  else
    return ::exp(x);
}
template <class T, std::enable_if_t<is_real<T>, int> = 0>
NLB_HOST_DEVICE inline T log1p(T x) {
  if constexpr (std::is_same_v<T, float>)
    return ::log1pf(x);
  else
    return ::log1p(x);
}
template <class T, std::enable_if_t<is_real<T>, int> = 0>
NLB_HOST_DEVICE inline T abs(T x) {
  if constexpr (std::is_same_v<T, float>)
    return ::fabsf(x);
  else
    return ::fabs(x);
}
/// std::max's rule: a NaN first argument is returned.
template <class T, std::enable_if_t<is_real<T>, int> = 0>
NLB_HOST_DEVICE inline T max(T a, T b) {
  return a < b ? b : a;
}
/// std::min's rule: a NaN first argument is returned.
template <class T, std::enable_if_t<is_real<T>, int> = 0>
NLB_HOST_DEVICE inline T min(T a, T b) {
  return b < a ? b : a;
}
template <class T, std::enable_if_t<is_real<T>, int> = 0>
NLB_HOST_DEVICE inline T select(bool condition, T if_true, T if_false) {
  return condition ? if_true : if_false;
}
/// x rounded to the nearest integer in the current rounding mode (ties to even by default).
template <class T, std::enable_if_t<is_real<T>, int> = 0>
NLB_HOST_DEVICE inline T nearbyint(T x) {
  if constexpr (std::is_same_v<T, float>)
    return ::nearbyintf(x);
  else
    return ::nearbyint(x);
}
/// 2^j · p (|j| within the exponent range).
template <class T, std::enable_if_t<is_real<T>, int> = 0>
NLB_HOST_DEVICE inline T ldexp(T p, int j) {
  if constexpr (std::is_same_v<T, float>)
    return ::ldexpf(p, j);
  else
    return ::ldexp(p, j);
}

// ---- an xsimd batch (host only) ------------------------------------------------------------
template <class T, class A>
xsimd::batch<T, A> tanh(const xsimd::batch<T, A>& x) {
  return xsimd::tanh(x);
}
template <class T, class A>
xsimd::batch<T, A> erf(const xsimd::batch<T, A>& x) {
  return xsimd::erf(x);
}
template <class T, class A>
xsimd::batch<T, A> exp(const xsimd::batch<T, A>& x) {
  return xsimd::exp(x);
}
template <class T, class A>
xsimd::batch<T, A> log1p(const xsimd::batch<T, A>& x) {
  return xsimd::log1p(x);
}
template <class T, class A>
xsimd::batch<T, A> abs(const xsimd::batch<T, A>& x) {
  return xsimd::abs(x);
}
template <class T, class A>
xsimd::batch<T, A> max(const xsimd::batch<T, A>& a, const xsimd::batch<T, A>& b) {
  return xsimd::max(a, b);
}
template <class T, class A>
xsimd::batch<T, A> min(const xsimd::batch<T, A>& a, const xsimd::batch<T, A>& b) {
  return xsimd::min(a, b);
}
template <class T, class A>
xsimd::batch<T, A> select(const xsimd::batch_bool<T, A>& condition, const xsimd::batch<T, A>& a,
                          const xsimd::batch<T, A>& b) {
  return xsimd::select(condition, a, b);
}

}  // namespace nlb::kernels::elementwise_math

NLB_XSIMD_GUARD_END
