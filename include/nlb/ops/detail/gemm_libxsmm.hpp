// The LIBXSMM provider: libxsmm_sgemm / libxsmm_dgemm (nlb/ops/gemm.hpp), made for small
// products: LIBXSMM generates a kernel for each small shape it sees (JIT, for the CPU it runs on)
// and hands larger products, and the transposes its kernels do not take, to the BLAS it is linked
// with (OpenBLAS here). Included only when NLB_HAVE_LIBXSMM is defined, i.e. the program links
// nlbudget::libxsmm (Debian: libxsmm-dev 1.17, static libraries, and libopenblas-dev).
#pragma once

#include <type_traits>

// LIBXSMM's two BLAS-style entry points, declared here instead of including <libxsmm.h>, which
// takes about 0.9 s to parse — in every translation unit of a program whose default provider is
// `measured`. Debian's LIBXSMM 1.17 is built with 32-bit BLAS integers (LIBXSMM_ILP64 0);
// tests/ops/test_gemm.cpp includes <libxsmm.h> beside this header, so a different declaration
// there fails to compile, and checks that its int is int.
extern "C" {
void libxsmm_sgemm(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                   const float* alpha, const float* a, const int* lda, const float* b,
                   const int* ldb, const float* beta, float* c, const int* ldc);
void libxsmm_dgemm(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                   const double* alpha, const double* a, const int* lda, const double* b,
                   const int* ldb, const double* beta, double* c, const int* ldc);
}

#include "nlb/core/gemm_provider.hpp"
#include "nlb/ops/detail/blas_operand.hpp"

// OpenBLAS's own function (LIBXSMM's fallback BLAS; declared in its cblas.h).
extern "C" void openblas_set_num_threads(int num_threads);

namespace nlb::ops::detail {

/// c = alpha · a · b + beta · c. LIBXSMM takes the BLAS (column-major) convention: a
/// column-major c is computed as it is, a row-major one as cᵀ = bᵀ · aᵀ (the same memory seen
/// column-major); an operand stored the other way is passed transposed (no copies).
template <class T>
void provider_gemm(gemm_provider::libxsmm, const BlasMatrix<const T>& a,
                   const BlasMatrix<const T>& b, const BlasMatrix<T>& c, T alpha, T beta) {
  const auto trans = [&](const BlasMatrix<const T>& m) {
    return m.row_major == c.row_major ? "N" : "T";
  };
  const auto m = static_cast<int>(c.rows), n = static_cast<int>(c.cols),
             k = static_cast<int>(a.cols), lda = static_cast<int>(a.ld),
             ldb = static_cast<int>(b.ld), ldc = static_cast<int>(c.ld);
  const auto call = [&](auto gemm) {
    if (c.row_major)
      gemm(trans(b), trans(a), &n, &m, &k, &alpha, b.data, &ldb, a.data, &lda, &beta, c.data, &ldc);
    else
      gemm(trans(a), trans(b), &m, &n, &k, &alpha, a.data, &lda, b.data, &ldb, &beta, c.data, &ldc);
  };
  if constexpr (std::is_same_v<T, float>)
    call(libxsmm_sgemm);
  else
    call(libxsmm_dgemm);
}

/// LIBXSMM generates its kernels for the CPU at run time: always usable.
inline bool provider_usable(gemm_provider::libxsmm) {
  return true;
}

/// LIBXSMM's own kernels run on the calling thread; the products it hands on run on OpenBLAS's
/// threads, which get the context's count.
inline void provider_set_threads(gemm_provider::libxsmm, int threads) {
  openblas_set_num_threads(threads);
}

}  // namespace nlb::ops::detail
