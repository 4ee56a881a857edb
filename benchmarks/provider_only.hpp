// Contexts for the side-by-side benchmarks (nlb/core/context.hpp): every matrix product in the
// BLAS provider (kernels::small_gemm off), and the provider's threads given back after a
// benchmark that ran on several.
#pragma once

#include "nlb/core/context.hpp"
#include "nlb/ops/gemm.hpp"

namespace nlb::bench {

/// `ctx` with kernels::small_gemm off (Context::set_small_gemm): ops::gemm gives every product to
/// the backend's provider, so that the ...ProviderOnly benchmarks measure both side by side.
template <class Backend>
Context<Backend> provider_only(Context<Backend> ctx) {
  ctx.set_small_gemm(false);
  return ctx;
}

/// Gives the provider's pool (Eigen's thread count for gemm_provider::eigen) one thread again
/// when a benchmark that ran its context on more ends:
/// the pools are process-wide, and the next benchmark's untimed setup and the products a BLAS
/// provider leaves to Eigen would otherwise run on the threads left over.
template <class Backend>
struct OneThreadAfter {
  OneThreadAfter() = default;
  ~OneThreadAfter() { ops::apply_threads(Context<Backend>(1)); }
  OneThreadAfter(const OneThreadAfter&) = delete;
  OneThreadAfter& operator=(const OneThreadAfter&) = delete;
};

}  // namespace nlb::bench
