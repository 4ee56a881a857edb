// A float MLP with a double surrogate must not compose into one GatedMLP.
// expect: GatedMLP: the MLP and the surrogate must share one scalar type
#include <nlb/mlp/gated_mlp.hpp>
#include <nlb/mlp/hyperplane_gate.hpp>
#include <nlb/mlp/mlp.hpp>
#include <nlb/mlp/ridge_surrogate.hpp>

using MlpT = nlb::Mlp<float, 8, 32>;
using Gate = nlb::HyperplaneGate<float, 8>;
#ifdef NLB_SHOULD_FAIL
using Surrogate = nlb::RidgeSurrogate<double, 8, 8>;
#else
using Surrogate = nlb::RidgeSurrogate<float, 8, 8>;
#endif

int main() {
  return sizeof(nlb::GatedMLP<MlpT, Surrogate, Gate>) > 0 ? 0 : 1;
}
