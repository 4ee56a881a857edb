// The operations of backend::cuda (DESIGN.md §4): nlb/ops/*.hpp for the device, same names and
// argument order, on device matrices and views. Here: kernel launchers, products, entrywise and
// row-movement ops, the gate's partition, the scratch (row_ops.cuh: LayerNorm, rotary, embedding,
// attention, losses). Nothing waits unless it reads a value back (the context counts waits).
// Products go to cuBLAS (column-major) through the operand swap: a row-major [r, s] matrix with
// row stride ld is the column-major [s, r] one with leading dimension ld, so the row-major
// c = op(a)·op(b) is the column-major cᵀ = op(b)ᵀ·op(a)ᵀ: cuBLAS gets b first, each operand keeps
// its transpose flag, nothing is copied. Other work is __global__ kernels over functors that
// run on the device and, in the host-system build (detail/config.cuh), as host loops.
#pragma once

// The components call the ops by qualified name (ops::gemm, …); such a call in a template sees only
// the overloads declared before the template, so these must come before any component header.
#if defined(NLB_OPS_CALLERS_INCLUDED)
#error \
    "nlb/cuda: include <nlb/cuda.cuh> (or nlb/cuda/ops.cuh) before the component and model headers"
#endif

#include <thrust/device_vector.h>
#include <thrust/partition.h>
#include <thrust/sequence.h>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlb/core/checks.hpp"
#include "nlb/core/host_device.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/kernels/column_major_gemm.hpp"
#include "nlb/kernels/elementwise_math.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb::cuda {

/// The ops' device buffers (ops::Scratch<cuda, T>: one per component workspace, passed to every
/// op). Grow-only: a call no larger than an earlier one allocates nothing.
template <class T>
struct DeviceScratch {
  std::vector<Index> host_ids;  // [T]: a window's token ids as row indices (embed_rows, losses)
  DeviceMatrix<Index> ids;      // [T, 1]: their device copy
  DeviceMatrix<double> losses;  // [1, T − 1]: next_token_losses, before the read-back
  DeviceMatrix<T> scores;       // causal_attention: [heads · query tile, S]
  DeviceMatrix<T> values, numerators, state, chunk;  // linear_attention (row_ops.cuh)
};

namespace detail {

/// The threads of a row kernel's row: lane `lane` of `count` visits entries lane, lane + count, …;
/// sum()/max() combine the lanes by a warp's shuffles. On the host one lane visits every entry in
/// order: a host-system run adds in the scalar CPU kernel's order.
struct RowLanes {
  int lane = 0, count = 1;
  template <class V>
  NLB_HOST_DEVICE V sum(V v) const {
#if defined(__CUDA_ARCH__)
    for (int offset = 16; offset > 0; offset /= 2)
      v += __shfl_xor_sync(0xffffffffu, v, offset);
#endif
    return v;
  }
  template <class V>
  NLB_HOST_DEVICE V max(V v) const {
#if defined(__CUDA_ARCH__)
    for (int offset = 16; offset > 0; offset /= 2)
      v = kernels::elementwise_math::max(v, __shfl_xor_sync(0xffffffffu, v, offset));
#endif
    return v;
  }
};

#if NLB_CUDA_DEVICE_BUILD
template <class F>
__global__ void element_kernel(F f, Index rows, Index cols) {
  const Index c = Index{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= cols)
    return;
  for (Index r = Index{blockIdx.y} * blockDim.y + threadIdx.y; r < rows;
       r += Index{gridDim.y} * blockDim.y)
    f(r, c);
}
#endif

/// f(r, c) for every entry of a [rows, cols] grid, queued on ctx's stream: one thread per entry,
/// a warp over 32 consecutive columns (coalesced), row and column from a 2-D grid (no division).
template <class F>
void for_each_element(Context<backend::cuda>& ctx, const char* what, Index rows, Index cols,
                      const F& f) {
  if (rows <= 0 || cols <= 0)
    return;
#if NLB_CUDA_DEVICE_BUILD
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32),
                  static_cast<unsigned>(std::min<Index>((rows + 7) / 8, 65535)));
  element_kernel<<<grid, block, 0, ctx.stream()>>>(f, rows, cols);
  check(cudaGetLastError(), what);
#else
  (void)ctx, (void)what;
  for (Index r = 0; r < rows; ++r)
    for (Index c = 0; c < cols; ++c)
      f(r, c);
#endif
}

template <class F>
struct AsRows {  // lane c of the warp that row r runs on
  F f;
  NLB_HOST_DEVICE void operator()(Index r, Index c) const {
    f(r, RowLanes{static_cast<int>(c), 32});
  }
};

/// f(r, lanes) for every row r < rows, queued on ctx's stream: one warp per row (a [rows, 32]
/// grid), so a row's reductions are spread over 32 lanes and its loads coalesced.
template <class F>
void for_each_row(Context<backend::cuda>& ctx, const char* what, Index rows, const F& f) {
#if NLB_CUDA_DEVICE_BUILD
  for_each_element(ctx, what, rows, 32, AsRows<F>{f});
#else
  (void)ctx, (void)what;
  for (Index r = 0; r < rows; ++r)
    f(r, RowLanes{});
#endif
}

/// The cuBLAS call for c_i = alpha · op(a_i) · op(b_i) + beta · c_i, i < batch, row-major,
/// with x_i at x.data() + i · stride_x (heads side by side: the stride is a head's width), by
/// the operand swap (header). Shapes: op(a) [m, k], op(b) [k, n], c [m, n]. Checked before
/// anything runs or is read: ShapeError on a mismatch, ArgumentError past cuBLAS's int.
template <class T>
kernels::ColumnMajorGemm<T> column_major_call(const char* what, DeviceView<const T> a, bool ta,
                                              DeviceView<const T> b, bool tb, DeviceView<T> c,
                                              T alpha, T beta, Index batch = 1, Index stride_a = 0,
                                              Index stride_b = 0, Index stride_c = 0) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "nlb/cuda: products of float or double");
  const Index m = ta ? a.cols() : a.rows(), k = ta ? a.rows() : a.cols();
  const Index k_b = tb ? b.cols() : b.rows(), n = tb ? b.rows() : b.cols();
  if (k != k_b || m != c.rows() || n != c.cols()) {
    check_dim(std::string(what) + ": inner dimensions of the product", k, k_b);
    check_dim(std::string(what) + ": rows of the result", m, c.rows());
    check_dim(std::string(what) + ": columns of the result", n, c.cols());
  }
  const Index lda = std::max<Index>(1, a.outerStride()), ldb = std::max<Index>(1, b.outerStride()),
              ldc = std::max<Index>(1, c.outerStride());
  // cuBLAS takes sizes and leading dimensions as int: a larger one is refused, by name.
  const auto fits = [what](const char* name, Index size) {
    if (size > INT_MAX)
      throw ArgumentError(nlb::detail::expected_found(std::string(what) + ": " + name,
                                                      "at most 2147483647 (cuBLAS's int)", size));
  };
  fits("rows of the result", m), fits("columns of the result", n), fits("inner dimension", k);
  fits("row stride of a", lda), fits("row stride of b", ldb), fits("batch", batch);
  fits("row stride of the result", ldc);
  return {tb,  ta,   n,        m,   k,     alpha,    b.data(), ldb,     a.data(),
          lda, beta, c.data(), ldc, batch, stride_b, stride_a, stride_c};
}

/// Runs a checked call on ctx's stream: cuBLAS, or the reference GEMM in the host-system build.
template <class T>
void run_gemm(Context<backend::cuda>& ctx, const char* what, const kernels::ColumnMajorGemm<T>& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0)
    return;
#if NLB_CUDA_DEVICE_BUILD
  // The compute type carries the context's math mode: TF32 only when it asks for it.
  constexpr bool single = std::is_same_v<T, float>;
  const cudaDataType type = single ? CUDA_R_32F : CUDA_R_64F;
  const cublasComputeType_t compute =
      !single
          ? CUBLAS_COMPUTE_64F
          : (ctx.gemm_math() == GemmMath::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  const auto op = [](bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; };
  const auto i = [](Index v) { return static_cast<int>(v); };  // checked by column_major_call
  check(g.batch == 1
            ? cublasGemmEx(ctx.blas(), op(g.transpose_a), op(g.transpose_b), i(g.m), i(g.n), i(g.k),
                           &g.alpha, g.a, type, i(g.lda), g.b, type, i(g.ldb), &g.beta, g.c, type,
                           i(g.ldc), compute, CUBLAS_GEMM_DEFAULT)
            : cublasGemmStridedBatchedEx(ctx.blas(), op(g.transpose_a), op(g.transpose_b), i(g.m),
                                         i(g.n), i(g.k), &g.alpha, g.a, type, i(g.lda), g.stride_a,
                                         g.b, type, i(g.ldb), g.stride_b, &g.beta, g.c, type,
                                         i(g.ldc), g.stride_c, i(g.batch), compute,
                                         CUBLAS_GEMM_DEFAULT),
        what);
#else
  (void)ctx, (void)what;
  kernels::column_major_gemm(g);
#endif
}

/// column_major_call, then run_gemm: one (batched) product on ctx's stream; no wait.
template <class T>
void product(Context<backend::cuda>& ctx, const char* what, DeviceView<const T> a, bool ta,
             DeviceView<const T> b, bool tb, DeviceView<T> c, T alpha, T beta, Index batch = 1,
             Index stride_a = 0, Index stride_b = 0, Index stride_c = 0) {
  run_gemm(
      ctx, what,
      column_major_call(what, a, ta, b, tb, c, alpha, beta, batch, stride_a, stride_b, stride_c));
}

// ---- entrywise ops: one kernel functor ---------------------------------------------------

/// What Entrywise computes for entry (r, c) of y, with x = a[r, c] and b = b[r, c].
enum class Formula {
  assign,          // y = x
  add,             // y += x
  multiply,        // y *= x
  add_sum,         // y += x + b (x + b first: the parallel-residual block's order)
  scaled_product,  // y = op(x · b): a column scaled by its diagonal entry, then by op's factor
  apply            // y = op(y)
};

/// Formula `formula` at every entry of a grid: every entrywise and row-movement op. y's row is
/// y_rows[r] and x's a_rows[r] (a null list is the identity); a row stride of 0 repeats one row
/// (a bias, a diagonal).
template <class T, Formula formula, class Op>
struct Entrywise {
  T* y;
  const T *a, *b;
  Index y_stride, a_stride, b_stride;
  const Index *a_rows, *y_rows;
  Op op;
  NLB_HOST_DEVICE void operator()(Index r, Index c) const {
    T& out = y[(y_rows ? y_rows[r] : r) * y_stride + c];
    const T x = a ? a[(a_rows ? a_rows[r] : r) * a_stride + c] : T(0);
    if constexpr (formula == Formula::assign)
      out = x;
    else if constexpr (formula == Formula::add)
      out += x;
    else if constexpr (formula == Formula::multiply)
      out *= x;
    else if constexpr (formula == Formula::add_sum)
      out += x + b[r * b_stride + c];
    else if constexpr (formula == Formula::scaled_product)
      out = op(x * b[r * b_stride + c]);
    else
      out = op(out);
  }
};
template <class T>
struct Times {
  T factor;
  NLB_HOST_DEVICE T operator()(T x) const { return x * factor; }
};

/// Queues Entrywise over y's entries (a's rows when y_rows scatters them). No wait.
template <Formula formula, class T, class Op = Times<T>>
void entrywise(Context<backend::cuda>& ctx, const char* what, DeviceView<T> y,
               DeviceView<const T> a, DeviceView<const T> b = {}, Op op = {},
               const Index* a_rows = nullptr, const Index* y_rows = nullptr) {
  for_each_element(ctx, what, y_rows ? a.rows() : y.rows(), y.cols(),
                   Entrywise<T, formula, Op>{y.data(), a.data(), b.data(), y.outerStride(),
                                             a.outerStride(), b.outerStride(), a_rows, y_rows, op});
}

/// A vector's entries repeated on every row of a [rows, cols] grid (a row stride of 0).
template <class T>
DeviceView<const T> repeated(const T* row, Index rows, Index cols) {
  return {row, rows, cols, 0};
}

template <class T>
struct ScoreAbove {  // the gate's test: score > threshold (false for NaN)
  const T* scores;
  Index stride;
  T threshold;
  NLB_HOST_DEVICE bool operator()(Index r) const { return scores[r * stride] > threshold; }
};

/// ShapeError unless `found` has the shape of `expected`.
template <class A, class B>
void check_same_shape(const char* what, const A& expected, const B& found) {
  if (expected.rows() != found.rows() || expected.cols() != found.cols())
    throw ShapeError(nlb::detail::expected_found(
        what, std::to_string(expected.rows()) + " x " + std::to_string(expected.cols()),
        std::to_string(found.rows()) + " x " + std::to_string(found.cols())));
}

/// A device list of row indices (a thrust vector, or a [n, 1] view of one) as a view.
inline DeviceView<const Index> indices(const thrust::device_vector<Index>& rows) {
  return {thrust::raw_pointer_cast(rows.data()), static_cast<Index>(rows.size()), 1, 1};
}
inline DeviceView<const Index> indices(DeviceView<const Index> rows) {
  return rows;
}

/// The data of a vector operand ([1, n], or [n, 1] with contiguous entries); ShapeError unless
/// it has n entries, ArgumentError when they are not contiguous.
template <class M>
const scalar_of<M>* vector_data(const char* what, const M& v, Index n) {
  const auto view = const_view_of(v);
  check_dim(what, n, view.size());
  if (!view.contiguous())
    throw ArgumentError(nlb::detail::expected_found(what, "contiguous entries", "a strided view"));
  return view.data();
}

}  // namespace detail

/// c = a · b, or c += a · b with `accumulate`, by cuBLAS (FP32 or FP64; TF32 only when the
/// context asks). a [m, k], b [k, n], c [m, n], any row strides; c must not alias a or b; the
/// scratch is unused. ShapeError on a mismatch, ArgumentError past cuBLAS's int sizes.
/// Cost: 2·m·n·k flops; no wait.
template <class T, device_operand_of<T> A, device_operand_of<T> B, device_operand_of<T> C>
void gemm(Context<backend::cuda>& ctx, const A& a, const B& b, C&& c, DeviceScratch<T>&,
          bool accumulate = false) {
  detail::product<T>(ctx, "ops::gemm (cuda)", const_view_of(a), false, const_view_of(b), false,
                     writable_view_of(c), T(1), accumulate ? T(1) : T(0));
}

/// c = a · bᵀ, or c += a · bᵀ (b [n, k]: e.g. the unembedding, or a head's keys). As gemm.
template <class T, device_operand_of<T> A, device_operand_of<T> B, device_operand_of<T> C>
void gemm_nt(Context<backend::cuda>& ctx, const A& a, const B& b, C&& c, DeviceScratch<T>&,
             bool accumulate = false) {
  detail::product<T>(ctx, "ops::gemm_nt (cuda)", const_view_of(a), false, const_view_of(b), true,
                     writable_view_of(c), T(1), accumulate ? T(1) : T(0));
}

/// y = x · w + bias (bias [1, n] on every row): the bias broadcast into y, then one accumulating
/// product (cuBLAS forms x·w, then adds y, as the CPU's product-then-bias). x [m, k], w [k, n],
/// y [m, n], all checked before y is written. Cost: 2·m·n·k flops + a pass over y; no wait.
template <class T, device_operand_of<T> X, device_operand_of<T> W, device_operand_of<T> Bias,
          device_operand_of<T> Y>
void gemm_bias(Context<backend::cuda>& ctx, const X& x, const W& w, const Bias& bias, Y&& y,
               DeviceScratch<T>&) {
  constexpr const char* what = "ops::gemm_bias (cuda)";
  const auto out = writable_view_of(y);
  const auto call = detail::column_major_call(what, const_view_of(x), false, const_view_of(w),
                                              false, out, T(1), T(1));
  const T* row = detail::vector_data("ops::gemm_bias (cuda): bias width", bias, out.cols());
  detail::entrywise<detail::Formula::assign>(ctx, what, out,
                                             detail::repeated(row, out.rows(), out.cols()));
  detail::run_gemm(ctx, what, call);
}

/// y += a, elementwise. a, y [m, n]. O(m n); no wait.
template <device_operand A, device_operand_of<scalar_of<A>> Y>
void add(Context<backend::cuda>& ctx, const A& a, Y&& y) {
  const auto out = writable_view_of(y);
  detail::check_same_shape("ops::add (cuda): shape of a", out, const_view_of(a));
  detail::entrywise<detail::Formula::add>(ctx, "ops::add (cuda)", out, const_view_of(a));
}

/// y += a + b, elementwise (a + b first, as the parallel-residual block adds). O(m n); no wait.
template <device_operand A, device_operand_of<scalar_of<A>> B, device_operand_of<scalar_of<A>> Y>
void add(Context<backend::cuda>& ctx, const A& a, const B& b, Y&& y) {
  const auto out = writable_view_of(y);
  detail::check_same_shape("ops::add (cuda): shape of a", out, const_view_of(a));
  detail::check_same_shape("ops::add (cuda): shape of b", out, const_view_of(b));
  detail::entrywise<detail::Formula::add_sum>(ctx, "ops::add (cuda)", out, const_view_of(a),
                                              const_view_of(b));
}

/// y ⊙= a, elementwise (SwiGLU's gate times its up projection). a, y [m, n]. O(m n); no wait.
template <device_operand A, device_operand_of<scalar_of<A>> Y>
void multiply(Context<backend::cuda>& ctx, const A& a, Y&& y) {
  const auto out = writable_view_of(y);
  detail::check_same_shape("ops::multiply (cuda): shape of a", out, const_view_of(a));
  detail::entrywise<detail::Formula::multiply>(ctx, "ops::multiply (cuda)", out, const_view_of(a));
}

/// to = from (same shape; they must not overlap). O(m n); no wait.
template <device_operand From, device_operand_of<scalar_of<From>> To>
void copy(Context<backend::cuda>& ctx, const From& from, To&& to) {
  const auto out = writable_view_of(to);
  detail::check_same_shape("ops::copy (cuda): shape of the destination", const_view_of(from), out);
  detail::entrywise<detail::Formula::assign>(ctx, "ops::copy (cuda)", out, const_view_of(from));
}

/// y = op(y) elementwise, op a functor of nlb/kernels/elementwise.hpp (any NLB_HOST_DEVICE call
/// operator). O(m n); no wait.
template <device_operand Y, class Op>
void transform(Context<backend::cuda>& ctx, Y&& y, Op op) {
  detail::entrywise<detail::Formula::apply>(ctx, "ops::transform (cuda)", writable_view_of(y), {},
                                            {}, op);
}

/// y *= factor, elementwise. O(m n); no wait.
template <device_operand Y>
void scale(Context<backend::cuda>& ctx, Y&& y, std::type_identity_t<scalar_of<Y>> factor) {
  transform(ctx, y, detail::Times<scalar_of<Y>>{factor});
}

/// out = (x · diag(diagonal)) · factor, in that order (a diagonal filter's query features,
/// PAPERS.md §B2). x, out [m, n]; diagonal [1, n]. O(m n); no wait.
template <device_operand X, device_operand_of<scalar_of<X>> Diagonal,
          device_operand_of<scalar_of<X>> Out>
void scale_columns(Context<backend::cuda>& ctx, const X& x, const Diagonal& diagonal, Out&& out,
                   std::type_identity_t<scalar_of<X>> factor) {
  const auto in = const_view_of(x);
  const auto to = writable_view_of(out);
  detail::check_same_shape("ops::scale_columns (cuda): shape of out", in, to);
  const auto* d = detail::vector_data("ops::scale_columns (cuda): diagonal", diagonal, in.cols());
  detail::entrywise<detail::Formula::scaled_product>(ctx, "ops::scale_columns (cuda)", to, in,
                                                     detail::repeated(d, in.rows(), in.cols()),
                                                     detail::Times<scalar_of<X>>{factor});
}

/// out[r, :] = x[rows[r], :] for r < n = out.rows(): rows in [0, x.rows()), the backend's
/// index_vector or a [n, 1] DeviceView<const Index> of device memory. O(n · cols); no wait.
template <device_operand X, class Rows, device_operand_of<scalar_of<X>> Out>
void gather_rows(Context<backend::cuda>& ctx, const X& x, const Rows& rows, Out&& out) {
  const auto in = const_view_of(x);
  const auto to = writable_view_of(out);
  const auto list = detail::indices(rows);
  check_dim("ops::gather_rows (cuda): rows of out (indices)", list.rows(), to.rows());
  check_dim("ops::gather_rows (cuda): width", in.cols(), to.cols());
  detail::entrywise<detail::Formula::assign>(ctx, "ops::gather_rows (cuda)", to, in, {}, {},
                                             list.data());
}

/// y[rows[r], :] = block[r, :] for r < n = block.rows() (rows as gather_rows', none twice); rows
/// of y not listed keep their values. O(n · cols); no wait.
template <device_operand Block, class Rows, device_operand_of<scalar_of<Block>> Y>
void scatter_rows(Context<backend::cuda>& ctx, const Block& block, const Rows& rows, Y&& y) {
  const auto in = const_view_of(block);
  const auto to = writable_view_of(y);
  const auto list = detail::indices(rows);
  check_dim("ops::scatter_rows (cuda): rows of block (indices)", list.rows(), in.rows());
  check_dim("ops::scatter_rows (cuda): width", to.cols(), in.cols());
  detail::entrywise<detail::Formula::assign>(ctx, "ops::scatter_rows (cuda)", to, in, {}, {},
                                             nullptr, list.data());
}

/// rows (resized to n) = 0 … n−1 stably partitioned by scores [n, 1] > threshold (NaN: not
/// above); returns how many are above. O(n); one wait, the count's read-back (none for n = 0;
/// growing `rows` allocates through thrust, which waits too).
template <device_operand Scores>
Index partition_rows(Context<backend::cuda>& ctx, const Scores& scores,
                     thrust::device_vector<Index>& rows,
                     std::type_identity_t<scalar_of<Scores>> threshold) {
  const auto s = const_view_of(scores);
  check_dim("ops::partition_rows (cuda): cols of scores", 1, s.cols());
  const Index n = s.rows();
  rows.resize(static_cast<std::size_t>(n));
  if (n == 0)
    return 0;
  Index* first = thrust::raw_pointer_cast(rows.data());
  thrust::sequence(ctx.policy(), first, first + n);
  const Index* middle = thrust::stable_partition(
      ctx.policy(), first, first + n,
      detail::ScoreAbove<scalar_of<Scores>>{s.data(), s.outerStride(), threshold});
  ctx.synchronize();  // thrust waited for the count: counted here, with any earlier failure
  return static_cast<Index>(middle - first);
}

}  // namespace nlb::cuda

namespace nlb::ops {

/// The scratch of backend::cuda's ops: device buffers (cuda::DeviceScratch).
template <class T>
struct scratch_of<backend::cuda, T> {
  using type = cuda::DeviceScratch<T>;
};

// The device ops are defined in nlb::cuda (where their operands live, so that argument-dependent
// lookup finds them too) and are ops:: members like the CPU ones: ops::gemm(ctx, …) on either.
using cuda::add, cuda::copy, cuda::gather_rows, cuda::gemm, cuda::gemm_bias, cuda::gemm_nt,
    cuda::multiply, cuda::partition_rows, cuda::scale, cuda::scale_columns, cuda::scatter_rows,
    cuda::transform;

}  // namespace nlb::ops
