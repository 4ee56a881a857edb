// The "nlb-sd" model's tensor names and layouts (GPT-2's names with S–D attention, PAPERS §B2;
// docs/model_files.md), read into a Transformer with S–D attention slots.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "nlb/model/attention_slot.hpp"
#include "nlb/model/detail/tensor_source.hpp"
#include "nlb/model/transformer.hpp"

namespace nlb::detail {

// Head h's [rows, cols] block of a row-major [H, rows, cols] tensor.
template <class T>
RowMatrix<T> head_block(const std::vector<T>& all, Index h, Index rows, Index cols) {
  return Eigen::Map<const RowMatrix<T>>(all.data() + h * rows * cols, rows, cols);
}

// Layer `l`'s S–D attention (prefix `p` = "transformer.h.{i}.attn."):
//   routing.u, routing.v [H, d, r]  (r = rank / 2; head h's U_h, V_h = [h, :, :])
//   filter.theta         [H, d] (diagonal) or [H] (scalar)
//   c_v.weight [d, d], c_v.bias [d], c_proj.weight [d, d], c_proj.bias [d]  (x W + b layout)
template <class T, class Backend>
AttentionSlot<T, Backend> read_sd_attention(TensorSource& src, const ModelConfig& c,
                                            const std::string& p, Index rank) {
  using Slot = AttentionSlot<T, Backend>;
  const Index d = c.d_model, H = c.n_heads, r = rank / 2;
  const auto u = src.file_of(p + "routing.u").template read<T>(p + "routing.u", {H, d, r});
  const auto v = src.file_of(p + "routing.v").template read<T>(p + "routing.v", {H, d, r});
  std::vector<typename Slot::Routing> routing;
  for (Index h = 0; h < H; ++h)
    routing.emplace_back(head_block(u, h, d, r), head_block(v, h, d, r));
  RowMatrix<T> w_v = src.template matrix<T>(p + "c_v.weight", d, d);
  RowVector<T> b_v = src.template vector<T>(p + "c_v.bias", d);
  RowMatrix<T> w_out = src.template matrix<T>(p + "c_proj.weight", d, d);
  RowVector<T> b_out = src.template vector<T>(p + "c_proj.bias", d);
  const std::string theta = p + "filter.theta";
  if (c.sd_filter == SDFilterKind::diagonal) {
    const RowMatrix<T> th = src.template matrix<T>(theta, H, d);
    std::vector<DiagonalFilter<T, Dynamic, Backend>> filters;
    for (Index h = 0; h < H; ++h)
      filters.emplace_back(th.row(h));
    return typename Slot::SDDiagonal(std::move(routing), std::move(filters), std::move(w_v),
                                     std::move(b_v), std::move(w_out), std::move(b_out));
  }
  const RowVector<T> th = src.template vector<T>(theta, H);
  std::vector<ScalarFilter<T, Backend>> filters;
  for (Index h = 0; h < H; ++h)
    filters.emplace_back(th(h));
  return typename Slot::SDScalar(std::move(routing), std::move(filters), std::move(w_v),
                                 std::move(b_v), std::move(w_out), std::move(b_out));
}

// The whole "nlb-sd" model: GPT-2's names ("transformer." prefix required) for embeddings,
// ln_1 (only when attn_layer_norm), ln_2, MLP and ln_f; the unembedding is tied to wte.
template <class T, class Backend>
Transformer<T, Backend> read_sd_model(TensorSource& src, const ModelConfig& c) {
  const std::string p = "transformer.";
  const Index d = c.d_model, h = c.d_hidden, V = c.vocab_size, P = c.n_positions;
  EmbeddingWeights<T> emb;
  emb.token = src.template matrix<T>(p + "wte.weight", V, d);
  emb.position = src.template matrix<T>(p + "wpe.weight", P, d);
  emb.final_norm = read_layer_norm<T>(src, p + "ln_f", d);
  using Slot = MlpSlot<T, Backend>;
  std::vector<DynamicBlock<T, Backend>> blocks;
  blocks.reserve(static_cast<std::size_t>(c.n_layers));
  for (Index i = 0; i < c.n_layers; ++i) {
    const std::string l = p + "h." + std::to_string(i) + ".";
    LayerNormWeights<T> ln1;  // empty without a pre-attention norm
    if (c.attn_layer_norm)
      ln1 = read_layer_norm<T>(src, l + "ln_1", d);
    auto attn =
        read_sd_attention<T, Backend>(src, c, l + "attn.", c.sd_ranks[static_cast<std::size_t>(i)]);
    auto ln2 = read_layer_norm<T>(src, l + "ln_2", d);
    RowMatrix<T> w_fc = src.template matrix<T>(l + "mlp.c_fc.weight", d, h);
    RowVector<T> b_fc = src.template vector<T>(l + "mlp.c_fc.bias", h);
    RowMatrix<T> w_proj = src.template matrix<T>(l + "mlp.c_proj.weight", h, d);
    RowVector<T> b_proj = src.template vector<T>(l + "mlp.c_proj.bias", d);
    Slot mlp = c.activation == ActivationKind::gelu_tanh
                   ? Slot(typename Slot::MlpTanh(w_fc, b_fc, w_proj, b_proj))
                   : Slot(typename Slot::MlpErf(w_fc, b_fc, w_proj, b_proj));
    blocks.emplace_back(std::move(ln1), std::move(attn), std::move(ln2), std::move(mlp),
                        /*parallel_residual=*/false, static_cast<T>(c.layer_norm_eps),
                        c.attn_layer_norm);
  }
  return Transformer<T, Backend>(c, std::move(emb), std::move(blocks));
}

}  // namespace nlb::detail
