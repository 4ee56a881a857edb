// A GatedMLP whose surrogate is 16 wide around an MLP 8 wide must not build.
// expect: widths differ at compile time (MlpT::in_size vs SurrogateT::in_size)
#include <nlb/mlp/gated_mlp.hpp>
#include <nlb/mlp/hyperplane_gate.hpp>
#include <nlb/mlp/mlp.hpp>
#include <nlb/mlp/ridge_surrogate.hpp>

using MlpT = nlb::Mlp<float, 8, 32>;
using Gate = nlb::HyperplaneGate<float, 8>;
#ifdef NLB_SHOULD_FAIL
using Surrogate = nlb::RidgeSurrogate<float, 16, 16>;
#else
using Surrogate = nlb::RidgeSurrogate<float, 8, 8>;
#endif

int main() {
  return sizeof(nlb::GatedMLP<MlpT, Surrogate, Gate>) > 0 ? 0 : 1;
}
