// The row operations of a transformer on backend::cuda (DESIGN.md §4): LayerNorm rows, the
// causal softmax of attention scores, rotary positions, residual adds, row copies, column scaling
// and the embedding lookup — the device counterparts of nlb/ops/layer_norm.hpp, nlb/ops/rotary.hpp
// and the attention's softmax.
//
// Each is a functor over one row (or one element) run by thrust with the context's policy, so
// the same code runs on the device and, in the host-system build, on the CPU (detail/config.cuh).
// The per-row functors follow the scalar CPU kernels operation by operation (same passes, same
// order of additions), so a host-system run matches the scalar backend to the last bit and a
// device run to the rounding of its math library. One thread per row leaves a GPU under-used on
// short batches; a block-per-row kernel is the planned speed-up once it can be measured.
#pragma once

#include <math.h>  // sqrtf, powf, ... by their typed names, also on the CUDA device

#include <cstdint>
#include <type_traits>

#include "nlb/core/checks.hpp"
#include "nlb/core/host_device.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/kernels/detail/elementwise_math.hpp"

namespace nlb::cuda::detail {

template <class T>
NLB_HOST_DEVICE inline T square_root(T x) {
  if constexpr (std::is_same_v<T, float>)
    return ::sqrtf(x);
  else
    return ::sqrt(x);
}

// One row of y = (x − mean) / sqrt(var + eps) ⊙ gamma + beta with the corrected two-pass
// moments of kernels::layer_norm (nlb/kernels/layer_norm.hpp). y may be x.
template <class T>
struct LayerNormRow {
  const T* x;
  Index x_stride;
  T* y;
  Index y_stride;
  const T* gamma;
  const T* beta;
  Index n;
  T eps;
  NLB_HOST_DEVICE void operator()(Index r) const {
    const T* in = x + r * x_stride;
    T* out = y + r * y_stride;
    T sum = T(0);
    for (Index i = 0; i < n; ++i)
      sum += in[i];
    const T count = static_cast<T>(n);
    const T rough_mean = sum / count;
    T centered_sum = T(0), centered_squares = T(0);
    for (Index i = 0; i < n; ++i) {
      const T centered = in[i] - rough_mean;
      centered_sum += centered;
      centered_squares += centered * centered;
    }
    const T correction = centered_sum / count;
    const T variance = kernels::detail::elementwise_math::max(
        centered_squares / count - correction * correction, T(0));
    const T mean = rough_mean + correction;
    const T inv_std = T(1) / square_root(variance + eps);
    for (Index i = 0; i < n; ++i)
      out[i] = (in[i] - mean) * inv_std * gamma[i] + beta[i];
  }
};

// Row t of scores [T, S] in place: the first past + t + 1 columns (the causal ones) become
// softmax(scale · s), the rest 0. Max-subtracted, so no exp overflows.
template <class T>
struct CausalSoftmaxRow {
  T* scores;
  Index stride, cols, past;
  T scale;
  NLB_HOST_DEVICE void operator()(Index t) const {
    namespace math = kernels::detail::elementwise_math;
    T* row = scores + t * stride;
    const Index visible = past + t + 1 < cols ? past + t + 1 : cols;
    T top = row[0] * scale;
    for (Index j = 1; j < visible; ++j)
      top = math::max(top, row[j] * scale);
    T sum = T(0);
    for (Index j = 0; j < visible; ++j) {
      row[j] = math::exp(row[j] * scale - top);
      sum += row[j];
    }
    const T inverse = T(1) / sum;
    for (Index j = 0; j < visible; ++j)
      row[j] *= inverse;
    for (Index j = visible; j < cols; ++j)
      row[j] = T(0);
  }
};

// Pair k of head h of row t of the Q and K blocks of qkv [T, 3d] rotated by the angle
// (past + t) · base^(−2k / rotary_dims), computed in double as kernels::rotary_angles does.
template <class T>
struct RotateQueryKeyPair {
  T* qkv;
  Index stride, d, head_dim, heads, half, past;
  double base;
  NLB_HOST_DEVICE void operator()(Index i) const {
    const Index k = i % half, h = (i / half) % heads, t = i / (half * heads);
    const double inv_freq =
        1.0 / ::pow(base, static_cast<double>(2 * k) / static_cast<double>(2 * half));
    const double angle = static_cast<double>(past + t) * inv_freq;
    const T cos = static_cast<T>(::cos(angle)), sin = static_cast<T>(::sin(angle));
    rotate(qkv + t * stride + h * head_dim, k, cos, sin);      // Q
    rotate(qkv + t * stride + d + h * head_dim, k, cos, sin);  // K
  }
  NLB_HOST_DEVICE void rotate(T* head, Index k, T cos, T sin) const {
    const T x1 = head[k], x2 = head[k + half];
    head[k] = x1 * cos - x2 * sin;
    head[k + half] = x2 * cos + x1 * sin;
  }
};

// y[r, j] += a[r, j] (+ b[r, j] when b is set: y + (a + b), the order of the CPU block).
template <class T>
struct AddRows {
  T* y;
  Index y_stride, cols;
  const T* a;
  Index a_stride;
  const T* b;
  Index b_stride;
  NLB_HOST_DEVICE void operator()(Index i) const {
    const Index r = i / cols, j = i % cols;
    if (b != nullptr)
      y[r * y_stride + j] += a[r * a_stride + j] + b[r * b_stride + j];
    else
      y[r * y_stride + j] += a[r * a_stride + j];
  }
};

template <class T>
struct CopyRows {  // to[r, j] = from[r, j]
  const T* from;
  Index from_stride;
  T* to;
  Index to_stride, cols;
  NLB_HOST_DEVICE void operator()(Index i) const {
    const Index r = i / cols, j = i % cols;
    to[r * to_stride + j] = from[r * from_stride + j];
  }
};

// out[r, j] = (x[r, j] · diagonal[j]) · factor.
template <class T>
struct ScaleColumns {
  const T* x;
  Index x_stride;
  const T* diagonal;
  T factor;
  T* out;
  Index out_stride, cols;
  NLB_HOST_DEVICE void operator()(Index i) const {
    const Index r = i / cols, j = i % cols;
    out[r * out_stride + j] = x[r * x_stride + j] * diagonal[j] * factor;
  }
};

// x[t, j] = token[ids[t], j] (+ position[past + t, j] when position is set).
template <class T>
struct EmbedRows {
  const T* token;
  Index token_stride;
  const T* position;
  Index position_stride;
  const std::int32_t* ids;
  Index past;
  T* x;
  Index x_stride, cols;
  NLB_HOST_DEVICE void operator()(Index i) const {
    const Index t = i / cols, j = i % cols;
    T value = token[static_cast<Index>(ids[t]) * token_stride + j];
    if (position != nullptr)
      value += position[(past + t) * position_stride + j];
    x[t * x_stride + j] = value;
  }
};

// Row t's next-token loss: log Σ_j exp(logits[t, j]) − logits[t, ids[t + 1]], in double with
// the maximum subtracted, as kernels::log_sum_exp's scalar form (the same passes and order).
template <class T>
struct NextTokenLossRow {
  const T* logits;
  Index stride, cols;
  const std::int32_t* ids;
  double* loss;
  NLB_HOST_DEVICE void operator()(Index t) const {
    const T* row = logits + t * stride;
    double maximum = static_cast<double>(row[0]);
    for (Index j = 1; j < cols; ++j)
      maximum = kernels::detail::elementwise_math::max(maximum, static_cast<double>(row[j]));
    double sum = 0;
    for (Index j = 0; j < cols; ++j)
      sum += ::exp(static_cast<double>(row[j]) - maximum);
    loss[t] = maximum + ::log(sum) - static_cast<double>(row[ids[t + 1]]);
  }
};

}  // namespace nlb::cuda::detail

namespace nlb::ops {

/// y[t, :] = (x[t, :] − mean) / sqrt(var + eps) ⊙ gamma + beta for every row (biased variance,
/// eps inside the root, PAPERS.md §A1); y may be x. x, y [T, d]; gamma, beta [1, d]. O(T d), one
/// thread per row. Throws ShapeError on a mismatch, ArgumentError for eps < 0 or d = 0.
template <class T>
void layer_norm_rows(Context<backend::cuda>& ctx, cuda::DeviceView<const T> x,
                     cuda::DeviceView<T> y, cuda::DeviceView<const T> gamma,
                     cuda::DeviceView<const T> beta, T eps) {
  check_dim("ops::layer_norm_rows (cuda): rows of y", x.rows, y.rows);
  check_dim("ops::layer_norm_rows (cuda): cols of y", x.cols, y.cols);
  check_dim("ops::layer_norm_rows (cuda): gamma width", x.cols, gamma.rows * gamma.cols);
  check_dim("ops::layer_norm_rows (cuda): beta width", x.cols, beta.rows * beta.cols);
  if (x.cols < 1 || !(eps >= T(0))) {
    throw ArgumentError(
        nlb::detail::expected_found("ops::layer_norm_rows (cuda): d and eps", "d >= 1 and eps >= 0",
                                    std::to_string(x.cols) + " and " + std::to_string(eps)));
  }
  cuda::detail::for_each_index(ctx, x.rows,
                               cuda::detail::LayerNormRow<T>{x.data, x.stride, y.data, y.stride,
                                                             gamma.data, beta.data, x.cols, eps});
}

/// In place on attention scores [T, S] of queries at positions [past, past + T): row t becomes
/// softmax(scale · s) over its causal columns [0, past + t] and 0 beyond. O(T S), one thread
/// per row. Throws ArgumentError when a row would see no column (S < past + 1).
template <class T>
void causal_softmax_rows(Context<backend::cuda>& ctx, cuda::DeviceView<T> scores, Index past,
                         T scale) {
  if (scores.rows == 0)
    return;
  if (past < 0 || scores.cols < past + 1) {
    throw ArgumentError(nlb::detail::expected_found(
        "ops::causal_softmax_rows (cuda): score columns",
        "at least past + 1 = " + std::to_string(past + 1), scores.cols));
  }
  cuda::detail::for_each_index(
      ctx, scores.rows,
      cuda::detail::CausalSoftmaxRow<T>{scores.data, scores.stride, scores.cols, past, scale});
}

/// Rotary positions (GPT-NeoX's rotate_half, nlb/kernels/rotary.hpp) on the queries and keys of
/// qkv [T, 3d] = [Q K V]: the first rotary_dims of each of `heads` heads of Q and K, rows at
/// positions [past, past + T). O(T · heads · rotary_dims). Throws ArgumentError for an odd or
/// too large rotary_dims, ShapeError when 3d is not qkv's width.
template <class T>
void rotate_queries_keys(Context<backend::cuda>& ctx, cuda::DeviceView<T> qkv, Index heads,
                         Index rotary_dims, Index past, double base) {
  if (qkv.cols % 3 != 0 || heads <= 0 || (qkv.cols / 3) % heads != 0)
    throw ShapeError(nlb::detail::expected_found("ops::rotate_queries_keys (cuda): qkv width",
                                                 "3 · d with d a multiple of the head count",
                                                 qkv.cols));
  const Index d = qkv.cols / 3, head_dim = d / heads;
  if (rotary_dims < 0 || rotary_dims % 2 != 0 || rotary_dims > head_dim)
    throw ArgumentError(nlb::detail::expected_found("ops::rotate_queries_keys (cuda): rotary dims",
                                                    "an even number in [0, head dim]",
                                                    rotary_dims));
  const Index half = rotary_dims / 2;
  if (half == 0)
    return;
  cuda::detail::for_each_index(ctx, qkv.rows * heads * half,
                               cuda::detail::RotateQueryKeyPair<T>{
                                   qkv.data, qkv.stride, d, head_dim, heads, half, past, base});
}

/// y += a, elementwise. y, a [m, n]. O(m n).
template <class T>
void add(Context<backend::cuda>& ctx, cuda::DeviceView<T> y, cuda::DeviceView<const T> a) {
  check_dim("ops::add (cuda): rows", y.rows, a.rows);
  check_dim("ops::add (cuda): cols", y.cols, a.cols);
  cuda::detail::for_each_index(
      ctx, y.rows * y.cols,
      cuda::detail::AddRows<T>{y.data, y.stride, y.cols, a.data, a.stride, nullptr, 0});
}

/// y += a + b, elementwise (a + b first, as the parallel-residual block adds). O(m n).
template <class T>
void add(Context<backend::cuda>& ctx, cuda::DeviceView<T> y, cuda::DeviceView<const T> a,
         cuda::DeviceView<const T> b) {
  check_dim("ops::add (cuda): rows", y.rows, a.rows);
  check_dim("ops::add (cuda): cols", y.cols, a.cols);
  check_dim("ops::add (cuda): rows", y.rows, b.rows);
  check_dim("ops::add (cuda): cols", y.cols, b.cols);
  cuda::detail::for_each_index(
      ctx, y.rows * y.cols,
      cuda::detail::AddRows<T>{y.data, y.stride, y.cols, a.data, a.stride, b.data, b.stride});
}

/// to = from (views of one shape that do not overlap). O(m n).
template <class T>
void copy(Context<backend::cuda>& ctx, cuda::DeviceView<const T> from, cuda::DeviceView<T> to) {
  check_dim("ops::copy (cuda): rows", from.rows, to.rows);
  check_dim("ops::copy (cuda): cols", from.cols, to.cols);
  cuda::detail::for_each_index(
      ctx, to.rows * to.cols,
      cuda::detail::CopyRows<T>{from.data, from.stride, to.data, to.stride, to.cols});
}

/// out = (x · diag(diagonal)) · factor: column j of x scaled by diagonal[j], then by factor (a
/// diagonal filter's query features, PAPERS.md §B2). x, out [m, n]; diagonal [1, n]. O(m n).
template <class T>
void scale_columns(Context<backend::cuda>& ctx, cuda::DeviceView<const T> x,
                   cuda::DeviceView<const T> diagonal, T factor, cuda::DeviceView<T> out) {
  check_dim("ops::scale_columns (cuda): diagonal width", x.cols, diagonal.rows * diagonal.cols);
  check_dim("ops::scale_columns (cuda): rows of out", x.rows, out.rows);
  check_dim("ops::scale_columns (cuda): cols of out", x.cols, out.cols);
  cuda::detail::for_each_index(
      ctx, x.rows * x.cols,
      cuda::detail::ScaleColumns<T>{x.data, x.stride, diagonal.data, factor, out.data, out.stride,
                                    out.cols});
}

/// x[t, :] = token[ids[t], :] + position[past + t, :] (position may be empty: no learned
/// positions). ids: T token ids in device memory, already checked to lie in [0, vocab) — the
/// device cannot report a bad id. x [T, d]. O(T d).
template <class T>
void embed_rows(Context<backend::cuda>& ctx, cuda::DeviceView<const T> token,
                cuda::DeviceView<const T> position, const std::int32_t* ids, Index past,
                cuda::DeviceView<T> x) {
  check_dim("ops::embed_rows (cuda): token embedding width", x.cols, token.cols);
  if (position.rows > 0) {
    check_dim("ops::embed_rows (cuda): position embedding width", x.cols, position.cols);
    if (past + x.rows > position.rows)
      throw ArgumentError(nlb::detail::expected_found("ops::embed_rows (cuda): positions",
                                                      "at most " + std::to_string(position.rows),
                                                      past + x.rows));
  }
  cuda::detail::for_each_index(
      ctx, x.rows * x.cols,
      cuda::detail::EmbedRows<T>{token.data, token.stride,
                                 position.rows > 0 ? position.data : nullptr, position.stride, ids,
                                 past, x.data, x.stride, x.cols});
}

/// Next-token losses of one window on the device: loss[t] = log Σ_j exp(logits[t, j]) −
/// logits[t, ids[t + 1]] for t < T − 1, in double (nlb::next_token_losses on the host). logits
/// [T, vocab], `ids` [T] and `loss` [T − 1] in device memory; ids must be in [0, vocab) (the
/// model checked them). O(T · vocab), one thread per row.
template <class T>
void next_token_losses(Context<backend::cuda>& ctx, cuda::DeviceView<const T> logits,
                       const std::int32_t* ids, double* loss) {
  if (logits.rows < 2)
    return;
  if (logits.cols < 1)
    throw ArgumentError(
        "ops::next_token_losses (cuda): expected a vocabulary of at least one "
        "entry, found 0 columns");
  cuda::detail::for_each_index(
      ctx, logits.rows - 1,
      cuda::detail::NextTokenLossRow<T>{logits.data, logits.stride, logits.cols, ids, loss});
}

}  // namespace nlb::ops
