// Where a command's forward passes run; see session.hpp.
#include "session.hpp"

#include <algorithm>
#include <thread>

#include "device_model.hpp"
#include "ranks.hpp"

#if defined(NLB_HAVE_OPENBLAS)
// OpenBLAS's own function (declared in its cblas.h; repeated here for older headers).
extern "C" int openblas_get_num_threads(void);
#endif

namespace nlb::cli {

int host_threads() {
  static const int threads = [] {
#if defined(NLB_HAVE_OPENBLAS)
    if constexpr (std::is_same_v<backend::cpu::gemm, gemm_provider::openblas> ||
                  std::is_same_v<backend::cpu::gemm, gemm_provider::measured>)
      return std::max(1, openblas_get_num_threads());
#endif
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return threads;
}

std::string weights_option(const Args& args) {
  const std::string weights = args.choice("weights", "f32", {"f32", "f16", "bf16", "q8"});
  if (weights != "f32" && args.get("device", "cpu") == "cuda")
    throw UsageError("--weights " + weights + " runs on the CPU; --device cuda keeps f32 weights");
  return weights;
}

bool cuda_device_option(const Args& args) {
  const bool cuda = args.choice("device", "cpu", {"cpu", "cuda"}) == "cuda";
  refuse_device_with_ranks(cuda);
  return cuda;
}

std::unique_ptr<ModelSession> make_session(const Transformer<float>& host, bool cuda,
                                           const std::string& weights) {
  if (cuda)
    return make_cuda_session(host);
  if (weights == "f16")
    return std::make_unique<BackendSession<backend::with_weights<storage::f16>>>(host,
                                                                                 host_threads());
  if (weights == "bf16")
    return std::make_unique<BackendSession<backend::with_weights<storage::bf16>>>(host,
                                                                                  host_threads());
  if (weights == "q8")
    return std::make_unique<BackendSession<backend::with_weights<storage::q8>>>(host,
                                                                                host_threads());
  return std::make_unique<BackendSession<backend::cpu>>(host, host_threads());
}

AnalysisRunner::AnalysisRunner(VariantRunner<float>& local) : runner_(&local) {
  if (ranks().size() > 1)
    runner_ = &sharded_.emplace(local, ranks());
}

}  // namespace nlb::cli
