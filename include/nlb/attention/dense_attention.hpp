// Standard multi-head causal self-attention, with optional partial rotary positions
// (GPT-2: none; GPT-NeoX: the first rotary_dims of each head). Written once for every backend:
// its work is the ops layer's products, rotary positions and causal attention (DESIGN.md §4).
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

#include "nlb/attention/kv_cache.hpp"
#include "nlb/core.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/ops/attention.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/half_gemm.hpp"
#include "nlb/ops/rotary.hpp"
#include "nlb/ops/rows.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

/// Weights of one attention layer in nlbudget's layout (Y = X W + b):
/// w_qkv [d, 3d] holds the Q, K and V projections side by side (columns [0, d), [d, 2d),
/// [2d, 3d)); within each, head h owns columns [h·d_h, (h+1)·d_h). This is GPT-2's c_attn
/// layout; GPT-NeoX's per-head interleaved query_key_value is permuted into it at load time.
/// The two matrices are kept in storage S (nlb/core/weight_storage.hpp; storage::device on
/// backend::cuda), the biases in T in S's memory space.
template <class T, int D = Dynamic, class S = storage::f32>
struct AttentionWeights {
  weight_matrix<S, T, D, Dynamic> w_qkv;                        // [d, 3d]
  typename vector_in<storage::memory_of<S>, T>::type b_qkv;     // [3d]
  weight_matrix<S, T, D, D> w_out;                              // [d, d]
  typename vector_in<storage::memory_of<S>, T, D>::type b_out;  // [d]
};

/// `w` (float matrices, or MappedMatrix views for storage::mapped) with its matrices in host
/// storage S (moved through when they are in it already). O(d²) for a conversion.
template <class S, class T, int D, class From>
AttentionWeights<T, D, S> to_weight_storage(AttentionWeights<T, D, From>&& w) {
  return {to_weight_storage<S>(std::move(w.w_qkv)), std::move(w.b_qkv),
          to_weight_storage<S>(std::move(w.w_out)), std::move(w.b_out)};
}

namespace detail {
/// ShapeError / ArgumentError unless `w` fits width d (and a compile-time D), `n_heads`
/// divides d and rotary_dims is even and at most a head's width. `what` names the component.
template <int D, class W>
void check_attention_weights(const char* what, const W& w, Index n_heads, Index rotary_dims) {
  const std::string name = what;
  const Index d = w.w_out.rows();
  if constexpr (D != Dynamic)
    check_dim(name + ": width (compile-time d)", D, d);
  check_dim(name + ": w_out cols (d)", d, w.w_out.cols());
  check_dim(name + ": w_qkv rows (d)", d, w.w_qkv.rows());
  check_dim(name + ": w_qkv cols (3d)", 3 * d, w.w_qkv.cols());
  check_dim(name + ": b_qkv size (3d)", 3 * d, w.b_qkv.size());
  check_dim(name + ": b_out size (d)", d, w.b_out.size());
  if (n_heads <= 0 || d % n_heads != 0) {
    throw ShapeError(expected_found(name + ": head count",
                                    "a positive divisor of d = " + std::to_string(d), n_heads));
  }
  if (rotary_dims < 0 || rotary_dims % 2 != 0 || rotary_dims > d / n_heads) {
    throw ArgumentError(
        expected_found(name + ": rotary dims", "an even number in [0, head dim]", rotary_dims));
  }
}

/// Grows the work matrix m to at least [rows, cols] (keeping the larger of each size), so that a
/// buffer whose shape follows a growing KV cache, or the widest of the layers sharing a
/// workspace, allocates once (Eigen's resize reallocates whenever the size changes); its users
/// take views (topRows / leftCols). Contents are unspecified after growing.
template <class M>
void grow_to(M& m, Index rows, Index cols) {
  if (m.rows() < rows || m.cols() < cols)
    m.resize(std::max<Index>(m.rows(), rows), std::max<Index>(m.cols(), cols));
}

/// `w` (on any backend) copied into Backend's storage: matrices by from_host (uploaded to a
/// device, converted to 16 bits, …), biases by vector_from_host. O(d²).
template <class Backend, class T, int D, class From>
AttentionWeights<T, D, typename Backend::weights> copy_attention_weights(
    const AttentionWeights<T, D, From>& w) {
  using Storage = storage_traits<Backend, T>;
  return {Storage::template from_host<D, Dynamic>(w.w_qkv),
          Storage::template vector_from_host<Dynamic>(w.b_qkv),
          Storage::template from_host<D, D>(w.w_out),
          Storage::template vector_from_host<D>(w.b_out)};
}
}  // namespace detail

/// Multi-head causal attention:
///   [Q K V] = X w_qkv + b_qkv;  Q, K rotated (first rotary_dims per head);
///   per head: P = softmax_causal(Q_h K_hᵀ / sqrt(d_h)),  C_h = P V_h;
///   Y = C w_out + b_out.
/// X, Y [T, d]. With a KV cache the T new tokens sit at positions [past, past + T) and attend to
/// every cached position too. Every head runs in one ops::causal_attention call (on the CPU in
/// tiles with a streamed softmax: no [T, S] score matrix, only the causal scores computed).
/// Cost per call: 8·T·d² (projections) + about 4·T·(past + T/2)·d (scores and values).
/// The projections' matrices are kept in the backend's weight storage
/// (storage_traits<Backend, T>::weights: float by default, 16-bit or mapped with
/// backend::with_weights, device memory on backend::cuda).
template <class T, int D = Dynamic, class Backend = backend::cpu>
class DenseAttention {
  using Storage = storage_traits<Backend, T>;

 public:
  using Scalar = T;
  using backend_type = Backend;
  static constexpr int size = D;
  using Input = typename Storage::template activations<D>;
  using Output = typename Storage::template activations<D>;
  // Arguments bind as width-Dynamic views, never as fixed-width ones: a fixed-width Eigen::Ref
  // bound to data of another width is undefined behaviour in release builds (Eigen only
  // asserts), so the width could not be checked. With these the check in forward() is real.
  using ConstView = typename Storage::const_view;
  using View = typename Storage::view;
  using Weights = typename Backend::weights;  // storage of w_qkv and w_out
  template <class B>
  using on_backend = DenseAttention<T, D, B>;

  /// Scratch memory for forward(); reuse it across calls. After a call with T rows, a call
  /// with T rows allocates nothing, however long the KV cache has grown (the ops' score tile
  /// has a fixed size).
  struct Workspace {
    typename Storage::template activations<> qkv;       // [T, 3d]
    typename Storage::template activations<D> context;  // [T, d]
    ops::Scratch<Backend, T> scratch;  // the ops' packing buffers, score tile, rotary tables
  };

  DenseAttention() = default;

  /// Throws ShapeError when the weights do not fit d and the head count, ArgumentError for an
  /// odd or too large rotary_dims. The weights are float host matrices (converted to `Weights`
  /// storage) or already in it (moved through: a loader's mapped views stay views).
  template <class From = storage::f32>
  requires backend::is_host<Backend> DenseAttention(AttentionWeights<T, D, From> weights,
                                                    Index n_heads, Index rotary_dims = 0,
                                                    double rotary_base = 10000.0)
      : w_(to_weight_storage<Weights>(std::move(weights))),
        n_heads_(n_heads),
        rotary_dims_(rotary_dims),
        rotary_base_(rotary_base) {
    detail::check_attention_weights<D>("DenseAttention", w_, n_heads, rotary_dims);
  }

  /// The same attention on another backend: the weights copied into this backend's storage
  /// (uploaded once for backend::cuda). O(d²).
  template <class From>
  requires(!std::is_same_v<From, Backend>) explicit DenseAttention(
      const DenseAttention<T, D, From>& from)
      : w_(detail::copy_attention_weights<Backend>(from.weights())),
        n_heads_(from.heads()),
        rotary_dims_(from.rotary_dims()),
        rotary_base_(from.rotary_base()) {}

  /// Y = attention(X), X, Y [T, d] (Y must not alias X). Without a cache X holds positions
  /// [0, T); with one, X's tokens follow the cached ones and their (rotated) keys and values
  /// are appended (ArgumentError when full; ShapeError when its width is not d). ShapeError on
  /// a width or row mismatch of X or Y.
  void forward(Context<Backend>& ctx, const ConstView& X, View Y, Workspace& ws,
               KVCacheLayerOf<T, Backend>* cache = nullptr) const {
    const Index d = features(), rows = X.rows();
    const Index past = detail::check_attention_call("DenseAttention::forward", d, X, Y, cache);
    if (rows == 0)
      return;
    ws.qkv.resize(rows, 3 * d);
    ops::gemm_bias(ctx, X, w_.w_qkv, w_.b_qkv, ws.qkv, ws.scratch);  // [T, 3d]
    ops::rotate_queries_keys(ctx, ws.qkv.leftCols(2 * d), n_heads_, rotary_dims_, past,
                             rotary_base_, ws.scratch);
    const T scale = T(1) / std::sqrt(static_cast<T>(head_dim()));
    ws.context.resize(rows, d);
    if (cache) {
      const Index span = past + rows;  // S: every position a new token may attend to
      ops::copy(ctx, ws.qkv.middleCols(d, d), cache->keys.middleRows(past, rows));
      ops::copy(ctx, ws.qkv.middleCols(2 * d, d), cache->values.middleRows(past, rows));
      cache->length = span;
      ops::causal_attention(ctx, ws.qkv.leftCols(d), cache->keys.topRows(span),
                            cache->values.topRows(span), ws.context, n_heads_, scale, past,
                            ws.scratch);
    } else {
      ops::causal_attention(ctx, ws.qkv.leftCols(d), ws.qkv.middleCols(d, d),
                            ws.qkv.middleCols(2 * d, d), ws.context, n_heads_, scale, past,
                            ws.scratch);
    }
    ops::gemm_bias(ctx, ws.context, w_.w_out, w_.b_out, Y, ws.scratch);  // [T, d]
  }

  Index features() const { return w_.w_out.rows(); }
  Index heads() const { return n_heads_; }
  Index head_dim() const { return n_heads_ > 0 ? features() / n_heads_ : 0; }
  Index rotary_dims() const { return rotary_dims_; }
  double rotary_base() const { return rotary_base_; }
  /// The weights in this backend's storage.
  const AttentionWeights<T, D, Weights>& weights() const { return w_; }

 private:
  AttentionWeights<T, D, Weights> w_;
  Index n_heads_ = 0;
  Index rotary_dims_ = 0;
  double rotary_base_ = 10000.0;
};

}  // namespace nlb
