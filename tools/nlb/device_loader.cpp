// --device cuda in an nlb built with the CUDA backend: the nvcc-compiled module (device_cuda.cu)
// is loaded on first use, so that runs without --device cuda never load cuBLAS
// (device_model.hpp says why).
#include <dlfcn.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "device_model.hpp"
#include "nlb/core/errors.hpp"

namespace nlb::cli {

namespace {

// Where the module may lie: beside the program (the build tree), then where `cmake --install`
// puts it relative to the program (NLB_CUDA_MODULE_INSTALL_RELPATH, from tools/nlb/CMakeLists).
std::vector<std::filesystem::path> cuda_module_candidates() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    return {NLB_CUDA_MODULE_NAME};  // the loader's own search path
  const auto dir = exe.parent_path();
  return {dir / NLB_CUDA_MODULE_NAME, dir / NLB_CUDA_MODULE_INSTALL_RELPATH / NLB_CUDA_MODULE_NAME};
}

// The module's entry at `path`, or null with why not appended to `tried`.
const CudaModuleEntry* open_cuda_module(const std::filesystem::path& path, std::string& tried) {
  if (path.has_parent_path() && !std::filesystem::exists(path)) {
    tried += "\n  " + path.string() + ": not found";
    return nullptr;
  }
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    tried += "\n  " + path.string() + ": " + (why ? why : "dlopen failed");
    return nullptr;
  }
  using EntryFunction = const CudaModuleEntry* (*)();
  auto* function = reinterpret_cast<EntryFunction>(::dlsym(handle, cuda_module_entry_symbol));
  if (function == nullptr) {
    tried += "\n  " + path.string() + ": no symbol " + cuda_module_entry_symbol;
    return nullptr;
  }
  const CudaModuleEntry* entry = function();
  if (!(entry->abi == ModuleAbi{})) {
    throw Error("--device cuda: the CUDA module " + path.string() +
                " was built with other options than this nlb (" +
                ModuleAbi{}.difference(entry->abi) +
                "): build both with the same NLB_ISA_FLAGS (docs/cuda.md)");
  }
  return entry;
}

const CudaModuleEntry& cuda_module() {
  // Loaded once and never unloaded: the sessions it makes run its code.
  static const CudaModuleEntry* entry = [] {
    std::string tried;
    for (const auto& path : cuda_module_candidates()) {
      if (const CudaModuleEntry* found = open_cuda_module(path, tried))
        return found;
    }
    throw Error("--device cuda: the CUDA module " + std::string(NLB_CUDA_MODULE_NAME) +
                " could not be loaded (it is built and installed with nlb; docs/cuda.md):" + tried);
  }();
  return *entry;
}

}  // namespace

std::unique_ptr<ModelSession> make_cuda_session(const Transformer<float>& host) {
  return cuda_module().make_session(host);
}

}  // namespace nlb::cli
