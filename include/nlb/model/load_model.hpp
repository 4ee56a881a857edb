// load_model<T>(dir): any model directory the library reads, as a Dynamic-size Transformer.
// Dispatches on config.json's model_type to the architecture's loader (hf_loader.hpp for
// GPT-2 and GPT-NeoX, sd_loader.hpp for nlb-sd).
#pragma once

#include <filesystem>

#include "nlb/model/config.hpp"
#include "nlb/model/hf_loader.hpp"
#include "nlb/model/sd_loader.hpp"
#include "nlb/model/transformer.hpp"
#include "nlb/model/weights.hpp"

namespace nlb {

/// Loads a model directory as a Dynamic-size Transformer (each layer's MlpSlot holds its Mlp,
/// its AttentionSlot the dense attention; for model_type "nlb-sd", load_sd_model's S–D
/// attention). The weights are read into Backend::weights storage tensor by tensor
/// (load_model_weights): with backend::with_weights<storage::mapped>, a GPT-2 checkpoint's F32
/// weights are used where the file's mapping holds them (docs/safetensors.md, "Memory").
template <class T, class Backend = backend::cpu>
Transformer<T, Backend> load_model(const std::filesystem::path& dir) {
  if (std::filesystem::is_directory(dir) &&
      read_hf_config(dir / "config.json").architecture == Architecture::nlb_sd) {
    return load_sd_model<T, Backend>(dir);
  }
  return make_transformer<T, Backend>(load_model_weights<T, typename Backend::weights>(dir));
}

#ifdef NLB_EXTERN_MODEL_INSTANCES
// Compiled once in tools/instances/model_instances.cpp (docs/architecture.md, "Compile time").
extern template Transformer<float> load_model<float>(const std::filesystem::path&);
extern template Transformer<double> load_model<double>(const std::filesystem::path&);
#endif

}  // namespace nlb
