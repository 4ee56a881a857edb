// S = U Vᵀ − V Uᵀ has even rank 2r (PAPERS §B1): an odd compile-time Rank must not build.
// expect: SkewSymmetricRouting: Rank must be a positive even number
#include <nlb/attention/skew_routing.hpp>

#ifdef NLB_SHOULD_FAIL
using Routing = nlb::SkewSymmetricRouting<float, 3>;
#else
using Routing = nlb::SkewSymmetricRouting<float, 4>;
#endif

int main() {
  return sizeof(Routing) > 0 ? 0 : 1;
}
