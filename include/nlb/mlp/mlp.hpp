// The transformer MLP, Y = Act(X W_fc + b_fc) W_proj + b_proj (PAPERS.md §A1).
#pragma once

#include <utility>

#include "nlb/core.hpp"
#include "nlb/core/gemm_scratch.hpp"
#include "nlb/mlp/activation.hpp"
#include "nlb/mlp/route_counts.hpp"
#include "nlb/ops/elementwise.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/half_gemm.hpp"

namespace nlb {

/// A two-layer MLP on row-major activations.
///
/// Shapes: X, Y [T, d]; W_fc [d, h]; b_fc [h]; W_proj [h, d]; b_proj [d]. D and H are
/// compile-time sizes or Dynamic; fixed sizes are checked against the weights at
/// construction. Cost: 4·T·d·h FLOPs (16·T·d² for h = 4d, PAPERS.md §A5), two GEMMs
/// through `Backend`'s provider plus its activation kernel on the [T, h] hidden block.
/// W_fc and W_proj are kept in `Backend::weights` storage (float matrices by default; 16-bit
/// with backend::with_weights, rounded once at construction); biases stay in T.
template <class T, int D = Dynamic, int H = Dynamic, class Act = GeluTanh,
          class Backend = backend::cpu>
class Mlp {
  static_assert(backend::is_host<Backend>,
                "Mlp: a host component: Backend must be backend::scalar or "
                "backend::simd<Arch> (backend::cuda runs its own components)");

 public:
  using Scalar = T;
  using backend_type = Backend;
  using Activation = Act;
  static constexpr int in_size = D;
  static constexpr int hidden_size = H;
  static constexpr int out_size = D;
  using Input = Activations<T, D>;
  using Output = Activations<T, D>;
  using Hidden = Activations<T, H>;
  using Weights = typename Backend::weights;  // storage of W_fc and W_proj
  using FcMatrix = weight_matrix<Weights, T, D, H>;
  using ProjMatrix = weight_matrix<Weights, T, H, D>;
  // Arguments bind as width-Dynamic references, never as fixed-width ones: a fixed-width
  // Eigen::Ref bound to data of another width is undefined behaviour in release builds (Eigen
  // only asserts), so the width could not be checked. With these the check below is real.
  using AnyInput = Activations<T>;
  using AnyOutput = Activations<T>;

  /// Scratch memory for forward(); reuse one across calls to avoid an allocation per call.
  struct Workspace {
    Hidden hidden;        // [≥ T, h]: grows to the largest batch seen, never shrinks
    GemmScratch<T> gemm;  // packing buffers of both products
  };

  /// An MLP with zero weights of width d and hidden width h (the compile-time sizes by default).
  explicit Mlp(Index d = size_or<D>(0), Index h = size_or<H>(0))
      : Mlp(RowMatrix<T, D, H>::Zero(d, h), RowVector<T, H>::Zero(h),
            RowMatrix<T, H, D>::Zero(h, d), RowVector<T, D>::Zero(d)) {}

  /// An MLP with the given weights; throws ShapeError if they do not fit together or do
  /// not match the compile-time sizes.
  Mlp(RowMatrix<T, D, H> w_fc, RowVector<T, H> b_fc, RowMatrix<T, H, D> w_proj,
      RowVector<T, D> b_proj)
      : w_fc_(to_weight_storage<Weights>(std::move(w_fc))),
        b_fc_(std::move(b_fc)),
        w_proj_(to_weight_storage<Weights>(std::move(w_proj))),
        b_proj_(std::move(b_proj)) {
    check_weights();
  }

  /// The same with W_fc and W_proj already in `Weights` storage (a loader's MappedMatrix views
  /// of a checkpoint, storage::mapped): kept as they are, nothing copied.
  Mlp(FcMatrix w_fc, RowVector<T, H> b_fc, ProjMatrix w_proj,
      RowVector<T, D> b_proj) requires(!std::is_same_v<Weights, storage::f32>)
      : w_fc_(std::move(w_fc)),
        b_fc_(std::move(b_fc)),
        w_proj_(std::move(w_proj)),
        b_proj_(std::move(b_proj)) {
    check_weights();
  }

  /// Y = MLP(X) using `ws` for the hidden block and the products' packing buffers. X [T, d],
  /// Y [T, d]; Y must not alias X. With a reused `ws` a batch no larger than an earlier one
  /// allocates nothing. Returns the rows that took the full path (all of them).
  RouteCounts forward(const Eigen::Ref<const AnyInput>& X, Eigen::Ref<AnyOutput> Y,
                      Workspace& ws) const {
    check_dim("Mlp::forward: input width (d)", features(), X.cols());
    check_dim("Mlp::forward: output rows (T)", X.rows(), Y.rows());
    check_dim("Mlp::forward: output width (d)", features(), Y.cols());
    // The buffer only grows: batches of varying size (a GatedMLP's groups) must not free and
    // reallocate megabytes per call, which costs page faults on every first touch.
    if (ws.hidden.rows() < X.rows() || ws.hidden.cols() != hidden_features()) {
      ws.hidden.resize(X.rows(), hidden_features());
    }
    auto hidden = ws.hidden.topRows(X.rows());  // [T, h]
    ops::gemm_bias(Backend{}, hidden, X, w_fc_, b_fc_, ws.gemm);
    // The top rows of a row-major matrix are contiguous: one kernel call over [T, h].
    ops::transform(Backend{}, hidden.data(), hidden.size(), typename Act::template op<>{});
    ops::gemm_bias(Backend{}, Y, hidden, w_proj_, b_proj_, ws.gemm);  // [T, d]
    return {0, X.rows()};
  }

  /// Y = MLP(X) with a temporary workspace.
  RouteCounts forward(const Eigen::Ref<const AnyInput>& X, Eigen::Ref<AnyOutput> Y) const {
    Workspace ws;
    return forward(X, Y, ws);
  }

  /// Returns MLP(X) as a new [T, d] matrix.
  Output forward(const Eigen::Ref<const AnyInput>& X) const {
    Output Y(X.rows(), features());
    forward(X, Y);
    return Y;
  }

  Index features() const { return w_fc_.rows(); }
  Index hidden_features() const { return w_fc_.cols(); }
  const FcMatrix& w_fc() const { return w_fc_; }             // [d, h]
  const RowVector<T, H>& b_fc() const { return b_fc_; }      // [h]
  const ProjMatrix& w_proj() const { return w_proj_; }       // [h, d]
  const RowVector<T, D>& b_proj() const { return b_proj_; }  // [d]

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
  RowVector<T, H> b_fc_;
  ProjMatrix w_proj_;
  RowVector<T, D> b_proj_;
};

}  // namespace nlb
