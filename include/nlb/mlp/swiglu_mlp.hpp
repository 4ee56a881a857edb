// The gated-linear-unit MLP of the Llama family (Llama, Qwen2, Mistral, SmolLM2):
// Y = (silu(X W_gate) ⊙ (X W_up)) W_down, no biases (PAPERS.md §A5 generalised: three matrices).
// Written once for every backend: one ops::gemm for both input projections, ops::transform and
// ops::multiply on the hidden block, one ops::gemm for the output (DESIGN.md §4).
//
// Not to be confused with GatedMLP, the paper's token-level router between a full MLP and its
// linear surrogate: GatedMLP<SwiGluMlp<…>, RidgeSurrogate<…>, HyperplaneGate<…>> routes the
// tokens of a SwiGLU layer like those of a GELU one, since the surrogate and the gate see only
// the MLP's input and output.
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <type_traits>
#include <utility>

#include "nlb/core.hpp"
#include "nlb/core/component_types.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/kernels/elementwise.hpp"
#include "nlb/mlp/route_counts.hpp"
#include "nlb/ops/elementwise.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/narrow_gemm.hpp"
#include "nlb/ops/rows.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

/// A SwiGLU MLP on row-major activations: Y = (silu(X W_gate) ⊙ (X W_up)) W_down.
///
/// Shapes: X, Y [T, d]; W_gate, W_up [d, h], kept side by side as one matrix
/// W_gate_up = [W_gate | W_up] [d, 2h] so that one product computes both; W_down [h, d]. D and H
/// are compile-time sizes or Dynamic; fixed sizes are checked against the weights at
/// construction. Cost: 6·T·d·h FLOPs (three [d, h] products) plus 2·T·h for the gate.
/// The matrices are kept in the backend's weight storage (storage_traits<Backend, T>::weights:
/// float matrices by default; 16-bit or mapped with backend::with_weights; device memory on
/// backend::cuda).
template <class T, int D = Dynamic, int H = Dynamic, class Backend = backend::cpu>
class SwiGluMlp : public ComponentTypes<T, Backend> {
  using Storage = storage_traits<Backend, T>;
  using Types = ComponentTypes<T, Backend>;
  static constexpr int H2 = size_product<2, H>;

 public:
  using typename Types::ConstView, typename Types::View;
  static constexpr int in_size = D;
  static constexpr int hidden_size = H;
  static constexpr int out_size = D;
  using Input = typename Storage::template activations<D>;
  using Output = typename Storage::template activations<D>;
  using GateUpMatrix = typename Storage::template weights<D, H2>;  // [d, 2h]
  using DownMatrix = typename Storage::template weights<H, D>;     // [h, d]
  template <class B>
  using on_backend = SwiGluMlp<T, D, H, B>;

  /// Scratch memory for forward(); reuse one across calls: a batch no larger than an earlier
  /// one allocates nothing.
  struct Workspace {
    typename Storage::template activations<H2> gate_up;  // [≥ T, 2h]: grows, never shrinks
    ops::Scratch<Backend, T> scratch;                    // the products' packing buffers
  };

  /// A SwiGLU MLP with zero weights of width d and hidden width h.
  explicit SwiGluMlp(Index d = size_or<D>(0), Index h = size_or<H>(0))
      : SwiGluMlp(RowMatrix<T, D, H>(RowMatrix<T, D, H>::Zero(d, h)),
                  RowMatrix<T, D, H>(RowMatrix<T, D, H>::Zero(d, h)),
                  RowMatrix<T, H, D>(RowMatrix<T, H, D>::Zero(h, d))) {}

  /// From the three host matrices as a checkpoint names them (gate_proj, up_proj and down_proj,
  /// transposed to [in, out]): W_gate [d, h], W_up [d, h], W_down [h, d], copied into this
  /// backend's storage once. ShapeError when they do not fit together or the compile-time sizes.
  SwiGluMlp(const RowMatrix<T, D, H>& w_gate, const RowMatrix<T, D, H>& w_up,
            const RowMatrix<T, H, D>& w_down)
      : w_gate_up_(Storage::template from_host<D, H2>(side_by_side(w_gate, w_up))),
        w_down_(Storage::template from_host<H, D>(w_down)) {
    check_weights();
  }

  /// From matrices already in this backend's storage (a loader's 16-bit or mapped matrices,
  /// device matrices): W_gate_up [d, 2h] = [W_gate | W_up], W_down [h, d], moved in.
  SwiGluMlp(GateUpMatrix w_gate_up, DownMatrix w_down)
      : w_gate_up_(std::move(w_gate_up)), w_down_(std::move(w_down)) {
    check_weights();
  }

  /// The same MLP on another (host) backend, its weights copied into this backend's storage
  /// (uploaded once for backend::cuda, rounded for 16-bit storage). O(d·h).
  template <class From>
  requires(!std::is_same_v<From, Backend> &&
           backend::is_host<From>) explicit SwiGluMlp(const SwiGluMlp<T, D, H, From>& from)
      : w_gate_up_(Storage::template from_host<D, H2>(from.w_gate_up())),
        w_down_(Storage::template from_host<H, D>(from.w_down())) {
    check_weights();
  }

  /// Y = SwiGLU(X), X [T, d], Y [T, d] (Y must not alias X), with `ws` for the [T, 2h] hidden
  /// block and the ops' scratch. Returns the rows that took the full path (all of them).
  /// ShapeError on a width or row mismatch. Cost: 6·T·d·h FLOPs.
  RouteCounts forward(Context<Backend>& ctx, const ConstView& X, View Y, Workspace& ws) const {
    check_dim("SwiGluMlp::forward: input width (d)", features(), X.cols());
    check_dim("SwiGluMlp::forward: output rows (T)", X.rows(), Y.rows());
    check_dim("SwiGluMlp::forward: output width (d)", features(), Y.cols());
    if (X.rows() == 0)
      return {0, 0};
    const Index h = hidden_features();
    if (ws.gate_up.rows() < X.rows() || ws.gate_up.cols() != 2 * h)
      ws.gate_up.resize(X.rows(), 2 * h);
    auto gate_up = ws.gate_up.topRows(X.rows());  // [T, 2h] = [X W_gate | X W_up]
    ops::gemm(ctx, X, w_gate_up_, gate_up, ws.scratch);
    auto gate = gate_up.leftCols(h);  // [T, h], row stride 2h
    ops::transform(ctx, gate, kernels::SiluOp{});
    ops::multiply(ctx, gate_up.rightCols(h), gate);  // silu(X W_gate) ⊙ (X W_up)
    ops::gemm(ctx, gate, w_down_, Y, ws.scratch);    // [T, d]
    return {0, X.rows()};
  }

  Index features() const { return w_gate_up_.rows(); }
  Index hidden_features() const { return w_down_.rows(); }
  const GateUpMatrix& w_gate_up() const { return w_gate_up_; }  // [d, 2h] = [W_gate | W_up]
  const DownMatrix& w_down() const { return w_down_; }          // [h, d]

 private:
  static RowMatrix<T, D, H2> side_by_side(const RowMatrix<T, D, H>& gate,
                                          const RowMatrix<T, D, H>& up) {
    check_dim("SwiGluMlp: W_up rows (d)", gate.rows(), up.rows());
    check_dim("SwiGluMlp: W_up cols (h)", gate.cols(), up.cols());
    RowMatrix<T, D, H2> both(gate.rows(), 2 * gate.cols());
    both << gate, up;
    return both;
  }

  // ShapeError unless the weights fit together and the compile-time sizes.
  void check_weights() const {
    const Index d = w_gate_up_.rows(), h = w_down_.rows();
    if constexpr (D != Dynamic)
      check_dim("SwiGluMlp: W_gate_up rows (compile-time d)", D, d);
    if constexpr (H != Dynamic)
      check_dim("SwiGluMlp: W_down rows (compile-time h)", H, h);
    check_dim("SwiGluMlp: W_gate_up cols (2h)", 2 * h, w_gate_up_.cols());
    check_dim("SwiGluMlp: W_down cols (d)", d, w_down_.cols());
  }

  GateUpMatrix w_gate_up_;
  DownMatrix w_down_;
};

}  // namespace nlb
