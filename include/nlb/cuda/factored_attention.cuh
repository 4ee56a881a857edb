// Attention with factored scores on backend::cuda (PAPERS.md §B1; docs/attention.md): the device
// form of a host FactoredAttention — the converted heads of the routing/filtering analysis.
#pragma once

#include <algorithm>
#include <vector>

#include "nlb/attention/factored_attention.hpp"
#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/kv_cache.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/cuda/row_ops.cuh"

namespace nlb {

/// Multi-head causal attention with factored scores whose weights live in device memory, built
/// from a host FactoredAttention (its formula, nlb/attention/factored_attention.hpp):
///   per head: F_q = X A_h + a_h [T, w_h], F_k = K B_h + b_h [S, w_h],
///             P = softmax_causal(scale · F_q F_kᵀ),  C_h = P V_h;
///   V = X w_v + b_v,  Y = C w_out + b_out,
/// with K the keys (X, or every cached row). KV cache as on the host: "keys" rows hold the raw
/// input rows, "values" the V rows. Per head the features are two cuBLAS products, the logits
/// [T, S] one more, the causal softmax one pass, the context one product. Cost: 4·T·d² +
/// 2·(T + S)·d·W (W = Σ w_h) + 2·T·S·(W + d), S = past + T, the masked half included.
template <class T, int D>
class FactoredAttention<T, D, backend::cuda> {
 public:
  using Scalar = T;
  using backend_type = backend::cuda;
  static constexpr int size = D;

  /// Scratch for forward(): the values [T, d], one head's query and key features [T | S, w_h],
  /// its logits [T, S], the context [T, d]. Grows to the largest call and keeps its memory.
  struct Workspace {
    cuda::DeviceMatrix<T> values, query_features, key_features, scores, context;
  };

  /// Uploads a host factored attention: every head's factors, the projections and the scale.
  template <class HostBackend>
  explicit FactoredAttention(const FactoredAttention<T, D, HostBackend>& host)
      : w_v_(cuda::upload(host.w_v())),
        b_v_(cuda::upload(host.b_v())),
        w_out_(cuda::upload(host.w_out())),
        b_out_(cuda::upload(host.b_out())),
        scale_(host.scale()) {
    for (Index h = 0; h < host.heads(); ++h) {
      const FactoredHead<T> head = host.head(h);
      heads_.push_back({cuda::upload(head.w_query), cuda::upload(head.b_query),
                        cuda::upload(head.w_key), cuda::upload(head.b_key)});
      max_width_ = std::max(max_width_, head.w_query.cols());
    }
  }

  /// Y = attention(X) on the device. X [T, d], Y [T, d] (Y must not alias X). With a cache, X's
  /// rows and V rows are appended to it (ArgumentError when full). ShapeError on a mismatch.
  void forward(Context<backend::cuda>& ctx, cuda::DeviceView<const T> X, cuda::DeviceView<T> Y,
               Workspace& ws, cuda::KVCacheLayer<T>* cache = nullptr) const {
    const Index d = features(), rows = X.rows, dh = head_dim();
    const Index past =
        cuda::detail::check_attention_call<T>("FactoredAttention<cuda>::forward", d, X, Y, cache);
    if (rows == 0)
      return;
    ws.values.resize(rows, d);
    const cuda::DeviceView<T> values_new = ws.values.view();  // [T, d]
    ops::gemm_bias<T>(ctx, X, w_v_.view(), b_v_.view(), values_new);
    const Index span = past + rows;
    cuda::DeviceView<const T> keys = X, values = values_new;
    if (cache) {
      ops::copy<T>(ctx, X, cache->keys.view().middle_rows(past, rows));
      ops::copy<T>(ctx, values_new, cache->values.view().middle_rows(past, rows));
      cache->length = span;
      keys = static_cast<cuda::DeviceView<const T>>(cache->keys.view()).top_rows(span);
      values = static_cast<cuda::DeviceView<const T>>(cache->values.view()).top_rows(span);
    }
    ws.query_features.resize(rows, max_width_);
    ws.key_features.resize(span, max_width_);
    ws.scores.resize(rows, span);
    ws.context.resize(rows, d);
    const cuda::DeviceView<T> scores = ws.scores.view(), context = ws.context.view();
    for (Index h = 0; h < heads(); ++h) {
      const Head& head = heads_[static_cast<std::size_t>(h)];
      const Index w = head.w_query.cols();
      const auto fq = ws.query_features.view().middle_cols(0, w);  // [T, w_h]
      const auto fk = ws.key_features.view().middle_cols(0, w);    // [S, w_h]
      ops::gemm_bias<T>(ctx, X, head.w_query.view(), head.b_query.view(), fq);
      ops::gemm_bias<T>(ctx, keys, head.w_key.view(), head.b_key.view(), fk);
      ops::gemm<T>(ctx, fq, fk, scores, T(1), T(0), false, true);  // [T, S]
      ops::causal_softmax_rows<T>(ctx, scores, past, scale_);
      ops::gemm<T>(ctx, scores, values.middle_cols(h * dh, dh), context.middle_cols(h * dh, dh));
    }
    ops::gemm_bias<T>(ctx, context, w_out_.view(), b_out_.view(), Y);  // [T, d]
  }

  Index features() const { return w_out_.rows(); }
  Index heads() const { return static_cast<Index>(heads_.size()); }
  Index head_dim() const { return heads() > 0 ? features() / heads() : 0; }
  T scale() const { return scale_; }

 private:
  struct Head {
    cuda::DeviceMatrix<T> w_query, b_query, w_key, b_key;  // [d, w], [1, w], [d, w], [1, w]
  };
  std::vector<Head> heads_;
  cuda::DeviceMatrix<T> w_v_, b_v_, w_out_, b_out_;  // [d, d], [1, d], [d, d], [1, d]
  T scale_ = T(1);
  Index max_width_ = 0;
};

/// The device copy of a host factored attention (uploads its weights once).
template <class T, int D, class HostBackend>
FactoredAttention<T, D, backend::cuda> to_backend(
    backend::cuda, const FactoredAttention<T, D, HostBackend>& host) {
  return FactoredAttention<T, D, backend::cuda>(host);
}

}  // namespace nlb
