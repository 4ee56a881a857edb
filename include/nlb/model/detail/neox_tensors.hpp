// GPTNeoXForCausalLM's tensor names and layouts (Hugging Face), read into ModelWeights.
#pragma once

#include <string>
#include <vector>

#include "nlb/model/detail/tensor_source.hpp"

namespace nlb::detail {

// GPTNeoX's fused query_key_value is an nn.Linear [3d, d] whose output, viewed as
// [n_heads, 3 · d_h], is q | k | v per head. Our w_qkv [d, 3d] is q | k | v per model (GPT-2's
// c_attn layout): output o = head·3d_h + part·d_h + j moves to column part·d + head·d_h + j.
inline std::vector<Index> neox_qkv_columns(Index d, Index n_heads) {
  const Index dh = d / n_heads;
  std::vector<Index> column(static_cast<std::size_t>(3 * d));
  for (Index o = 0; o < 3 * d; ++o) {
    const Index head = o / (3 * dh), part = (o / dh) % 3, j = o % dh;
    column[static_cast<std::size_t>(o)] = part * d + head * dh + j;
  }
  return column;
}

// GPTNeoXForCausalLM: "gpt_neox." prefix, untied embed_out (unless tie_word_embeddings).
// Known buffers in older Pythia files: attention.bias ([1, 1, P, P] mask),
// attention.masked_bias ([]), attention.rotary_emb.inv_freq ([rotary_dims / 2]).
template <class T, class S = storage::f32>
ModelWeights<T, S> read_gpt_neox(TensorSource& src, const ModelConfig& c) {
  const std::string p = "gpt_neox.";
  const Index d = c.d_model, h = c.d_hidden, V = c.vocab_size, P = c.n_positions;
  const std::vector<Index> qkv_columns = neox_qkv_columns(d, c.n_heads);
  ModelWeights<T, S> w;
  w.config = c;
  w.embeddings.token = src.weight<T, S>(p + "embed_in.weight", V, d);
  w.embeddings.final_norm = read_layer_norm<T>(src, p + "final_layer_norm", d);
  if (!c.tied_embeddings || src.contains("embed_out.weight")) {
    w.embeddings.unembedding = src.weight<T, S>("embed_out.weight", V, d);
  }
  for (Index i = 0; i < c.n_layers; ++i) {
    const std::string l = p + "layers." + std::to_string(i) + ".";
    BlockWeights<T, S> b;
    b.ln1 = read_layer_norm<T>(src, l + "input_layernorm", d);
    b.ln2 = read_layer_norm<T>(src, l + "post_attention_layernorm", d);
    b.attention.w_qkv =
        src.linear_weight<T, S>(l + "attention.query_key_value.weight", d, 3 * d, qkv_columns);
    const RowVector<T> qkv_bias = c.attention_bias
                                      ? src.vector<T>(l + "attention.query_key_value.bias", 3 * d)
                                      : RowVector<T>::Zero(1, 3 * d);
    b.attention.b_qkv.resize(1, 3 * d);
    for (Index o = 0; o < 3 * d; ++o)
      b.attention.b_qkv(qkv_columns[static_cast<std::size_t>(o)]) = qkv_bias(o);
    b.attention.w_out = src.linear_weight<T, S>(l + "attention.dense.weight", d, d);
    b.attention.b_out =
        c.attention_bias ? src.vector<T>(l + "attention.dense.bias", d) : RowVector<T>::Zero(1, d);
    b.mlp = read_mlp<T, S>(src, c, i, l + "mlp.",
                           {"dense_h_to_4h.weight", "dense_h_to_4h.bias", "dense_4h_to_h.weight",
                            "dense_4h_to_h.bias"},
                           [&](MlpWeights<T, S>& m) {
                             m.w_fc = src.linear_weight<T, S>(l + "mlp.dense_h_to_4h.weight", d, h);
                             m.b_fc = src.vector<T>(l + "mlp.dense_h_to_4h.bias", h);
                             m.w_proj =
                                 src.linear_weight<T, S>(l + "mlp.dense_4h_to_h.weight", h, d);
                             m.b_proj = src.vector<T>(l + "mlp.dense_4h_to_h.bias", d);
                           });
    src.accept_buffer(l + "attention.bias", {1, 1, P, P});
    src.accept_buffer(l + "attention.masked_bias", {});
    src.accept_buffer(l + "attention.rotary_emb.inv_freq", {c.rotary_dims() / 2});
    w.blocks.push_back(std::move(b));
  }
  return w;
}

}  // namespace nlb::detail
