// GPTNeoXForCausalLM's tensor names and layouts (Hugging Face), read into ModelWeights.
#pragma once

#include <string>

#include "nlb/model/detail/tensor_source.hpp"

namespace nlb::detail {

// GPTNeoX's fused query_key_value is an nn.Linear [3d, d] whose output, viewed as
// [n_heads, 3 · d_h], is q | k | v per head. Our w_qkv [d, 3d] is q | k | v per model (GPT-2's
// c_attn layout): output o = head·3d_h + part·d_h + j moves to column part·d + head·d_h + j.
template <class T>
void permute_neox_qkv(const RowMatrix<T>& hf_weight, const RowVector<T>& hf_bias, Index d,
                      Index n_heads, RowMatrix<T>& w_qkv, RowVector<T>& b_qkv) {
  const Index dh = d / n_heads;
  w_qkv.resize(d, 3 * d);
  b_qkv.resize(1, 3 * d);
  for (Index head = 0; head < n_heads; ++head) {
    for (Index part = 0; part < 3; ++part) {
      for (Index j = 0; j < dh; ++j) {
        const Index o = head * 3 * dh + part * dh + j;
        const Index col = part * d + head * dh + j;
        w_qkv.col(col) = hf_weight.row(o).transpose();
        b_qkv(col) = hf_bias(o);
      }
    }
  }
}

// GPTNeoXForCausalLM: "gpt_neox." prefix, untied embed_out (unless tie_word_embeddings).
// Known buffers in older Pythia files: attention.bias ([1, 1, P, P] mask),
// attention.masked_bias ([]), attention.rotary_emb.inv_freq ([rotary_dims / 2]).
template <class T>
ModelWeights<T> read_gpt_neox(TensorSource& src, const ModelConfig& c) {
  const std::string p = "gpt_neox.";
  const Index d = c.d_model, h = c.d_hidden, V = c.vocab_size, P = c.n_positions;
  ModelWeights<T> w;
  w.config = c;
  w.embeddings.token = src.matrix<T>(p + "embed_in.weight", V, d);
  w.embeddings.final_norm = read_layer_norm<T>(src, p + "final_layer_norm", d);
  if (!c.tied_embeddings || src.contains("embed_out.weight")) {
    w.embeddings.unembedding = src.matrix<T>("embed_out.weight", V, d);
  }
  for (Index i = 0; i < c.n_layers; ++i) {
    const std::string l = p + "layers." + std::to_string(i) + ".";
    BlockWeights<T> b;
    b.ln1 = read_layer_norm<T>(src, l + "input_layernorm", d);
    b.ln2 = read_layer_norm<T>(src, l + "post_attention_layernorm", d);
    const auto qkv = src.matrix<T>(l + "attention.query_key_value.weight", 3 * d, d);
    const RowVector<T> qkv_bias = c.attention_bias
                                      ? src.vector<T>(l + "attention.query_key_value.bias", 3 * d)
                                      : RowVector<T>::Zero(1, 3 * d);
    permute_neox_qkv<T>(qkv, qkv_bias, d, c.n_heads, b.attention.w_qkv, b.attention.b_qkv);
    b.attention.w_out = src.linear<T>(l + "attention.dense.weight", d, d);
    b.attention.b_out =
        c.attention_bias ? src.vector<T>(l + "attention.dense.bias", d) : RowVector<T>::Zero(1, d);
    b.mlp = read_mlp<T>(src, c, i, l + "mlp.",
                        {"dense_h_to_4h.weight", "dense_h_to_4h.bias", "dense_4h_to_h.weight",
                         "dense_4h_to_h.bias"},
                        [&](MlpWeights<T>& m) {
                          m.w_fc = src.linear<T>(l + "mlp.dense_h_to_4h.weight", d, h);
                          m.b_fc = src.vector<T>(l + "mlp.dense_h_to_4h.bias", h);
                          m.w_proj = src.linear<T>(l + "mlp.dense_4h_to_h.weight", h, d);
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
