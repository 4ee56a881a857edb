// A GPT-2-small-shaped model directory with random weights, shared by the benchmark programs.
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "nlb/io/safetensors_writer.hpp"

namespace nlb::bench {

namespace fs = std::filesystem;

// Writes a GPT-2-small model directory with N(0, 0.02²) weights (LayerNorm gains 1, biases 0)
// once per process and returns its path (12 layers, d 768, 12 heads, vocabulary 50 257,
// 1024 positions, F32).
inline const fs::path& gpt2_small_dir() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / "nlb-bench-gpt2-small";
    fs::create_directories(d);
    const long long V = 50257, P = 1024, D = 768, L = 12;
    std::mt19937_64 rng(1);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    nlb::io::SafetensorsWriter w;
    auto add = [&](const std::string& name, std::vector<std::int64_t> shape, float fill,
                   bool random) {
      std::size_t n = 1;
      for (auto s : shape)
        n *= static_cast<std::size_t>(s);
      std::vector<float> v(n, fill);
      if (random) {
        for (auto& x : v)
          x = normal(rng);
      }
      w.add(name, nlb::io::DType::F32, std::move(shape), std::span<const float>(v));
    };
    add("transformer.wte.weight", {V, D}, 0, true);
    add("transformer.wpe.weight", {P, D}, 0, true);
    for (long long i = 0; i < L; ++i) {
      const std::string p = "transformer.h." + std::to_string(i) + ".";
      add(p + "ln_1.weight", {D}, 1, false);
      add(p + "ln_1.bias", {D}, 0, false);
      add(p + "attn.c_attn.weight", {D, 3 * D}, 0, true);
      add(p + "attn.c_attn.bias", {3 * D}, 0, false);
      add(p + "attn.c_proj.weight", {D, D}, 0, true);
      add(p + "attn.c_proj.bias", {D}, 0, false);
      add(p + "ln_2.weight", {D}, 1, false);
      add(p + "ln_2.bias", {D}, 0, false);
      add(p + "mlp.c_fc.weight", {D, 4 * D}, 0, true);
      add(p + "mlp.c_fc.bias", {4 * D}, 0, false);
      add(p + "mlp.c_proj.weight", {4 * D, D}, 0, true);
      add(p + "mlp.c_proj.bias", {D}, 0, false);
    }
    add("transformer.ln_f.weight", {D}, 1, false);
    add("transformer.ln_f.bias", {D}, 0, false);
    w.write(d / "model.safetensors");
    std::ofstream(d / "config.json")
        << R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,)"
        << R"( "n_positions": 1024, "vocab_size": 50257, "layer_norm_epsilon": 1e-05,)"
        << R"( "activation_function": "gelu_new"})";
    return d;
  }();
  return dir;
}

}  // namespace nlb::bench
