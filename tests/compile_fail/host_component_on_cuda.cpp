// The CPU Mlp asked for the CUDA backend must refuse by name, not fail deep inside a kernel.
// expect: Mlp: a host component: Backend must be backend::scalar or backend::simd<Arch>
#include <nlb/mlp/mlp.hpp>

#ifdef NLB_SHOULD_FAIL
using MlpT = nlb::Mlp<float, 8, 32, nlb::GeluTanh, nlb::backend::cuda>;
#else
using MlpT = nlb::Mlp<float, 8, 32, nlb::GeluTanh, nlb::backend::scalar>;
#endif

int main() {
  return sizeof(MlpT) > 0 ? 0 : 1;
}
