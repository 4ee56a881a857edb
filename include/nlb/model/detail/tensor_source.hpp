// The tensors of a model directory (one safetensors file or an index of shards), with the
// strict bookkeeping every architecture's loader shares: each tensor read once, every tensor in
// the files used or a known buffer (docs/model_files.md). Also the readers of the parts that
// all families lay out alike: LayerNorm weights and one layer's MLP by its nlb_mlp_kinds kind.
#pragma once

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nlb/io/safetensors.hpp"
#include "nlb/model/config.hpp"
#include "nlb/model/weights.hpp"

namespace nlb::detail {

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
  // A torch.nn.Linear weight [out, in], returned as our [in, out]; output o becomes column
  // column_of_output[o] when that is given (a permutation of the outputs).
  template <class T>
  RowMatrix<T> linear(const std::string& name, Index in, Index out,
                      std::span<const Index> column_of_output = {}) {
    return file_of(name).template read_matrix_transposed<T>(name, out, in, column_of_output);
  }

  // A weight matrix [rows, cols] used as the file lays it out, in storage S: for storage::mapped
  // a view of the file where it holds T's values as they lie (map_matrix), else converted.
  template <class T, class S>
  weight_matrix<S, T> weight(const std::string& name, Index rows, Index cols) {
    if constexpr (std::is_same_v<S, storage::mapped>)
      return file_of(name).template map_matrix<T>(name, rows, cols);
    else
      return to_weight_storage<S>(matrix<T>(name, rows, cols));
  }
  // linear() in storage S (a transposed copy is never a view).
  template <class T, class S>
  weight_matrix<S, T> linear_weight(const std::string& name, Index in, Index out,
                                    std::span<const Index> column_of_output = {}) {
    return to_weight_storage<S>(linear<T>(name, in, out, column_of_output));
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

  /// The safetensors files, in the order they were opened (one, or the index's shards by name).
  const std::vector<io::SafetensorsFile>& files() const { return files_; }

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

/// True for the names of the non-parameter buffers that some writers store (the causal masks
/// attn.bias / attention.bias, masked_bias, NeoX's rotary inv_freq): what the loaders accept
/// with accept_buffer and what a parameter count leaves out.
inline bool is_non_parameter_buffer(std::string_view name) {
  for (std::string_view suffix : {".attn.bias", ".attn.masked_bias", ".attention.bias",
                                  ".attention.masked_bias", ".rotary_emb.inv_freq"}) {
    if (name.ends_with(suffix))
      return true;
  }
  return false;
}

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
template <class T, class S, class ReadFull>
MlpWeights<T, S> read_mlp(TensorSource& src, const ModelConfig& c, Index layer,
                          const std::string& mlp, std::initializer_list<const char*> full,
                          ReadFull&& read_full) {
  const MlpKind kind = c.mlp_kind(layer);
  const Index d = c.d_model;
  auto refuse = [&](const std::string& name, const char* expected) {
    if (src.contains(name)) {
      throw FormatError(expected_found(src.path_of(name) + ": tensor \"" + name + "\" of layer " +
                                           std::to_string(layer) + " (config nlb_mlp_kinds: \"" +
                                           to_string(kind) + "\")",
                                       expected, "the tensor present"));
    }
  };
  MlpWeights<T, S> m;
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

/// read(source) over the safetensors files of model directory `dir`, then FormatError naming a
/// tensor of them that `read` did not use (the loaders' strictness, docs/model_files.md).
template <class Read>
auto read_every_tensor(const std::filesystem::path& dir, Read&& read) {
  TensorSource source(dir);
  auto result = read(source);
  source.check_all_used();
  return result;
}

}  // namespace nlb::detail
