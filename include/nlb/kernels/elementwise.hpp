// Elementwise math written once, as functors for the host and the CUDA device (DESIGN.md §4).
//
// Each functor maps one value to one value: operator() is a template over the value type V, a
// float or double (the scalar loops and the CUDA kernels) or an xsimd batch (the SIMD kernels),
// so the scalar, SIMD and CUDA paths evaluate one formula. The in-place kernels of
// gelu.hpp, softplus.hpp and elu_feature.hpp apply them on the CPU; ops::transform applies them
// on either backend (nlb/ops/elementwise.hpp, nlb/cuda/ops.cuh).
//
//   GeluTanhOp   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   GPT-2 "gelu_new"  (PAPERS §A1)
//                math::fast: x / (1 + 2^(-2 log2(e) u)) with a cheap 2^t (the fast logistic)
//   GeluErfOp    0.5 x (1 + erf(x / sqrt 2))                        GPT-NeoX "gelu"   (PAPERS §A1)
//   SoftplusOp   max(x, 0) + log1p(e^(-|x|))                        D = diag(softplus θ) (PAPERS
//   §B2) EluFeatureOp x + 1 for x > 0, e^x otherwise                     linear attention φ (PAPERS
//   §B3)
//
// Error bounds and cost of each: docs/kernels.md.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include <type_traits>

#include "nlb/core/host_device.hpp"
#include "nlb/core/math_policy.hpp"
#include "nlb/kernels/detail/fast_logistic.hpp"
#include "nlb/kernels/elementwise_math.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels {

namespace detail {

/// Constants of the GELU forms, rounded once to T.
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

// One body, two call operators: for a float or double (host and CUDA device), and for an xsimd
// batch (host only: a batch is a vector type, which nvcc refuses in device code even in an
// instantiation only the host calls).
#define NLB_ELEMENTWISE_CALL(...)                                    \
  NLB_EXEC_CHECK_DISABLE                                             \
  template <class V>                                                 \
  requires std::is_arithmetic_v<V> NLB_HOST_DEVICE V operator()(V x) \
      const __VA_ARGS__ template <class V>                           \
  requires(!std::is_arithmetic_v<V>) V operator()(V x) const __VA_ARGS__

/// GPT-2's "gelu_new" of one value or batch. Math: math::exact (tanh) or math::fast (the
/// logistic form 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)) with detail::fast_exp2).
template <class Math = math::exact>
struct GeluTanhOp {
  static_assert(math::is_policy<Math>, "GeluTanhOp: Math must be math::exact or math::fast");
  NLB_ELEMENTWISE_CALL({
    using c = detail::gelu_constants<elementwise_math::scalar_of_t<V>>;
    namespace em = elementwise_math;
    const V u = V(c::sqrt_2_over_pi) * (x + V(c::cubic) * x * x * x);
    if constexpr (std::is_same_v<Math, math::fast>) {
      return x / (V(c::one) + detail::fast_exp2(u * V(c::minus_two_log2e)));
    } else {
      return V(c::half) * x * (V(c::one) + em::tanh(u));
    }
  })
};

/// GPT-NeoX's exact GELU of one value or batch (math::fast is the same as math::exact).
template <class Math = math::exact>
struct GeluErfOp {
  static_assert(math::is_policy<Math>, "GeluErfOp: Math must be math::exact or math::fast");
  NLB_ELEMENTWISE_CALL({
    using c = detail::gelu_constants<elementwise_math::scalar_of_t<V>>;
    return V(c::half) * x * (V(c::one) + elementwise_math::erf(x * V(c::inv_sqrt2)));
  })
};

/// softplus(x) = log(1 + e^x), evaluated as max(x, 0) + log1p(e^(-|x|)): the exponent is <= 0,
/// so nothing overflows, and no precision is lost for very negative x.
struct SoftplusOp {
  NLB_ELEMENTWISE_CALL({
    namespace em = elementwise_math;
    using T = em::scalar_of_t<V>;
    return em::max(x, V(T(0))) + em::log1p(em::exp(-em::abs(x)));
  })
};

/// SiLU (swish), x · sigmoid(x) = x / (1 + e^(-x)): the gate activation of a SwiGLU MLP. For
/// very negative x, e^(-x) overflows to +inf and the quotient is -0, the limit.
struct SiluOp {
  NLB_ELEMENTWISE_CALL({
    namespace em = elementwise_math;
    using T = em::scalar_of_t<V>;
    return x / (V(T(1)) + em::exp(-x));
  })
};

/// φ(x) = elu(x) + 1: x + 1 for x > 0, e^x otherwise (always > 0). Both branches are
/// evaluated, the exponent clamped to <= 0 so that neither overflows.
struct EluFeatureOp {
  NLB_ELEMENTWISE_CALL({
    namespace em = elementwise_math;
    using T = em::scalar_of_t<V>;
    const V zero(T(0));
    return em::select(x > zero, x + V(T(1)), em::exp(em::min(x, zero)));
  })
};

#undef NLB_ELEMENTWISE_CALL

}  // namespace nlb::kernels

NLB_XSIMD_GUARD_END
