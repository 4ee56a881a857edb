// Causal ELU+1 linear attention of one head by chunked prefix sums: the CPU implementation of
// ops::linear_attention (nlb/ops/attention.hpp). Internal to nlb/ops.
#pragma once

#include <Eigen/Core>
#include <algorithm>

#include "nlb/core/matrix.hpp"

namespace nlb::ops {
/// Rows per chunk of linear attention's chunked prefix sums (ops::linear_attention, both backends).
inline constexpr Index linear_attention_chunk = 64;
}  // namespace nlb::ops

namespace nlb::ops::detail {

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
  for (Index c0 = 0; c0 < rows; c0 += linear_attention_chunk) {
    const Index n = std::min(linear_attention_chunk, rows - c0);
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

}  // namespace nlb::ops::detail
