// The heavy operations of backend::cuda (DESIGN.md §4): the same operations as nlb/ops/ for the
// CPU — matrix products with bias, bias rows, elementwise maps, row gathers and scatters, and
// the partition of rows by a gate's scores — on device views, in a Context<backend::cuda>.
//
// Matrix products go to cuBLAS (column-major) through the operand swap: a row-major [r, s]
// matrix with row stride ld is the column-major [s, r] matrix with leading dimension ld, so the
// row-major c = op(a)·op(b) is the column-major cᵀ = op(b)ᵀ·op(a)ᵀ — cuBLAS is called with b
// first, each operand keeping its own transpose flag, and no data is copied. Elementwise work
// and row movement are thrust algorithms with the context's execution policy, over functors
// that run on the device (and on the host in the host-system build, detail/config.cuh).
#pragma once

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/partition.h>
#include <thrust/sequence.h>
#include <algorithm>
#include <type_traits>

#include "nlb/core/checks.hpp"
#include "nlb/core/host_device.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/detail/config.cuh"
#include "nlb/cuda/detail/reference_gemm.cuh"
#include "nlb/cuda/device_matrix.cuh"

namespace nlb::cuda::detail {

/// The cuBLAS call for the row-major c = alpha · op(a) · op(b) + beta · c (the operand swap
/// described above). Shapes: op(a) [m, k], op(b) [k, n], c [m, n].
template <class T>
ColumnMajorGemm<T> column_major_call(DeviceView<const T> a, bool transpose_a, DeviceView<const T> b,
                                     bool transpose_b, DeviceView<T> c, T alpha, T beta) {
  ColumnMajorGemm<T> g;
  g.transpose_a = transpose_b;  // cuBLAS's first operand is b
  g.transpose_b = transpose_a;
  g.m = c.cols;
  g.n = c.rows;
  g.k = transpose_a ? a.rows : a.cols;
  g.alpha = alpha;
  g.a = b.data;
  g.lda = std::max<Index>(1, b.stride);
  g.b = a.data;
  g.ldb = std::max<Index>(1, a.stride);
  g.beta = beta;
  g.c = c.data;
  g.ldc = std::max<Index>(1, c.stride);
  return g;
}

/// Runs one column-major GEMM: cuBLAS on the context's stream, or the reference loops in the
/// host-system build.
template <class T>
void run_gemm(Context<backend::cuda>& ctx, const ColumnMajorGemm<T>& g) {
#if NLB_CUDA_DEVICE_BUILD
  const auto op = [](bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; };
  const auto m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const auto lda = static_cast<int>(g.lda), ldb = static_cast<int>(g.ldb),
             ldc = static_cast<int>(g.ldc);
  if constexpr (std::is_same_v<T, float>)
    check(cublasSgemm(ctx.blas(), op(g.transpose_a), op(g.transpose_b), m, n, k, &g.alpha, g.a, lda,
                      g.b, ldb, &g.beta, g.c, ldc),
          "cublasSgemm");
  else
    check(cublasDgemm(ctx.blas(), op(g.transpose_a), op(g.transpose_b), m, n, k, &g.alpha, g.a, lda,
                      g.b, ldb, &g.beta, g.c, ldc),
          "cublasDgemm");
#else
  (void)ctx;
  reference_gemm(g);
#endif
}

/// Calls f(i) for i in [0, n) with the context's policy.
template <class F>
void for_each_index(Context<backend::cuda>& ctx, Index n, F f) {
  if (n > 0)
    thrust::for_each(ctx.policy(), thrust::counting_iterator<Index>(0),
                     thrust::counting_iterator<Index>(n), f);
}

// Functors over the flat index i of a [rows, cols] view (row i / cols, column i % cols).
template <class T>
struct BroadcastRow {  // y[r, :] = row
  T* y;
  Index cols, stride;
  const T* row;
  NLB_HOST_DEVICE void operator()(Index i) const {
    y[i / cols * stride + i % cols] = row[i % cols];
  }
};
template <class T>
struct AddRow {  // y[r, :] += row
  T* y;
  Index cols, stride;
  const T* row;
  NLB_HOST_DEVICE void operator()(Index i) const {
    y[i / cols * stride + i % cols] += row[i % cols];
  }
};
template <class T, class Op>
struct ApplyInPlace {  // y = op(y)
  T* y;
  Index cols, stride;
  Op op;
  NLB_HOST_DEVICE void operator()(Index i) const {
    T& value = y[i / cols * stride + i % cols];
    value = op(value);
  }
};
template <class T>
struct GatherRows {  // out[r, :] = x[rows[r], :]
  const T* x;
  Index x_stride;
  const Index* rows;
  T* out;
  Index out_stride, cols;
  NLB_HOST_DEVICE void operator()(Index i) const {
    const Index r = i / cols, j = i % cols;
    out[r * out_stride + j] = x[rows[r] * x_stride + j];
  }
};
template <class T>
struct ScatterRows {  // y[rows[r], :] = block[r, :]
  const T* block;
  Index block_stride;
  const Index* rows;
  T* y;
  Index y_stride, cols;
  NLB_HOST_DEVICE void operator()(Index i) const {
    const Index r = i / cols, j = i % cols;
    y[rows[r] * y_stride + j] = block[r * block_stride + j];
  }
};
template <class T>
struct ScoreAbove {  // the gate's test: score > threshold (false for NaN)
  const T* scores;
  Index stride;
  T threshold;
  NLB_HOST_DEVICE bool operator()(Index r) const { return scores[r * stride] > threshold; }
};

}  // namespace nlb::cuda::detail

namespace nlb::ops {

/// c = alpha · op(a) · op(b) + beta · c on the device (cuBLAS; FP32 or FP64 compute, TF32 only
/// when the context asks for it). op(x) is x or xᵀ per flag. Shapes: op(a) [m, k], op(b) [k, n],
/// c [m, n], row-major views with any row stride >= their width; c must not alias a or b.
/// Throws ShapeError on a mismatch. Cost: 2·m·n·k flops.
template <class T>
void gemm(Context<backend::cuda>& ctx, cuda::DeviceView<const T> a, cuda::DeviceView<const T> b,
          cuda::DeviceView<T> c, T alpha = T(1), T beta = T(0), bool transpose_a = false,
          bool transpose_b = false) {
  const Index m = transpose_a ? a.cols : a.rows, k = transpose_a ? a.rows : a.cols;
  const Index k_b = transpose_b ? b.cols : b.rows, n = transpose_b ? b.rows : b.cols;
  check_dim("ops::gemm (cuda): inner dimensions of op(a) and op(b)", k, k_b);
  check_dim("ops::gemm (cuda): rows of c (rows of op(a))", m, c.rows);
  check_dim("ops::gemm (cuda): cols of c (cols of op(b))", n, c.cols);
  if (m == 0 || n == 0)
    return;
  cuda::detail::run_gemm(
      ctx, cuda::detail::column_major_call(a, transpose_a, b, transpose_b, c, alpha, beta));
}

/// y = x · w + bias (bias [1, n] added to every row), as one accumulating product over rows
/// preset to the bias. Shapes: x [m, k], w [k, n], y [m, n]. Cost: 2·m·n·k flops.
template <class T>
void gemm_bias(Context<backend::cuda>& ctx, cuda::DeviceView<const T> x,
               cuda::DeviceView<const T> w, cuda::DeviceView<const T> bias, cuda::DeviceView<T> y) {
  check_dim("ops::gemm_bias (cuda): bias rows", 1, bias.rows);
  check_dim("ops::gemm_bias (cuda): bias width (cols of w)", w.cols, bias.cols);
  check_dim("ops::gemm_bias (cuda): cols of y", w.cols, y.cols);
  cuda::detail::for_each_index(ctx, y.rows * y.cols,
                               cuda::detail::BroadcastRow<T>{y.data, y.cols, y.stride, bias.data});
  gemm(ctx, x, w, y, T(1), T(1));
}

/// y[r, :] += row for every row r. Shapes: y [m, n], row [1, n]. O(m n).
template <class T>
void add_row(Context<backend::cuda>& ctx, cuda::DeviceView<T> y, cuda::DeviceView<const T> row) {
  check_dim("ops::add_row (cuda): row width", y.cols, row.cols);
  cuda::detail::for_each_index(ctx, y.rows * y.cols,
                               cuda::detail::AddRow<T>{y.data, y.cols, y.stride, row.data});
}

/// y = op(y) elementwise, op a functor of nlb/kernels/elementwise.hpp (or any functor whose
/// call operator runs on the device). O(size).
template <class T, class Op>
void transform(Context<backend::cuda>& ctx, cuda::DeviceView<T> y, Op op) {
  cuda::detail::for_each_index(ctx, y.rows * y.cols,
                               cuda::detail::ApplyInPlace<T, Op>{y.data, y.cols, y.stride, op});
}

/// out[r, :] = x[rows[r], :] for r < count (rows: device memory). out [count, d]. O(count d).
template <class T>
void gather_rows(Context<backend::cuda>& ctx, cuda::DeviceView<const T> x, const Index* rows,
                 cuda::DeviceView<T> out) {
  check_dim("ops::gather_rows (cuda): width", x.cols, out.cols);
  cuda::detail::for_each_index(
      ctx, out.rows * out.cols,
      cuda::detail::GatherRows<T>{x.data, x.stride, rows, out.data, out.stride, out.cols});
}

/// y[rows[r], :] = block[r, :] for r < block.rows (rows: device memory, no index twice). O(n d).
template <class T>
void scatter_rows(Context<backend::cuda>& ctx, cuda::DeviceView<const T> block, const Index* rows,
                  cuda::DeviceView<T> y) {
  check_dim("ops::scatter_rows (cuda): width", y.cols, block.cols);
  cuda::detail::for_each_index(
      ctx, block.rows * block.cols,
      cuda::detail::ScatterRows<T>{block.data, block.stride, rows, y.data, y.stride, y.cols});
}

/// Writes the row indices 0 .. n-1 of scores [n, 1] to rows[0, n), the rows with
/// score > threshold first, each group in ascending order (a stable partition), and returns how
/// many scored above. NaN scores count as not above. O(n).
template <class T>
Index partition_rows(Context<backend::cuda>& ctx, cuda::DeviceView<const T> scores, T threshold,
                     Index* rows) {
  check_dim("ops::partition_rows (cuda): scores cols", 1, scores.cols);
  const Index n = scores.rows;
  if (n == 0)
    return 0;
  thrust::sequence(ctx.policy(), rows, rows + n);
  Index* middle =
      thrust::stable_partition(ctx.policy(), rows, rows + n,
                               cuda::detail::ScoreAbove<T>{scores.data, scores.stride, threshold});
  return static_cast<Index>(middle - rows);
}

}  // namespace nlb::ops
