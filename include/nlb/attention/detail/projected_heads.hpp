// What DenseAttention and LinearAttention share (the linear attention keeps the dense layer's
// weights, PAPERS §B3): the fused Q/K/V and output projections in the backend's weight storage,
// the query and key/value head counts and the rotary settings, checked once at construction; their
// constructors and accessors; and the scratch of their forward passes. Internal to nlb/attention:
// each public class derives from it (naming itself as `Attention`), inherits its constructors and
// adds its own forward().
#pragma once

#include <string>
#include <type_traits>
#include <utility>

#include "nlb/attention/attention_weights.hpp"
#include "nlb/core.hpp"
#include "nlb/core/component_types.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/kernels/rotary.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb::detail {

/// Attention<T, D, Backend> is the deriving class; it names itself in `kind_name` (the messages'
/// class name).
template <template <class, int, class> class Attention, class T, int D, class Backend>
class ProjectedHeads : public ComponentTypes<T, Backend> {
  using Storage = storage_traits<Backend, T>;

 public:
  static constexpr int size = D;
  using Input = typename Storage::template activations<D>;
  using Output = typename Storage::template activations<D>;
  using Weights = typename Backend::weights;  // storage of w_qkv and w_out
  template <class B>
  using on_backend = Attention<T, D, B>;

  /// Scratch memory for forward(); reuse it across calls. A type of its own per attention kind
  /// (this base is one per kind), so that a slot holding several kinds keeps one workspace per
  /// kind. After a call with T rows, a call with no more rows allocates nothing: DenseAttention's
  /// score tile has a fixed size however long the KV cache has grown, LinearAttention's prefix-sum
  /// state sits in the scratch.
  struct Workspace {
    typename Storage::template activations<> qkv;       // [T, d + 2·d_kv]
    typename Storage::template activations<D> context;  // [T, d]
    ops::Scratch<Backend, T> scratch;  // the ops' packing buffers, score tile, rotary tables
  };

  ProjectedHeads() = default;

  /// n_heads query heads and kv_heads key/value heads (0: as many as query heads; fewer:
  /// grouped-query attention, w_qkv [d, d + 2·kv_heads·d_h]); the first rotary_dims of every
  /// query and key head rotated with frequencies rotary_base^(−2i / rotary_dims), rescaled by
  /// rope_scaling. Throws ShapeError when the weights do not fit d and the head counts,
  /// ArgumentError for an odd or too large rotary_dims or an unusable scaling (the messages name
  /// Attention::kind_name). The weights are float host matrices (converted to `Weights` storage)
  /// or already in it (moved through: a loader's mapped views stay views).
  template <class From = storage::f32>
  requires backend::is_host<Backend> ProjectedHeads(AttentionWeights<T, D, From> weights,
                                                    Index n_heads, Index rotary_dims = 0,
                                                    double rotary_base = 10000.0,
                                                    Index kv_heads = 0,
                                                    kernels::RopeScaling rope_scaling = {})
      : w_(nlb::to_weight_storage<Weights>(std::move(weights))),
        n_heads_(n_heads),
        n_kv_heads_(kv_heads == 0 ? n_heads : kv_heads),
        rotary_dims_(rotary_dims),
        rotary_base_(rotary_base),
        rope_scaling_(rope_scaling) {
    check_attention_weights<D>(Attention<T, D, Backend>::kind_name, w_, n_heads, rotary_dims,
                               n_kv_heads_);
    kernels::check_rope_scaling(Attention<T, D, Backend>::kind_name, rope_scaling_);
    if (!Attention<T, D, Backend>::grouped_heads && n_kv_heads_ != n_heads) {
      throw ArgumentError(
          expected_found(std::string(Attention<T, D, Backend>::kind_name) + ": key/value heads",
                         "as many as query heads (" + std::to_string(n_heads) + ")", n_kv_heads_));
    }
  }

  /// The same attention on another backend: the weights copied into this backend's storage
  /// (uploaded once for backend::cuda). O(d²).
  template <class From>
  requires(!std::is_same_v<From, Backend>) explicit ProjectedHeads(
      const Attention<T, D, From>& from)
      : w_(copy_attention_weights<Backend>(from.weights())),
        n_heads_(from.heads()),
        n_kv_heads_(from.kv_heads()),
        rotary_dims_(from.rotary_dims()),
        rotary_base_(from.rotary_base()),
        rope_scaling_(from.rope_scaling()) {}

  Index features() const { return w_.w_out.rows(); }
  Index heads() const { return n_heads_; }
  /// Key/value heads: heads() for multi-head attention, fewer for grouped-query attention.
  Index kv_heads() const { return n_kv_heads_; }
  Index head_dim() const { return n_heads_ > 0 ? features() / n_heads_ : 0; }
  /// Width of the keys and of the values, kv_heads() · head_dim(): a KV cache layer's width.
  Index kv_width() const { return n_kv_heads_ * head_dim(); }
  Index rotary_dims() const { return rotary_dims_; }
  double rotary_base() const { return rotary_base_; }
  const kernels::RopeScaling& rope_scaling() const { return rope_scaling_; }
  /// The weights in this backend's storage.
  const AttentionWeights<T, D, Weights>& weights() const { return w_; }

 protected:
  AttentionWeights<T, D, Weights> w_;
  Index n_heads_ = 0;
  Index n_kv_heads_ = 0;
  Index rotary_dims_ = 0;
  double rotary_base_ = 10000.0;
  kernels::RopeScaling rope_scaling_;
};

}  // namespace nlb::detail
