// An MLP on the scalar backend with a surrogate and gate on the SIMD backend must not compose:
// a composite runs on the one backend of its parts.
// expect: the MLP and the surrogate must run on one backend (MlpT vs SurrogateT)
#include <nlb/mlp/gated_mlp.hpp>
#include <nlb/mlp/hyperplane_gate.hpp>
#include <nlb/mlp/mlp.hpp>
#include <nlb/mlp/ridge_surrogate.hpp>

using Surrogate = nlb::RidgeSurrogate<float, 8, 8, nlb::backend::cpu>;
using Gate = nlb::HyperplaneGate<float, 8, nlb::backend::cpu>;
#ifdef NLB_SHOULD_FAIL
using MlpT = nlb::Mlp<float, 8, 32, nlb::GeluTanh, nlb::backend::scalar>;
#else
using MlpT = nlb::Mlp<float, 8, 32, nlb::GeluTanh, nlb::backend::cpu>;
#endif

int main() {
  return sizeof(nlb::GatedMLP<MlpT, Surrogate, Gate>) > 0 ? 0 : 1;
}
