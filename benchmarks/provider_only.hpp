// Runs a benchmark with every matrix product in the BLAS provider: kernels::small_gemm off
// (ops::set_small_gemm) for the life of the object, so that both are measured side by side.
#pragma once

#include "nlb/ops/gemm.hpp"

namespace nlb::bench {

struct ProviderOnly {
  ProviderOnly() { nlb::ops::set_small_gemm(false); }
  ~ProviderOnly() { nlb::ops::set_small_gemm(true); }
  ProviderOnly(const ProviderOnly&) = delete;
  ProviderOnly& operator=(const ProviderOnly&) = delete;
};

}  // namespace nlb::bench
