// Hugging Face config.json parsing (model/config.hpp): GPT-2, GPT-NeoX and the Llama family's
// published configs, defaults, and errors.
#include <boost/test/unit_test.hpp>
#include <functional>

#include "nlb/model/config.hpp"

namespace {

const char* gpt2_small = R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
  "n_positions": 1024, "n_ctx": 1024, "vocab_size": 50257, "layer_norm_epsilon": 1e-05,
  "activation_function": "gelu_new", "n_inner": null})";

const char* pythia_160m = R"({"model_type": "gpt_neox", "hidden_size": 768,
  "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
  "max_position_embeddings": 2048, "vocab_size": 50304, "layer_norm_eps": 1e-05,
  "hidden_act": "gelu", "rotary_pct": 0.25, "rotary_emb_base": 10000,
  "use_parallel_residual": true, "tie_word_embeddings": false})";

// As published on the Hugging Face Hub (meta-llama/Llama-3.2-1B, Qwen/Qwen2.5-0.5B,
// mistralai/Mistral-7B-v0.1), keys that do not affect the model left out.
const char* llama_32_1b = R"({"model_type": "llama", "attention_bias": false, "head_dim": 64,
  "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "num_attention_heads": 32,
  "num_hidden_layers": 16, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "vocab_size": 128256})";

const char* qwen25_05b = R"({"model_type": "qwen2", "hidden_act": "silu", "hidden_size": 896,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
  "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
  "tie_word_embeddings": true, "use_sliding_window": false, "vocab_size": 151936})";

const char* mistral_7b = R"({"model_type": "mistral", "hidden_act": "silu", "hidden_size": 4096,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
  "vocab_size": 32000})";

bool has(const nlb::FormatError& e, const std::string& text) {
  return std::string(e.what()).find(text) != std::string::npos;
}

nlb::ModelConfig parse(const std::string& text) {
  return nlb::parse_hf_config(nlohmann::json::parse(text), "config.json");
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt2_config) {
  const auto c = parse(gpt2_small);
  BOOST_TEST((c.architecture == nlb::Architecture::gpt2));
  BOOST_TEST(c.d_model == 768);
  BOOST_TEST(c.d_hidden == 3072);  // n_inner null → 4 d
  BOOST_TEST(c.head_dim() == 64);
  BOOST_TEST(c.rotary_dims() == 0);
  BOOST_TEST(c.tied_embeddings);
  BOOST_TEST(!c.parallel_residual);
  BOOST_TEST((c.activation == nlb::ActivationKind::gelu_tanh));
}

BOOST_AUTO_TEST_CASE(gpt_neox_config) {
  const auto c = parse(pythia_160m);
  BOOST_TEST((c.architecture == nlb::Architecture::gpt_neox));
  BOOST_TEST(c.rotary_dims() == 16);  // int(64 · 0.25)
  BOOST_TEST(c.parallel_residual);
  BOOST_TEST(!c.tied_embeddings);
  BOOST_TEST(c.n_positions == 2048);
  BOOST_TEST((c.activation == nlb::ActivationKind::gelu_erf));
}

BOOST_AUTO_TEST_CASE(config_errors_name_the_key) {
  auto j = nlohmann::json::parse(gpt2_small);
  j.erase("n_embd");
  BOOST_CHECK_EXCEPTION(nlb::parse_hf_config(j, "config.json"), nlb::FormatError,
                        [](const auto& e) { return has(e, "missing config key \"n_embd\""); });
  j = nlohmann::json::parse(gpt2_small);
  j["model_type"] = "falcon";
  BOOST_CHECK_EXCEPTION(nlb::parse_hf_config(j, "config.json"), nlb::FormatError,
                        [](const auto& e) { return has(e, "found \"falcon\""); });
  j = nlohmann::json::parse(gpt2_small);
  j["n_head"] = 7;
  BOOST_CHECK_EXCEPTION(nlb::parse_hf_config(j, "config.json"), nlb::FormatError,
                        [](const auto& e) { return has(e, "multiple of the head count"); });
  j = nlohmann::json::parse(gpt2_small);
  j["n_layer"] = "twelve";
  BOOST_CHECK_EXCEPTION(nlb::parse_hf_config(j, "config.json"), nlb::FormatError,
                        [](const auto& e) { return has(e, "expected a positive integer"); });
  j = nlohmann::json::parse(gpt2_small);
  j["activation_function"] = "relu";
  BOOST_CHECK_THROW(nlb::parse_hf_config(j, "config.json"), nlb::FormatError);
  BOOST_CHECK_THROW(nlb::read_hf_config("/nonexistent/config.json"), nlb::FormatError);
}

BOOST_AUTO_TEST_CASE(llama_family_published_configs) {
  const auto llama = parse(llama_32_1b);
  BOOST_TEST((llama.architecture == nlb::Architecture::llama));
  BOOST_TEST(nlb::is_llama_family(llama.architecture));
  BOOST_TEST((llama.norm == nlb::NormKind::rms_norm));
  BOOST_TEST((llama.activation == nlb::ActivationKind::swiglu));
  BOOST_TEST(llama.mlp_matrices() == 3);
  BOOST_TEST(llama.head_dim() == 64);
  BOOST_TEST(llama.kv_heads() == 8);
  BOOST_TEST(llama.kv_width() == 512);
  BOOST_TEST(llama.rotary_dims() == 64);  // the whole head
  BOOST_TEST(llama.rotary_base == 500000.0);
  BOOST_TEST((llama.rope_scaling.kind == nlb::kernels::RopeScaling::Kind::llama3));
  BOOST_TEST(llama.rope_scaling.factor == 32.0);
  BOOST_TEST(llama.rope_scaling.original_max_positions == 8192.0);
  BOOST_TEST(llama.tied_embeddings);
  BOOST_TEST(!llama.attention_bias);
  BOOST_TEST(!llama.attention_output_bias);
  BOOST_TEST(!llama.parallel_residual);
  BOOST_TEST(llama.n_positions == 131072);
  BOOST_TEST(llama.layer_norm_eps == 1e-5);

  const auto qwen = parse(qwen25_05b);
  BOOST_TEST((qwen.architecture == nlb::Architecture::qwen2));
  BOOST_TEST(qwen.head_dim() == 64);
  BOOST_TEST(qwen.kv_heads() == 2);
  BOOST_TEST(qwen.attention_bias);  // q, k, v
  BOOST_TEST(!qwen.attention_output_bias);
  BOOST_TEST((qwen.rope_scaling.kind == nlb::kernels::RopeScaling::Kind::none));
  BOOST_TEST(qwen.n_positions == 32768);  // use_sliding_window false: the window is not used

  const auto mistral = parse(mistral_7b);
  BOOST_TEST((mistral.architecture == nlb::Architecture::mistral));
  BOOST_TEST(mistral.kv_heads() == 8);
  BOOST_TEST(!mistral.tied_embeddings);
  BOOST_TEST(!mistral.attention_bias);
  BOOST_TEST(mistral.n_positions == 4096);  // bounded by the sliding window
}

BOOST_AUTO_TEST_CASE(llama_family_config_errors_name_the_key) {
  const auto refused = [](const char* base, const std::function<void(nlohmann::json&)>& edit,
                          const std::string& text) {
    auto j = nlohmann::json::parse(base);
    edit(j);
    BOOST_CHECK_EXCEPTION(nlb::parse_hf_config(j, "config.json"), nlb::FormatError,
                          [&](const auto& e) {
                            BOOST_TEST_MESSAGE(e.what());
                            return has(e, text);
                          });
  };
  refused(
      llama_32_1b, [](auto& j) { j["num_key_value_heads"] = 3; }, "num_key_value_heads");
  refused(
      llama_32_1b, [](auto& j) { j["num_key_value_heads"] = 0; }, "num_key_value_heads");
  refused(
      llama_32_1b, [](auto& j) { j["rope_scaling"]["rope_type"] = "yarn"; }, "\"yarn\"");
  refused(
      llama_32_1b, [](auto& j) { j["rope_scaling"].erase("factor"); }, "\"factor\"");
  refused(
      llama_32_1b, [](auto& j) { j["rope_scaling"]["low_freq_factor"] = 8.0; },
      "llama3 rope scaling");
  refused(
      llama_32_1b, [](auto& j) { j["rope_scaling"] = "llama3"; }, "rope_scaling");
  refused(
      llama_32_1b, [](auto& j) { j["hidden_act"] = "gelu"; }, "hidden_act");
  refused(
      llama_32_1b, [](auto& j) { j["mlp_bias"] = true; }, "mlp_bias");
  refused(
      llama_32_1b, [](auto& j) { j["head_dim"] = 128; }, "head_dim");
  refused(
      llama_32_1b, [](auto& j) { j.erase("rms_norm_eps"); }, "rms_norm_eps");
  refused(
      qwen25_05b, [](auto& j) { j["num_attention_heads"] = 13; }, "num_key_value_heads");
  refused(
      mistral_7b, [](auto& j) { j["sliding_window"] = -1; }, "sliding_window");
  // Qwen2 with its sliding window in use: the context is bounded by it.
  auto windowed = nlohmann::json::parse(qwen25_05b);
  windowed["use_sliding_window"] = true;
  windowed["sliding_window"] = 4096;
  BOOST_TEST(nlb::parse_hf_config(windowed, "config.json").n_positions == 4096);
}
