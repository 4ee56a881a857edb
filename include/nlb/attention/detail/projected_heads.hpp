// What DenseAttention and LinearAttention share (the linear attention keeps the dense layer's
// weights, PAPERS §B3): the fused Q/K/V and output projections in the backend's weight storage,
// the head count and the rotary settings, checked once at construction; their accessors; and
// the scratch of their forward passes. Internal to nlb/attention: each public class derives from
// it and adds its own forward().
#pragma once

#include <utility>

#include "nlb/attention/attention_weights.hpp"
#include "nlb/core.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb::detail {

template <class T, int D, class Backend>
class ProjectedHeads {
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

  /// The buffers of forward(). Each derived class names its own Workspace type deriving from
  /// this one, so that a slot holding several attention kinds keeps one workspace per kind.
  struct ProjectionWorkspace {
    typename Storage::template activations<> qkv;       // [T, 3d]
    typename Storage::template activations<D> context;  // [T, d]
    ops::Scratch<Backend, T> scratch;  // the ops' packing buffers, score tile, rotary tables
  };

  Index features() const { return w_.w_out.rows(); }
  Index heads() const { return n_heads_; }
  Index head_dim() const { return n_heads_ > 0 ? features() / n_heads_ : 0; }
  Index rotary_dims() const { return rotary_dims_; }
  double rotary_base() const { return rotary_base_; }
  /// The weights in this backend's storage.
  const AttentionWeights<T, D, Weights>& weights() const { return w_; }

 protected:
  ProjectedHeads() = default;

  /// Host weights converted to `Weights` storage (moved through when already in it), then
  /// checked against the head count and rotary_dims; `who` names the class in the messages.
  template <class From>
  ProjectedHeads(const char* who, AttentionWeights<T, D, From>&& weights, Index n_heads,
                 Index rotary_dims, double rotary_base)
      : w_(nlb::to_weight_storage<Weights>(std::move(weights))),
        n_heads_(n_heads),
        rotary_dims_(rotary_dims),
        rotary_base_(rotary_base) {
    check_attention_weights<D>(who, w_, n_heads, rotary_dims);
  }

  /// The same projections on another backend, copied into this backend's storage. O(d²).
  template <class From>
  explicit ProjectedHeads(const ProjectedHeads<T, D, From>& from)
      : w_(copy_attention_weights<Backend>(from.weights())),
        n_heads_(from.heads()),
        rotary_dims_(from.rotary_dims()),
        rotary_base_(from.rotary_base()) {}

  AttentionWeights<T, D, Weights> w_;
  Index n_heads_ = 0;
  Index rotary_dims_ = 0;
  double rotary_base_ = 10000.0;
};

}  // namespace nlb::detail
