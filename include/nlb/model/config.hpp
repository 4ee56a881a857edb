// The architecture of a reference transformer, read from a Hugging Face config.json.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nlb/core.hpp"
#include "nlb/kernels/rotary.hpp"
#include "nlb/model/norm.hpp"

namespace nlb {

/// The two model families of the papers (PAPERS §A, §B), GPT-2 with S–D attention, and the
/// Llama family of today's checkpoints (docs/architectures.md has the table of what differs).
enum class Architecture {
  gpt2,      // sequential residual, learned positions, tanh GELU, tied unembedding
  gpt_neox,  // parallel residual (usually), partial rotary, exact GELU, separate unembedding
  nlb_sd,    // "nlb-sd": GPT-2's layout with S–D attention (PAPERS §B2; nlb/model/sd_loader.hpp)
  llama,     // RMSNorm, SwiGLU, rotary over the whole head, grouped-query attention
  qwen2,     // llama's layout with q/k/v biases
  mistral    // llama's layout (its sliding window refused where it would matter)
};

/// True for the Llama family (llama, qwen2, mistral): RMSNorm, SwiGLU MLP, grouped-query heads.
inline bool is_llama_family(Architecture a) {
  return a == Architecture::llama || a == Architecture::qwen2 || a == Architecture::mistral;
}

/// The filter D of an S–D model's attention: diag(softplus θ_h) or softplus(θ_h)·I per head.
enum class SDFilterKind { diagonal, scalar };

/// The model_type of an Architecture as config.json spells it: "gpt2", "gpt_neox" or "nlb-sd"
/// (the one name of each architecture in every report).
inline const char* to_string(Architecture a) {
  switch (a) {
    case Architecture::gpt2:
      return "gpt2";
    case Architecture::gpt_neox:
      return "gpt_neox";
    case Architecture::nlb_sd:
      return "nlb-sd";
    case Architecture::llama:
      return "llama";
    case Architecture::qwen2:
      return "qwen2";
    case Architecture::mistral:
      return "mistral";
  }
  return "unknown";
}

/// The MLP's form: a two-matrix GELU MLP (tanh or exact GELU), or the Llama family's
/// three-matrix SwiGLU MLP down(silu(x W_gate) ⊙ (x W_up)) (hidden_act "silu").
enum class ActivationKind { gelu_tanh, gelu_erf, swiglu };

/// What one layer of a (possibly linearized) model runs as its MLP (config.json
/// "nlb_mlp_kinds", docs/linearize.md): the full MLP, its linear surrogate y = x W + b
/// (PAPERS §A1), or a GatedMLP routing each token to one of the two (PAPERS §A3).
enum class MlpKind { full, linear, gated };

/// The name of an MlpKind as config.json spells it: "full", "linear" or "gated".
inline const char* to_string(MlpKind kind) {
  return kind == MlpKind::full ? "full" : kind == MlpKind::linear ? "linear" : "gated";
}

/// Hyperparameters of a GPT-2, GPT-NeoX or Llama-family model. Sizes are run-time values; a
/// fixed-size model checks them against its compile-time sizes.
struct ModelConfig {
  Architecture architecture = Architecture::gpt2;
  Index vocab_size = 0;
  Index d_model = 0;  // residual width d
  Index n_layers = 0;
  Index n_heads = 0;
  Index n_kv_heads = 0;   // key/value heads (0: as many as n_heads; fewer: grouped-query)
  Index d_hidden = 0;     // MLP hidden width h
  Index n_positions = 0;  // longest sequence (GPT-2: rows of wpe)
  double layer_norm_eps = 1e-5;
  ActivationKind activation = ActivationKind::gelu_tanh;
  bool parallel_residual = false;  // x + attn(ln1 x) + mlp(ln2 x) (GPT-NeoX)
  double rotary_pct = 0.0;         // share of each head's dims that are rotated (GPT-NeoX)
  double rotary_base = 10000.0;
  kernels::RopeScaling rope_scaling;  // config "rope_scaling" (Llama family); none otherwise
  NormKind norm = NormKind::layer_norm;
  bool tied_embeddings = true;        // unembedding = token embedding (GPT-2)
  bool attention_bias = true;         // q/k/v projections have biases
  bool attention_output_bias = true;  // the output projection has a bias (Qwen2: q/k/v only)
  // S–D models (Architecture::nlb_sd) only:
  bool attn_layer_norm = true;  // pre-attention LayerNorm ln_1 present (false: raw stream)
  std::vector<Index> sd_ranks;  // routing rank (even) of each layer; empty otherwise
  SDFilterKind sd_filter = SDFilterKind::diagonal;
  // Linearized models (docs/linearize.md): each layer's MLP kind; empty = every layer full.
  std::vector<MlpKind> mlp_kinds;

  /// The MLP kind of `layer` (full when mlp_kinds is empty). Precondition: layer < n_layers.
  MlpKind mlp_kind(Index layer) const {
    return mlp_kinds.empty() ? MlpKind::full : mlp_kinds[static_cast<std::size_t>(layer)];
  }

  Index head_dim() const { return n_heads > 0 ? d_model / n_heads : 0; }
  /// Key/value heads: n_kv_heads, or n_heads when it is 0 (multi-head attention).
  Index kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
  /// Width of the keys (and values) of all heads, kv_heads · head_dim: the KV cache's width.
  Index kv_width() const { return kv_heads() * head_dim(); }
  /// Weight matrices of one full MLP: 3 for SwiGLU (gate, up, down), else 2.
  Index mlp_matrices() const { return activation == ActivationKind::swiglu ? 3 : 2; }
  /// Rotated dims per head: int(head_dim · rotary_pct), as Hugging Face computes it.
  Index rotary_dims() const {
    return static_cast<Index>(static_cast<double>(head_dim()) * rotary_pct);
  }
};

namespace detail {

inline const nlohmann::json& config_key(const nlohmann::json& j, const std::string& file,
                                        const std::string& key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    throw FormatError(file + ": missing config key \"" + key + "\"");
  }
  return *it;
}

inline Index config_size(const nlohmann::json& j, const std::string& file, const std::string& key) {
  const auto& v = config_key(j, file, key);
  if (!v.is_number_integer() || v.get<long long>() <= 0) {
    throw FormatError(
        expected_found(file + ": config key \"" + key + "\"", "a positive integer", v.dump()));
  }
  return static_cast<Index>(v.get<long long>());
}

inline double config_number(const nlohmann::json& j, const std::string& file,
                            const std::string& key) {
  const auto& v = config_key(j, file, key);
  if (!v.is_number()) {
    throw FormatError(expected_found(file + ": config key \"" + key + "\"", "a number", v.dump()));
  }
  return v.get<double>();
}

// An optional key, or `fallback` when absent or null.
template <class V>
V config_optional(const nlohmann::json& j, const std::string& file, const std::string& key,
                  V fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null())
    return fallback;
  try {
    return it->get<V>();
  } catch (const nlohmann::json::exception&) {
    throw FormatError(file + ": config key \"" + key + "\" has the wrong type: " + it->dump());
  }
}

inline ActivationKind config_activation(const std::string& file, const std::string& key,
                                        const std::string& name) {
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") {
    return ActivationKind::gelu_tanh;
  }
  if (name == "gelu")
    return ActivationKind::gelu_erf;
  throw FormatError(expected_found(file + ": config key \"" + key + "\"",
                                   "\"gelu_new\", \"gelu_pytorch_tanh\" or \"gelu\"",
                                   "\"" + name + "\""));
}

// The S–D keys of an "nlb-sd" config (after the GPT-2 keys, so n_layers is known).
inline void parse_sd_keys(const nlohmann::json& j, const std::string& file, ModelConfig& c) {
  const auto& ranks = config_key(j, file, "sd_ranks");
  if (!ranks.is_array() || static_cast<Index>(ranks.size()) != c.n_layers) {
    throw FormatError(expected_found(
        file + ": config key \"sd_ranks\"",
        "an array of n_layer = " + std::to_string(c.n_layers) + " ranks", ranks.dump()));
  }
  for (const auto& r : ranks) {
    if (!r.is_number_integer() || r.get<long long>() <= 0 || r.get<long long>() % 2 != 0 ||
        r.get<long long>() > c.d_model) {
      throw FormatError(expected_found(
          file + ": config key \"sd_ranks\" entry",
          "a positive even integer <= n_embd = " + std::to_string(c.d_model), r.dump()));
    }
    c.sd_ranks.push_back(static_cast<Index>(r.get<long long>()));
  }
  const auto& filter = config_key(j, file, "sd_filter");
  if (filter == "diagonal") {
    c.sd_filter = SDFilterKind::diagonal;
  } else if (filter == "scalar") {
    c.sd_filter = SDFilterKind::scalar;
  } else {
    throw FormatError(expected_found(file + ": config key \"sd_filter\"",
                                     "\"diagonal\" or \"scalar\"", filter.dump()));
  }
  const auto& norm = config_key(j, file, "sd_attn_layer_norm");
  if (!norm.is_boolean()) {
    throw FormatError(
        expected_found(file + ": config key \"sd_attn_layer_norm\"", "a boolean", norm.dump()));
  }
  c.attn_layer_norm = norm.get<bool>();
  if (!config_optional<bool>(j, file, "tie_word_embeddings", true)) {
    throw FormatError(expected_found(file + ": config key \"tie_word_embeddings\"",
                                     "true (nlb-sd models tie the unembedding)", "false"));
  }
}

// The optional "nlb_mlp_kinds" key (after n_layers is known): an array of n_layers strings,
// each "full", "linear" or "gated". Absent or null: every layer full.
inline std::vector<MlpKind> parse_mlp_kinds(const nlohmann::json& j, const std::string& file,
                                            Index n_layers) {
  const auto it = j.find("nlb_mlp_kinds");
  if (it == j.end() || it->is_null())
    return {};
  if (!it->is_array() || static_cast<Index>(it->size()) != n_layers) {
    throw FormatError(expected_found(
        file + ": config key \"nlb_mlp_kinds\"",
        "an array of n_layers = " + std::to_string(n_layers) + " MLP kinds", it->dump()));
  }
  std::vector<MlpKind> kinds;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& v = (*it)[i];
    const std::string name = v.is_string() ? v.get<std::string>() : std::string();
    if (name == "full") {
      kinds.push_back(MlpKind::full);
    } else if (name == "linear") {
      kinds.push_back(MlpKind::linear);
    } else if (name == "gated") {
      kinds.push_back(MlpKind::gated);
    } else {
      throw FormatError(
          expected_found(file + ": config key \"nlb_mlp_kinds\" entry " + std::to_string(i),
                         "\"full\", \"linear\" or \"gated\"", v.dump()));
    }
  }
  return kinds;
}

// config.json "rope_scaling": null, or an object whose "rope_type" (older files: "type") is
// "default" (none), "linear" (factor) or "llama3" (factor, low_freq_factor, high_freq_factor,
// original_max_position_embeddings). Another type is a FormatError naming it.
inline kernels::RopeScaling parse_rope_scaling(const nlohmann::json& j, const std::string& file) {
  using Kind = kernels::RopeScaling::Kind;
  kernels::RopeScaling s;
  const auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null())
    return s;
  const std::string key = file + ": config key \"rope_scaling\"";
  if (!it->is_object())
    throw FormatError(expected_found(key, "null or an object", it->dump()));
  const std::string type = it->contains("rope_type")
                               ? config_optional<std::string>(*it, key, "rope_type", "")
                               : config_optional<std::string>(*it, key, "type", "");
  if (type == "default")
    return s;
  if (type != "linear" && type != "llama3") {
    throw FormatError(
        expected_found(key + " type", "\"default\", \"linear\" or \"llama3\"", "\"" + type + "\""));
  }
  s.kind = type == "linear" ? Kind::linear : Kind::llama3;
  s.factor = config_number(*it, key, "factor");
  if (s.kind == Kind::llama3) {
    s.low_freq_factor = config_number(*it, key, "low_freq_factor");
    s.high_freq_factor = config_number(*it, key, "high_freq_factor");
    s.original_max_positions =
        static_cast<double>(config_size(*it, key, "original_max_position_embeddings"));
  }
  try {
    kernels::check_rope_scaling(key.c_str(), s);
  } catch (const ArgumentError& e) {
    throw FormatError(e.what());
  }
  return s;
}

// The keys of a Llama-family config.json (model_type "llama", "qwen2", "mistral").
inline void parse_llama_keys(const nlohmann::json& j, const std::string& file, ModelConfig& c) {
  c.d_model = config_size(j, file, "hidden_size");
  c.n_layers = config_size(j, file, "num_hidden_layers");
  c.n_heads = config_size(j, file, "num_attention_heads");
  c.n_kv_heads = j.contains("num_key_value_heads") && !j.at("num_key_value_heads").is_null()
                     ? config_size(j, file, "num_key_value_heads")
                     : c.n_heads;
  if (c.n_heads % c.n_kv_heads != 0) {
    throw FormatError(expected_found(
        file + ": config key \"num_key_value_heads\"",
        "a divisor of num_attention_heads = " + std::to_string(c.n_heads), c.n_kv_heads));
  }
  c.vocab_size = config_size(j, file, "vocab_size");
  c.n_positions = config_size(j, file, "max_position_embeddings");
  c.d_hidden = config_size(j, file, "intermediate_size");
  c.layer_norm_eps = config_number(j, file, "rms_norm_eps");
  c.norm = NormKind::rms_norm;
  const auto act = config_optional<std::string>(j, file, "hidden_act", "silu");
  if (act != "silu") {
    throw FormatError(expected_found(file + ": config key \"hidden_act\"",
                                     "\"silu\" (the SwiGLU MLP)", "\"" + act + "\""));
  }
  c.activation = ActivationKind::swiglu;
  c.parallel_residual = false;
  c.rotary_pct = 1.0;
  c.rotary_base = config_optional<double>(j, file, "rope_theta", 10000.0);
  c.rope_scaling = parse_rope_scaling(j, file);
  c.tied_embeddings = config_optional<bool>(j, file, "tie_word_embeddings", false);
  // Llama: "attention_bias" on q, k, v and o; Qwen2: biases on q, k, v always, none on o;
  // Mistral: none.
  c.attention_bias = c.architecture == Architecture::qwen2 ||
                     (c.architecture == Architecture::llama &&
                      config_optional<bool>(j, file, "attention_bias", false));
  c.attention_output_bias = c.architecture == Architecture::llama && c.attention_bias;
  if (config_optional<bool>(j, file, "mlp_bias", false)) {
    throw FormatError(expected_found(file + ": config key \"mlp_bias\"",
                                     "false (the SwiGLU MLP has no biases)", "true"));
  }
  const auto head_dim = j.find("head_dim");
  if (head_dim != j.end() && !head_dim->is_null() && c.d_model % c.n_heads == 0 &&
      config_size(j, file, "head_dim") != c.d_model / c.n_heads) {
    throw FormatError(expected_found(
        file + ": config key \"head_dim\"",
        "hidden_size / num_attention_heads = " + std::to_string(c.d_model / c.n_heads),
        head_dim->dump()));
  }
  // A sliding window changes attention only beyond its width: the context is bounded by it, so
  // a longer sequence is refused rather than computed as if every position were visible.
  const bool window = c.architecture == Architecture::mistral ||
                      (c.architecture == Architecture::qwen2 &&
                       config_optional<bool>(j, file, "use_sliding_window", false));
  const auto sliding = j.find("sliding_window");
  if (window && sliding != j.end() && !sliding->is_null())
    c.n_positions = std::min(c.n_positions, config_size(j, file, "sliding_window"));
}

}  // namespace detail

/// Parses a Hugging Face config.json for model_type "gpt2", "gpt_neox" or "nlb-sd".
/// GPT-2 keys: n_embd, n_layer, n_head, n_positions (or n_ctx), vocab_size, layer_norm_epsilon,
/// activation_function, n_inner (null = 4·n_embd). "nlb-sd" (docs/model_files.md): the GPT-2
/// keys plus sd_ranks (n_layer positive even integers), sd_filter ("diagonal" or "scalar") and
/// sd_attn_layer_norm (bool); the unembedding is tied. GPT-NeoX keys: hidden_size,
/// num_hidden_layers, num_attention_heads, intermediate_size, max_position_embeddings,
/// vocab_size, layer_norm_eps, hidden_act, rotary_pct, rotary_emb_base (or rope_theta),
/// use_parallel_residual, tie_word_embeddings, attention_bias. Llama family ("llama", "qwen2",
/// "mistral"): hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads (a
/// divisor of the heads; absent = the heads), intermediate_size, max_position_embeddings,
/// vocab_size, rms_norm_eps, hidden_act ("silu"), rope_theta, rope_scaling (none, "default",
/// "linear", "llama3"), tie_word_embeddings, attention_bias (llama), mlp_bias (false), head_dim
/// (= hidden_size / heads), sliding_window (bounds the context of mistral, and of qwen2 with
/// use_sliding_window). Any model type may carry
/// "nlb_mlp_kinds" (docs/linearize.md): n_layers strings "full", "linear" or "gated".
/// Throws FormatError naming the file and key on a missing key, a wrong type, an unknown
/// model_type or an inconsistent shape (d not divisible by the heads).
inline ModelConfig parse_hf_config(const nlohmann::json& j, const std::string& file) {
  if (!j.is_object())
    throw FormatError(file + ": config is not a JSON object");
  const auto model_type = detail::config_optional<std::string>(j, file, "model_type", "");
  ModelConfig c;
  if (model_type == "gpt2" || model_type == "nlb-sd") {
    c.architecture = model_type == "gpt2" ? Architecture::gpt2 : Architecture::nlb_sd;
    c.d_model = detail::config_size(j, file, "n_embd");
    c.n_layers = detail::config_size(j, file, "n_layer");
    c.n_heads = detail::config_size(j, file, "n_head");
    c.vocab_size = detail::config_size(j, file, "vocab_size");
    c.n_positions = j.contains("n_positions") ? detail::config_size(j, file, "n_positions")
                                              : detail::config_size(j, file, "n_ctx");
    c.d_hidden = detail::config_optional<long long>(j, file, "n_inner", 4 * c.d_model);
    c.layer_norm_eps = detail::config_number(j, file, "layer_norm_epsilon");
    c.activation = detail::config_activation(
        file, "activation_function",
        detail::config_optional<std::string>(j, file, "activation_function", "gelu_new"));
    c.parallel_residual = false;
    c.tied_embeddings = detail::config_optional<bool>(j, file, "tie_word_embeddings", true);
    c.attention_bias = true;
    if (c.architecture == Architecture::nlb_sd)
      detail::parse_sd_keys(j, file, c);
  } else if (model_type == "gpt_neox") {
    c.architecture = Architecture::gpt_neox;
    c.d_model = detail::config_size(j, file, "hidden_size");
    c.n_layers = detail::config_size(j, file, "num_hidden_layers");
    c.n_heads = detail::config_size(j, file, "num_attention_heads");
    c.vocab_size = detail::config_size(j, file, "vocab_size");
    c.n_positions = detail::config_size(j, file, "max_position_embeddings");
    c.d_hidden = detail::config_size(j, file, "intermediate_size");
    c.layer_norm_eps = detail::config_number(j, file, "layer_norm_eps");
    c.activation = detail::config_activation(
        file, "hidden_act", detail::config_optional<std::string>(j, file, "hidden_act", "gelu"));
    c.parallel_residual = detail::config_optional<bool>(j, file, "use_parallel_residual", true);
    c.rotary_pct = detail::config_optional<double>(j, file, "rotary_pct", 1.0);
    c.rotary_base = j.contains("rotary_emb_base")
                        ? detail::config_number(j, file, "rotary_emb_base")
                        : detail::config_optional<double>(j, file, "rope_theta", 10000.0);
    c.tied_embeddings = detail::config_optional<bool>(j, file, "tie_word_embeddings", false);
    c.attention_bias = detail::config_optional<bool>(j, file, "attention_bias", true);
    c.attention_output_bias = c.attention_bias;
  } else if (model_type == "llama" || model_type == "qwen2" || model_type == "mistral") {
    c.architecture = model_type == "llama"   ? Architecture::llama
                     : model_type == "qwen2" ? Architecture::qwen2
                                             : Architecture::mistral;
    detail::parse_llama_keys(j, file, c);
  } else {
    throw FormatError(detail::expected_found(file + ": config key \"model_type\"",
                                             "\"gpt2\", \"gpt_neox\", \"nlb-sd\", \"llama\", "
                                             "\"qwen2\" or \"mistral\"",
                                             "\"" + model_type + "\""));
  }
  c.mlp_kinds = detail::parse_mlp_kinds(j, file, c.n_layers);
  if (c.d_model % c.n_heads != 0) {
    throw FormatError(detail::expected_found(
        file + ": hidden size " + std::to_string(c.d_model) + " over " + std::to_string(c.n_heads) +
            " heads",
        "a multiple of the head count", "a remainder of " + std::to_string(c.d_model % c.n_heads)));
  }
  if (c.d_hidden <= 0)
    throw FormatError(file + ": MLP hidden size must be positive");
  if (!(c.layer_norm_eps > 0.0)) {
    throw FormatError(detail::expected_found(file + ": layer norm eps", "> 0", c.layer_norm_eps));
  }
  if (c.rotary_pct < 0.0 || c.rotary_pct > 1.0) {
    throw FormatError(
        detail::expected_found(file + ": rotary_pct", "a value in [0, 1]", c.rotary_pct));
  }
  if (c.rotary_dims() % 2 != 0) {
    throw FormatError(
        detail::expected_found(file + ": rotary dims per head", "an even number", c.rotary_dims()));
  }
  return c;
}

/// Reads and parses `path` (a config.json). Throws FormatError naming the file.
inline ModelConfig read_hf_config(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in)
    throw FormatError(path.string() + ": cannot open config file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path.string() + ": config is not valid JSON: " + e.what());
  }
  return parse_hf_config(j, path.string());
}

/// The config of model directory `dir` (`dir`/config.json, as read_hf_config reads it).
/// FormatError when `dir` is not a directory or its config does not parse.
inline ModelConfig read_model_directory_config(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir))
    throw FormatError(dir.string() + ": not a model directory");
  return read_hf_config(dir / "config.json");
}

}  // namespace nlb
