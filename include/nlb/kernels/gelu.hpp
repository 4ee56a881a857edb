// GELU activations, in place on contiguous values (PAPERS.md §A1: the MLP's nonlinearity).
//
//   gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   GPT-2 "gelu_new"
//   gelu_erf(x)  = 0.5 x (1 + erf(x / sqrt(2)))                       GPT-NeoX "gelu"
//
// Both formulas are written once, as functors (nlb/kernels/elementwise.hpp); each kernel has a
// scalar loop (the C library's tanh / erf) and an xsimd form (xsimd::tanh / xsimd::erf) of the
// same functor, chosen by the backend tag: `backend::simd<Arch>` is an exact match for the
// SIMD overload; any other CPU tag converts to `backend::scalar`. The math policy picks the
// transcendental: math::exact (default) as above; math::fast for gelu_tanh evaluates the
// identical function 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)) with a cheap 2^t
// (detail/fast_logistic.hpp): measured relative error <= 1.1e-5 in float, 3.2e-6 in double
// (docs/kernels.md); for gelu_erf math::fast is math::exact. Tail handling, error bounds
// and cost: docs/kernels.md.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include "nlb/core.hpp"
#include "nlb/kernels/detail/row_checks.hpp"
#include "nlb/kernels/detail/simd_row.hpp"
#include "nlb/kernels/elementwise.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels {

namespace detail {
// Applies `op` (one formula for values and batches, nlb/kernels/elementwise.hpp) in place.
template <class Op, class T>
void apply_scalar(T* data, Index n, Op op) {
  for (Index i = 0; i < n; ++i)
    data[i] = op(data[i]);
}
}  // namespace detail

/// GPT-2 "gelu_new", in place on data[0, n). Scalar reference. O(n).
/// Throws ArgumentError if n < 0.
template <class Math = math::exact, class T>
void gelu_tanh(backend::scalar, T* data, Index n) {
  static_assert(detail::is_math_policy<Math>, "gelu_tanh: Math must be math::exact or math::fast");
  detail::check_row_length("gelu_tanh: n", n, 0);
  detail::apply_scalar(data, n, GeluTanhOp<Math>{});
}

/// GPT-2 "gelu_new", in place on data[0, n), with xsimd batches for Arch: n / W full
/// batches and one padded tail batch (W = xsimd::batch<T, Arch>::size). O(n).
/// Throws ArgumentError if n < 0.
template <class Math = math::exact, class T, class Arch, class Gemm>
void gelu_tanh(backend::simd<Arch, Gemm>, T* data, Index n) {
  static_assert(detail::is_math_policy<Math>, "gelu_tanh: Math must be math::exact or math::fast");
  detail::check_row_length("gelu_tanh: n", n, 0);
  detail::transform_in_place<Arch>(data, n, T(0), GeluTanhOp<Math>{});
}

/// Exact GELU (GPT-NeoX "gelu"), in place on data[0, n). Scalar reference. O(n).
/// math::fast is the same as math::exact here. Throws ArgumentError if n < 0.
template <class Math = math::exact, class T>
void gelu_erf(backend::scalar, T* data, Index n) {
  static_assert(detail::is_math_policy<Math>, "gelu_erf: Math must be math::exact or math::fast");
  detail::check_row_length("gelu_erf: n", n, 0);
  detail::apply_scalar(data, n, GeluErfOp<Math>{});
}

/// Exact GELU (GPT-NeoX "gelu"), in place on data[0, n), with xsimd batches for Arch
/// (full batches, then one padded tail batch). math::fast is the same as math::exact.
/// O(n). Throws ArgumentError if n < 0.
template <class Math = math::exact, class T, class Arch, class Gemm>
void gelu_erf(backend::simd<Arch, Gemm>, T* data, Index n) {
  static_assert(detail::is_math_policy<Math>, "gelu_erf: Math must be math::exact or math::fast");
  detail::check_row_length("gelu_erf: n", n, 0);
  detail::transform_in_place<Arch>(data, n, T(0), GeluErfOp<Math>{});
}

}  // namespace nlb::kernels

NLB_XSIMD_GUARD_END
