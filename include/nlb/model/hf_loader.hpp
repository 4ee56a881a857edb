// Loads a Hugging Face model directory (config.json + model.safetensors, or a sharded
// model.safetensors.index.json) of a GPT2LMHeadModel or GPTNeoXForCausalLM into ModelWeights.
//
// The mapping from Hugging Face names to our parameters is explicit and strict
// (docs/model_files.md): every expected tensor must be present with the shape the config implies,
// every tensor in the file must be used or be a known non-parameter buffer, otherwise
// FormatError naming the file, the tensor, what was expected and what was found.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nlb/io/safetensors.hpp"
#include "nlb/model/config.hpp"
#include "nlb/model/weights.hpp"

namespace nlb {

namespace detail {

// The tensors of one model, possibly spread over shards; remembers which ones were used.
class TensorSource {
 public:
  explicit TensorSource(const std::filesystem::path& dir) {
    const auto single = dir / "model.safetensors";
    const auto index = dir / "model.safetensors.index.json";
    if (std::filesystem::exists(single)) {
      add_file(single);
    } else if (std::filesystem::exists(index)) {
      read_index(dir, index);
    } else {
      throw FormatError(dir.string() +
                        ": no model.safetensors or model.safetensors.index.json in the directory");
    }
  }

  bool contains(const std::string& name) const { return where_.count(name) > 0; }
  /// The file holding tensor `name` (which must be present), without marking it used.
  std::string path_of(const std::string& name) const {
    return files_[where_.at(name)].path().string();
  }

  const io::SafetensorsFile& file_of(const std::string& name) {
    const auto it = where_.find(name);
    if (it == where_.end()) {
      throw FormatError(files_.front().path().string() + ": missing tensor \"" + name + "\"");
    }
    used_.insert(name);
    return files_[it->second];
  }

  template <class T>
  RowMatrix<T> matrix(const std::string& name, Index rows, Index cols) {
    return file_of(name).template read_matrix<T>(name, rows, cols);
  }
  template <class T>
  RowVector<T> vector(const std::string& name, Index n) {
    return file_of(name).template read_row_vector<T>(name, n);
  }
  // A torch.nn.Linear weight [out, in], returned as our [in, out].
  template <class T>
  RowMatrix<T> linear(const std::string& name, Index in, Index out) {
    return matrix<T>(name, out, in).transpose();
  }

  /// Marks a known non-parameter buffer as accounted for, after checking its shape.
  void accept_buffer(const std::string& name, std::vector<std::int64_t> shape) {
    if (!contains(name))
      return;
    const auto& info = file_of(name).info(name);
    if (info.shape != shape) {
      throw FormatError(expected_found(
          files_[where_.at(name)].path().string() + ": buffer \"" + name + "\" shape",
          shape_string(shape), shape_string(info.shape)));
    }
  }

  /// Throws FormatError naming the first tensor that nothing used.
  void check_all_used() const {
    for (const auto& [name, file] : where_) {
      if (!used_.count(name)) {
        throw FormatError(files_[file].path().string() + ": unexpected tensor \"" + name +
                          "\" (no known parameter or buffer of this model has that name)");
      }
    }
  }

  std::string file_name() const { return files_.front().path().string(); }

 private:
  static std::string shape_string(const std::vector<std::int64_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
      s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }

  void add_file(const std::filesystem::path& path) {
    files_.push_back(io::SafetensorsFile::open(path));
    for (const auto& t : files_.back().tensors()) {
      if (!where_.emplace(t.name, files_.size() - 1).second) {
        throw FormatError(path.string() + ": tensor \"" + t.name +
                          "\" also appears in another shard");
      }
    }
  }

  void read_index(const std::filesystem::path& dir, const std::filesystem::path& index) {
    std::ifstream in(index);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw FormatError(index.string() + ": not valid JSON: " + e.what());
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
      throw FormatError(index.string() + ": expected an object \"weight_map\"");
    }
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : j["weight_map"].items()) {
      if (!shard.is_string()) {
        throw FormatError(index.string() + ": weight_map entry \"" + tensor +
                          "\" is not a file name");
      }
      const auto name = shard.get<std::string>();
      if (name.find('/') != std::string::npos || name.find("..") != std::string::npos) {
        throw FormatError(index.string() + ": shard name \"" + name + "\" leaves the directory");
      }
      shards.insert(name);
    }
    for (const auto& shard : shards)
      add_file(dir / shard);
    for (const auto& [tensor, shard] : j["weight_map"].items()) {
      const auto it = where_.find(tensor);
      if (it == where_.end() || files_[it->second].path().filename() != shard.get<std::string>()) {
        throw FormatError(index.string() + ": tensor \"" + tensor + "\" is not in shard " +
                          shard.get<std::string>());
      }
    }
  }

  std::vector<io::SafetensorsFile> files_;
  std::map<std::string, std::size_t> where_;
  std::set<std::string> used_;
};

template <class T>
LayerNormWeights<T> read_layer_norm(TensorSource& src, const std::string& name, Index d) {
  return {src.vector<T>(name + ".weight", d), src.vector<T>(name + ".bias", d)};
}

// One layer's MLP by its kind in config.json "nlb_mlp_kinds" (docs/linearize.md). `mlp` is the
// layer's MLP prefix ("transformer.h.1.mlp." / "gpt_neox.layers.1.mlp."), `full` the names of
// the full MLP's tensors under it, read by `read_full(m)`. A linear layer has exactly
//   mlp.surrogate.weight [d, d] (y = x W + b, [in, out] in both families), mlp.surrogate.bias [d]
// and none of `full`; a gated one has `full`, the surrogate and
//   mlp.gate.weight [d] (folded, PAPERS §A3), mlp.gate.bias [1], mlp.gate.threshold [1];
// a full one none of the surrogate or gate tensors. A tensor of another kind is a FormatError
// naming the file, the tensor, what the layer's kind expects and what was found.
template <class T, class ReadFull>
MlpWeights<T> read_mlp(TensorSource& src, const ModelConfig& c, Index layer, const std::string& mlp,
                       std::initializer_list<const char*> full, ReadFull&& read_full) {
  const MlpKind kind = c.mlp_kind(layer);
  const Index d = c.d_model;
  auto refuse = [&](const std::string& name, const char* expected) {
    if (src.contains(name)) {
      throw FormatError(expected_found(src.path_of(name) + ": tensor \"" + name + "\" of layer " +
                                           std::to_string(layer) + " (config nlb_mlp_kinds: \"" +
                                           mlp_kind_name(kind) + "\")",
                                       expected, "the tensor present"));
    }
  };
  MlpWeights<T> m;
  m.kind = kind;
  if (kind == MlpKind::linear) {
    for (const char* name : full)
      refuse(mlp + name, "no full-MLP tensors in a linear layer (only mlp.surrogate.*)");
  } else {
    read_full(m);
  }
  if (kind == MlpKind::full) {
    for (const char* name : {"surrogate.weight", "surrogate.bias"})
      refuse(mlp + name, "no surrogate tensors in a full layer");
  } else {
    m.w_surrogate = src.matrix<T>(mlp + "surrogate.weight", d, d);
    m.b_surrogate = src.vector<T>(mlp + "surrogate.bias", d);
  }
  if (kind != MlpKind::gated) {
    for (const char* name : {"gate.weight", "gate.bias", "gate.threshold"})
      refuse(mlp + name, "no gate tensors in a layer that is not gated");
  } else {
    m.gate_weight = src.vector<T>(mlp + "gate.weight", d).transpose();
    m.gate_bias = src.vector<T>(mlp + "gate.bias", 1)(0);
    m.gate_threshold = src.vector<T>(mlp + "gate.threshold", 1)(0);
  }
  return m;
}

// GPT2LMHeadModel. Names carry the "transformer." prefix (save_pretrained) or none (the
// original hub files of gpt2 … gpt2-xl). Known buffers: h.{i}.attn.bias (causal mask
// [1, 1, n_positions, n_positions]) and h.{i}.attn.masked_bias ([]) in older files. lm_head.weight
// is tied to wte and normally absent; when present it is used as the unembedding.
template <class T>
ModelWeights<T> read_gpt2(TensorSource& src, const ModelConfig& c) {
  const std::string p = src.contains("transformer.wte.weight") ? "transformer." : "";
  const Index d = c.d_model, h = c.d_hidden, V = c.vocab_size, P = c.n_positions;
  ModelWeights<T> w;
  w.config = c;
  w.embeddings.token = src.matrix<T>(p + "wte.weight", V, d);
  w.embeddings.position = src.matrix<T>(p + "wpe.weight", P, d);
  w.embeddings.final_norm = read_layer_norm<T>(src, p + "ln_f", d);
  if (src.contains("lm_head.weight")) {
    w.embeddings.unembedding = src.matrix<T>("lm_head.weight", V, d);
  }
  for (Index i = 0; i < c.n_layers; ++i) {
    const std::string l = p + "h." + std::to_string(i) + ".";
    BlockWeights<T> b;
    b.ln1 = read_layer_norm<T>(src, l + "ln_1", d);
    b.ln2 = read_layer_norm<T>(src, l + "ln_2", d);
    // Conv1D weights are already [in, out].
    b.attention.w_qkv = src.matrix<T>(l + "attn.c_attn.weight", d, 3 * d);
    b.attention.b_qkv = src.vector<T>(l + "attn.c_attn.bias", 3 * d);
    b.attention.w_out = src.matrix<T>(l + "attn.c_proj.weight", d, d);
    b.attention.b_out = src.vector<T>(l + "attn.c_proj.bias", d);
    b.mlp = read_mlp<T>(src, c, i, l + "mlp.",
                        {"c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"},
                        [&](MlpWeights<T>& m) {
                          m.w_fc = src.matrix<T>(l + "mlp.c_fc.weight", d, h);
                          m.b_fc = src.vector<T>(l + "mlp.c_fc.bias", h);
                          m.w_proj = src.matrix<T>(l + "mlp.c_proj.weight", h, d);
                          m.b_proj = src.vector<T>(l + "mlp.c_proj.bias", d);
                        });
    src.accept_buffer(l + "attn.bias", {1, 1, P, P});
    src.accept_buffer(l + "attn.masked_bias", {});
    w.blocks.push_back(std::move(b));
  }
  return w;
}

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

}  // namespace detail

/// Reads `dir`/config.json and the model's safetensors into ModelWeights<T> (weights converted
/// from F32, F16, BF16 or F64 to T). Throws FormatError naming file, tensor, expected and found.
template <class T>
ModelWeights<T> load_model_weights(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir)) {
    throw FormatError(dir.string() + ": not a model directory");
  }
  const ModelConfig config = read_hf_config(dir / "config.json");
  if (config.architecture == Architecture::nlb_sd) {
    throw ArgumentError(detail::expected_found(
        "load_model_weights: " + dir.string(), "a GPT-2 or GPT-NeoX model (dense attention)",
        "an \"nlb-sd\" model (S–D attention; load it with load_model)"));
  }
  detail::TensorSource src(dir);
  ModelWeights<T> w = config.architecture == Architecture::gpt2
                          ? detail::read_gpt2<T>(src, config)
                          : detail::read_gpt_neox<T>(src, config);
  src.check_all_used();
  return w;
}

/// An "nlb-sd" (S–D attention) model directory as a Transformer; defined in sd_loader.hpp.
template <class T, class Backend = backend::cpu>
Transformer<T, Backend> load_sd_model(const std::filesystem::path& dir);

/// Loads a model directory as a Dynamic-size Transformer (each layer's MlpSlot holds its Mlp,
/// its AttentionSlot the dense attention; for model_type "nlb-sd", load_sd_model's S–D
/// attention).
template <class T, class Backend = backend::cpu>
Transformer<T, Backend> load_model(const std::filesystem::path& dir) {
  if (std::filesystem::is_directory(dir) &&
      read_hf_config(dir / "config.json").architecture == Architecture::nlb_sd) {
    return load_sd_model<T, Backend>(dir);
  }
  return make_transformer<T, Backend>(load_model_weights<T>(dir));
}

}  // namespace nlb

#include "nlb/model/sd_loader.hpp"  // load_sd_model's definition (it needs this file's helpers)
