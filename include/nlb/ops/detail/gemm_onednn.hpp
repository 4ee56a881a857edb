// The oneDNN provider: dnnl_sgemm, oneDNN's row-major float GEMM with kernels generated for the
// CPU it runs on (nlb/ops/gemm.hpp). Included only when NLB_HAVE_ONEDNN is defined, i.e. the
// program links nlbudget::onednn (Debian: libdnnl-dev, oneDNN 2.6, built on OpenMP). oneDNN has
// no double GEMM, so double products stay with Eigen (provider_takes).
#pragma once

#include <dnnl.h>

#include <omp.h>  // oneDNN's threads are its OpenMP runtime's; nlbudget::onednn links libgomp

#include <string>
#include <type_traits>

#include "nlb/core/errors.hpp"
#include "nlb/core/gemm_provider.hpp"
#include "nlb/ops/detail/blas_operand.hpp"

namespace nlb::ops::detail {

template <>
inline constexpr bool provider_takes<gemm_provider::onednn, double> = false;

/// c = alpha · a · b + beta · c. dnnl_sgemm is row-major: a row-major c is computed as it is,
/// a column-major one as cᵀ = bᵀ · aᵀ (the same memory seen row-major); an operand stored the
/// other way than the call sees it is passed transposed (no copies). Throws Error when oneDNN
/// reports a failure.
inline void provider_gemm(gemm_provider::onednn, const BlasMatrix<const float>& a,
                          const BlasMatrix<const float>& b, const BlasMatrix<float>& c, float alpha,
                          float beta) {
  const auto trans = [&](const BlasMatrix<const float>& m) {
    return m.row_major == c.row_major ? 'N' : 'T';
  };
  const dnnl_status_t status = c.row_major
                                   ? dnnl_sgemm(trans(a), trans(b), c.rows, c.cols, a.cols, alpha,
                                                a.data, a.ld, b.data, b.ld, beta, c.data, c.ld)
                                   : dnnl_sgemm(trans(b), trans(a), c.cols, c.rows, a.cols, alpha,
                                                b.data, b.ld, a.data, a.ld, beta, c.data, c.ld);
  if (status != dnnl_success)
    throw Error("ops::gemm (oneDNN provider): dnnl_sgemm failed with status " +
                std::to_string(static_cast<int>(status)));
}

/// oneDNN generates its kernels for the CPU at run time (JIT): always usable.
inline bool provider_usable(gemm_provider::onednn) {
  return true;
}

/// oneDNN's OpenMP runtime (GNU OpenMP, which nlbudget::onednn links) takes the count for the
/// parallel regions this thread starts, in a program built with OpenMP or without (before, a
/// program without -fopenmp left oneDNN on every core whatever the context said).
inline void provider_set_threads(gemm_provider::onednn, int threads) {
  omp_set_num_threads(threads);
}

}  // namespace nlb::ops::detail
