// cuBLAS's column-major GEMM contract evaluated on the host by Eigen: the products of nlb/cuda's
// host-system build (nlb/cuda/detail/config.cuh, docs/cuda.md).
//
// There the row-major products of nlb/cuda/ops.cuh reach column_major_gemm with exactly the
// arguments they pass to cuBLAS on a GPU — the swapped operands, their transposes, leading
// dimensions and batch strides — so a wrong swap or stride fails the tests on any machine. The
// operands are Eigen maps over those pointers (no copy): the check costs a blocked GEMM, not
// plain loops (those were 82% of the host-system model suite's time).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <string>

#include "nlb/core/errors.hpp"
#include "nlb/core/matrix.hpp"

namespace nlb::kernels {

/// One cuBLAS gemm call in column-major terms: C = alpha · op(A) · op(B) + beta · C with
/// op(A) [m, k], op(B) [k, n], C [m, n]; element (i, j) of a column-major X with leading
/// dimension ld is X[i + j·ld]. C is not read when beta == 0. With batch > 1, the strided batch:
/// product b uses A + b·stride_a, B + b·stride_b, C + b·stride_c.
template <class T>
struct ColumnMajorGemm {
  bool transpose_a = false, transpose_b = false;
  Index m = 0, n = 0, k = 0;
  T alpha = T(1);
  const T* a = nullptr;
  Index lda = 1;
  const T* b = nullptr;
  Index ldb = 1;
  T beta = T(0);
  T* c = nullptr;
  Index ldc = 1;
  Index batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

namespace detail {

template <class T>
using ColumnMajor = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>,
                               Eigen::Unaligned, Eigen::OuterStride<>>;

// cuBLAS refuses (CUBLAS_STATUS_INVALID_VALUE) a leading dimension below max(1, rows) of the
// stored matrix; so does this (ArgumentError).
inline void check_leading_dimension(const char* name, Index ld, Index rows) {
  const Index least = std::max<Index>(1, rows);
  if (ld < least)
    throw ArgumentError(
        nlb::detail::expected_found(std::string("column_major_gemm: leading dimension of ") + name,
                                    "at least " + std::to_string(least), ld));
}

// The stored [rows, cols] operand at p. Its last element is read here, outside Eigen's kernel
// (which the sanitizer builds leave uninstrumented), so AddressSanitizer reports an operand
// that runs past its allocation.
template <class T>
ColumnMajor<T> column_major_operand(const char* name, const T* p, Index rows, Index cols,
                                    Index ld) {
  check_leading_dimension(name, ld, rows);
  if (rows > 0 && cols > 0) {
    volatile T last = p[(rows - 1) + (cols - 1) * ld];
    (void)last;
  }
  return {p, rows, cols, Eigen::OuterStride<>(ld)};
}

}  // namespace detail

/// Evaluates `g` on the host with Eigen's GEMM over maps of its pointers, one product per batch
/// entry. ArgumentError for a leading dimension cuBLAS would refuse. O(batch · m · n · k).
template <class T>
void column_major_gemm(const ColumnMajorGemm<T>& g) {
  using detail::column_major_operand;
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  detail::check_leading_dimension("C", g.ldc, g.m);
  for (Index i = 0; i < g.batch; ++i) {
    const auto a = column_major_operand("A", g.a + i * g.stride_a, g.transpose_a ? g.k : g.m,
                                        g.transpose_a ? g.m : g.k, g.lda);
    const auto b = column_major_operand("B", g.b + i * g.stride_b, g.transpose_b ? g.n : g.k,
                                        g.transpose_b ? g.k : g.n, g.ldb);
    if (g.m == 0 || g.n == 0)
      return;
    // op(A), op(B) as plain matrices: a copy of O(m k + k n), next to the O(m n k) product.
    const Matrix op_a = g.transpose_a ? Matrix(a.transpose()) : Matrix(a);
    const Matrix op_b = g.transpose_b ? Matrix(b.transpose()) : Matrix(b);
    Eigen::Map<Matrix, Eigen::Unaligned, Eigen::OuterStride<>> c(g.c + i * g.stride_c, g.m, g.n,
                                                                 Eigen::OuterStride<>(g.ldc));
    if (g.beta == T(0))
      c.noalias() = g.alpha * (op_a * op_b);  // C is not read (BLAS)
    else
      c = g.alpha * (op_a * op_b) + g.beta * c;
  }
}

}  // namespace nlb::kernels
