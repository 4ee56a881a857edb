// The weights of a multi-head attention layer in nlbudget's layout (fused Q/K/V projection and
// output projection), their checks against a width and head count, and their conversions between
// weight storages and backends. DenseAttention and LinearAttention hold them (PAPERS §B3: the
// linear attention keeps the dense layer's weights); the loaders fill them.
#pragma once

#include <string>
#include <utility>

#include "nlb/core.hpp"
#include "nlb/core/storage.hpp"

namespace nlb {

/// Weights of one attention layer in nlbudget's layout (Y = X W + b):
/// w_qkv [d, d + 2·d_kv] holds the Q, K and V projections side by side (columns [0, d),
/// [d, d + d_kv), [d + d_kv, d + 2·d_kv)); within each, head h owns columns [h·d_h, (h+1)·d_h).
/// d_kv = d with as many key/value heads as query heads (GPT-2's c_attn layout: [d, 3d]; GPT-NeoX's
/// per-head interleaved query_key_value is permuted into it at load time); d_kv = H_kv·d_h with
/// grouped-query attention (the Llama family: q_proj, k_proj, v_proj side by side).
/// The two matrices are kept in storage S (nlb/core/weight_storage.hpp; storage::device on
/// backend::cuda), the biases in T in S's memory space.
template <class T, int D = Dynamic, class S = storage::f32>
struct AttentionWeights {
  weight_matrix<S, T, D, Dynamic> w_qkv;                        // [d, d + 2·d_kv]
  typename vector_in<storage::memory_of<S>, T>::type b_qkv;     // [d + 2·d_kv]
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

/// The key/value heads of a layer with `n_heads` query heads, read from its w_qkv
/// [d, d + 2·kv_heads·d_h]: n_heads without grouped-query attention. ShapeError when the width
/// does not split into whole heads. O(1).
template <class T, int D, class S>
Index key_value_heads(const AttentionWeights<T, D, S>& w, Index n_heads) {
  const Index d = w.w_qkv.rows();
  const Index dh = n_heads > 0 && d % n_heads == 0 ? d / n_heads : 0;
  const Index kv = dh > 0 ? (w.w_qkv.cols() - d) / (2 * dh) : 0;
  if (dh == 0 || kv <= 0 || d + 2 * kv * dh != w.w_qkv.cols() || n_heads % kv != 0) {
    throw ShapeError(detail::expected_found(
        "key_value_heads: w_qkv cols (d + 2·d_kv) for " + std::to_string(n_heads) + " heads",
        "d + 2·kv_heads·d_h with kv_heads dividing the heads", w.w_qkv.cols()));
  }
  return kv;
}

/// The same layer as multi-head attention, w_qkv [d, 3d]: every query head h gets its own copy of
/// its group's key and value columns (key/value head h / (H / H_kv)), as Hugging Face's repeat_kv
/// expands them; the weights themselves when there are as many key/value heads as heads. The
/// attention is unchanged. Float host weights. O(d²).
template <class T, int D>
AttentionWeights<T, D> multi_head_weights(const AttentionWeights<T, D>& w, Index n_heads) {
  const Index kv = key_value_heads(w, n_heads);
  if (kv == n_heads)
    return w;
  const Index d = w.w_qkv.rows(), dh = d / n_heads, group = n_heads / kv;
  AttentionWeights<T, D> out{RowMatrix<T, D, Dynamic>(d, 3 * d), RowVector<T>(1, 3 * d), w.w_out,
                             w.b_out};
  out.w_qkv.leftCols(d) = w.w_qkv.leftCols(d);
  out.b_qkv.leftCols(d) = w.b_qkv.leftCols(d);
  for (Index h = 0; h < n_heads; ++h) {
    const Index g = h / group;
    for (Index part = 1; part <= 2; ++part) {  // keys, then values
      const Index from = d + (part - 1) * kv * dh + g * dh, to = part * d + h * dh;
      out.w_qkv.middleCols(to, dh) = w.w_qkv.middleCols(from, dh);
      out.b_qkv.middleCols(to, dh) = w.b_qkv.middleCols(from, dh);
    }
  }
  return out;
}

namespace detail {
/// ShapeError / ArgumentError unless `w` fits width d (and a compile-time D) with `n_heads`
/// query heads and `kv_heads` key/value heads (a positive divisor of n_heads; w_qkv [d, d + 2·d_kv]
/// with d_kv = kv_heads · d / n_heads), and rotary_dims is even and at most a head's width.
/// `what` names the component.
template <int D, class W>
void check_attention_weights(const char* what, const W& w, Index n_heads, Index rotary_dims,
                             Index kv_heads) {
  const std::string name = what;
  const Index d = w.w_out.rows();
  if constexpr (D != Dynamic)
    check_dim(name + ": width (compile-time d)", D, d);
  if (n_heads <= 0 || d % n_heads != 0) {
    throw ShapeError(expected_found(name + ": head count",
                                    "a positive divisor of d = " + std::to_string(d), n_heads));
  }
  if (kv_heads <= 0 || n_heads % kv_heads != 0) {
    throw ShapeError(expected_found(
        name + ": key/value head count",
        "a positive divisor of the " + std::to_string(n_heads) + " query heads", kv_heads));
  }
  const Index qkv = d + 2 * kv_heads * (d / n_heads);
  check_dim(name + ": w_out cols (d)", d, w.w_out.cols());
  check_dim(name + ": w_qkv rows (d)", d, w.w_qkv.rows());
  check_dim(name + ": w_qkv cols (d + 2·d_kv)", qkv, w.w_qkv.cols());
  check_dim(name + ": b_qkv size (d + 2·d_kv)", qkv, w.b_qkv.size());
  check_dim(name + ": b_out size (d)", d, w.b_out.size());
  if (rotary_dims < 0 || rotary_dims % 2 != 0 || rotary_dims > d / n_heads) {
    throw ArgumentError(
        expected_found(name + ": rotary dims", "an even number in [0, head dim]", rotary_dims));
  }
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

}  // namespace nlb
