// What DenseAttention and LinearAttention share (the linear attention keeps the dense layer's
// weights, PAPERS §B3): the fused Q/K/V and output projections in the backend's weight storage,
// the head count and the rotary settings, checked once at construction; their constructors and
// accessors; and the scratch of their forward passes. Internal to nlb/attention: each public
// class derives from it (naming itself as `Attention`), inherits its constructors and adds its
// own forward().
#pragma once

#include <type_traits>
#include <utility>

#include "nlb/attention/attention_weights.hpp"
#include "nlb/core.hpp"
#include "nlb/core/component_types.hpp"
#include "nlb/core/storage.hpp"
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
    typename Storage::template activations<> qkv;       // [T, 3d]
    typename Storage::template activations<D> context;  // [T, d]
    ops::Scratch<Backend, T> scratch;  // the ops' packing buffers, score tile, rotary tables
  };

  ProjectedHeads() = default;

  /// Throws ShapeError when the weights do not fit d and the head count, ArgumentError for an
  /// odd or too large rotary_dims (the messages name Attention::kind_name). The weights are float
  /// host matrices (converted to `Weights` storage) or already in it (moved through: a loader's
  /// mapped views stay views).
  template <class From = storage::f32>
  requires backend::is_host<Backend> ProjectedHeads(AttentionWeights<T, D, From> weights,
                                                    Index n_heads, Index rotary_dims = 0,
                                                    double rotary_base = 10000.0)
      : w_(nlb::to_weight_storage<Weights>(std::move(weights))),
        n_heads_(n_heads),
        rotary_dims_(rotary_dims),
        rotary_base_(rotary_base) {
    check_attention_weights<D>(Attention<T, D, Backend>::kind_name, w_, n_heads, rotary_dims);
  }

  /// The same attention on another backend: the weights copied into this backend's storage
  /// (uploaded once for backend::cuda). O(d²).
  template <class From>
  requires(!std::is_same_v<From, Backend>) explicit ProjectedHeads(
      const Attention<T, D, From>& from)
      : w_(copy_attention_weights<Backend>(from.weights())),
        n_heads_(from.heads()),
        rotary_dims_(from.rotary_dims()),
        rotary_base_(from.rotary_base()) {}

  Index features() const { return w_.w_out.rows(); }
  Index heads() const { return n_heads_; }
  Index head_dim() const { return n_heads_ > 0 ? features() / n_heads_ : 0; }
  Index rotary_dims() const { return rotary_dims_; }
  double rotary_base() const { return rotary_base_; }
  /// The weights in this backend's storage.
  const AttentionWeights<T, D, Weights>& weights() const { return w_; }

 protected:
  AttentionWeights<T, D, Weights> w_;
  Index n_heads_ = 0;
  Index rotary_dims_ = 0;
  double rotary_base_ = 10000.0;
};

}  // namespace nlb::detail
