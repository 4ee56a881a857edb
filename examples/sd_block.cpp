// An S–D attention block on its own (PAPERS §B2): per head the logits are x_i (S_h − D_h) x_jᵀ
// with S_h = U_h V_hᵀ − V_h U_hᵀ a rank-4 skew-symmetric routing matrix and D_h a positive
// diagonal filter, inside a pre-norm block with a GELU MLP, all sizes fixed at compile time.
// Runs a sequence in one call and again token by token with a KV cache, and prints how far the
// two agree, the routing part's antisymmetry and the attention parameter count against a
// dense attention of the same width.
//
// --quick: 16 tokens instead of 64 (CTest runs every example with it).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "nlb/nlb.hpp"

namespace {

using nlb::Index;
constexpr int D = 32;       // width
constexpr int Rank = 4;     // routing rank per head (2 planes)
constexpr Index heads = 4;  // d_h = 8

using Routing = nlb::SkewSymmetricRouting<float, Rank>;
using Filter = nlb::DiagonalFilter<float, D>;
using Attention = nlb::SDAttention<Routing, Filter>;
using LayerMlp = nlb::Mlp<float, D, 4 * D, nlb::GeluTanh>;
using SDBlock = nlb::Block<Attention, LayerMlp>;

std::mt19937 rng(7);

template <int R = nlb::Dynamic, int C = nlb::Dynamic>
nlb::RowMatrix<float, R, C> random(Index rows, Index cols, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  nlb::RowMatrix<float, R, C> m(rows, cols);
  for (Index i = 0; i < m.size(); ++i)
    m.data()[i] = normal(rng);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const Index T = quick ? 16 : 64;

  std::vector<Routing> routing;
  std::vector<Filter> filters;
  for (Index h = 0; h < heads; ++h) {
    routing.emplace_back(random(D, Rank / 2, 0.3f), random(D, Rank / 2, 0.3f));
    filters.emplace_back(random(1, D, 1.0f));  // θ; the filter is diag(softplus θ)
  }
  const Routing first_head = routing.front();
  Attention attention(std::move(routing), std::move(filters), random(D, D, 0.2f),
                      nlb::RowVector<float>::Zero(D), random(D, D, 0.2f),
                      nlb::RowVector<float>::Zero(D));
  const nlb::LayerNormWeights<float, D> norm{nlb::RowVector<float, D>::Ones(D),
                                             nlb::RowVector<float, D>::Zero(D)};
  const SDBlock block(
      norm, std::move(attention), norm,
      LayerMlp(random<D, 4 * D>(D, 4 * D, 0.1f), nlb::RowVector<float, 4 * D>::Zero(4 * D),
               random<4 * D, D>(4 * D, D, 0.1f), nlb::RowVector<float, D>::Zero(D)),
      /*parallel_residual=*/false, 1e-5f);

  // The whole sequence in one call (a residual stream x [T, d], advanced in place).
  const nlb::Activations<float, D> input = random(T, D, 1.0f);
  nlb::Activations<float, D> x = input;
  nlb::Context<nlb::backend::cpu> ctx;
  SDBlock::Workspace ws;
  block.forward(ctx, x, ws, /*layer=*/0);

  // The same tokens one at a time: each step sees the cached rows of the steps before it.
  nlb::KVCacheLayer<float> cache(T, D);
  float max_gap = 0.0f;
  for (Index t = 0; t < T; ++t) {
    nlb::Activations<float, D> step = input.row(t);
    block.forward(ctx, step, ws, 0, &cache);
    max_gap = std::max(max_gap, (step.row(0) - x.row(t)).cwiseAbs().maxCoeff());
  }

  const nlb::RowMatrix<float> S = first_head.dense();  // [d, d]
  const float skew = (S + S.transpose()).cwiseAbs().maxCoeff();
  const Index sd_params = heads * (2 * D * (Rank / 2) + D) + 2 * D * D;  // U, V, θ per head; V, O
  const Index dense_params = 4 * D * D;                                  // Q, K, V, O
  std::printf("S–D block, d = %d, %ld heads of rank %d, %ld tokens\n", D, static_cast<long>(heads),
              Rank, static_cast<long>(T));
  std::printf("one call vs token by token with a KV cache: max |difference| %.2e\n", max_gap);
  std::printf("routing S + Sᵀ (head 0): max |entry| %.1e (exactly skew-symmetric)\n", skew);
  std::printf("attention weights: %ld (S–D) vs %ld (dense)\n", static_cast<long>(sd_params),
              static_cast<long>(dense_params));
  return (x.allFinite() && max_gap < 1e-4f && skew == 0.0f) ? 0 : 1;
}
