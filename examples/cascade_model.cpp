// A cascade-allocated S–D model as a type (PAPERS.md §B3, docs/attention.md): each layer's
// routing rank is a template argument, small at the bottom and large at the top (2, 4, 8, 16),
// so the whole allocation is checked and unrolled at compile time. Random weights; prints each
// layer's rank, the attention parameter count against dense attention of the same width, and
// the logits' shape of one forward pass.
//
// --quick: a 16-token forward instead of 128 (CTest runs every example with it).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "nlb/attention/sd_attention.hpp"
#include "nlb/mlp/mlp.hpp"
#include "nlb/model/transformer.hpp"

namespace {

using nlb::Index;
constexpr int D = 64;       // residual width
constexpr int H = 4 * D;    // MLP hidden width
constexpr Index heads = 4;  // d_h = 16
constexpr Index vocab = 256;
constexpr Index positions = 128;

template <int Rank>
using SDLayerAttention =
    nlb::SDAttention<nlb::SkewSymmetricRouting<float, Rank>, nlb::DiagonalFilter<float, D>>;
using LayerMlp = nlb::Mlp<float, D, H, nlb::GeluTanh>;
template <int Rank>
using SDBlock = nlb::Block<SDLayerAttention<Rank>, LayerMlp>;

// The cascade: Rank 2 at layer 0, then 4, 8, 16.
using CascadeLayers = std::tuple<SDBlock<2>, SDBlock<4>, SDBlock<8>, SDBlock<16>>;
using CascadeModel = nlb::BasicTransformer<CascadeLayers>;

std::mt19937_64 rng(2026);

template <int R = nlb::Dynamic, int C = nlb::Dynamic>
nlb::RowMatrix<float, R, C> random(Index rows, Index cols, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  nlb::RowMatrix<float, R, C> m(rows, cols);
  for (Index i = 0; i < m.size(); ++i)
    m.data()[i] = normal(rng);
  return m;
}

nlb::LayerNormWeights<float, D> unit_norm() {
  return {nlb::RowVector<float, D>::Ones(D), nlb::RowVector<float, D>::Zero(D)};
}

template <int Rank>
SDBlock<Rank> make_block() {
  std::vector<nlb::SkewSymmetricRouting<float, Rank>> routing;
  std::vector<nlb::DiagonalFilter<float, D>> filters;
  for (Index h = 0; h < heads; ++h) {
    routing.emplace_back(random(D, Rank / 2, 0.2f), random(D, Rank / 2, 0.2f));
    filters.emplace_back(random(1, D, 1.0f));
  }
  SDLayerAttention<Rank> attention(std::move(routing), std::move(filters), random(D, D, 0.1f),
                                   nlb::RowVector<float>::Zero(D), random(D, D, 0.1f),
                                   nlb::RowVector<float>::Zero(D));
  LayerMlp mlp(random<D, H>(D, H, 0.1f), nlb::RowVector<float, H>::Zero(H),
               random<H, D>(H, D, 0.1f), nlb::RowVector<float, D>::Zero(D));
  return SDBlock<Rank>(unit_norm(), std::move(attention), unit_norm(), std::move(mlp), false,
                       1e-5f);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  nlb::ModelConfig config;
  config.vocab_size = vocab;
  config.d_model = D;
  config.n_layers = std::tuple_size_v<CascadeLayers>;
  config.n_heads = heads;
  config.d_hidden = H;
  config.n_positions = positions;
  nlb::EmbeddingWeights<float, D> embeddings{
      random(vocab, D, 0.5f), random(positions, D, 0.1f), unit_norm(), {}};
  const CascadeModel model(
      config, std::move(embeddings),
      CascadeLayers(make_block<2>(), make_block<4>(), make_block<8>(), make_block<16>()));

  // Per-layer ranks and attention parameters, against dense attention (W_qkv [d, 3d] + b_qkv,
  // W_out [d, d] + b_out) of the same width.
  const Index dense_per_layer = 4 * D * D + 4 * D;
  Index sd_total = 0;
  std::printf("layer  rank  attention parameters (S–D / dense)\n");
  auto report = [&](const auto& block, Index layer) {
    const auto& attn = block.attention();
    sd_total += attn.parameter_count();
    std::printf("%5ld  %4ld  %8ld / %ld\n", static_cast<long>(layer),
                static_cast<long>(attn.routing(0).rank()),
                static_cast<long>(attn.parameter_count()), static_cast<long>(dense_per_layer));
  };
  report(std::get<0>(model.layers()), 0);
  report(std::get<1>(model.layers()), 1);
  report(std::get<2>(model.layers()), 2);
  report(std::get<3>(model.layers()), 3);
  const Index dense_total = dense_per_layer * config.n_layers;
  std::printf("total  %ld / %ld attention parameters (%.1f%% fewer)\n", static_cast<long>(sd_total),
              static_cast<long>(dense_total),
              100.0 * (1.0 - static_cast<double>(sd_total) / static_cast<double>(dense_total)));

  const Index length = quick ? 16 : positions;
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(length));
  for (Index t = 0; t < length; ++t)
    tokens[static_cast<std::size_t>(t)] = static_cast<std::int32_t>((t * 37 + 11) % vocab);
  nlb::Context<nlb::backend::cpu> ctx;
  CascadeModel::Workspace ws;
  nlb::RowMatrix<float> logits;
  model.forward(ctx, tokens, logits, ws);
  std::printf("logits [%ld, %ld], finite: %s\n", static_cast<long>(logits.rows()),
              static_cast<long>(logits.cols()), logits.allFinite() ? "yes" : "no");
  return logits.allFinite() && logits.rows() == length && logits.cols() == vocab ? 0 : 1;
}
