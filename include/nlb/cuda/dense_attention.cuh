// Multi-head causal self-attention with optional partial rotary positions on backend::cuda:
// the specialisation DenseAttention<T, D, backend::cuda> of nlb/attention/dense_attention.hpp.
#pragma once

#include <cmath>
#include <string>

#include "nlb/attention/dense_attention.hpp"
#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/detail/qkv_projection.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/kv_cache.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/cuda/row_ops.cuh"

namespace nlb {

/// Dense attention whose weights live in device memory, built from a host DenseAttention
/// (to_backend). The host component's formula and layout (w_qkv [d, 3d] = [Q K V], head h in
/// columns [h·d_h, (h+1)·d_h) of each):
///   [Q K V] = X w_qkv + b_qkv;  Q, K rotated (first rotary_dims per head);
///   per head: P = softmax_causal(Q_h K_hᵀ / sqrt(d_h)),  C_h = P V_h;   Y = C w_out + b_out.
/// X, Y [T, d]. With a device KV cache the T new tokens sit at positions [past, past + T).
/// Per head the scores [T, past + T] are one cuBLAS product, the causal softmax one pass over
/// them (row_ops.cuh), the context one more product: 8·T·d² + 4·T·(past + T)·d FLOPs, the
/// masked half of the scores included (a fused tiled kernel is the planned speed-up).
template <class T, int D>
class DenseAttention<T, D, backend::cuda> {
 public:
  using Scalar = T;
  using backend_type = backend::cuda;
  static constexpr int size = D;

  /// Scratch for forward(): qkv [T, 3d], one head's scores [T, S], the context [T, d]. Grows to
  /// the largest call and keeps its memory.
  struct Workspace {
    cuda::DeviceMatrix<T> qkv, scores, context;
  };

  /// Uploads a host attention's weights, head count and rotary settings.
  template <class HostBackend>
  explicit DenseAttention(const DenseAttention<T, D, HostBackend>& host) : projection_(host) {}

  /// Y = attention(X) on the device. X [T, d], Y [T, d] (Y must not alias X). With a cache, X's
  /// tokens follow the cached ones and their keys and values are appended (ArgumentError when
  /// full). Throws ShapeError on a width or row mismatch.
  void forward(Context<backend::cuda>& ctx, cuda::DeviceView<const T> X, cuda::DeviceView<T> Y,
               Workspace& ws, cuda::KVCacheLayer<T>* cache = nullptr) const {
    const Index d = features(), rows = X.rows, dh = head_dim();
    const Index past =
        cuda::detail::check_attention_call<T>("DenseAttention<cuda>::forward", d, X, Y, cache);
    if (rows == 0)
      return;
    ws.qkv.resize(rows, 3 * d);
    const cuda::DeviceView<T> qkv = ws.qkv.view();  // [T, 3d]
    projection_.project(ctx, X, qkv, past);

    const Index span = past + rows;  // S: every position a new token may attend to
    cuda::DeviceView<const T> keys = qkv.middle_cols(d, d), values = qkv.middle_cols(2 * d, d);
    if (cache) {
      ops::copy<T>(ctx, keys, cache->keys.view().middle_rows(past, rows));
      ops::copy<T>(ctx, values, cache->values.view().middle_rows(past, rows));
      cache->length = span;
      keys = static_cast<cuda::DeviceView<const T>>(cache->keys.view()).top_rows(span);
      values = static_cast<cuda::DeviceView<const T>>(cache->values.view()).top_rows(span);
    }
    ws.scores.resize(rows, span);
    ws.context.resize(rows, d);
    const cuda::DeviceView<T> scores = ws.scores.view(), context = ws.context.view();
    const T scale = T(1) / std::sqrt(static_cast<T>(dh));
    for (Index h = 0; h < heads(); ++h) {
      const cuda::DeviceView<const T> q = qkv.middle_cols(h * dh, dh);  // [T, d_h]
      ops::gemm<T>(ctx, q, keys.middle_cols(h * dh, dh), scores, T(1), T(0), false, true);
      ops::causal_softmax_rows<T>(ctx, scores, past, scale);
      ops::gemm<T>(ctx, scores, values.middle_cols(h * dh, dh), context.middle_cols(h * dh, dh));
    }
    projection_.output(ctx, context, Y);  // [T, d]
  }

  Index features() const { return projection_.features(); }
  Index heads() const { return projection_.heads(); }
  Index head_dim() const { return projection_.head_dim(); }
  Index rotary_dims() const { return projection_.rotary_dims(); }
  double rotary_base() const { return projection_.rotary_base(); }

 private:
  cuda::detail::QkvProjection<T> projection_;  // w_qkv, b_qkv, w_out, b_out, heads, rotary
};

/// The device copy of a host dense attention (uploads its weights once).
template <class T, int D, class HostBackend>
DenseAttention<T, D, backend::cuda> to_backend(backend::cuda,
                                               const DenseAttention<T, D, HostBackend>& host) {
  return DenseAttention<T, D, backend::cuda>(host);
}

}  // namespace nlb
