// The row operations of backend::cuda (DESIGN.md §4): LayerNorm, rotary positions, embedding,
// attention, next-token losses and the host copy — nlb/ops/*.hpp for the device, same names and
// arguments. LayerNorm, the attention's softmax and the loss run a warp per row: lanes take every
// 32nd entry and their sums meet by shuffles; in the host-system build one lane takes every entry
// in order, adding exactly as the scalar CPU kernels do (kernels::layer_norm, log_sum_exp).
// Attention heads are batched, not looped: head h of a row-major operand is its column block h·w,
// so the per-head products are one strided-batched cuBLAS call of batch stride w (no copies).
#pragma once

#if defined(NLB_OPS_CALLERS_INCLUDED)
#error \
    "nlb/cuda: include <nlb/cuda.cuh> (or nlb/cuda/row_ops.cuh) before the component and model headers"
#endif

#include <math.h>  // sqrtf, exp, log, pow, cos, sin by their typed names, also on the device

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlb/core/checks.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/host_device.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/kernels/elementwise_math.hpp"
#include "nlb/ops/detail/attention_heads.hpp"
#include "nlb/ops/rotary.hpp"

namespace nlb::cuda {

namespace detail {

// Row r of y = (x − mean) / sqrt(var + eps) ⊙ gamma + beta with the corrected two-pass moments
// of kernels::layer_norm (nlb/kernels/layer_norm.hpp), or without beta RMSNorm's
// y = x / sqrt(mean(x²) + eps) ⊙ gamma as kernels::rms_norm. y may be x: each lane reads an
// entry before it writes it, and no other lane touches it.
template <class T>
struct NormRow {
  const T *x, *gamma, *beta;
  T* y;
  Index x_stride, y_stride, n;
  T eps;
  // sqrt in double rounds to sqrtf's float exactly (53 >= 2·24 + 2 bits).
  static NLB_HOST_DEVICE T inverse_root(T v) { return T(1) / static_cast<T>(::sqrt(double(v))); }
  NLB_HOST_DEVICE void operator()(Index r, RowLanes lanes) const {
    const T* in = x + r * x_stride;
    const T count = static_cast<T>(n);
    T sum = T(0), centered_sum = T(0), centered_squares = T(0);
    if (beta == nullptr) {
      for (Index i = lanes.lane; i < n; i += lanes.count)
        sum += in[i] * in[i];
      const T inv_rms = inverse_root(lanes.sum(sum) / count + eps);
      for (Index i = lanes.lane; i < n; i += lanes.count)
        y[r * y_stride + i] = in[i] * inv_rms * gamma[i];
      return;
    }
    for (Index i = lanes.lane; i < n; i += lanes.count)
      sum += in[i];
    const T rough_mean = lanes.sum(sum) / count;
    for (Index i = lanes.lane; i < n; i += lanes.count) {
      const T centered = in[i] - rough_mean;
      centered_sum += centered;
      centered_squares += centered * centered;
    }
    const T correction = lanes.sum(centered_sum) / count;
    const T variance = kernels::elementwise_math::max(
        lanes.sum(centered_squares) / count - correction * correction, T(0));
    const T mean = rough_mean + correction, inv_std = inverse_root(variance + eps);
    for (Index i = lanes.lane; i < n; i += lanes.count)
      y[r * y_stride + i] = (in[i] - mean) * inv_std * gamma[i] + beta[i];
  }
};

// The checks and the launch of both norms (`what` names the op; beta null for RMSNorm).
template <class T>
void norm_rows(Context<backend::cuda>& ctx, const char* what, DeviceView<const T> in,
               DeviceView<T> out, const T* gamma, const T* beta, T eps) {
  if (in.cols() < 1 || !(eps >= 0) || in.rows() != out.rows() || in.cols() != out.cols()) {
    check_same_shape((std::string(what) + ": shape of y").c_str(), in, out);
    throw ArgumentError(
        nlb::detail::expected_found(std::string(what) + ": d and eps", "d >= 1 and eps >= 0",
                                    std::to_string(in.cols()) + " and " + std::to_string(eps)));
  }
  for_each_row(ctx, what, in.rows(),
               NormRow<T>{in.data(), gamma, beta, out.data(), in.outerStride(), out.outerStride(),
                          in.cols(), eps});
}

// Pair k of every head of Q and K in row t of qk [T, 2d], rotated by the angle
// (past + t) · base^(−2k / rotary_dims) computed in double as kernels::rotary_angles does. Head
// g < 2·heads (Q's, then K's) starts at column g · head_dim.
template <class T>
struct RotatePairs {
  T* qk;
  Index stride, head_dim, groups, half, past;
  double base;
  kernels::RopeScaling scaling;
  NLB_HOST_DEVICE void operator()(Index t, Index k) const {
    const double angle =
        static_cast<double>(past + t) * kernels::rope_inverse_frequency(k, 2 * half, base, scaling);
    const T cos = static_cast<T>(::cos(angle)), sin = static_cast<T>(::sin(angle));
    for (Index g = 0; g < groups; ++g) {
      T* pair = qk + t * stride + g * head_dim + k;
      const T x1 = pair[0], x2 = pair[half];
      pair[0] = x1 * cos - x2 * sin;
      pair[half] = x2 * cos + x1 * sin;
    }
  }
};

// Row t's loss log Σ_j exp(logits[t, j]) − logits[t, ids[t + 1]] in double, the maximum
// subtracted first (kernels::log_sum_exp's scalar form: the same passes and order).
template <class T>
struct NextTokenLoss {
  const T* logits;
  const Index* ids;
  double* loss;
  Index stride, cols;
  NLB_HOST_DEVICE void operator()(Index t, RowLanes lanes) const {
    const T* row = logits + t * stride;
    double maximum = static_cast<double>(row[0]), sum = 0;
    for (Index j = lanes.lane; j < cols; j += lanes.count)
      maximum = kernels::elementwise_math::max(maximum, static_cast<double>(row[j]));
    maximum = lanes.max(maximum);
    for (Index j = lanes.lane; j < cols; j += lanes.count)
      sum += ::exp(static_cast<double>(row[j]) - maximum);
    sum = lanes.sum(sum);
    if (lanes.lane == 0)
      loss[t] = maximum + ::log(sum) - static_cast<double>(row[ids[t + 1]]);
  }
};

// The token ids, widened to row indices, copied into the scratch on ctx's stream (the span may
// go away when this returns). A [T, 1] view of them.
template <class T>
DeviceView<const Index> upload_ids(Context<backend::cuda>& ctx, std::span<const std::int32_t> ids,
                                   DeviceScratch<T>& scratch) {
  const auto n = static_cast<Index>(ids.size());
  scratch.host_ids.assign(ids.begin(), ids.end());
  scratch.ids.resize(n, 1);
  copy_2d(ctx, scratch.host_ids.data(), n, scratch.ids.data(), n, 1, n);
  return scratch.ids.view();
}

/// Query rows per tile of causal_attention: a tile's [heads, rows, keys] scores are one batched
/// product, and the keys after its last query are never scored (the masked half, about half the
/// FLOPs of the [T, S] form at past = 0, less ~1/(2·tiles)).
inline constexpr Index attention_query_tile = 128;
/// Rows per chunk of linear attention's prefix sums (as ops/detail/linear_attention.hpp).
inline constexpr Index linear_attention_chunk = 64;

// The CPU's head layout and checks (ops/detail/attention_heads.hpp) on device views.
template <class Q, class K, class V, class Out>
ops::detail::HeadLayout check_heads(const char* what, Index heads, const Q& q, const K& k,
                                    const V& v, const Out& out, Index past) {
  return ops::detail::check_heads(what, heads, q.rows(), q.cols(), k.rows(), k.cols(), v.rows(),
                                  v.cols(), out.rows(), out.cols(), past);
}

// Row r of the scores [heads · n, end] of one query tile (head r / n, query r % n at position
// first + r % n), in place: softmax over the keys it sees, [0, first + r % n], and 0 for the
// keys after it. Max-subtracted, so no exp overflows. One warp per row.
template <class T>
struct CausalSoftmaxRow {
  T* scores;
  Index cols, n, first;
  NLB_HOST_DEVICE void operator()(Index r, RowLanes lanes) const {
    namespace math = kernels::elementwise_math;
    T* row = scores + r * cols;
    const Index visible = first + r % n + 1;
    T top = row[0];
    for (Index j = lanes.lane; j < visible; j += lanes.count)
      top = math::max(top, row[j]);
    top = lanes.max(top);
    T sum = T(0);
    for (Index j = lanes.lane; j < visible; j += lanes.count) {
      row[j] = math::exp(row[j] - top);
      sum += row[j];
    }
    const T inverse = T(1) / lanes.sum(sum);
    for (Index j = lanes.lane; j < cols; j += lanes.count)
      row[j] = j < visible ? row[j] * inverse : T(0);
  }
};

// values[t, h·(w+1) + j] = v[t, h·w + j] for j < w, 1 for j = w: each head's values with a
// column of ones, so that one product gives the numerator and (last column) the denominator.
template <class T>
struct ValuesWithOnes {
  const T* v;
  Index v_stride;
  T* values;
  Index values_stride;
  int w;
  NLB_HOST_DEVICE void operator()(Index t, Index c) const {
    const int h = static_cast<int>(c) / (w + 1), j = static_cast<int>(c) - h * (w + 1);  // 32-bit
    values[t * values_stride + c] = j < w ? v[t * v_stride + h * w + j] : T(1);
  }
};

// a[r, j] = 0 for j > r % n: the strictly upper triangle of each head's [n, n] chunk scores.
template <class T>
struct ZeroStrictlyUpper {
  T* a;
  int n;
  NLB_HOST_DEVICE void operator()(Index r, Index j) const {
    if (j > static_cast<int>(r) % n)
      a[r * n + j] = T(0);
  }
};

// out[t, h·w + j] = numerators[t, h·(w+1) + j] / numerators[t, h·(w+1) + w].
template <class T>
struct DivideByLastColumn {
  const T* numerators;
  Index numerators_stride;
  T* out;
  Index out_stride;
  int w;
  NLB_HOST_DEVICE void operator()(Index t, Index c) const {
    const int h = static_cast<int>(c) / w, j = static_cast<int>(c) - h * w;  // 32-bit
    const T* head = numerators + t * numerators_stride + h * (w + 1);
    out[t * out_stride + c] = head[j] / head[w];
  }
};

}  // namespace detail

/// y[t, :] = (x[t, :] − mean) / sqrt(var + eps) ⊙ gamma + beta (biased variance, PAPERS.md §A1);
/// y may be x. x, y [T, d]; gamma, beta [1, d]. A warp per row, three passes: O(T d); no wait.
/// ShapeError on a mismatch, ArgumentError for d = 0 or eps < 0 (as kernels::layer_norm_rows).
template <device_operand X, device_operand_of<scalar_of<X>> Gamma,
          device_operand_of<scalar_of<X>> Beta, device_operand_of<scalar_of<X>> Y>
void layer_norm_rows(Context<backend::cuda>& ctx, const X& x, const Gamma& gamma, const Beta& beta,
                     Y&& y, std::type_identity_t<scalar_of<X>> eps) {
  const auto in = const_view_of(x);
  detail::norm_rows(ctx, "ops::layer_norm_rows (cuda)", in, writable_view_of(y),
                    detail::vector_data("ops::layer_norm_rows (cuda): gamma", gamma, in.cols()),
                    detail::vector_data("ops::layer_norm_rows (cuda): beta", beta, in.cols()), eps);
}

/// y[t, :] = x[t, :] / sqrt(mean(x[t, :]²) + eps) ⊙ weight (RMSNorm, as kernels::rms_norm); y may
/// be x. x, y [T, d]; weight [1, d]. A warp per row, two passes: O(T d); no wait. Errors as above.
template <device_operand X, device_operand_of<scalar_of<X>> Weight,
          device_operand_of<scalar_of<X>> Y>
void rms_norm_rows(Context<backend::cuda>& ctx, const X& x, const Weight& weight, Y&& y,
                   std::type_identity_t<scalar_of<X>> eps) {
  const auto in = const_view_of(x);
  detail::norm_rows(ctx, "ops::rms_norm_rows (cuda)", in, writable_view_of(y),
                    detail::vector_data("ops::rms_norm_rows (cuda): weight", weight, in.cols()),
                    static_cast<const scalar_of<X>*>(nullptr), eps);
}

/// GPT-NeoX's rotate_half on the first rotary_dims of every head of x [T, heads·d_h] ([Q K]), rows
/// at positions [past, past + T), angles as kernels::rotary_angles (double), each computed once
/// for all heads; the scratch is unused. O(T · heads · rotary_dims); no wait. Errors as the CPU's.
template <device_operand QK>
void rotate_heads(Context<backend::cuda>& ctx, QK&& qk, Index heads, Index rotary_dims, Index past,
                  double base, DeviceScratch<scalar_of<QK>>&,
                  const kernels::RopeScaling& scaling = {}) {
  const auto m = writable_view_of(qk);
  const Index head_dim = nlb::ops::detail::check_rotary(m.cols(), heads, rotary_dims);
  kernels::check_rope_scaling("ops::rotate_heads (cuda)", scaling);
  detail::for_each_element(
      ctx, "ops::rotate_heads (cuda)", m.rows(), rotary_dims / 2,
      detail::RotatePairs<scalar_of<QK>>{m.data(), m.outerStride(), head_dim, heads,
                                         rotary_dims / 2, past, base, scaling});
}

/// x[t, :] = token[ids[t], :] (+ position[past + t, :] when `position` has rows): a gather of
/// token rows, then the positions added (the CPU's order). token [vocab, d], position
/// [n_positions, d] or empty; ids [T] on the host (copied on ctx's stream), already checked as on
/// the CPU: in [0, vocab), past + T <= n_positions. x [T, d]. O(T d); no wait.
template <device_operand Token, device_operand_of<scalar_of<Token>> Position,
          device_operand_of<scalar_of<Token>> X>
void embed_rows(Context<backend::cuda>& ctx, const Token& token, const Position& position,
                std::span<const std::int32_t> ids, X&& x, Index past,
                DeviceScratch<scalar_of<Token>>& scratch) {
  const auto positions = const_view_of(position);
  const auto out = writable_view_of(x);
  gather_rows(ctx, token, detail::upload_ids(ctx, ids, scratch), out);
  if (positions.size() > 0)
    add(ctx, positions.middleRows(past, out.rows()), out);
}

/// out = softmax_causal(scale · q_h k_hᵀ) v_h for every head h (columns [h·w, (h+1)·w)): q
/// [T, H·w_q] at positions [past, past + T), k [past + T, H·w_q], v [past + T, H·w_v], out
/// [T, H·w_v] (no aliasing); query i sees keys j <= past + i. Per tile of 128 queries, all heads
/// at once: a batched product with the keys it can see, a causal softmax (a warp per row), a
/// batched product with the values. Cost: about 2·T·(past + T/2)·(w_q + w_v)·H flops + one exp
/// per causal score; scratch H · min(T, 128) · (past + T); no wait. ShapeError on a mismatch.
template <device_operand Q, device_operand_of<scalar_of<Q>> K, device_operand_of<scalar_of<Q>> V,
          device_operand_of<scalar_of<Q>> Out, class T>
void causal_attention(Context<backend::cuda>& ctx, const Q& q, const K& k, const V& v, Out&& out,
                      Index heads, T scale, Index past, DeviceScratch<T>& scratch) {
  constexpr const char* what = "ops::causal_attention (cuda)";
  const auto qv = const_view_of(q), kv = const_view_of(k), vv = const_view_of(v);
  const auto ov = writable_view_of(out);
  const auto layout = detail::check_heads(what, heads, qv, kv, vv, ov, past);
  const Index wq = layout.w_q, wv = layout.w_v, group = layout.group();
  const Index rows = qv.rows(), tile = std::min(rows, detail::attention_query_tile);
  if (rows == 0)
    return;
  scratch.scores.resize(heads * tile, past + rows);
  for (Index i0 = 0; i0 < rows; i0 += tile) {
    const Index n = std::min(tile, rows - i0), end = past + i0 + n;  // the tile sees keys [0, end)
    const DeviceView<T> s(scratch.scores.data(), heads * n, end, end);  // head h at rows h·n
    // Query heads r, r + group, …: one product batched over the key/value heads.
    for (Index r = 0; r < group; ++r)
      detail::product<T>(ctx, what, qv.middleRows(i0, n).middleCols(r * wq, wq), false,
                         kv.topRows(end).leftCols(wq), true, s.middleRows(r * n, n), scale, T(0),
                         layout.kv_heads, group * wq, wq, group * n * end);
    detail::for_each_row(ctx, what, heads * n,
                         detail::CausalSoftmaxRow<T>{s.data(), end, n, past + i0});
    for (Index r = 0; r < group; ++r)
      detail::product<T>(ctx, what, s.middleRows(r * n, n), false, vv.topRows(end).leftCols(wv),
                         false, ov.middleRows(i0, n).middleCols(r * wv, wv), T(1), T(0),
                         layout.kv_heads, group * n * end, wv, group * wv);
  }
}

/// Causal ELU+1 linear attention of every head (PAPERS.md §B3) on features fq, fk [T, H·w_k]
/// (φ applied) and values v [T, H·w_v]: out [T, H·w_v], row i of head h φq_i Σ_{j<=i} φk_jᵀ v_j /
/// (φq_i Σ_{j<=i} φk_jᵀ). The chunks of ops/detail/linear_attention.hpp with [V_h | 1], so the
/// state S_h [w_k, w_v + 1] carries the denominator in its last column: per 64 rows,
/// A = tril(φQ_c φK_cᵀ), N_c = φQ_c S + A [V_c | 1], S += φK_cᵀ [V_c | 1] (batched over heads);
/// then out = N[:, :w_v] / N[:, w_v]. O(T·w_k·(w_v + 64)·H); no wait. ShapeError on a mismatch.
template <device_operand Q, device_operand_of<scalar_of<Q>> K, device_operand_of<scalar_of<Q>> V,
          device_operand_of<scalar_of<Q>> Out, class T>
void linear_attention(Context<backend::cuda>& ctx, const Q& fq, const K& fk, const V& v, Out&& out,
                      Index heads, DeviceScratch<T>& scratch) {
  constexpr const char* what = "ops::linear_attention (cuda)";
  const auto qv = const_view_of(fq), kv = const_view_of(fk), vv = const_view_of(v);
  const auto ov = writable_view_of(out);
  const auto layout = detail::check_heads(what, heads, qv, kv, vv, ov, 0);
  check_dim("ops::linear_attention (cuda): key width (query width)", qv.cols(), kv.cols());
  const Index wk = layout.w_q, wv = layout.w_v, rows = qv.rows(), wo = wv + 1;
  if (rows == 0)
    return;
  const Index chunk = std::min(rows, detail::linear_attention_chunk);
  scratch.values.resize(rows, heads * wo);
  scratch.numerators.resize(rows, heads * wo);
  scratch.state.resize(heads * wk, wo);
  scratch.chunk.resize(heads * chunk, chunk);
  const auto values = scratch.values.view(), numerators = scratch.numerators.view();
  const DeviceView<T> state(scratch.state.data(), wk, wo, wo);  // head h at + h·w_k·wo
  detail::for_each_element(ctx, what, rows, heads * wo,
                           detail::ValuesWithOnes<T>{vv.data(), vv.outerStride(), values.data(),
                                                     values.outerStride(), static_cast<int>(wv)});
  for (Index c0 = 0; c0 < rows; c0 += chunk) {
    const Index n = std::min(chunk, rows - c0);
    const bool first = c0 == 0;  // the state is still zero: no product with it
    const auto q_c = qv.middleRows(c0, n).leftCols(wk), k_c = kv.middleRows(c0, n).leftCols(wk);
    const DeviceView<const T> v_c = values.middleRows(c0, n).leftCols(wo);
    const auto n_c = numerators.middleRows(c0, n).leftCols(wo);
    const DeviceView<T> a(scratch.chunk.data(), n, n, n);  // head h at + h·n·n
    detail::product<T>(ctx, what, q_c, false, k_c, true, a, T(1), T(0), heads, wk, wk, n * n);
    detail::for_each_element(ctx, what, heads * n, n,
                             detail::ZeroStrictlyUpper<T>{a.data(), static_cast<int>(n)});
    if (!first)
      detail::product<T>(ctx, what, q_c, false, state, false, n_c, T(1), T(0), heads, wk, wk * wo,
                         wo);
    detail::product<T>(ctx, what, a, false, v_c, false, n_c, T(1), first ? T(0) : T(1), heads,
                       n * n, wo, wo);
    detail::product<T>(ctx, what, k_c, true, v_c, false, state, T(1), first ? T(0) : T(1), heads,
                       wk, wo, wk * wo);
  }
  detail::for_each_element(
      ctx, what, rows, heads * wv,
      detail::DivideByLastColumn<T>{numerators.data(), numerators.outerStride(), ov.data(),
                                    ov.outerStride(), static_cast<int>(wv)});
}

/// Appends the T − 1 next-token losses logsumexp(logits[t, :]) − logits[t, ids[t + 1]], computed
/// in double on the device (a warp per row) and read back. logits [T, vocab]; ids [T] on the host,
/// in [0, vocab). O(T · vocab); one wait (none for T < 2). ShapeError when T is not ids' size,
/// ArgumentError for an empty vocabulary.
template <device_operand Logits>
void next_token_losses(Context<backend::cuda>& ctx, const Logits& logits,
                       std::span<const std::int32_t> ids, std::vector<double>& losses,
                       DeviceScratch<scalar_of<Logits>>& scratch) {
  constexpr const char* what = "ops::next_token_losses (cuda)";
  const auto in = const_view_of(logits);
  check_dim("ops::next_token_losses (cuda): logits rows (tokens)", static_cast<Index>(ids.size()),
            in.rows());
  if (ids.size() < 2)
    return;
  if (in.cols() < 1)
    throw ArgumentError(nlb::detail::expected_found(what, "a vocabulary of at least 1", 0));
  const Index n = in.rows() - 1;
  scratch.losses.resize(1, n);
  detail::for_each_row(ctx, what, n,
                       detail::NextTokenLoss<scalar_of<Logits>>{
                           in.data(), detail::upload_ids(ctx, ids, scratch).data(),
                           scratch.losses.data(), in.outerStride(), in.cols()});
  const RowMatrix<double> host = download(ctx, scratch.losses);  // the one wait
  losses.insert(losses.end(), host.data(), host.data() + n);
}

/// A host copy of a device matrix or view, after the work queued before it: one wait. O(m n).
template <device_operand M>
RowMatrix<scalar_of<M>> to_host(Context<backend::cuda>& ctx, const M& m) {
  return download(ctx, m);
}

}  // namespace nlb::cuda

namespace nlb::ops {
using cuda::causal_attention, cuda::embed_rows, cuda::layer_norm_rows, cuda::linear_attention,
    cuda::rms_norm_rows, cuda::next_token_losses, cuda::rotate_heads, cuda::to_host;
}  // namespace nlb::ops
