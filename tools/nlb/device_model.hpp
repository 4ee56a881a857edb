// --device for the commands that run forward passes (eval, forward, generate, budget): the model
// on a compute device, behind a small interface, so that the CUDA code is one nvcc-compiled file
// and the rest of nlb stays plain C++. That file (device_cuda.cu) is a module nlb loads only when
// --device cuda is given (device_loader.cpp): linked into nlb, cuBLAS's start-up alone took 0.4 s
// and 200 MB of every nlb run, `nlb help` included. Without the CUDA backend device_none.cpp
// stands in for the loader.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "nlb/analysis/variant_engine.hpp"
#include "nlb/model/taps.hpp"
#include "nlb/model/transformer.hpp"

namespace nlb::cli {

/// The forward passes of one model on a device, with one KV cache for decoding.
class DeviceRunner {
 public:
  virtual ~DeviceRunner() = default;
  /// Logits [T, vocab] of `tokens`; with use_cache the tokens follow the cached ones.
  virtual void forward(std::span<const std::int32_t> tokens, RowMatrix<float>& logits,
                       bool use_cache) = 0;
  /// Empties the KV cache.
  virtual void reset_cache() = 0;
  virtual Index cache_length() const = 0;
  virtual Index cache_capacity() const = 0;
};

/// The host model uploaded to the first CUDA device. Throws DeviceError naming why no device is
/// usable (no driver, no device, no kernel image), UsageError when this nlb was built without
/// the CUDA backend.
std::unique_ptr<DeviceRunner> make_cuda_runner(const Transformer<float>& host);

/// The budget pipeline's forward passes and timings on the first CUDA device: run_budget's
/// engine (nlb/analysis/variant_engine.hpp) and the device objects it refers to, which `owner`
/// keeps alive. Throws as make_cuda_runner.
struct DeviceEngine {
  std::shared_ptr<void> owner;
  VariantEngine<float> engine;
};
DeviceEngine make_cuda_variant_engine(const Transformer<float>& host);

/// What the CUDA module (device_cuda.cu) exports under the C name cuda_module_entry_symbol: its
/// two factories, which make_cuda_runner and make_cuda_variant_engine call.
struct CudaModuleEntry {
  std::unique_ptr<DeviceRunner> (*make_runner)(const Transformer<float>& host);
  DeviceEngine (*make_variant_engine)(const Transformer<float>& host);
};
inline constexpr const char* cuda_module_entry_symbol = "nlb_cuda_module_entry";

/// A device model with the host model's calling conventions, for evaluate_perplexity() and
/// generate() (nlb/model/loss.hpp, sampling.hpp): forward(tokens, logits, ws[, taps, cache]).
/// Its cache is the runner's one cache (make_cache() empties it).
class DeviceModel {
 public:
  using Scalar = float;
  struct Workspace {};  // the runner keeps its device workspace
  class Cache {
   public:
    explicit Cache(const DeviceRunner* runner) : runner_(runner) {}
    Index length() const { return runner_->cache_length(); }
    Index capacity() const { return runner_->cache_capacity(); }

   private:
    const DeviceRunner* runner_;
  };

  DeviceModel(std::unique_ptr<DeviceRunner> runner, const ModelConfig& config)
      : runner_(std::move(runner)), config_(config) {}

  void forward(std::span<const std::int32_t> tokens, RowMatrix<float>& logits, Workspace&) const {
    runner_->forward(tokens, logits, false);
  }
  void forward(std::span<const std::int32_t> tokens, RowMatrix<float>& logits, Workspace&, NoTaps,
               Cache*) const {
    runner_->forward(tokens, logits, true);
  }
  Cache make_cache() const {
    runner_->reset_cache();
    return Cache(runner_.get());
  }
  const ModelConfig& config() const { return config_; }

 private:
  std::unique_ptr<DeviceRunner> runner_;
  ModelConfig config_;
};

}  // namespace nlb::cli
