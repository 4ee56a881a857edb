// The transformer MLP, Y = Act(X W_fc + b_fc) W_proj + b_proj (PAPERS.md §A1). Written once for
// every backend: its work is two ops::gemm_bias and one ops::transform (DESIGN.md §4).
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <type_traits>
#include <utility>

#include "nlb/core.hpp"
#include "nlb/core/component_types.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/mlp/activation.hpp"
#include "nlb/mlp/route_counts.hpp"
#include "nlb/ops/elementwise.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/narrow_gemm.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

/// A two-layer MLP on row-major activations.
///
/// Shapes: X, Y [T, d]; W_fc [d, h]; b_fc [h]; W_proj [h, d]; b_proj [d]. D and H are
/// compile-time sizes or Dynamic; fixed sizes are checked against the weights at
/// construction. Cost: 4·T·d·h FLOPs (16·T·d² for h = 4d, PAPERS.md §A5), two GEMMs
/// through the backend's ops plus the activation on the [T, h] hidden block.
/// W_fc and W_proj are kept in the backend's weight storage (storage_traits<Backend, T>::weights:
/// float matrices by default; 16-bit or mapped with backend::with_weights, rounded once at
/// construction; device memory on backend::cuda); the biases in T.
template <class T, int D = Dynamic, int H = Dynamic, class Act = GeluTanh,
          class Backend = backend::cpu>
class Mlp : public ComponentTypes<T, Backend> {
  using Storage = storage_traits<Backend, T>;
  using Types = ComponentTypes<T, Backend>;

 public:
  using typename Types::ConstView, typename Types::View;
  using Activation = Act;
  static constexpr int in_size = D;
  static constexpr int hidden_size = H;
  static constexpr int out_size = D;
  using Input = typename Storage::template activations<D>;
  using Output = typename Storage::template activations<D>;
  using Hidden = typename Storage::template activations<H>;
  using Weights = typename Backend::weights;  // storage policy of W_fc and W_proj
  using FcMatrix = typename Storage::template weights<D, H>;
  using ProjMatrix = typename Storage::template weights<H, D>;
  using FcBias = typename Storage::template vector<H>;
  using ProjBias = typename Storage::template vector<D>;
  template <class B>
  using on_backend = Mlp<T, D, H, Act, B>;

  /// Scratch memory for forward(); reuse one across calls: a batch no larger than an earlier
  /// one allocates nothing.
  struct Workspace {
    Hidden hidden;                     // [≥ T, h]: grows to the largest batch seen, never shrinks
    ops::Scratch<Backend, T> scratch;  // the ops' scratch (both products' packing buffers)
  };

  /// An MLP with zero weights of width d and hidden width h (the compile-time sizes by default).
  explicit Mlp(Index d = size_or<D>(0), Index h = size_or<H>(0))
      : Mlp(RowMatrix<T, D, H>(RowMatrix<T, D, H>::Zero(d, h)),
            RowVector<T, H>(RowVector<T, H>::Zero(h)),
            RowMatrix<T, H, D>(RowMatrix<T, H, D>::Zero(h, d)),
            RowVector<T, D>(RowVector<T, D>::Zero(d))) {}

  /// An MLP with the given weights already in this backend's storage (float host matrices by
  /// default; a loader's 16-bit matrices or MappedMatrix views of a checkpoint; device matrices):
  /// moved in, nothing copied. Throws ShapeError if they do not fit together or do not match
  /// the compile-time sizes.
  Mlp(FcMatrix w_fc, FcBias b_fc, ProjMatrix w_proj, ProjBias b_proj)
      : w_fc_(std::move(w_fc)),
        b_fc_(std::move(b_fc)),
        w_proj_(std::move(w_proj)),
        b_proj_(std::move(b_proj)) {
    check_weights();
  }

  /// The same from float host matrices when this backend stores them otherwise: converted once
  /// (rounded to 16 bits, wrapped in a MappedMatrix that owns them, uploaded to a device).
  Mlp(RowMatrix<T, D, H> w_fc, RowVector<T, H> b_fc, RowMatrix<T, H, D> w_proj,
      RowVector<T, D> b_proj) requires(!std::is_same_v<FcMatrix, RowMatrix<T, D, H>> ||
                                       !std::is_same_v<FcBias, RowVector<T, H>>)
      : w_fc_(Storage::template from_host<D, H>(w_fc)),
        b_fc_(Storage::template vector_from_host<H>(b_fc)),
        w_proj_(Storage::template from_host<H, D>(w_proj)),
        b_proj_(Storage::template vector_from_host<D>(b_proj)) {
    check_weights();
  }

  /// The same MLP on another (host) backend, its weights copied into this backend's storage
  /// (uploaded once for backend::cuda, rounded for 16-bit storage). O(d·h).
  template <class From>
  requires(!std::is_same_v<From, Backend> &&
           backend::is_host<From>) explicit Mlp(const Mlp<T, D, H, Act, From>& from)
      : w_fc_(Storage::template from_host<D, H>(from.w_fc())),
        b_fc_(Storage::template vector_from_host<H>(from.b_fc())),
        w_proj_(Storage::template from_host<H, D>(from.w_proj())),
        b_proj_(Storage::template vector_from_host<D>(from.b_proj())) {
    check_weights();
  }

  /// Y = MLP(X), X [T, d], Y [T, d] (Y must not alias X), with `ws` for the hidden block and
  /// the ops' scratch. Returns the rows that took the full path (all of them). ShapeError on a
  /// width or row mismatch. With a reused `ws` a batch no larger than an earlier one allocates
  /// nothing. Cost: 4·T·d·h FLOPs.
  RouteCounts forward(Context<Backend>& ctx, const ConstView& X, View Y, Workspace& ws) const {
    check_dim("Mlp::forward: input width (d)", features(), X.cols());
    check_dim("Mlp::forward: output rows (T)", X.rows(), Y.rows());
    check_dim("Mlp::forward: output width (d)", features(), Y.cols());
    if (X.rows() == 0)
      return {0, 0};
    // The buffer only grows: batches of varying size (a GatedMLP's groups) must not free and
    // reallocate megabytes per call, which costs page faults on every first touch.
    if (ws.hidden.rows() < X.rows() || ws.hidden.cols() != hidden_features())
      ws.hidden.resize(X.rows(), hidden_features());
    auto hidden = ws.hidden.topRows(X.rows());  // [T, h], contiguous
    ops::gemm_bias(ctx, X, w_fc_, b_fc_, hidden, ws.scratch);
    ops::transform(ctx, hidden, typename Act::template op<>{});
    ops::gemm_bias(ctx, hidden, w_proj_, b_proj_, Y, ws.scratch);  // [T, d]
    return {0, X.rows()};
  }

  Index features() const { return w_fc_.rows(); }
  Index hidden_features() const { return w_fc_.cols(); }
  const FcMatrix& w_fc() const { return w_fc_; }        // [d, h]
  const FcBias& b_fc() const { return b_fc_; }          // [h]
  const ProjMatrix& w_proj() const { return w_proj_; }  // [h, d]
  const ProjBias& b_proj() const { return b_proj_; }    // [d]

 private:
  // ShapeError unless the weights fit together and the compile-time sizes.
  void check_weights() const {
    const Index d = w_fc_.rows();
    const Index h = w_fc_.cols();
    if constexpr (D != Dynamic)
      check_dim("Mlp: W_fc rows (compile-time d)", D, d);
    if constexpr (H != Dynamic)
      check_dim("Mlp: W_fc cols (compile-time h)", H, h);
    check_dim("Mlp: b_fc size (h)", h, b_fc_.size());
    check_dim("Mlp: W_proj rows (h)", h, w_proj_.rows());
    check_dim("Mlp: W_proj cols (d)", d, w_proj_.cols());
    check_dim("Mlp: b_proj size (d)", d, b_proj_.size());
  }

  FcMatrix w_fc_;
  FcBias b_fc_;
  ProjMatrix w_proj_;
  ProjBias b_proj_;
};

}  // namespace nlb
