// Causal ELU+1 linear attention (PAPERS.md §B3; docs/attention.md), per head
//   out_i = φ(q_i)ᵀ Σ_{j<=i} φ(k_j) v_jᵀ / (φ(q_i)ᵀ Σ_{j<=i} φ(k_j)),   φ(u) = elu(u) + 1,
// on the head's own q, k, v (after rotary when the model has it). Ours: no 1/sqrt(d_h) scale,
// φ acts on the raw q and k. φ > 0, so every denominator is positive.
#pragma once

#include <algorithm>
#include <string>
#include <utility>

#include "nlb/attention/dense_attention.hpp"
#include "nlb/attention/kv_cache.hpp"
#include "nlb/core.hpp"
#include "nlb/kernels/elementwise.hpp"
#include "nlb/kernels/rotary.hpp"
#include "nlb/ops/elementwise.hpp"
#include "nlb/ops/rotary.hpp"

namespace nlb {

namespace detail {

/// Rows per chunk of the chunked prefix sums.
inline constexpr Index linear_chunk = 64;

/// Linear attention on features fq, fk [T, d_k] (φ already applied, entries > 0) and values
/// v [T, d_v] into out [T, d_v], by prefix sums over chunks of C = 64 rows: with the running
/// state S = Σ_{j<c0} φ(k_j) v_jᵀ [d_k, d_v] and z = Σ_{j<c0} φ(k_j) [d_k] before a chunk
/// starting at c0, and A = tril(fq_c fk_cᵀ) inside it,
///   numerator_c = fq_c S + A v_c,   denominator_c = fq_c z + A 1,
/// then S += fk_cᵀ v_c, z += Σ_c fk. The same sums as the row-by-row recurrence, grouped into
/// GEMMs: O(T·d_k·(d_v + C)). `state`, `z`, `a` are scratch.
template <class T, class Q, class K, class V, class O>
void linear_attention_features(const Q& fq, const K& fk, const V& v, O&& out, RowMatrix<T>& state,
                               RowVector<T>& z, RowMatrix<T>& a) {
  const Index rows = fq.rows(), dk = fq.cols(), dv = v.cols();
  state.setZero(dk, dv);
  z.setZero(dk);
  for (Index c0 = 0; c0 < rows; c0 += linear_chunk) {
    const Index n = std::min(linear_chunk, rows - c0);
    const auto q = fq.middleRows(c0, n);
    const auto k = fk.middleRows(c0, n);
    const auto vc = v.middleRows(c0, n);
    a.resize(n, n);
    a.noalias() = q * k.transpose();
    a.template triangularView<Eigen::StrictlyUpper>().setZero();
    auto o = out.middleRows(c0, n);
    o.noalias() = q * state;
    o.noalias() += a * vc;
    for (Index i = 0; i < n; ++i) {
      const T denominator = q.row(i).dot(z) + a.row(i).sum();
      o.row(i) /= denominator;
    }
    state.noalias() += k.transpose() * vc;
    z += k.colwise().sum();
  }
}

}  // namespace detail

/// One head of causal ELU+1 linear attention on given q, k [T, d_k] (raw: φ is applied here)
/// and v [T, d_v]: out [T, d_v]. O(T·d_k·(d_v + 64)). ShapeError on mismatched shapes.
template <class T, class Backend = backend::cpu>
void linear_attention_head(Backend, const Eigen::Ref<const RowMatrix<T>>& q,
                           const Eigen::Ref<const RowMatrix<T>>& k,
                           const Eigen::Ref<const RowMatrix<T>>& v, Eigen::Ref<RowMatrix<T>> out) {
  check_dim("linear_attention_head: k rows (T)", q.rows(), k.rows());
  check_dim("linear_attention_head: k cols (d_k)", q.cols(), k.cols());
  check_dim("linear_attention_head: v rows (T)", q.rows(), v.rows());
  check_dim("linear_attention_head: out rows (T)", q.rows(), out.rows());
  check_dim("linear_attention_head: out cols (d_v)", v.cols(), out.cols());
  RowMatrix<T> fq = q, fk = k;
  ops::transform(Backend{}, fq.data(), fq.size(), kernels::EluFeatureOp{});
  ops::transform(Backend{}, fk.data(), fk.size(), kernels::EluFeatureOp{});
  RowMatrix<T> state, a;
  RowVector<T> z;
  detail::linear_attention_features<T>(fq, fk, v, out, state, z, a);
}

/// Multi-head causal linear attention with DenseAttention's weights and layout (PAPERS §B3):
///   [Q K V] = X w_qkv + b_qkv;  Q, K rotated (first rotary_dims per head);
///   per head: C_h = linear_attention(φ(Q_h), φ(K_h), V_h);   Y = C w_out + b_out.
/// X, Y [T, d]. Cost: 8·T·d² FLOPs (projections) + O(T·d·(d_h + 64)) for the heads, linear in T.
/// No KV cache: the recurrent state would be the cache; forward throws ArgumentError when given
/// one.
template <class T, int D = Dynamic, class Backend = backend::cpu>
class LinearAttention {
  static_assert(backend::is_host<Backend>,
                "LinearAttention: a host component: Backend must be backend::scalar or "
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
    Activations<T> qkv;      // [T, 3d]
    RowMatrix<T> state, a;   // [d_h, d_h], [64, 64]
    RowVector<T> z;          // [d_h]
    Activations<T> context;  // [T, d]
  };

  LinearAttention() = default;

  /// Same weights and checks as DenseAttention (ShapeError for sizes and head count,
  /// ArgumentError for an odd or too large rotary_dims).
  LinearAttention(AttentionWeights<T, D> weights, Index n_heads, Index rotary_dims = 0,
                  double rotary_base = 10000.0)
      : w_(std::move(weights)),
        n_heads_(n_heads),
        rotary_dims_(rotary_dims),
        rotary_base_(rotary_base) {
    const Index d = w_.w_out.rows();
    if constexpr (D != Dynamic)
      check_dim("LinearAttention: width (compile-time d)", D, d);
    check_dim("LinearAttention: w_out cols (d)", d, w_.w_out.cols());
    check_dim("LinearAttention: w_qkv rows (d)", d, w_.w_qkv.rows());
    check_dim("LinearAttention: w_qkv cols (3d)", 3 * d, w_.w_qkv.cols());
    check_dim("LinearAttention: b_qkv size (3d)", 3 * d, w_.b_qkv.size());
    check_dim("LinearAttention: b_out size (d)", d, w_.b_out.size());
    if (n_heads <= 0 || d % n_heads != 0) {
      throw ShapeError(detail::expected_found("LinearAttention: head count",
                                              "a positive divisor of d = " + std::to_string(d),
                                              n_heads));
    }
    if (rotary_dims < 0 || rotary_dims % 2 != 0 || rotary_dims > d / n_heads) {
      throw ArgumentError(detail::expected_found("LinearAttention: rotary dims",
                                                 "an even number in [0, head dim]", rotary_dims));
    }
  }

  /// Y = linear_attention(X) over positions [0, T). `cache` must be null (ArgumentError
  /// otherwise: incremental decoding with linear attention is not supported).
  void forward(const Eigen::Ref<const AnyInput>& X, Eigen::Ref<AnyOutput> Y, Workspace& ws,
               KVCacheLayer<T>* cache = nullptr) const {
    if (cache) {
      throw ArgumentError(detail::expected_found("LinearAttention::forward: KV cache",
                                                 "none (not supported)", "a cache"));
    }
    const Index d = features(), rows = X.rows(), dh = head_dim();
    check_dim("LinearAttention::forward: input width (d)", d, X.cols());
    check_dim("LinearAttention::forward: output rows (T)", rows, Y.rows());
    check_dim("LinearAttention::forward: output width (d)", d, Y.cols());
    ws.qkv.resize(rows, 3 * d);
    ws.qkv.noalias() = X * w_.w_qkv;
    ws.qkv.rowwise() += w_.b_qkv;
    rotate(ws.qkv);
    for (Index t = 0; t < rows; ++t)
      ops::transform(Backend{}, &ws.qkv(t, 0), 2 * d,
                     kernels::EluFeatureOp{});  // φ on Q and K, side by side
    ws.context.resize(rows, d);
    for (Index h = 0; h < n_heads_; ++h) {
      detail::linear_attention_features<T>(ws.qkv.middleCols(h * dh, dh),
                                           ws.qkv.middleCols(d + h * dh, dh),
                                           ws.qkv.middleCols(2 * d + h * dh, dh),
                                           ws.context.middleCols(h * dh, dh), ws.state, ws.z, ws.a);
    }
    Y.noalias() = ws.context * w_.w_out;
    Y.rowwise() += w_.b_out;
  }

  Index features() const { return w_.w_out.rows(); }
  Index heads() const { return n_heads_; }
  Index head_dim() const { return n_heads_ > 0 ? features() / n_heads_ : 0; }
  Index rotary_dims() const { return rotary_dims_; }
  double rotary_base() const { return rotary_base_; }
  const AttentionWeights<T, D>& weights() const { return w_; }

 private:
  void rotate(Activations<T>& qkv) const {
    if (rotary_dims_ == 0)
      return;
    const Index d = features(), dh = head_dim(), half = rotary_dims_ / 2;
    const auto angles = kernels::rotary_angles<T>(0, qkv.rows(), rotary_dims_, rotary_base_);
    for (Index t = 0; t < qkv.rows(); ++t) {
      const T* cos = angles.cos.data() + t * half;
      const T* sin = angles.sin.data() + t * half;
      for (Index h = 0; h < n_heads_; ++h) {
        ops::rotate_half(Backend{}, &qkv(t, h * dh), rotary_dims_, cos, sin);
        ops::rotate_half(Backend{}, &qkv(t, d + h * dh), rotary_dims_, cos, sin);
      }
    }
  }

  AttentionWeights<T, D> w_;
  Index n_heads_ = 0;
  Index rotary_dims_ = 0;
  double rotary_base_ = 10000.0;
};

}  // namespace nlb
