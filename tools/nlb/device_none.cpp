// --device cuda in an nlb built without the CUDA backend (no nvcc, or NLB_ENABLE_CUDA=OFF).
#include "common.hpp"
#include "device_model.hpp"

namespace nlb::cli {

std::unique_ptr<ModelSession> make_cuda_session(const Transformer<float>&) {
  throw UsageError(
      "--device cuda: this nlb was built without the CUDA backend (configure with nvcc found "
      "and NLB_ENABLE_CUDA=ON; docs/cuda.md)");
}

}  // namespace nlb::cli
