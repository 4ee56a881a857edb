// The column-major GEMM of the host-system build: cuBLAS's ?gemm contract, in plain loops.
// Internal to nlb/cuda.
//
// In the host-system build (detail/config.cuh) the row-major products of nlb/cuda/ops.cuh reach
// this function with exactly the arguments they pass to cuBLAS on a GPU — the swapped operands,
// their transposes and leading dimensions — so a wrong swap or leading dimension fails the
// tests on any machine, not only on a GPU.
#pragma once

#include "nlb/core/matrix.hpp"

namespace nlb::cuda::detail {

/// One call of BLAS ?gemm in column-major terms: C = alpha · op(A) · op(B) + beta · C with
/// op(A) [m, k], op(B) [k, n], C [m, n]; element (i, j) of a column-major matrix X with leading
/// dimension ld is X[i + j·ld]. As in BLAS, C is not read when beta == 0.
template <class T>
struct ColumnMajorGemm {
  bool transpose_a = false;
  bool transpose_b = false;
  Index m = 0, n = 0, k = 0;
  T alpha = T(1);
  const T* a = nullptr;
  Index lda = 1;
  const T* b = nullptr;
  Index ldb = 1;
  T beta = T(0);
  T* c = nullptr;
  Index ldc = 1;
};

/// Evaluates `g` on the host (accumulating in T, in order of k). O(m n k).
template <class T>
void reference_gemm(const ColumnMajorGemm<T>& g) {
  for (Index j = 0; j < g.n; ++j) {
    for (Index i = 0; i < g.m; ++i) {
      T sum = T(0);
      for (Index p = 0; p < g.k; ++p) {
        const T a = g.transpose_a ? g.a[p + i * g.lda] : g.a[i + p * g.lda];
        const T b = g.transpose_b ? g.b[j + p * g.ldb] : g.b[p + j * g.ldb];
        sum += a * b;
      }
      T& c = g.c[i + j * g.ldc];
      c = g.beta == T(0) ? g.alpha * sum : g.alpha * sum + g.beta * c;
    }
  }
}

}  // namespace nlb::cuda::detail
