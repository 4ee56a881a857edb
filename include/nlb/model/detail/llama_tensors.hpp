// The Llama family's tensor names and layouts (Hugging Face LlamaForCausalLM,
// Qwen2ForCausalLM, MistralForCausalLM), read into ModelWeights.
#pragma once

#include <string>
#include <utility>

#include "nlb/model/detail/tensor_source.hpp"

namespace nlb::detail {

// The full SwiGLU MLP's tensors under a layer's "mlp." prefix (nn.Linear weights [out, in]).
inline constexpr std::initializer_list<const char*> llama_mlp_tensors = {
    "gate_proj.weight", "up_proj.weight", "down_proj.weight"};

// Two matrices with the same rows side by side, [a | b].
template <class T>
RowMatrix<T> side_by_side(const RowMatrix<T>& a, const RowMatrix<T>& b) {
  RowMatrix<T> both(a.rows(), a.cols() + b.cols());
  both << a, b;
  return both;
}

// "model." prefix; per layer input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
// mlp.{gate,up,down}_proj; model.norm; lm_head (absent when tied). q, k and v (nn.Linear
// [out, in]) go side by side into w_qkv [d, d + 2·d_kv] (AttentionWeights' layout), gate and up
// into W_fc = [W_gate | W_up] [d, 2h] (SwiGluMlp's layout), each converted to storage S as it is
// built (one layer's float copy at a time). Known buffers: rotary_emb.inv_freq
// ([head_dim / 2]) per layer or once under "model.".
template <class T, class S = storage::f32>
ModelWeights<T, S> read_llama(TensorSource& src, const ModelConfig& c) {
  const std::string p = "model.";
  const Index d = c.d_model, h = c.d_hidden, V = c.vocab_size, kv = c.kv_width();
  ModelWeights<T, S> w;
  w.config = c;
  w.embeddings.token = src.weight<T, S>(p + "embed_tokens.weight", V, d);
  w.embeddings.final_norm.gamma = src.vector<T>(p + "norm.weight", d);
  if (!c.tied_embeddings || src.contains("lm_head.weight"))
    w.embeddings.unembedding = src.weight<T, S>("lm_head.weight", V, d);
  const auto bias = [&](const std::string& name, Index n, bool present) {
    return present ? src.vector<T>(name, n) : RowVector<T>(RowVector<T>::Zero(1, n));
  };
  for (Index i = 0; i < c.n_layers; ++i) {
    const std::string l = p + "layers." + std::to_string(i) + ".";
    const std::string a = l + "self_attn.";
    BlockWeights<T, S> b;
    b.ln1.gamma = src.vector<T>(l + "input_layernorm.weight", d);
    b.ln2.gamma = src.vector<T>(l + "post_attention_layernorm.weight", d);
    b.attention.w_qkv = to_weight_storage<S>(
        side_by_side<T>(side_by_side<T>(src.linear<T>(a + "q_proj.weight", d, d),
                                        src.linear<T>(a + "k_proj.weight", d, kv)),
                        src.linear<T>(a + "v_proj.weight", d, kv)));
    b.attention.b_qkv.resize(1, d + 2 * kv);
    b.attention.b_qkv << bias(a + "q_proj.bias", d, c.attention_bias),
        bias(a + "k_proj.bias", kv, c.attention_bias),
        bias(a + "v_proj.bias", kv, c.attention_bias);
    b.attention.w_out = src.linear_weight<T, S>(a + "o_proj.weight", d, d);
    b.attention.b_out = bias(a + "o_proj.bias", d, c.attention_output_bias);
    b.mlp = read_mlp<T, S>(src, c, i, l + "mlp.", llama_mlp_tensors, [&](MlpWeights<T, S>& m) {
      m.w_fc = to_weight_storage<S>(side_by_side<T>(src.linear<T>(l + "mlp.gate_proj.weight", d, h),
                                                    src.linear<T>(l + "mlp.up_proj.weight", d, h)));
      m.w_proj = src.linear_weight<T, S>(l + "mlp.down_proj.weight", h, d);
    });
    src.accept_buffer(a + "rotary_emb.inv_freq", {c.head_dim() / 2});
    w.blocks.push_back(std::move(b));
  }
  src.accept_buffer(p + "rotary_emb.inv_freq", {c.head_dim() / 2});
  return w;
}

}  // namespace nlb::detail
