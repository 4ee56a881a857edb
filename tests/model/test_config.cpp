// Hugging Face config.json parsing (model/config.hpp): both model types, defaults, and errors.
#include <boost/test/unit_test.hpp>

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
  j["model_type"] = "llama";
  BOOST_CHECK_EXCEPTION(nlb::parse_hf_config(j, "config.json"), nlb::FormatError,
                        [](const auto& e) { return has(e, "found \"llama\""); });
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
