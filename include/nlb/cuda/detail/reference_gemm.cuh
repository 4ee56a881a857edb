// The column-major GEMM of the host-system build: cuBLAS's ?gemm contract, evaluated by Eigen.
// Internal to nlb/cuda.
//
// In the host-system build (detail/config.cuh) the row-major products of nlb/cuda/ops.cuh reach
// this function with exactly the arguments they pass to cuBLAS on a GPU — the swapped operands,
// their transposes and leading dimensions — so a wrong swap or leading dimension fails the
// tests on any machine, not only on a GPU. The operands are Eigen maps over those very
// pointers and leading dimensions (no copy), so the check costs a blocked GEMM, not plain loops
// (those were 82% of the host-system model suite's time).
#pragma once

#include <algorithm>
#include <string>

#include "nlb/core/errors.hpp"
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

namespace reference_gemm_detail {

template <class T>
using ColumnMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

// BLAS (and cuBLAS, CUBLAS_STATUS_INVALID_VALUE) refuse a leading dimension below
// max(1, rows) of the stored column-major matrix; so does this (ArgumentError).
inline void check_leading_dimension(const char* name, Index ld, Index rows) {
  const Index least = std::max<Index>(1, rows);
  if (ld < least)
    throw ArgumentError(
        nlb::detail::expected_found(std::string("reference_gemm: leading dimension of ") + name,
                                    "at least " + std::to_string(least), ld));
}

// The stored [rows, cols] column-major operand at p with leading dimension ld. The last element
// is read once here, outside Eigen's kernel (which the sanitizer builds leave uninstrumented),
// so an operand that runs past its allocation is reported by AddressSanitizer.
template <class T>
Eigen::Map<const ColumnMajorMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>> operand(
    const char* name, const T* p, Index rows, Index cols, Index ld) {
  check_leading_dimension(name, ld, rows);
  if (rows > 0 && cols > 0) {
    volatile T last = p[(rows - 1) + (cols - 1) * ld];
    (void)last;
  }
  return {p, rows, cols, Eigen::OuterStride<>(ld)};
}

}  // namespace reference_gemm_detail

/// Evaluates `g` on the host with Eigen's GEMM over maps of the given pointers and leading
/// dimensions. Throws ArgumentError for a leading dimension BLAS would refuse.
/// O(m n k).
template <class T>
void reference_gemm(const ColumnMajorGemm<T>& g) {
  using reference_gemm_detail::operand;
  const auto a = operand("A", g.a, g.transpose_a ? g.k : g.m, g.transpose_a ? g.m : g.k, g.lda);
  const auto b = operand("B", g.b, g.transpose_b ? g.n : g.k, g.transpose_b ? g.k : g.n, g.ldb);
  reference_gemm_detail::check_leading_dimension("C", g.ldc, g.m);
  if (g.m == 0 || g.n == 0)
    return;
  Eigen::Map<reference_gemm_detail::ColumnMajorMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>> c(
      g.c, g.m, g.n, Eigen::OuterStride<>(g.ldc));
  const auto update = [&](const auto& op_a, const auto& op_b) {
    if (g.beta == T(0))
      c.noalias() = g.alpha * (op_a * op_b);  // C is not read (BLAS)
    else
      c = g.alpha * (op_a * op_b) + g.beta * c;
  };
  if (g.transpose_a && g.transpose_b)
    update(a.transpose(), b.transpose());
  else if (g.transpose_a)
    update(a.transpose(), b);
  else if (g.transpose_b)
    update(a, b.transpose());
  else
    update(a, b);
}

}  // namespace nlb::cuda::detail
