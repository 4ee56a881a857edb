// --device cuda (device_model.hpp): the session of the model copied to the first CUDA device,
// BackendSession<backend::cuda> (model_session.hpp, the same code as on the host), compiled by
// nvcc into the module nlb loads when --device cuda is given (device_loader.cpp).
#include "nlb/cuda.cuh"  // first: the components call the device ops by qualified name

#include <memory>

#include "device_model.hpp"

namespace nlb::cli {

namespace {

// The context comes first in the session: it throws DeviceError with the reason before anything
// touches the device.
std::unique_ptr<ModelSession> make_session(const Transformer<float>& host) {
  return std::make_unique<BackendSession<backend::cuda>>(host);
}

}  // namespace

}  // namespace nlb::cli

// The module's one exported name (device_model.hpp): a C name, so that dlsym finds it unmangled.
extern "C" __attribute__((visibility("default"))) const nlb::cli::CudaModuleEntry*
nlb_cuda_module_entry() {
  static const nlb::cli::CudaModuleEntry entry{nlb::cli::ModuleAbi{}, &nlb::cli::make_session};
  return &entry;
}
