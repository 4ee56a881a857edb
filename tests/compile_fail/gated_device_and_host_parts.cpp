// A GatedMLP whose MLP was copied to the device while its surrogate and gate stayed on the host
// must not compose: a composite runs in the one memory space of its parts, and says how to get
// there (to_backend) instead of failing inside an operation.
// expect: GatedMLP: the MLP, surrogate and gate must live in one memory space
#if !defined(THRUST_DEVICE_SYSTEM)
#define THRUST_DEVICE_SYSTEM \
  THRUST_DEVICE_SYSTEM_CPP  // nlb/cuda's host-system build (docs/cuda.md)
#endif
#include <nlb/cuda/device_matrix.cuh>
#include <nlb/mlp/gated_mlp.hpp>
#include <nlb/mlp/hyperplane_gate.hpp>
#include <nlb/mlp/mlp.hpp>
#include <nlb/mlp/ridge_surrogate.hpp>

using Surrogate = nlb::RidgeSurrogate<float, 8, 8, nlb::backend::cpu>;
using Gate = nlb::HyperplaneGate<float, 8, nlb::backend::cpu>;
#ifdef NLB_SHOULD_FAIL
using MlpT = nlb::Mlp<float, 8, 32, nlb::GeluTanh, nlb::backend::cuda>;
#else
using MlpT = nlb::Mlp<float, 8, 32, nlb::GeluTanh, nlb::backend::cpu>;
#endif

int main() {
  return sizeof(nlb::GatedMLP<MlpT, Surrogate, Gate>) > 0 ? 0 : 1;
}
