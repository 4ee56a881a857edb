// --device cuda (device_model.hpp): the model as Transformer<float, backend::cuda>
// (nlb/cuda/transformer.cuh), and the budget pipeline's passes (nlb/cuda/variant_engine.cuh),
// compiled by nvcc into the module nlb loads when --device cuda is given (device_loader.cpp).
#include <memory>

#include "device_model.hpp"
#include "nlb/cuda/transformer.cuh"
#include "nlb/cuda/variant_engine.cuh"

namespace nlb::cli {

namespace {

class CudaRunner final : public DeviceRunner {
 public:
  // The context first: it throws DeviceError with the reason before anything touches the device.
  explicit CudaRunner(const Transformer<float>& host)
      : ctx_(), model_(to_backend(backend::cuda{}, host)), cache_(model_.make_cache()) {}

  void forward(std::span<const std::int32_t> tokens, RowMatrix<float>& logits,
               bool use_cache) override {
    model_.forward(ctx_, tokens, logits, ws_, use_cache ? &cache_ : nullptr);
  }
  void reset_cache() override { cache_.clear(); }
  Index cache_length() const override { return cache_.length(); }
  Index cache_capacity() const override { return cache_.capacity(); }

 private:
  Context<backend::cuda> ctx_;
  Transformer<float, backend::cuda> model_;
  Transformer<float, backend::cuda>::Workspace ws_;
  cuda::KVCache<float> cache_;
};

// The context first, as in CudaRunner.
struct CudaVariants {
  explicit CudaVariants(const Transformer<float>& host) : ctx(), variants(ctx, host) {}
  Context<backend::cuda> ctx;
  cuda::DeviceVariants<float> variants;
};

DeviceEngine make_variant_engine(const Transformer<float>& host) {
  auto owner = std::make_shared<CudaVariants>(host);
  auto engine = owner->variants.engine();
  return {std::move(owner), std::move(engine)};
}

std::unique_ptr<DeviceRunner> make_runner(const Transformer<float>& host) {
  return std::make_unique<CudaRunner>(host);
}

}  // namespace

}  // namespace nlb::cli

// The module's one exported name (device_model.hpp): a C name, so that dlsym finds it unmangled.
extern "C" __attribute__((visibility("default"))) const nlb::cli::CudaModuleEntry*
nlb_cuda_module_entry() {
  static const nlb::cli::CudaModuleEntry entry{&nlb::cli::make_runner,
                                               &nlb::cli::make_variant_engine};
  return &entry;
}
