// Standard multi-head causal self-attention, with optional partial rotary positions
// (GPT-2: none; GPT-NeoX: the first rotary_dims of each head). Written once for every backend:
// its work is the ops layer's products, rotary positions and causal attention (DESIGN.md §4).
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <algorithm>
#include <cmath>
#include <string>

#include "nlb/attention/attention_weights.hpp"
#include "nlb/attention/detail/cache_append.hpp"
#include "nlb/attention/detail/projected_heads.hpp"
#include "nlb/attention/kv_cache.hpp"
#include "nlb/core.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/ops/attention.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/narrow_gemm.hpp"
#include "nlb/ops/rotary.hpp"
#include "nlb/ops/rows.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

/// Multi-head causal attention, with H query heads and H_kv key/value heads:
///   [Q K V] = X w_qkv + b_qkv;  Q, K rotated (first rotary_dims per head);
///   per head h: P = softmax_causal(Q_h K_gᵀ / sqrt(d_h)),  C_h = P V_g,  g = h / (H / H_kv);
///   Y = C w_out + b_out.
/// H_kv = H is GPT-2's and GPT-NeoX's multi-head attention; H_kv < H the Llama family's
/// grouped-query attention (K, V and the KV cache [S, H_kv·d_h]; H_kv = 1: multi-query).
/// X, Y [T, d]. With a KV cache the T new tokens sit at positions [past, past + T) and attend to
/// every cached position too. Every head runs in one ops::causal_attention call (on the CPU in
/// tiles with a streamed softmax: no [T, S] score matrix, only the causal scores computed).
/// Cost per call: 2·T·d·(2d + 2·d_kv) (projections) + about 4·T·(past + T/2)·d (scores and
/// values).
/// The projections' matrices are kept in the backend's weight storage
/// (storage_traits<Backend, T>::weights: float by default, 16-bit or mapped with
/// backend::with_weights, device memory on backend::cuda).
template <class T, int D = Dynamic, class Backend = backend::cpu>
class DenseAttention : public detail::ProjectedHeads<DenseAttention, T, D, Backend> {
  using Base = detail::ProjectedHeads<DenseAttention, T, D, Backend>;

 public:
  using typename Base::ConstView, typename Base::View, typename Base::Workspace;
  /// The class name, as the constructor's messages give it.
  static constexpr const char* kind_name = "DenseAttention";
  /// Fewer key/value heads than query heads are allowed (grouped-query attention).
  static constexpr bool grouped_heads = true;

  /// DenseAttention() (empty), DenseAttention(weights, n_heads, rotary_dims = 0, rotary_base =
  /// 10000, kv_heads = n_heads, rope_scaling = none) on a host backend, and the converting
  /// DenseAttention(const DenseAttention<T, D, From>&) onto another backend: ProjectedHeads'
  /// constructors (ShapeError for sizes and head counts, ArgumentError for an odd or too large
  /// rotary_dims or an unusable rope scaling).
  using Base::Base;

  /// Y = attention(X), X, Y [T, d] (Y must not alias X). Without a cache X holds positions
  /// [0, T); with one, X's tokens follow the cached ones and their (rotated) keys and values
  /// are appended (ArgumentError when full; ShapeError when its width is not kv_width()).
  /// ShapeError on a width or row mismatch of X or Y.
  void forward(Context<Backend>& ctx, const ConstView& X, View Y, Workspace& ws,
               KVCacheLayerOf<T, Backend>* cache = nullptr) const {
    const Index d = this->features(), kv = this->kv_width(), rows = X.rows();
    const Index past = detail::check_attention_call("DenseAttention::forward", d, X, Y, cache, kv);
    if (rows == 0)
      return;
    ws.qkv.resize(rows, d + 2 * kv);
    ops::gemm_bias(ctx, X, this->w_.w_qkv, this->w_.b_qkv, ws.qkv, ws.scratch);  // [T, d + 2kv]
    // The query heads and the key heads side by side, [Q K]: one rotation for both.
    ops::rotate_heads(ctx, ws.qkv.leftCols(d + kv), this->n_heads_ + this->n_kv_heads_,
                      this->rotary_dims_, past, this->rotary_base_, ws.scratch,
                      this->rope_scaling_);
    const T scale = T(1) / std::sqrt(static_cast<T>(this->head_dim()));
    ws.context.resize(rows, d);
    if (cache) {
      // S = past + T: every position a new token may attend to
      const Index span = detail::append_to_cache(ctx, ws.qkv.middleCols(d, kv),
                                                 ws.qkv.middleCols(d + kv, kv), cache, past);
      ops::causal_attention(ctx, ws.qkv.leftCols(d), cache->keys.topRows(span),
                            cache->values.topRows(span), ws.context, this->n_heads_, scale, past,
                            ws.scratch);
    } else {
      ops::causal_attention(ctx, ws.qkv.leftCols(d), ws.qkv.middleCols(d, kv),
                            ws.qkv.middleCols(d + kv, kv), ws.context, this->n_heads_, scale, past,
                            ws.scratch);
    }
    ops::gemm_bias(ctx, ws.context, this->w_.w_out, this->w_.b_out, Y, ws.scratch);  // [T, d]
  }
};

}  // namespace nlb
