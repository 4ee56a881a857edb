// The MLP activations of the two model families, as policy types for Mlp: `op` is the formula as
// a functor that ops::transform runs on any backend (on the CPU through the SIMD kernels).
#pragma once

#include "nlb/core.hpp"
#include "nlb/kernels/gelu.hpp"

namespace nlb {

/// GPT-2's "gelu_new": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct GeluTanh {
  static constexpr const char* name = "gelu_new";
  /// The formula as a host/device functor (ops::transform on any backend).
  template <class Math = math::exact>
  using op = kernels::GeluTanhOp<Math>;
};

/// The exact (erf) GELU of GPT-NeoX / Pythia: 0.5 x (1 + erf(x / sqrt 2)).
struct GeluErf {
  static constexpr const char* name = "gelu";
  template <class Math = math::exact>
  using op = kernels::GeluErfOp<Math>;
};

/// Not an activation but the tag of the Llama family's MLP where a block's activation is a
/// template argument (FixedBlock<T, D, H, SwiGlu>: a SwiGluMlp, silu(x W_gate) ⊙ (x W_up)).
struct SwiGlu {
  static constexpr const char* name = "silu";
};

}  // namespace nlb
