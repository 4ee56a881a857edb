// Multi-head causal attention whose per-head score form is a general low-rank bilinear form
// given by its factors: ℓ_ij = (x_i A_h + a_h)·(x_j B_h + b_h) · scale. The converted heads of
// the routing/filtering analysis run as this (PAPERS §B1, analysis/attention_conversions.hpp):
// a standard head is A_h = W_Q,h, B_h = W_K,h (biases b_Q,h, b_K,h); a head whose skew part was
// truncated or whose symmetric part was replaced is another pair (A_h, B_h) of any width.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "nlb/attention/dense_attention.hpp"
#include "nlb/attention/detail/tiled_attention.hpp"
#include "nlb/attention/kv_cache.hpp"
#include "nlb/core.hpp"
#include "nlb/ops/gemm.hpp"

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
/// Each head runs in tiles with a streamed softmax (detail::tiled_causal_attention: no [T, S]
/// score matrix). Cost per call: 4·T·d² (values, output) + 2·S·d·W (features, W = Σ w_h) +
/// about 2·T·(past + T/2)·(W + d) (scores and context).
template <class T, int D = Dynamic, class Backend = backend::cpu>
class FactoredAttention {
  static_assert(backend::is_host<Backend>,
                "FactoredAttention: a host component: Backend must be backend::scalar or "
                "backend::simd<Arch> (backend::cuda runs its own components)");

 public:
  using Scalar = T;
  using backend_type = Backend;
  static constexpr int size = D;
  using Input = Activations<T, D>;
  using Output = Activations<T, D>;
  using AnyInput = Activations<T>;
  using AnyOutput = Activations<T>;

  /// Scratch memory for forward(); reuse it across calls.
  struct Workspace {
    Activations<T> values;                       // [T, d]
    RowMatrix<T> fq;                             // [T, W]: every head's query features side by side
    RowMatrix<T> fk;                             // [S, W]
    detail::TiledAttentionScratch<T> attention;  // one score tile and its running softmax
    Activations<T> context;                      // [T, d]
    GemmScratch<T> gemm;                         // packing buffers of the products
  };

  FactoredAttention() = default;

  /// Per-head factors, value and output projections w_v, w_out [d, d], b_v, b_out [d], and the
  /// logit scale (1/√d_h for a converted standard head). ShapeError when H does not divide d,
  /// a factor is not [d, w] with biases [w] and w ≥ 1, or a projection does not have width d.
  FactoredAttention(const std::vector<FactoredHead<T>>& heads, RowMatrix<T> w_v, RowVector<T> b_v,
                    RowMatrix<T> w_out, RowVector<T> b_out, T scale)
      : w_v_(std::move(w_v)),
        b_v_(std::move(b_v)),
        w_out_(std::move(w_out)),
        b_out_(std::move(b_out)),
        scale_(scale) {
    const Index d = w_out_.rows(), n = static_cast<Index>(heads.size());
    if constexpr (D != Dynamic)
      check_dim("FactoredAttention: width (compile-time d)", D, d);
    if (n <= 0 || d % n != 0) {
      throw ShapeError(detail::expected_found("FactoredAttention: head count",
                                              "a positive divisor of d = " + std::to_string(d), n));
    }
    check_dim("FactoredAttention: w_out cols (d)", d, w_out_.cols());
    check_dim("FactoredAttention: w_v rows (d)", d, w_v_.rows());
    check_dim("FactoredAttention: w_v cols (d)", d, w_v_.cols());
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
    w_query_.resize(d, total);
    w_key_.resize(d, total);
    b_query_.resize(1, total);
    b_key_.resize(1, total);
    for (Index h = 0; h < n; ++h) {
      const auto& f = heads[static_cast<std::size_t>(h)];
      const Index o = offsets_[static_cast<std::size_t>(h)], w = f.w_query.cols();
      w_query_.middleCols(o, w) = f.w_query;
      w_key_.middleCols(o, w) = f.w_key;
      b_query_.middleCols(o, w) = f.b_query;
      b_key_.middleCols(o, w) = f.b_key;
    }
  }

  /// The standard heads of `dense` as factors (A_h = W_Q,h, B_h = W_K,h, the q/k biases,
  /// scale 1/√d_h): the same attention. ArgumentError when `dense` rotates positions (rotary
  /// scores are not a fixed bilinear form).
  template <int D2, class B2>
  static FactoredAttention from_dense(const DenseAttention<T, D2, B2>& dense) {
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

  /// Y = attention(X), X, Y [T, d]. Without a cache X holds positions [0, T); with one, X's
  /// tokens follow the cached ones and X's rows and V rows are appended (ArgumentError when
  /// full; ShapeError when its width is not d).
  void forward(const Eigen::Ref<const AnyInput>& X, Eigen::Ref<AnyOutput> Y, Workspace& ws,
               KVCacheLayer<T>* cache = nullptr) const {
    const Index d = features(), rows = X.rows(), dh = head_dim();
    check_dim("FactoredAttention::forward: input width (d)", d, X.cols());
    check_dim("FactoredAttention::forward: output rows (T)", rows, Y.rows());
    check_dim("FactoredAttention::forward: output width (d)", d, Y.cols());
    const Index past = cache ? cache->length : 0;
    if (cache) {
      check_dim("FactoredAttention::forward: cache key width (d)", d, cache->keys.cols());
      check_dim("FactoredAttention::forward: cache value width (d)", d, cache->values.cols());
      if (past + rows > cache->capacity()) {
        throw ArgumentError(detail::expected_found("FactoredAttention::forward: cache positions",
                                                   "at most " + std::to_string(cache->capacity()),
                                                   past + rows));
      }
    }
    ws.values.resize(rows, d);
    ops::gemm_bias(Backend{}, ws.values, X, w_v_, b_v_, ws.gemm);
    const Index span = past + rows;
    if (cache) {
      cache->keys.middleRows(past, rows) = X;
      cache->values.middleRows(past, rows) = ws.values;
      cache->length = span;
    }
    const Eigen::Ref<const AnyInput> keys =
        cache ? Eigen::Ref<const AnyInput>(cache->keys.topRows(span)) : X;
    const Eigen::Ref<const AnyInput> values =
        cache ? Eigen::Ref<const AnyInput>(cache->values.topRows(span))
              : Eigen::Ref<const AnyInput>(ws.values);
    const Index total = w_query_.cols();
    ws.fq.resize(rows, total);
    ops::gemm_bias(Backend{}, ws.fq, X, w_query_, b_query_, ws.gemm);
    ws.fq *= scale_;  // any sign: the tiles' softmax then takes the logits as they are
    ws.fk.resize(span, total);
    ops::gemm_bias(Backend{}, ws.fk, keys, w_key_, b_key_, ws.gemm);
    ws.context.resize(rows, d);
    for (Index h = 0; h < heads(); ++h) {
      const Index o = offsets_[static_cast<std::size_t>(h)];
      const Index w = offsets_[static_cast<std::size_t>(h + 1)] - o;
      detail::tiled_causal_attention<Backend, T>(
          Backend{}, ws.fq.middleCols(o, w), ws.fk.middleCols(o, w), values.middleCols(h * dh, dh),
          T(1), past, ws.context.middleCols(h * dh, dh), ws.attention, ws.gemm);
    }
    ops::gemm_bias(Backend{}, Y, ws.context, w_out_, b_out_, ws.gemm);
  }

  Index features() const { return w_out_.rows(); }
  Index heads() const { return offsets_.empty() ? 0 : static_cast<Index>(offsets_.size()) - 1; }
  Index head_dim() const { return heads() > 0 ? features() / heads() : 0; }
  /// Head h's feature width w_h.
  Index feature_width(Index h) const {
    return offsets_.at(static_cast<std::size_t>(h + 1)) - offsets_.at(static_cast<std::size_t>(h));
  }
  T scale() const { return scale_; }
  /// Head h's factors (copies).
  FactoredHead<T> head(Index h) const {
    const Index o = offsets_.at(static_cast<std::size_t>(h)), w = feature_width(h);
    return {w_query_.middleCols(o, w), b_query_.middleCols(o, w), w_key_.middleCols(o, w),
            b_key_.middleCols(o, w)};
  }
  const RowMatrix<T>& w_v() const { return w_v_; }
  const RowVector<T>& b_v() const { return b_v_; }
  const RowMatrix<T>& w_out() const { return w_out_; }
  const RowVector<T>& b_out() const { return b_out_; }

 private:
  RowMatrix<T> w_query_, w_key_;  // [d, W]: heads side by side
  RowVector<T> b_query_, b_key_;  // [W]
  std::vector<Index> offsets_;    // head h's features are columns [offsets_[h], offsets_[h+1])
  RowMatrix<T> w_v_;
  RowVector<T> b_v_;
  RowMatrix<T> w_out_;
  RowVector<T> b_out_;
  T scale_ = T(1);
};

}  // namespace nlb
