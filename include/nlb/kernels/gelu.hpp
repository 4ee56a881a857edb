// GELU activations, in place on contiguous values (PAPERS.md §A1: the MLP's nonlinearity).
//
//   gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   GPT-2 "gelu_new"
//   gelu_erf(x)  = 0.5 x (1 + erf(x / sqrt(2)))                       GPT-NeoX "gelu"
//
// Both formulas are written once, as functors (nlb/kernels/elementwise.hpp); each kernel runs
// its functor through kernels::transform: a scalar loop (the C library's tanh / erf) or xsimd
// batches (xsimd::tanh / xsimd::erf), chosen by the backend tag: `backend::simd<Arch>` is an
// exact match for the SIMD overload; any other CPU tag converts to `backend::scalar`. The math
// policy picks the transcendental: math::exact (default) as above; math::fast for gelu_tanh
// evaluates the identical function 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)) with a cheap 2^t
// (detail/fast_logistic.hpp): measured relative error <= 1.1e-5 in float, 3.2e-6 in double
// (docs/kernels.md); for gelu_erf math::fast is math::exact. Tail handling, error bounds
// and cost: docs/kernels.md.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include "nlb/core.hpp"
#include "nlb/kernels/detail/row_checks.hpp"
#include "nlb/kernels/elementwise.hpp"
#include "nlb/kernels/transform.hpp"

namespace nlb::kernels {

/// GPT-2 "gelu_new", in place on data[0, n), with the backend's loop (kernels::transform: the
/// scalar reference for backend::scalar; for backend::simd<Arch>, n / W full xsimd batches and
/// one padded tail batch, W = xsimd::batch<T, Arch>::size). O(n).
/// Throws ArgumentError if n < 0.
template <class Math = math::exact, class T, class Backend>
requires backend::is_host<Backend>
void gelu_tanh(Backend backend, T* data, Index n) {
  static_assert(detail::is_math_policy<Math>, "gelu_tanh: Math must be math::exact or math::fast");
  detail::checked_transform("gelu_tanh: n", backend, data, n, GeluTanhOp<Math>{});
}

/// Exact GELU (GPT-NeoX "gelu"), in place on data[0, n), with the backend's loop (as
/// gelu_tanh). math::fast is the same as math::exact here. O(n). Throws ArgumentError if n < 0.
template <class Math = math::exact, class T, class Backend>
requires backend::is_host<Backend>
void gelu_erf(Backend backend, T* data, Index n) {
  static_assert(detail::is_math_policy<Math>, "gelu_erf: Math must be math::exact or math::fast");
  detail::checked_transform("gelu_erf: n", backend, data, n, GeluErfOp<Math>{});
}

}  // namespace nlb::kernels
