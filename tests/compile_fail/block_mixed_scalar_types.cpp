// A float attention with a double MLP must not compose into one Block: the block takes its
// scalar type from its parts, and they must agree.
// expect: Block: attention and MLP must share one scalar type (AttnT vs MlpT)
#include <nlb/attention/dense_attention.hpp>
#include <nlb/mlp/mlp.hpp>
#include <nlb/model/block.hpp>

using Attention = nlb::DenseAttention<float, 8>;
#ifdef NLB_SHOULD_FAIL
using MlpT = nlb::Mlp<double, 8, 32>;
#else
using MlpT = nlb::Mlp<float, 8, 32>;
#endif

int main() {
  return sizeof(nlb::Block<Attention, MlpT>) > 0 ? 0 : 1;
}
