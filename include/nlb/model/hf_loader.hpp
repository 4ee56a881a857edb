// Loads a Hugging Face model directory (config.json + model.safetensors, or a sharded
// model.safetensors.index.json) of a GPT2LMHeadModel, GPTNeoXForCausalLM or a Llama-family
// model (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM) into ModelWeights.
//
// The mapping from Hugging Face names to our parameters is explicit and strict
// (docs/model_files.md): every expected tensor must be present with the shape the config implies,
// every tensor in the file must be used or be a known non-parameter buffer, otherwise
// FormatError naming the file, the tensor, what was expected and what was found.
#pragma once

#include <filesystem>

#include "nlb/core.hpp"
#include "nlb/model/config.hpp"
#include "nlb/model/detail/gpt2_tensors.hpp"
#include "nlb/model/detail/llama_tensors.hpp"
#include "nlb/model/detail/neox_tensors.hpp"
#include "nlb/model/detail/tensor_source.hpp"
#include "nlb/model/weights.hpp"

namespace nlb {

/// Reads `dir`/config.json and the model's safetensors into ModelWeights<T, S> (weights converted
/// from F32, F16, BF16 or F64 to T). The large matrices are in storage S, each converted as it is
/// read (so a 16-bit model never holds the float copy of all its weights); with storage::mapped
/// the ones the file holds as T's values in our layout (GPT-2's Conv1D weights and embeddings,
/// GPT-NeoX's embeddings) stay where the mapping has them, nothing copied. Throws FormatError
/// naming file, tensor, expected and found.
template <class T, class S = storage::f32>
ModelWeights<T, S> load_model_weights(const std::filesystem::path& dir) {
  const ModelConfig config = read_model_directory_config(dir);
  if (config.architecture == Architecture::nlb_sd) {
    throw ArgumentError(
        detail::expected_found("load_model_weights: " + dir.string(),
                               "a GPT-2, GPT-NeoX or Llama-family model (dense attention)",
                               "an \"nlb-sd\" model (S–D attention; load it with load_model)"));
  }
  return detail::read_every_tensor(dir, [&config](detail::TensorSource& src) {
    if (is_llama_family(config.architecture))
      return detail::read_llama<T, S>(src, config);
    return config.architecture == Architecture::gpt2 ? detail::read_gpt2<T, S>(src, config)
                                                     : detail::read_gpt_neox<T, S>(src, config);
  });
}

#ifdef NLB_EXTERN_MODEL_INSTANCES
// Compiled once in tools/instances/model_instances.cpp (docs/architecture.md, "Compile time").
extern template ModelWeights<float> load_model_weights<float>(const std::filesystem::path&);
extern template ModelWeights<double> load_model_weights<double>(const std::filesystem::path&);
#endif

}  // namespace nlb
