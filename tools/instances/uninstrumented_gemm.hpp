// Eigen's GEMM kernel and packing routines, instantiated once without sanitizer instrumentation.
//
// A sanitizer build (NLB_UNINSTRUMENTED_GEMM, on in the asan preset) force-includes this header
// into every in-tree translation unit, so the instrumented code calls the float and double
// instantiations that uninstrumented_gemm.cpp compiles with -fno-sanitize=all instead of
// compiling its own. Why: instrumented with -fsanitize=address,undefined, Eigen's register-
// blocked micro-kernel runs 72 times slower (1.7 vs 121 GFLOP/s for [512, 768] x [768, 768] on
// one core, GCC 12 -O1), which was most of the sanitizer suite's time (docs/testing.md). Only
// third-party inner loops over packed copies lose their checks: the product's shapes are still
// checked by Eigen's asserts in the instrumented caller, and the packing reads the operands the
// caller's instrumented code described (rows, columns, strides).
#pragma once

#include <Eigen/Core>

// PREFIX is `extern` (this header: a declaration) or empty (uninstrumented_gemm.cpp: the
// definition). The template arguments are the ones Eigen's general_matrix_matrix_product uses
// (GeneralMatrixMatrix.h): a column-major result mapper with unit inner stride (a row-major
// result is computed as its transpose), const operand mappers of either storage order.
#define NLB_GEMM_INSTANCES(PREFIX, T)                                                             \
  PREFIX template struct Eigen::internal::gebp_kernel<                                            \
      T, T, Eigen::Index,                                                                         \
      Eigen::internal::blas_data_mapper<T, Eigen::Index, Eigen::ColMajor, Eigen::Unaligned, 1>,   \
      Eigen::internal::gebp_traits<T, T>::mr, Eigen::internal::gebp_traits<T, T>::nr, false,      \
      false>;                                                                                     \
  PREFIX template struct Eigen::internal::gemm_pack_lhs<                                          \
      T, Eigen::Index, Eigen::internal::const_blas_data_mapper<T, Eigen::Index, Eigen::ColMajor>, \
      Eigen::internal::gebp_traits<T, T>::mr, Eigen::internal::gebp_traits<T, T>::LhsProgress,    \
      Eigen::internal::gebp_traits<T, T>::LhsPacket4Packing, Eigen::ColMajor>;                    \
  PREFIX template struct Eigen::internal::gemm_pack_lhs<                                          \
      T, Eigen::Index, Eigen::internal::const_blas_data_mapper<T, Eigen::Index, Eigen::RowMajor>, \
      Eigen::internal::gebp_traits<T, T>::mr, Eigen::internal::gebp_traits<T, T>::LhsProgress,    \
      Eigen::internal::gebp_traits<T, T>::LhsPacket4Packing, Eigen::RowMajor>;                    \
  PREFIX template struct Eigen::internal::gemm_pack_rhs<                                          \
      T, Eigen::Index, Eigen::internal::const_blas_data_mapper<T, Eigen::Index, Eigen::ColMajor>, \
      Eigen::internal::gebp_traits<T, T>::nr, Eigen::ColMajor>;                                   \
  PREFIX template struct Eigen::internal::gemm_pack_rhs<                                          \
      T, Eigen::Index, Eigen::internal::const_blas_data_mapper<T, Eigen::Index, Eigen::RowMajor>, \
      Eigen::internal::gebp_traits<T, T>::nr, Eigen::RowMajor>;

#ifndef NLB_UNINSTRUMENTED_GEMM_DEFINITIONS
NLB_GEMM_INSTANCES(extern, float)
NLB_GEMM_INSTANCES(extern, double)
#endif
