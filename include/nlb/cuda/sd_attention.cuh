// S–D attention on backend::cuda (PAPERS.md §B2; docs/attention.md): the device form of a host
// SDAttention with either filter (diagonal or scalar) and any routing rank per head.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "nlb/attention/sd_attention.hpp"
#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/kv_cache.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/cuda/row_ops.cuh"

namespace nlb::cuda {

/// Multi-head causal S–D attention with its weights in device memory, built from a host
/// SDAttention (its formula, nlb/attention/sd_attention.hpp): for head h with routing
/// S_h = U Vᵀ − V Uᵀ (U, V [d, r/2]) and filter D_h = diag(δ_h),
///   ℓ_ij = x_i (S_h − D_h) x_jᵀ / sqrt(d_h) for j <= i,  P_h = softmax_j(ℓ),
///   V = X w_v + b_v;  C_h = P_h V_h;  Y = C w_out + b_out.
/// Per head the logits are one cuBLAS product of the fused features
///   [−(X D_h)/sqrt(d_h) | X [U V]/sqrt(d_h)]  times  [K | K [V −U]]ᵀ   (inner size d + r),
/// with K the keys (X, or every cached row): the host's features, so the host and device agree
/// to rounding. KV cache as on the host: "keys" rows hold the raw input rows, "values" the V rows.
/// Cost: 4·T·d² (projections) + per head 2·(T + S)·d·r (features) + 2·T·S·(d + r + d_h), S =
/// past + T, the masked half of the logits included.
template <class T>
class SDAttention {
 public:
  using Scalar = T;
  using backend_type = backend::cuda;

  /// Scratch for forward(): the values [T, d], query and key features [T | S, d + r], one head's
  /// logits [T, S] and the context [T, d]. Grows to the largest call and keeps its memory.
  struct Workspace {
    DeviceMatrix<T> values, query_features, key_features, scores, context;
  };

  /// Uploads a host S–D attention: per head [U V] and [V −U] [d, r] and the filter's diagonal.
  template <class Routing, class Filter, class HostBackend>
  explicit SDAttention(const nlb::SDAttention<Routing, Filter, HostBackend>& host)
      : w_v_(upload(host.w_v())),
        b_v_(upload(host.b_v())),
        w_out_(upload(host.w_out())),
        b_out_(upload(host.b_out())) {
    const Index d = host.features();
    for (Index h = 0; h < host.heads(); ++h) {
      const auto& routing = host.routing(h);
      const Index half = routing.rank() / 2;
      RowMatrix<T> query(d, 2 * half), key(d, 2 * half);
      query << routing.u(), routing.v();
      key << routing.v(), -routing.u();
      query_factors_.push_back(upload(query));
      key_factors_.push_back(upload(key));
      const auto& filter = host.filter(h);
      if constexpr (requires { filter.diagonal(d); })
        diagonals_.push_back(upload(filter.diagonal(d)));  // ScalarFilter: softplus(θ) d times
      else
        diagonals_.push_back(upload(filter.diagonal()));  // DiagonalFilter: softplus(θ) [d]
      max_rank_ = std::max(max_rank_, 2 * half);
    }
  }

  /// Y = attention(X) on the device. X [T, d], Y [T, d] (Y must not alias X). With a cache, X's
  /// rows and V rows are appended to it (ArgumentError when full). ShapeError on a mismatch.
  void forward(Context<backend::cuda>& ctx, DeviceView<const T> X, DeviceView<T> Y, Workspace& ws,
               KVCacheLayer<T>* cache = nullptr) const {
    const Index d = features(), rows = X.rows, dh = head_dim();
    const Index past =
        detail::check_attention_call<T>("cuda::SDAttention::forward", d, X, Y, cache);
    if (rows == 0)
      return;
    ws.values.resize(rows, d);
    const DeviceView<T> values_new = ws.values.view();  // [T, d]
    ops::gemm_bias<T>(ctx, X, w_v_.view(), b_v_.view(), values_new);
    const Index span = past + rows;
    DeviceView<const T> keys = X, values = values_new;
    if (cache) {
      ops::copy<T>(ctx, X, cache->keys.view().middle_rows(past, rows));
      ops::copy<T>(ctx, values_new, cache->values.view().middle_rows(past, rows));
      cache->length = span;
      keys = static_cast<DeviceView<const T>>(cache->keys.view()).top_rows(span);
      values = static_cast<DeviceView<const T>>(cache->values.view()).top_rows(span);
    }
    ws.query_features.resize(rows, d + max_rank_);
    ws.key_features.resize(span, d + max_rank_);
    ws.scores.resize(rows, span);
    ws.context.resize(rows, d);
    const DeviceView<T> lq = ws.query_features.view(), lk = ws.key_features.view(),
                        scores = ws.scores.view(), context = ws.context.view();
    ops::copy<T>(ctx, keys, lk.middle_cols(0, d));  // the filter's key side, shared by every head
    const T scale = T(1) / std::sqrt(static_cast<T>(dh));
    for (Index h = 0; h < heads(); ++h) {
      const auto u = static_cast<std::size_t>(h);
      const Index r = query_factors_[u].cols(), width = d + r;
      ops::scale_columns<T>(ctx, X, diagonals_[u].view(), -scale, lq.middle_cols(0, d));
      ops::gemm<T>(ctx, X, query_factors_[u].view(), lq.middle_cols(d, r), scale, T(0));
      ops::gemm<T>(ctx, keys, key_factors_[u].view(), lk.middle_cols(d, r));
      ops::gemm<T>(ctx, lq.middle_cols(0, width), lk.middle_cols(0, width), scores, T(1), T(0),
                   false, true);  // [T, S]
      ops::causal_softmax_rows<T>(ctx, scores, past, T(1));
      ops::gemm<T>(ctx, scores, values.middle_cols(h * dh, dh), context.middle_cols(h * dh, dh));
    }
    ops::gemm_bias<T>(ctx, context, w_out_.view(), b_out_.view(), Y);  // [T, d]
  }

  Index features() const { return w_out_.rows(); }
  Index heads() const { return static_cast<Index>(query_factors_.size()); }
  Index head_dim() const { return heads() > 0 ? features() / heads() : 0; }

 private:
  std::vector<DeviceMatrix<T>> query_factors_;  // per head [U V] [d, r]
  std::vector<DeviceMatrix<T>> key_factors_;    // per head [V −U] [d, r]
  std::vector<DeviceMatrix<T>> diagonals_;      // per head the filter's diagonal [1, d]
  DeviceMatrix<T> w_v_, b_v_, w_out_, b_out_;   // [d, d], [1, d], [d, d], [1, d]
  Index max_rank_ = 0;
};

}  // namespace nlb::cuda

namespace nlb {

/// The device copy of a host S–D attention (uploads its weights once).
template <class Routing, class Filter, class HostBackend>
cuda::SDAttention<typename Routing::Scalar> to_backend(
    backend::cuda, const SDAttention<Routing, Filter, HostBackend>& host) {
  return cuda::SDAttention<typename Routing::Scalar>(host);
}

}  // namespace nlb
