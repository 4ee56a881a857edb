// Where a command's forward passes run, chosen in one place: the model's session
// (model_session.hpp) on --device cpu|cuda with --weights f32|f16|bf16|q8, its CPU threads, and the
// runner of the analyses over the ranks of an MPI run. The commands then call the same code on
// every choice.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "args.hpp"
#include "model_session.hpp"
#include "nlb/distributed/sharded_runner.hpp"

namespace nlb::cli {

/// The threads of the CPU contexts: what the GEMM provider would use by itself, read before any
/// context applies its own — OpenBLAS's count (OPENBLAS_NUM_THREADS, else every core) with the
/// OpenBLAS or the measured provider (which has OpenBLAS among its libraries), else
/// every core (std::thread::hardware_concurrency). So a run keeps the provider's threads of
/// earlier nlb versions, on one process and on each MPI rank alike (mpirun -x
/// OPENBLAS_NUM_THREADS=1: one per rank, docs/scaling.md).
int host_threads();

/// --weights f32|f16|bf16|q8 of eval, forward, generate and budget: how the session keeps the
/// weight matrices (nlb/core/weight_storage.hpp; 16 bits halve what decoding reads, q8 quarters
/// it). UsageError for another name, or for anything but f32 with --device cuda (the CUDA backend
/// keeps float weights).
std::string weights_option(const Args& args);

/// --device cpu|cuda: true for cuda. UsageError for another name, or for cuda under an MPI
/// launcher (one process per GPU is not built).
bool cuda_device_option(const Args& args);

/// The session of `host`: on the first CUDA device (make_cuda_session, device_model.hpp) with
/// `cuda`, else on the CPU with host_threads() threads, the weight matrices kept as `weights`
/// says (f16 / bf16: a rounded copy; q8: a copy quantized in blocks). `host` must outlive it.
std::unique_ptr<ModelSession> make_session(const Transformer<float>& host, bool cuda,
                                           const std::string& weights = "f32");

/// The runner of a command's analyses: the session's own on one process; under an MPI launcher
/// a ShardedRunner around it, which spreads the windows over the ranks and gives every rank the
/// one-process result (docs/scaling.md).
class AnalysisRunner {
 public:
  explicit AnalysisRunner(VariantRunner<float>& local);
  AnalysisRunner(const AnalysisRunner&) = delete;
  AnalysisRunner& operator=(const AnalysisRunner&) = delete;

  VariantRunner<float>& get() { return *runner_; }

 private:
  std::optional<distributed::ShardedRunner<float>> sharded_;
  VariantRunner<float>* runner_;
};

}  // namespace nlb::cli
