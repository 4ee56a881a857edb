// Causal ELU+1 linear attention (PAPERS.md §B3; docs/attention.md), per head
//   out_i = φ(q_i)ᵀ Σ_{j<=i} φ(k_j) v_jᵀ / (φ(q_i)ᵀ Σ_{j<=i} φ(k_j)),   φ(u) = elu(u) + 1,
// on the head's own q, k, v (after rotary when the model has it). Ours: no 1/sqrt(d_h) scale,
// φ acts on the raw q and k. φ > 0, so every denominator is positive. Written once for every
// backend: the prefix sums are the ops layer's (ops::linear_attention).
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <string>

#include "nlb/attention/attention_weights.hpp"
#include "nlb/attention/detail/projected_heads.hpp"
#include "nlb/attention/kv_cache.hpp"
#include "nlb/core.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/kernels/elementwise.hpp"
#include "nlb/ops/attention.hpp"
#include "nlb/ops/elementwise.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/narrow_gemm.hpp"
#include "nlb/ops/rotary.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

/// One head of causal ELU+1 linear attention on given q, k [T, d_k] (raw: φ is applied here,
/// to copies) and v [T, d_v]: out [T, d_v]. A host helper for tests and benchmarks (it
/// allocates its copies and scratch). O(T·d_k·(d_v + 64)). ShapeError on mismatched shapes.
template <class T, class Backend>
requires backend::is_host<Backend>
void linear_attention_head(const Context<Backend>& ctx, const Eigen::Ref<const RowMatrix<T>>& q,
                           const Eigen::Ref<const RowMatrix<T>>& k,
                           const Eigen::Ref<const RowMatrix<T>>& v, Eigen::Ref<RowMatrix<T>> out) {
  check_dim("linear_attention_head: k rows (T)", q.rows(), k.rows());
  check_dim("linear_attention_head: k cols (d_k)", q.cols(), k.cols());
  check_dim("linear_attention_head: v rows (T)", q.rows(), v.rows());
  check_dim("linear_attention_head: out rows (T)", q.rows(), out.rows());
  check_dim("linear_attention_head: out cols (d_v)", v.cols(), out.cols());
  RowMatrix<T> fq = q, fk = k;
  ops::transform(ctx, fq, kernels::EluFeatureOp{});
  ops::transform(ctx, fk, kernels::EluFeatureOp{});
  ops::Scratch<Backend, T> scratch;
  ops::linear_attention(ctx, fq, fk, v, out, 1, scratch);
}

/// Multi-head causal linear attention with DenseAttention's weights and layout (PAPERS §B3):
///   [Q K V] = X w_qkv + b_qkv;  Q, K rotated (first rotary_dims per head);
///   per head: C_h = linear_attention(φ(Q_h), φ(K_h), V_h);   Y = C w_out + b_out.
/// X, Y [T, d]. Cost: 8·T·d² FLOPs (projections) + O(T·d·(d_h + 64)) for the heads, linear in T.
/// No KV cache: the recurrent state would be the cache; forward throws ArgumentError when given
/// one. The matrices are kept in the backend's weight storage, as DenseAttention's.
template <class T, int D = Dynamic, class Backend = backend::cpu>
class LinearAttention : public detail::ProjectedHeads<LinearAttention, T, D, Backend> {
  using Base = detail::ProjectedHeads<LinearAttention, T, D, Backend>;

 public:
  /// The class name, as the constructor's messages give it.
  static constexpr const char* kind_name = "LinearAttention";
  /// One key head per query head: the construction refuses grouped-query weights (ArgumentError).
  static constexpr bool grouped_heads = false;
  using typename Base::ConstView, typename Base::View, typename Base::Workspace;

  /// DenseAttention's constructors (ProjectedHeads'), with the same arguments and errors.
  using Base::Base;

  /// Y = linear_attention(X) over positions [0, T), X, Y [T, d] (Y must not alias X). `cache`
  /// must be null (ArgumentError otherwise: incremental decoding with linear attention is not
  /// supported). ShapeError on a width or row mismatch.
  void forward(Context<Backend>& ctx, const ConstView& X, View Y, Workspace& ws,
               KVCacheLayerOf<T, Backend>* cache = nullptr) const {
    if (cache) {
      throw ArgumentError(detail::expected_found("LinearAttention::forward: KV cache",
                                                 "none (not supported)", "a cache"));
    }
    const Index d = this->features(), rows = X.rows();
    detail::check_attention_call("LinearAttention::forward", d, X, Y, cache);
    if (rows == 0)
      return;
    ws.qkv.resize(rows, 3 * d);
    ops::gemm_bias(ctx, X, this->w_.w_qkv, this->w_.b_qkv, ws.qkv, ws.scratch);  // [T, 3d]
    ops::rotate_heads(ctx, ws.qkv.leftCols(2 * d), 2 * this->n_heads_, this->rotary_dims_, 0,
                      this->rotary_base_, ws.scratch, this->rope_scaling_);
    ops::transform(ctx, ws.qkv.leftCols(2 * d), kernels::EluFeatureOp{});  // φ on Q and K
    ws.context.resize(rows, d);
    ops::linear_attention(ctx, ws.qkv.leftCols(d), ws.qkv.middleCols(d, d),
                          ws.qkv.middleCols(2 * d, d), ws.context, this->n_heads_, ws.scratch);
    ops::gemm_bias(ctx, ws.context, this->w_.w_out, this->w_.b_out, Y, ws.scratch);  // [T, d]
  }
};

}  // namespace nlb
