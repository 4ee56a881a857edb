// Multi-head causal attention whose per-head score form is a general low-rank bilinear form
// given by its factors: ℓ_ij = (x_i A_h + a_h)·(x_j B_h + b_h) · scale. The converted heads of
// the routing/filtering analysis run as this (PAPERS §B1, analysis/attention/conversions.hpp):
// a standard head is A_h = W_Q,h, B_h = W_K,h (biases b_Q,h, b_K,h); a head whose skew part was
// truncated or whose symmetric part was replaced is another pair (A_h, B_h) of any width.
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlb/attention/dense_attention.hpp"
#include "nlb/attention/detail/cache_append.hpp"
#include "nlb/attention/kv_cache.hpp"
#include "nlb/core.hpp"
#include "nlb/core/component_types.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/ops/attention.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/narrow_gemm.hpp"
#include "nlb/ops/rows.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

/// One head's score factors: query features x A + a, key features x B + b, both of width w
/// (any w ≥ 1, independent of d_h).
template <class T>
struct FactoredHead {
  RowMatrix<T> w_query;  // A [d, w]
  RowVector<T> b_query;  // a [w]
  RowMatrix<T> w_key;    // B [d, w]
  RowVector<T> b_key;    // b [w]
};

/// Multi-head causal attention with factored scores, X, Y [T, d], H = heads.size(),
/// d_h = d / H:
///   per head: F_q = X A_h + a_h [T, w_h], F_k = X B_h + b_h [S, w_h],
///             P = softmax_causal(scale · F_q F_kᵀ),  C_h = P V_h;
///   V = X w_v + b_v [T, d] (head h uses columns [h·d_h, (h+1)·d_h)),  Y = C w_out + b_out.
/// No rotary positions. KV cache (as SDAttention's): the "keys" rows hold the raw input rows
/// x_j, the "values" rows the V rows; key features of cached rows are recomputed each call.
/// Every head's features are one product each side ([A_0 … A_H−1] side by side); the heads run
/// in one ops::causal_attention call when their widths agree, else one call per head (on the
/// CPU in tiles with a streamed softmax: no [T, S] score matrix). Cost per call: 4·T·d² (values,
/// output) + 2·(T + S)·d·W (features, W = Σ w_h) + about 2·T·(past + T/2)·(W + d) (scores and
/// context). The matrices are kept in the backend's weight storage.
template <class T, int D = Dynamic, class Backend = backend::cpu>
class FactoredAttention : public ComponentTypes<T, Backend> {
  using Storage = storage_traits<Backend, T>;
  using Types = ComponentTypes<T, Backend>;
  using Matrix = typename Storage::template activations<>;
  template <class, int, class>
  friend class FactoredAttention;  // the converting constructor reads another backend's form

 public:
  using typename Types::ConstView, typename Types::View;
  static constexpr int size = D;
  using Input = typename Storage::template activations<D>;
  using Output = typename Storage::template activations<D>;
  using Weight = typename Storage::template weights<>;  // w_v, w_out [d, d]; factors [d, W]
  using Bias = typename Storage::template vector<>;     // biases [d] or [W]
  template <class B>
  using on_backend = FactoredAttention<T, D, B>;

  /// Scratch memory for forward(); reuse it across calls. After a call with T rows and S
  /// positions, a call with T rows and at most S positions allocates nothing (the key features
  /// are grow-only storage used through views; with a cache they are sized for its capacity).
  struct Workspace {
    Matrix values;                     // [T, d]
    Matrix fq;                         // [T, W]: every head's query features side by side
    Matrix fk;                         // [>= S, >= W]
    Matrix context;                    // [T, d]
    ops::Scratch<Backend, T> scratch;  // packing buffers, score tile
  };

  FactoredAttention() = default;

  /// Per-head factors, value and output projections w_v, w_out [d, d], b_v, b_out [d], and the
  /// logit scale (1/√d_h for a converted standard head). ShapeError when H does not divide d,
  /// a factor is not [d, w] with biases [w] and w ≥ 1, or a projection does not have width d.
  FactoredAttention(const std::vector<FactoredHead<T>>& heads, RowMatrix<T> w_v, RowVector<T> b_v,
                    RowMatrix<T> w_out, RowVector<T> b_out,
                    T scale) requires backend::is_host<Backend>
      : b_v_(std::move(b_v)), b_out_(std::move(b_out)), scale_(scale) {
    const Index d = w_out.rows(), n = static_cast<Index>(heads.size());
    if constexpr (D != Dynamic)
      check_dim("FactoredAttention: width (compile-time d)", D, d);
    if (n <= 0 || d % n != 0) {
      throw ShapeError(detail::expected_found("FactoredAttention: head count",
                                              "a positive divisor of d = " + std::to_string(d), n));
    }
    check_dim("FactoredAttention: w_out cols (d)", d, w_out.cols());
    check_dim("FactoredAttention: w_v rows (d)", d, w_v.rows());
    check_dim("FactoredAttention: w_v cols (d)", d, w_v.cols());
    check_dim("FactoredAttention: b_v size (d)", d, b_v_.size());
    check_dim("FactoredAttention: b_out size (d)", d, b_out_.size());
    Index total = 0;
    offsets_.push_back(0);
    for (Index h = 0; h < n; ++h) {
      const auto& f = heads[static_cast<std::size_t>(h)];
      const std::string what = "FactoredAttention: head " + std::to_string(h);
      const Index w = f.w_query.cols();
      if (w <= 0)
        throw ShapeError(detail::expected_found(what + " feature width", "at least 1", w));
      check_dim(what + " query factor rows (d)", d, f.w_query.rows());
      check_dim(what + " key factor rows (d)", d, f.w_key.rows());
      check_dim(what + " key factor cols (w)", w, f.w_key.cols());
      check_dim(what + " query bias size (w)", w, f.b_query.size());
      check_dim(what + " key bias size (w)", w, f.b_key.size());
      total += w;
      offsets_.push_back(total);
    }
    RowMatrix<T> w_query(d, total), w_key(d, total);
    b_query_.resize(1, total);
    b_key_.resize(1, total);
    for (Index h = 0; h < n; ++h) {
      const auto& f = heads[static_cast<std::size_t>(h)];
      const Index o = offsets_[static_cast<std::size_t>(h)], w = f.w_query.cols();
      w_query.middleCols(o, w) = f.w_query;
      w_key.middleCols(o, w) = f.w_key;
      b_query_.middleCols(o, w) = f.b_query;
      b_key_.middleCols(o, w) = f.b_key;
    }
    using Weights = typename Backend::weights;
    w_query_ = to_weight_storage<Weights>(std::move(w_query));
    w_key_ = to_weight_storage<Weights>(std::move(w_key));
    w_v_ = to_weight_storage<Weights>(std::move(w_v));
    w_out_ = to_weight_storage<Weights>(std::move(w_out));
  }

  /// The same attention on another backend: every factor, projection and bias copied into this
  /// backend's storage (uploaded once for backend::cuda). O(d² + d·W).
  template <class From>
  requires(!std::is_same_v<From, Backend>) explicit FactoredAttention(
      const FactoredAttention<T, D, From>& from)
      : w_query_(Storage::template from_host<>(from.w_query_)),
        w_key_(Storage::template from_host<>(from.w_key_)),
        b_query_(Storage::template vector_from_host<>(from.b_query_)),
        b_key_(Storage::template vector_from_host<>(from.b_key_)),
        offsets_(from.offsets_),
        w_v_(Storage::template from_host<>(from.w_v_)),
        b_v_(Storage::template vector_from_host<>(from.b_v_)),
        w_out_(Storage::template from_host<>(from.w_out_)),
        b_out_(Storage::template vector_from_host<>(from.b_out_)),
        scale_(from.scale_) {}

  /// The standard heads of `dense` as factors (A_h = W_Q,h, B_h = W_K,h, the q/k biases,
  /// scale 1/√d_h): the same attention. ArgumentError when `dense` rotates positions (rotary
  /// scores are not a fixed bilinear form).
  template <int D2, class B2>
  static FactoredAttention from_dense(
      const DenseAttention<T, D2, B2>& dense) requires backend::is_host<Backend> {
    if (dense.rotary_dims() != 0) {
      throw ArgumentError(detail::expected_found("FactoredAttention::from_dense: rotary dims",
                                                 "0 (no position-free bilinear form otherwise)",
                                                 dense.rotary_dims()));
    }
    const auto& w = dense.weights();
    const Index d = dense.features(), dh = dense.head_dim();
    std::vector<FactoredHead<T>> heads;
    for (Index h = 0; h < dense.heads(); ++h) {
      heads.push_back({w.w_qkv.middleCols(h * dh, dh), w.b_qkv.middleCols(h * dh, dh),
                       w.w_qkv.middleCols(d + h * dh, dh), w.b_qkv.middleCols(d + h * dh, dh)});
    }
    return FactoredAttention(heads, w.w_qkv.middleCols(2 * d, d), w.b_qkv.middleCols(2 * d, d),
                             w.w_out, w.b_out, T(1) / std::sqrt(static_cast<T>(dh)));
  }

  /// Y = attention(X), X, Y [T, d] (Y must not alias X). Without a cache X holds positions
  /// [0, T); with one, X's tokens follow the cached ones and X's rows and V rows are appended
  /// (ArgumentError when full; ShapeError when its width is not d). ShapeError on a width or
  /// row mismatch of X or Y.
  void forward(Context<Backend>& ctx, const ConstView& X, View Y, Workspace& ws,
               KVCacheLayerOf<T, Backend>* cache = nullptr) const {
    const Index d = features(), rows = X.rows(), dh = head_dim();
    const Index past = detail::check_attention_call("FactoredAttention::forward", d, X, Y, cache);
    if (rows == 0)
      return;
    ws.values.resize(rows, d);
    ops::gemm_bias(ctx, X, w_v_, b_v_, ws.values, ws.scratch);  // [T, d]
    // keys and values [S, d]: S = past + T, every position a new token may attend to
    const auto [span, keys, values] = detail::append_raw_rows(ctx, X, ws.values, cache, past);
    const Index total = w_query_.cols();
    ws.fq.resize(rows, total);
    ops::gemm_bias(ctx, X, w_query_, b_query_, ws.fq, ws.scratch);  // [T, W]
    ops::scale(ctx, ws.fq, scale_);  // any sign: the softmax then takes the logits as they are
    detail::grow_to(ws.fk, cache ? cache->capacity() : span, total);
    auto fk = ws.fk.topRows(span).leftCols(total);  // [S, W]
    ops::gemm_bias(ctx, keys, w_key_, b_key_, fk, ws.scratch);
    ws.context.resize(rows, d);
    if (uniform_width() > 0) {  // every head of one width: one call for all of them
      ops::causal_attention(ctx, ws.fq, fk, values, ws.context, heads(), T(1), past, ws.scratch);
      ops::gemm_bias(ctx, ws.context, w_out_, b_out_, Y, ws.scratch);  // [T, d]
      return;
    }
    for (Index h = 0; h < heads(); ++h) {
      const Index o = offsets_[static_cast<std::size_t>(h)], w = feature_width(h);
      ops::causal_attention(ctx, ws.fq.middleCols(o, w), fk.middleCols(o, w),
                            values.middleCols(h * dh, dh), ws.context.middleCols(h * dh, dh), 1,
                            T(1), past, ws.scratch);
    }
    ops::gemm_bias(ctx, ws.context, w_out_, b_out_, Y, ws.scratch);  // [T, d]
  }

  Index features() const { return w_out_.rows(); }
  Index heads() const { return offsets_.empty() ? 0 : static_cast<Index>(offsets_.size()) - 1; }
  Index head_dim() const { return heads() > 0 ? features() / heads() : 0; }
  /// Head h's feature width w_h.
  Index feature_width(Index h) const {
    return offsets_.at(static_cast<std::size_t>(h + 1)) - offsets_.at(static_cast<std::size_t>(h));
  }
  T scale() const { return scale_; }
  /// Head h's factors (host copies).
  FactoredHead<T> head(Index h) const requires backend::is_host<Backend> {
    const Index o = offsets_.at(static_cast<std::size_t>(h)), w = feature_width(h);
    return {w_query_.middleCols(o, w), b_query_.middleCols(o, w), w_key_.middleCols(o, w),
            b_key_.middleCols(o, w)};
  }
  /// The value and output projections [d, d] in this backend's weight storage, and their
  /// biases [d].
  const Weight& w_v() const { return w_v_; }
  const Bias& b_v() const { return b_v_; }
  const Weight& w_out() const { return w_out_; }
  const Bias& b_out() const { return b_out_; }

 private:
  // The common feature width of every head, or 0 when they differ. O(H).
  Index uniform_width() const {
    const Index w = heads() > 0 ? feature_width(0) : 0;
    for (Index h = 1; h < heads(); ++h) {
      if (feature_width(h) != w)
        return 0;
    }
    return w;
  }

  Weight w_query_, w_key_;      // [d, W]: heads side by side
  Bias b_query_, b_key_;        // [W]
  std::vector<Index> offsets_;  // head h's features are columns [offsets_[h], offsets_[h+1])
  Weight w_v_;
  Bias b_v_;
  Weight w_out_;
  Bias b_out_;
  T scale_ = T(1);
};

}  // namespace nlb
