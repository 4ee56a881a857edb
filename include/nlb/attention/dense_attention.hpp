// Standard multi-head causal self-attention, with optional partial rotary positions
// (GPT-2: none; GPT-NeoX: the first rotary_dims of each head).
#pragma once

#include <cmath>
#include <utility>

#include "nlb/attention/detail/tiled_attention.hpp"
#include "nlb/attention/kv_cache.hpp"
#include "nlb/core.hpp"
#include "nlb/kernels/rotary.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/half_gemm.hpp"
#include "nlb/ops/rotary.hpp"

namespace nlb {

/// Weights of one attention layer in nlbudget's layout (Y = X W + b):
/// w_qkv [d, 3d] holds the Q, K and V projections side by side (columns [0, d), [d, 2d),
/// [2d, 3d)); within each, head h owns columns [h·d_h, (h+1)·d_h). This is GPT-2's c_attn
/// layout; GPT-NeoX's per-head interleaved query_key_value is permuted into it at load time.
/// The two matrices are kept in storage S (nlb/core/weight_storage.hpp), the biases in T.
template <class T, int D = Dynamic, class S = storage::f32>
struct AttentionWeights {
  weight_matrix<S, T, D, Dynamic> w_qkv;  // [d, 3d]
  RowVector<T> b_qkv;                     // [3d]
  weight_matrix<S, T, D, D> w_out;        // [d, d]
  RowVector<T, D> b_out;                  // [d]
};

/// `w` (float matrices, or MappedMatrix views for storage::mapped) with its matrices in storage
/// S (moved through when they are in it already). O(d²) for a conversion.
template <class S, class T, int D, class From>
AttentionWeights<T, D, S> to_weight_storage(AttentionWeights<T, D, From>&& w) {
  return {to_weight_storage<S>(std::move(w.w_qkv)), std::move(w.b_qkv),
          to_weight_storage<S>(std::move(w.w_out)), std::move(w.b_out)};
}

/// Multi-head causal attention:
///   [Q K V] = X w_qkv + b_qkv;  Q, K rotated (first rotary_dims per head);
///   per head: P = softmax_causal(Q_h K_hᵀ / sqrt(d_h)),  C_h = P V_h;
///   Y = C w_out + b_out.
/// X, Y [T, d]. With a KV cache the T new tokens sit at positions [past, past + T) and attend to
/// every cached position too. Each head runs in tiles with a streamed softmax
/// (detail::tiled_causal_attention): no [T, S] score matrix, and only the causal scores are
/// computed. Cost per call: 8·T·d² (projections) + about 4·T·(past + T/2)·d (scores and values).
/// The projections' matrices are kept in `Backend::weights` storage (float by default).
template <class T, int D = Dynamic, class Backend = backend::cpu>
class DenseAttention {
  static_assert(backend::is_host<Backend>,
                "DenseAttention: a host component: Backend must be backend::scalar or "
                "backend::simd<Arch> (backend::cuda runs its own components)");

 public:
  using Scalar = T;
  using backend_type = Backend;
  static constexpr int size = D;
  using Input = Activations<T, D>;
  using Output = Activations<T, D>;
  // Arguments bind as width-Dynamic references, never as fixed-width ones: a fixed-width
  // Eigen::Ref bound to data of another width is undefined behaviour in release builds (Eigen
  // only asserts), so the width could not be checked. With these the check below is real.
  using AnyInput = Activations<T>;
  using AnyOutput = Activations<T>;
  using Weights = typename Backend::weights;  // storage of w_qkv and w_out

  /// Scratch memory for forward(); reuse it across calls. After a call with T rows, a call
  /// with T rows allocates nothing, however long the KV cache has grown (the score tile has a
  /// fixed size).
  struct Workspace {
    Activations<T> qkv;                          // [T, 3d]
    detail::TiledAttentionScratch<T> attention;  // one score tile and its running softmax
    Activations<T, D> context;                   // [T, d]
    kernels::RotaryAngles<T> angles;             // [T, rotary_dims / 2] cos and sin
    GemmScratch<T> gemm;                         // packing buffers of the products
  };

  DenseAttention() = default;

  /// Throws ShapeError when the weights do not fit d and the head count, ArgumentError for an
  /// odd or too large rotary_dims. The weights are float matrices (converted to `Weights`
  /// storage) or already in it.
  template <class From = storage::f32>
  DenseAttention(AttentionWeights<T, D, From> weights, Index n_heads, Index rotary_dims = 0,
                 double rotary_base = 10000.0)
      : w_(to_weight_storage<Weights>(std::move(weights))),
        n_heads_(n_heads),
        rotary_dims_(rotary_dims),
        rotary_base_(rotary_base) {
    const Index d = w_.w_out.rows();
    if constexpr (D != Dynamic)
      check_dim("DenseAttention: width (compile-time d)", D, d);
    check_dim("DenseAttention: w_out cols (d)", d, w_.w_out.cols());
    check_dim("DenseAttention: w_qkv rows (d)", d, w_.w_qkv.rows());
    check_dim("DenseAttention: w_qkv cols (3d)", 3 * d, w_.w_qkv.cols());
    check_dim("DenseAttention: b_qkv size (3d)", 3 * d, w_.b_qkv.size());
    check_dim("DenseAttention: b_out size (d)", d, w_.b_out.size());
    if (n_heads <= 0 || d % n_heads != 0) {
      throw ShapeError(detail::expected_found(
          "DenseAttention: head count", "a positive divisor of d = " + std::to_string(d), n_heads));
    }
    if (rotary_dims < 0 || rotary_dims % 2 != 0 || rotary_dims > d / n_heads) {
      throw ArgumentError(detail::expected_found("DenseAttention: rotary dims",
                                                 "an even number in [0, head dim]", rotary_dims));
    }
  }

  /// Y = attention(X). Without a cache X holds positions [0, T); with one, X's tokens follow
  /// the cached ones and their keys and values are appended (ArgumentError when full).
  void forward(const Eigen::Ref<const AnyInput>& X, Eigen::Ref<AnyOutput> Y, Workspace& ws,
               KVCacheLayer<T>* cache = nullptr) const {
    const Index d = features(), rows = X.rows(), dh = head_dim();
    check_dim("DenseAttention::forward: input width (d)", d, X.cols());
    check_dim("DenseAttention::forward: output rows (T)", rows, Y.rows());
    check_dim("DenseAttention::forward: output width (d)", d, Y.cols());
    const Index past = cache ? cache->length : 0;
    if (cache) {
      check_dim("DenseAttention::forward: cache width (d)", d, cache->keys.cols());
      if (past + rows > cache->capacity()) {
        throw ArgumentError(detail::expected_found("DenseAttention::forward: cache positions",
                                                   "at most " + std::to_string(cache->capacity()),
                                                   past + rows));
      }
    }
    ws.qkv.resize(rows, 3 * d);
    ops::gemm_bias(Backend{}, ws.qkv, X, w_.w_qkv, w_.b_qkv, ws.gemm);  // [T, 3d]
    rotate(ws.qkv, past, ws.angles);

    const Index span = past + rows;  // S: every position a new token may attend to
    if (cache) {
      cache->keys.middleRows(past, rows) = ws.qkv.middleCols(d, d);
      cache->values.middleRows(past, rows) = ws.qkv.middleCols(2 * d, d);
      cache->length = span;
    }
    const T scale = T(1) / std::sqrt(static_cast<T>(dh));
    ws.context.resize(rows, d);
    for (Index h = 0; h < n_heads_; ++h) {
      const auto q = ws.qkv.middleCols(h * dh, dh);  // [T, d_h]
      auto context = ws.context.middleCols(h * dh, dh);
      if (cache) {
        detail::tiled_causal_attention<Backend, T>(
            Backend{}, q, cache->keys.block(0, h * dh, span, dh),
            cache->values.block(0, h * dh, span, dh), scale, past, context, ws.attention, ws.gemm);
      } else {
        detail::tiled_causal_attention<Backend, T>(Backend{}, q, ws.qkv.middleCols(d + h * dh, dh),
                                                   ws.qkv.middleCols(2 * d + h * dh, dh), scale,
                                                   past, context, ws.attention, ws.gemm);
      }
    }
    ops::gemm_bias(Backend{}, Y, ws.context, w_.w_out, w_.b_out, ws.gemm);  // [T, d]
  }

  Index features() const { return w_.w_out.rows(); }
  Index heads() const { return n_heads_; }
  Index head_dim() const { return n_heads_ > 0 ? features() / n_heads_ : 0; }
  Index rotary_dims() const { return rotary_dims_; }
  double rotary_base() const { return rotary_base_; }
  const AttentionWeights<T, D, Weights>& weights() const { return w_; }

 private:
  // Rotates the first rotary_dims of every Q and K head of positions [past, past + T).
  void rotate(Activations<T>& qkv, Index past, kernels::RotaryAngles<T>& angles) const {
    if (rotary_dims_ == 0)
      return;
    const Index d = features(), dh = head_dim(), half = rotary_dims_ / 2;
    kernels::rotary_angles<T>(past, qkv.rows(), rotary_dims_, rotary_base_, angles);
    for (Index t = 0; t < qkv.rows(); ++t) {
      const T* cos = angles.cos.data() + t * half;
      const T* sin = angles.sin.data() + t * half;
      for (Index h = 0; h < n_heads_; ++h) {
        ops::rotate_half(Backend{}, &qkv(t, h * dh), rotary_dims_, cos, sin);      // Q
        ops::rotate_half(Backend{}, &qkv(t, d + h * dh), rotary_dims_, cos, sin);  // K
      }
    }
  }

  AttentionWeights<T, D, Weights> w_;
  Index n_heads_ = 0;
  Index rotary_dims_ = 0;
  double rotary_base_ = 10000.0;
};

}  // namespace nlb
