// nlb info: what a model directory holds and what loading it takes, from config.json, the
// safetensors headers and the tokenizer files; no weights are read.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "common.hpp"
#include "nlb/model/model_summary.hpp"
#include "nlb/ops/gemm.hpp"

namespace nlb::cli {
namespace {

// 1234567 -> "1 234 567" (the spacing of the reports).
std::string grouped(std::uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ' ';
    out += digits[i];
  }
  return out;
}

// Bytes in binary units with three significant figures ("3.21 MiB").
std::string size_text(std::uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.3g %s", value, units[unit]);
  return text;
}

struct TokenizerInfo {
  std::string kind;      // "byte-level", "tokenizer.json", "vocab.json + merges.txt", "none"
  Index vocabulary = 0;  // ids the tokenizer defines (0 when it has none)
};

TokenizerInfo describe_tokenizer(const std::filesystem::path& dir, const ModelConfig& config) {
  if (config.vocab_size <= 256)
    return {"byte-level", 256};
#if NLB_WITH_TEXT
  const auto files = text::find_tokenizer_files(dir);
  if (files == text::TokenizerFiles::none)
    return {"none", 0};
  // Loaded (not just found) so that a malformed file is reported here, as a run would.
  const text::Tokenizer* tokenizer = model_tokenizer(dir, config);
  return {
      files == text::TokenizerFiles::tokenizer_json ? "tokenizer.json" : "vocab.json + merges.txt",
      tokenizer != nullptr ? tokenizer->vocab_size() : 0};
#else
  (void)dir;
  return {"unknown (this nlb was built without tokenizers)", 0};
#endif
}

// The parts that differ between the families (docs/architectures.md): norm, MLP, key/value
// heads, positions.
std::string norm_text(const ModelConfig& c) {
  return c.norm == NormKind::rms_norm ? "RMSNorm" : "LayerNorm";
}
std::string mlp_text(const ModelConfig& c) {
  return c.activation == ActivationKind::swiglu      ? "SwiGLU (gate, up, down)"
         : c.activation == ActivationKind::gelu_tanh ? "GELU (tanh)"
                                                     : "GELU (erf)";
}
std::string position_text(const ModelConfig& c) {
  if (c.rotary_dims() == 0)
    return c.architecture == Architecture::nlb_sd ? "learned (S-D attention)" : "learned";
  using Kind = kernels::RopeScaling::Kind;
  const auto& s = c.rope_scaling;
  char base[64];
  std::snprintf(base, sizeof base, "%g", c.rotary_base);
  return "rotary over " + std::to_string(c.rotary_dims()) + " of " + std::to_string(c.head_dim()) +
         " head dims, base " + base +
         (s.kind == Kind::linear   ? ", linear scaling"
          : s.kind == Kind::llama3 ? ", llama3 scaling"
                                   : "");
}

std::string mlp_kinds_text(const ModelConfig& c) {
  Index linear = 0;
  Index gated = 0;
  for (Index l = 0; l < c.n_layers; ++l) {
    linear += c.mlp_kind(l) == MlpKind::linear;
    gated += c.mlp_kind(l) == MlpKind::gated;
  }
  if (linear == 0 && gated == 0)
    return "every layer full";
  return std::to_string(c.n_layers - linear - gated) + " full, " + std::to_string(linear) +
         " linear, " + std::to_string(gated) + " gated";
}

// What a forward holds besides the weights: one full-context window's logits [T, vocab]
// (float32); its activations are much smaller.
std::uint64_t logits_bytes(const ModelConfig& c) {
  return static_cast<std::uint64_t>(c.n_positions) * static_cast<std::uint64_t>(c.vocab_size) *
         sizeof(float);
}

// Which library runs the matrix products here (docs/ops.md), and whether it really does.
struct GemmInfo {
  std::string provider = gemm_provider::name<backend::cpu::gemm>();
  bool in_use = ops::gemm_provider_in_use(backend::cpu{});
};

nlohmann::json info_json(const std::filesystem::path& dir, const ModelSummary& s,
                         const TokenizerInfo& tokenizer, const GemmInfo& gemm) {
  const ModelConfig& c = s.config;
  nlohmann::json dtypes = nlohmann::json::object();
  for (const auto& [dtype, share] : s.by_dtype) {
    dtypes[std::string(io::to_string(dtype))] = {
        {"tensors", share.tensors}, {"elements", share.elements}, {"bytes", share.bytes}};
  }
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : s.files)
    files.push_back(
        {{"file", f.path.filename().string()}, {"bytes", f.bytes}, {"tensors", f.tensors}});
  return {{"model", dir.string()},
          {"architecture", to_string(c.architecture)},
          {"layers", c.n_layers},
          {"d_model", c.d_model},
          {"heads", c.n_heads},
          {"key_value_heads", c.kv_heads()},
          {"norm", norm_text(c)},
          {"mlp", mlp_text(c)},
          {"position", position_text(c)},
          {"d_hidden", c.d_hidden},
          {"context", c.n_positions},
          {"vocab_size", c.vocab_size},
          {"tied_embeddings", c.tied_embeddings},
          {"parameters", s.parameters},
          {"buffer_elements", s.buffer_elements},
          {"files", files},
          {"dtypes", dtypes},
          {"tokenizer", {{"kind", tokenizer.kind}, {"vocabulary", tokenizer.vocabulary}}},
          {"memory",
           {{"weights_float32_bytes", s.weight_bytes<float>()},
            {"weights_float64_bytes", s.weight_bytes<double>()},
            {"logits_per_window_bytes", logits_bytes(c)}}},
          {"gemm", {{"provider", gemm.provider}, {"in_use", gemm.in_use}}}};
}

// The architecture, parameters, files and dtypes, one line each.
void print_model_lines(const std::filesystem::path& dir, const ModelSummary& s) {
  const ModelConfig& c = s.config;
  std::printf("model         %s\n", dir.string().c_str());
  std::printf(
      "architecture  %s: %lld layers, d %lld, %lld heads, MLP %lld, context %lld, "
      "vocabulary %lld; %s\n",
      to_string(c.architecture), static_cast<long long>(c.n_layers),
      static_cast<long long>(c.d_model), static_cast<long long>(c.n_heads),
      static_cast<long long>(c.d_hidden), static_cast<long long>(c.n_positions),
      static_cast<long long>(c.vocab_size), mlp_kinds_text(c).c_str());
  std::printf("blocks        %s, %s MLP, %lld key/value heads%s; positions %s\n",
              norm_text(c).c_str(), mlp_text(c).c_str(), static_cast<long long>(c.kv_heads()),
              c.kv_heads() != c.n_heads ? " (grouped-query)" : "", position_text(c).c_str());
  std::printf("parameters    %s (%s embeddings)\n",
              grouped(static_cast<std::uint64_t>(s.parameters)).c_str(),
              c.tied_embeddings ? "tied" : "separate");
  for (const auto& f : s.files) {
    std::printf("file          %s: %s bytes (%s), %lld tensors\n",
                f.path.filename().string().c_str(), grouped(f.bytes).c_str(),
                size_text(f.bytes).c_str(), static_cast<long long>(f.tensors));
  }
  for (const auto& [dtype, share] : s.by_dtype) {
    std::printf("dtype         %s: %lld tensor%s, %s elements, %s\n",
                std::string(io::to_string(dtype)).c_str(), static_cast<long long>(share.tensors),
                share.tensors == 1 ? "" : "s",
                grouped(static_cast<std::uint64_t>(share.elements)).c_str(),
                size_text(share.bytes).c_str());
  }
  if (s.buffer_elements > 0) {
    std::printf("buffers       %s elements of stored masks / rotary tables (not loaded)\n",
                grouped(static_cast<std::uint64_t>(s.buffer_elements)).c_str());
  }
}

// The tokenizer, the memory loading takes and the GEMM provider, one line each.
void print_run_lines(const ModelSummary& s, const TokenizerInfo& tokenizer, const GemmInfo& gemm) {
  const ModelConfig& c = s.config;
  std::printf("tokenizer     %s", tokenizer.kind.c_str());
  if (tokenizer.vocabulary > 0 && c.vocab_size > 256)
    std::printf(" (%lld ids)", static_cast<long long>(tokenizer.vocabulary));
  std::printf("\n");
  std::printf(
      "memory        weights %s as float32 (eval, forward, generate, budget, spectrum)\n"
      "              or %s as float64 (linearize); plus %s of logits per %lld-token "
      "window\n",
      size_text(s.weight_bytes<float>()).c_str(), size_text(s.weight_bytes<double>()).c_str(),
      size_text(logits_bytes(c)).c_str(), static_cast<long long>(c.n_positions));
  if (gemm.in_use) {
    std::printf("gemm          %s\n", gemm.provider.c_str());
  } else {
    std::printf(
        "gemm          %s has no kernels for this CPU: products run in Eigen%s "
        "(docs/ops.md)\n",
        gemm.provider.c_str(), gemm.provider == "openblas" ? "; set OPENBLAS_CORETYPE" : "");
  }
}

}  // namespace

int run_info(const std::vector<std::string>& argv) {
  const Args args(argv, {"model"}, {"json"});
  const std::filesystem::path dir = args.get("model", default_model().string());
  const ModelSummary s = summarize_model(dir);
  const TokenizerInfo tokenizer = describe_tokenizer(dir, s.config);
  const GemmInfo gemm;
  if (args.flag("json")) {
    std::printf("%s\n", info_json(dir, s, tokenizer, gemm).dump(2).c_str());
    return 0;
  }
  print_model_lines(dir, s);
  print_run_lines(s, tokenizer, gemm);
  return 0;
}

}  // namespace nlb::cli
