// --device cuda (eval, forward, generate, budget): the model's session (model_session.hpp) on the
// first CUDA device. The CUDA code is one nvcc-compiled file (device_cuda.cu) in a module that
// nlb loads only when --device cuda is given (device_loader.cpp): linked into nlb, cuBLAS's
// start-up alone took 0.4 s and 200 MB of every nlb run, `nlb help` included. Without the CUDA
// backend device_none.cpp stands in for the loader.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "model_session.hpp"

namespace nlb::cli {

/// The host model uploaded to the first CUDA device, as BackendSession<backend::cuda>. Throws
/// DeviceError naming why no device is usable (no driver, no device, no kernel image), Error when
/// the module cannot be loaded or was built with other options than this nlb, UsageError when
/// this nlb was built without the CUDA backend.
std::unique_ptr<ModelSession> make_cuda_session(const Transformer<float>& host);

/// What nlb and the module must agree on: the module receives the host model and the variants'
/// parts and returns a session nlb calls, so both sides must lay these types out alike. Eigen's
/// alignment follows the ISA flags (EIGEN_MAX_ALIGN_BYTES), and a matrix allocated on one side
/// is freed on the other; the sizes catch any other difference of options (CUDA-NOTES finding 8).
struct ModuleAbi {
  std::size_t eigen_align_bytes = EIGEN_MAX_ALIGN_BYTES;
  std::size_t eigen_static_align_bytes = EIGEN_MAX_STATIC_ALIGN_BYTES;
  std::size_t model_bytes = sizeof(Transformer<float>);
  std::size_t block_bytes = sizeof(DynamicBlock<float>);
  std::size_t variant_bytes = sizeof(ModelVariant<float>);
  std::size_t sampler_bytes = sizeof(TokenSampler);

  bool operator==(const ModuleAbi&) const = default;
  /// "Eigen alignment 64 vs 32 bytes, ..." for the fields that differ (this side first).
  std::string difference(const ModuleAbi& other) const {
    std::string out;
    const auto field = [&](const char* what, std::size_t mine, std::size_t theirs) {
      if (mine != theirs)
        out += std::string(out.empty() ? "" : ", ") + what + " " + std::to_string(mine) + " vs " +
               std::to_string(theirs) + " bytes";
    };
    field("Eigen alignment", eigen_align_bytes, other.eigen_align_bytes);
    field("Eigen static alignment", eigen_static_align_bytes, other.eigen_static_align_bytes);
    field("Transformer<float>", model_bytes, other.model_bytes);
    field("DynamicBlock<float>", block_bytes, other.block_bytes);
    field("ModelVariant<float>", variant_bytes, other.variant_bytes);
    field("TokenSampler", sampler_bytes, other.sampler_bytes);
    return out;
  }
};

/// What the CUDA module (device_cuda.cu) exports under the C name cuda_module_entry_symbol: the
/// options it was built with (checked first) and its factory, which make_cuda_session calls.
struct CudaModuleEntry {
  ModuleAbi abi;
  std::unique_ptr<ModelSession> (*make_session)(const Transformer<float>& host);
};
inline constexpr const char* cuda_module_entry_symbol = "nlb_cuda_module_entry";

}  // namespace nlb::cli
