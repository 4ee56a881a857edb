// Where one nlb run's forward passes go: a model on a backend with the context it runs in, seen
// through one small interface — the analyses' VariantRunner (perplexity, the budget pipeline,
// the attention conversions), a forward pass that returns host logits (nlb forward) and
// generation with a KV cache (nlb generate). Written once, as a template over the backend: nlb
// instantiates it for the CPU (float or 16-bit weights), the CUDA module (device_cuda.cu) for
// backend::cuda, and every command runs the same code wherever its passes run. A translation
// unit that instantiates it for backend::cuda includes nlb/cuda.cuh first.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "nlb/analysis/variant_runner.hpp"
#include "nlb/model/sampling.hpp"

namespace nlb::cli {

/// One model where the passes run (the host model itself, a copy with other weight storage, a
/// copy on a device).
class ModelSession {
 public:
  using Tokens = std::span<const std::int32_t>;
  /// Sees each generated token; false ends the generation (generate(), model/sampling.hpp).
  using OnToken = std::function<bool(std::int32_t)>;

  virtual ~ModelSession() = default;

  /// The runner of the analyses, on this session's model and context.
  virtual VariantRunner<float>& runner() = 0;
  /// Logits [T, vocab] of `tokens` (positions 0 … T−1) in host memory.
  virtual void forward(Tokens tokens, RowMatrix<float>& logits) = 0;
  /// nlb::generate (model/sampling.hpp): up to `count` tokens after `prompt`.
  virtual std::vector<std::int32_t> generate(Tokens prompt, Index count, TokenSampler& sampler,
                                             const OnToken& on_token) = 0;
};

/// The host model `host` on Backend: ModelRunner<float, Backend> (the host model itself on
/// backend::cpu, a copy in Backend's storage or memory otherwise) and the context it runs in,
/// made from `context_args`. The context comes first, so a missing device throws (DeviceError)
/// before anything touches it. One workspace serves every forward(). `host` must outlive it.
template <class Backend>
class BackendSession final : public ModelSession {
  using Model = Transformer<float, Backend>;

 public:
  template <class... ContextArgs>
  explicit BackendSession(const Transformer<float>& host, ContextArgs... context_args)
      : ctx_(context_args...), runner_(ctx_, host) {}

  VariantRunner<float>& runner() override { return runner_; }

  void forward(Tokens tokens, RowMatrix<float>& logits) override {
    if constexpr (backend::is_host<Backend>) {
      runner_.backend_model().forward(ctx_, tokens, logits, ws_);
    } else {
      runner_.backend_model().forward(ctx_, tokens, logits_, ws_);
      logits = ops::to_host(ctx_, logits_);  // [T, vocab]
    }
  }

  std::vector<std::int32_t> generate(Tokens prompt, Index count, TokenSampler& sampler,
                                     const OnToken& on_token) override {
    return nlb::generate(ctx_, runner_.backend_model(), prompt, count, sampler, on_token);
  }

 private:
  Context<Backend> ctx_;
  ModelRunner<float, Backend> runner_;
  typename Model::Workspace ws_;
  typename Model::Logits logits_;  // a device's logits before they are read back
};

}  // namespace nlb::cli
