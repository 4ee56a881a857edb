// Loads an "nlb-sd" model directory (models/tiny-sd: GPT-2's layout with S–D attention,
// PAPERS §B2; written by tools/python/nlb_reference/sd_model.py) into a Dynamic Transformer
// whose layers hold S–D attention slots. load_model<T>(dir) (load_model.hpp) dispatches
// here for model_type "nlb-sd".
//
// Strict like hf_loader.hpp (docs/model_files.md): every expected tensor must be present with
// the shape the config implies and every tensor in the file must be used, otherwise FormatError
// naming the file, the tensor, what was expected and what was found.
#pragma once

#include <filesystem>

#include "nlb/model/config.hpp"
#include "nlb/model/detail/sd_tensors.hpp"
#include "nlb/model/detail/tensor_source.hpp"
#include "nlb/model/transformer.hpp"

namespace nlb {

/// Reads an "nlb-sd" model directory (config.json + model.safetensors) as a Dynamic-size
/// Transformer<T> whose attention slots hold SDAttention with the configured filter, per-layer
/// ranks (config "sd_ranks") and, when "sd_attn_layer_norm" is false, no pre-attention
/// LayerNorm. Weights are converted from F32, F16, BF16 or F64 to T.
/// Throws FormatError naming file, tensor (or config key), expected and found: a missing or
/// unexpected tensor, a wrong shape (e.g. a routing factor whose r is not rank / 2), or a
/// config that is not "nlb-sd". Cost: O(parameters).
template <class T, class Backend = backend::cpu>
Transformer<T, Backend> load_sd_model(const std::filesystem::path& dir) {
  const ModelConfig config = read_model_directory_config(dir);
  if (config.architecture != Architecture::nlb_sd) {
    throw FormatError(detail::expected_found((dir / "config.json").string() + ": model_type",
                                             "\"nlb-sd\"", "another model type"));
  }
  return detail::read_every_tensor(dir, [&config](detail::TensorSource& src) {
    return detail::read_sd_model<T, Backend>(src, config);
  });
}

#ifdef NLB_EXTERN_MODEL_INSTANCES
// Compiled once in tools/instances/model_instances.cpp (docs/architecture.md, "Compile time").
extern template Transformer<float> load_sd_model<float>(const std::filesystem::path&);
extern template Transformer<double> load_sd_model<double>(const std::filesystem::path&);
#endif

}  // namespace nlb
