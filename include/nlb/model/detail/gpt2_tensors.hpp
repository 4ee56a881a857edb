// GPT2LMHeadModel's tensor names and layouts (Hugging Face), read into ModelWeights.
#pragma once

#include <string>

#include "nlb/model/detail/tensor_source.hpp"

namespace nlb::detail {

// GPT2LMHeadModel. Names carry the "transformer." prefix (save_pretrained) or none (the
// original hub files of gpt2 … gpt2-xl). Known buffers: h.{i}.attn.bias (causal mask
// [1, 1, n_positions, n_positions]) and h.{i}.attn.masked_bias ([]) in older files. lm_head.weight
// is tied to wte and normally absent; when present it is used as the unembedding.
template <class T, class S = storage::f32>
ModelWeights<T, S> read_gpt2(TensorSource& src, const ModelConfig& c) {
  const std::string p = src.contains("transformer.wte.weight") ? "transformer." : "";
  const Index d = c.d_model, h = c.d_hidden, V = c.vocab_size, P = c.n_positions;
  ModelWeights<T, S> w;
  w.config = c;
  w.embeddings.token = src.weight<T, S>(p + "wte.weight", V, d);
  w.embeddings.position = src.weight<T, S>(p + "wpe.weight", P, d);
  w.embeddings.final_norm = read_layer_norm<T>(src, p + "ln_f", d);
  if (src.contains("lm_head.weight")) {
    w.embeddings.unembedding = src.weight<T, S>("lm_head.weight", V, d);
  }
  for (Index i = 0; i < c.n_layers; ++i) {
    const std::string l = p + "h." + std::to_string(i) + ".";
    BlockWeights<T, S> b;
    b.ln1 = read_layer_norm<T>(src, l + "ln_1", d);
    b.ln2 = read_layer_norm<T>(src, l + "ln_2", d);
    // Conv1D weights are already [in, out].
    b.attention.w_qkv = src.weight<T, S>(l + "attn.c_attn.weight", d, 3 * d);
    b.attention.b_qkv = src.vector<T>(l + "attn.c_attn.bias", 3 * d);
    b.attention.w_out = src.weight<T, S>(l + "attn.c_proj.weight", d, d);
    b.attention.b_out = src.vector<T>(l + "attn.c_proj.bias", d);
    b.mlp = read_mlp<T, S>(src, c, i, l + "mlp.",
                           {"c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"},
                           [&](MlpWeights<T, S>& m) {
                             m.w_fc = src.weight<T, S>(l + "mlp.c_fc.weight", d, h);
                             m.b_fc = src.vector<T>(l + "mlp.c_fc.bias", h);
                             m.w_proj = src.weight<T, S>(l + "mlp.c_proj.weight", h, d);
                             m.b_proj = src.vector<T>(l + "mlp.c_proj.bias", d);
                           });
    src.accept_buffer(l + "attn.bias", {1, 1, P, P});
    src.accept_buffer(l + "attn.masked_bias", {});
    w.blocks.push_back(std::move(b));
  }
  return w;
}

}  // namespace nlb::detail
