// An MLP whose tokens a hyperplane gate routes either through the full MLP or through its
// linear surrogate (PAPERS.md §A3, §A5), skipping the MLP's work for the linear rows. Written
// once for every backend: the routing is the ops layer's partition, gather and scatter
// (DESIGN.md §4).
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <cmath>
#include <type_traits>
#include <utility>

#include "nlb/core.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/mlp/route_counts.hpp"
#include "nlb/ops/rows.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

/// Scratch memory of gated_route: the gate's scores, the row order, the gathered rows and the
/// gate product's scratch, in Backend's memory. Every buffer keeps its capacity, so after a call
/// with T rows a call with at most T rows allocates nothing.
template <class T, int D = Dynamic, class Backend = backend::cpu>
struct RoutingWorkspace {
  using Storage = storage_traits<Backend, T>;
  typename Storage::template activations<1> scores;  // [≥ T, 1]
  typename Storage::index_vector rows;  // [T]: the linear rows, then the full rows, each ascending
  typename Storage::template activations<D> gathered_in;   // [≥ T, d]: X's rows in that order
  typename Storage::template activations<D> gathered_out;  // [≥ T, d]
  ops::Scratch<Backend, T> scratch;                        // the gate's product
};

/// Hard routing of X [T, d] into Y [T, d] (Y must not alias X): `gate` scores every row and one
/// stable partition orders the row indices (rows with score > gate.threshold() first, each group
/// ascending); one gather packs X's rows in that order, `linear(in, out)` runs on the top block
/// of linear rows and `full(in, out)` on the rest, and one scatter puts the results back into Y.
/// When every row takes one path, that path runs on X and Y directly (no copies). The paths are
/// callables taking a const view [n, d] and a view [n, d] of the backend. Returns the rows per
/// path. The one routing code of the library: GatedMLP::forward and a model layer run with a
/// gated override (Block::forward, MlpOverride) both call it. Widths are checked by the caller.
/// Cost: the gate's 2·T·d FLOPs, the paths, and O(T·d) copies when the rows split.
template <class Backend, class T, int D, class Gate, class LinearPath, class FullPath>
RouteCounts gated_route(Context<Backend>& ctx,
                        const typename storage_traits<Backend, T>::const_view& X,
                        typename storage_traits<Backend, T>::view Y, const Gate& gate,
                        RoutingWorkspace<T, D, Backend>& ws, LinearPath&& linear, FullPath&& full) {
  using ConstView = typename storage_traits<Backend, T>::const_view;
  using View = typename storage_traits<Backend, T>::view;
  const Index rows = X.rows();
  if (rows == 0)
    return {0, 0};
  // Grow-only buffers: the batch size changes call by call (decoding, a window's tail).
  if (ws.scores.rows() < rows)
    ws.scores.resize(rows, 1);
  const Index n_linear = gate.route(ctx, X, ws.scores.topRows(rows), ws.rows, ws.scratch);
  const RouteCounts counts{n_linear, rows - n_linear};
  if (counts.full == 0) {
    linear(X, Y);
    return counts;
  }
  if (counts.linear == 0) {
    full(X, Y);
    return counts;
  }
  if (ws.gathered_in.rows() < rows || ws.gathered_in.cols() != X.cols()) {
    ws.gathered_in.resize(rows, X.cols());
    ws.gathered_out.resize(rows, X.cols());
  }
  auto in = ws.gathered_in.topRows(rows);  // [T, d], contiguous
  auto out = ws.gathered_out.topRows(rows);
  ops::gather_rows(ctx, X, ws.rows, in);
  linear(ConstView(in.topRows(counts.linear)), View(out.topRows(counts.linear)));
  full(ConstView(in.middleRows(counts.linear, counts.full)),
       View(out.middleRows(counts.linear, counts.full)));
  ops::scatter_rows(ctx, out, ws.rows, Y);
  return counts;
}

/// Gated MLP: per token, `score = x·w' + b'` (the gate); rows with score > threshold go to
/// the surrogate `x W + b`, the rest to the MLP.
///
/// Hard routing (forward, gated_route) really skips work: it scores, partitions the row
/// indices, gathers the rows into that order, runs the surrogate on the linear block and the
/// MLP on the full block, and scatters the results back. When every row takes one path, it
/// runs that path on X directly (no copies), so threshold = +inf equals the Mlp bit for bit and
/// threshold = -inf the surrogate. Cost: 2Td (gate) + (1-f)·4Tdh + f·2Td² FLOPs plus O(Td)
/// copies (PAPERS.md §A5). Soft mode (forward_soft, host backends) blends both paths for
/// analysis.
///
/// MlpT: Mlp<T, D, H, Act, Backend>; SurrogateT: RidgeSurrogate<T, D, D, Backend>; GateT:
/// HyperplaneGate<T, D, Backend>; one scalar, one backend (and so one memory space), one width.
template <class MlpT, class SurrogateT, class GateT>
class GatedMLP {
 public:
  // Scalar, backend and width are the parts': each pair that must agree is checked on its own,
  // so the message names the two sides that differ.
  using Scalar = typename MlpT::Scalar;
  static_assert(
      same_scalar<MlpT, SurrogateT>,
      "GatedMLP: the MLP and the surrogate must share one scalar type (MlpT vs SurrogateT)");
  static_assert(same_scalar<MlpT, GateT>,
                "GatedMLP: the MLP and the gate must share one scalar type (MlpT vs GateT)");
  using backend_type = typename MlpT::backend_type;
  // A device part beside host parts is the likely mix (a part not copied with to_backend): said
  // first, by memory space, before the backend checks below name the two backends.
  static_assert(std::is_same_v<typename backend_type::memory_space,
                               typename SurrogateT::backend_type::memory_space> &&
                    std::is_same_v<typename backend_type::memory_space,
                                   typename GateT::backend_type::memory_space>,
                "GatedMLP: the MLP, surrogate and gate must live in one memory space (a device "
                "part with host parts: copy every part with to_backend(backend::cuda{}, part))");
  static_assert(same_backend<MlpT, SurrogateT>,
                "GatedMLP: the MLP and the surrogate must run on one backend (MlpT vs SurrogateT)");
  static_assert(same_backend<MlpT, GateT>,
                "GatedMLP: the MLP and the gate must run on one backend (MlpT vs GateT)");
  static_assert(sizes_compatible<MlpT::in_size, SurrogateT::in_size> &&
                    sizes_compatible<MlpT::out_size, SurrogateT::out_size>,
                "GatedMLP: MLP, surrogate and gate widths differ at compile time "
                "(MlpT::in_size vs SurrogateT::in_size)");
  static_assert(sizes_compatible<MlpT::in_size, GateT::size>,
                "GatedMLP: MLP, surrogate and gate widths differ at compile time "
                "(MlpT::in_size vs GateT::size)");
  // The MLP kinds' one compile-time width spelling (Mlp, RidgeSurrogate, MlpSlot): d to d.
  static constexpr int in_size =
      common_size<common_size<MlpT::in_size, SurrogateT::in_size>, GateT::size>;
  static constexpr int out_size = in_size;
  static_assert(sizes_compatible<in_size, SurrogateT::out_size>,
                "GatedMLP: the surrogate must map d to d (SurrogateT::out_size vs d)");

 private:
  using Backend = backend_type;
  using Storage = storage_traits<Backend, Scalar>;

 public:
  using Input = typename Storage::template activations<in_size>;
  using Output = typename Storage::template activations<in_size>;
  // Width-Dynamic views: the widths are checked in forward() (see Mlp).
  using ConstView = typename Storage::const_view;
  using View = typename Storage::view;
  template <class B>
  using on_backend =
      GatedMLP<on_backend_t<B, MlpT>, on_backend_t<B, SurrogateT>, on_backend_t<B, GateT>>;

  /// Scratch memory for forward(); reuse one across calls: a batch no larger than an earlier
  /// one allocates nothing.
  struct Workspace {
    RoutingWorkspace<Scalar, in_size, Backend> routing;  // scores, row order, gathered rows
    /// The MLP's hidden block and the ops' scratch, which the surrogate's product shares (the
    /// two paths run one after the other).
    typename MlpT::Workspace mlp;
  };

  /// Composes the three parts; throws ShapeError if their run-time widths differ.
  GatedMLP(MlpT mlp, SurrogateT surrogate, GateT gate)
      : mlp_(std::move(mlp)), surrogate_(std::move(surrogate)), gate_(std::move(gate)) {
    check_parts();
  }

  /// The same gated MLP on another (host) backend: its three parts copied (to_backend). O(d·h).
  template <class OtherMlp, class OtherSurrogate, class OtherGate>
  requires(!std::is_same_v<GatedMLP<OtherMlp, OtherSurrogate, OtherGate>,
                           GatedMLP>) explicit GatedMLP(const GatedMLP<OtherMlp, OtherSurrogate,
                                                                       OtherGate>& from)
      : mlp_(from.mlp()), surrogate_(from.surrogate()), gate_(from.gate()) {
    check_parts();
  }

  /// Hard routing (gated_route). X [T, d] -> Y [T, d] (Y must not alias X). Returns the rows
  /// per path. ShapeError on a width or row mismatch.
  RouteCounts forward(Context<Backend>& ctx, const ConstView& X, View Y, Workspace& ws) const {
    check_dim("GatedMLP::forward: input width (d)", features(), X.cols());
    check_dim("GatedMLP::forward: output rows (T)", X.rows(), Y.rows());
    check_dim("GatedMLP::forward: output width (d)", features(), Y.cols());
    return gated_route(
        ctx, X, Y, gate_, ws.routing,
        [&](const ConstView& in, View out) { surrogate_.forward(ctx, in, out, ws.mlp.scratch); },
        [&](const ConstView& in, View out) { mlp_.forward(ctx, in, out, ws.mlp); });
  }

  /// Soft mode for analysis (host backends): Y = g ⊙ MLP(X) + (1 − g) ⊙ (X W + b), per row
  /// g = 1 − sigmoid(score − threshold), the gate's probability that the row needs the MLP.
  /// Runs both paths on every row: 4Tdh + 2Td² FLOPs. ShapeError on a width or row mismatch.
  void forward_soft(Context<Backend>& ctx, const ConstView& X, View Y,
                    Workspace& ws) const requires backend::is_host<Backend> {
    check_dim("GatedMLP::forward_soft: input width (d)", features(), X.cols());
    check_dim("GatedMLP::forward_soft: output rows (T)", X.rows(), Y.rows());
    check_dim("GatedMLP::forward_soft: output width (d)", features(), Y.cols());
    const Index rows = X.rows();
    auto& r = ws.routing;
    if (r.scores.rows() < rows)
      r.scores.resize(rows, 1);
    if (r.gathered_out.rows() < rows || r.gathered_out.cols() != X.cols())
      r.gathered_out.resize(rows, X.cols());
    auto scores = r.scores.topRows(rows);        // [T]
    auto linear = r.gathered_out.topRows(rows);  // [T, d]: the surrogate's rows
    gate_.score(ctx, X, scores, r.scratch);
    surrogate_.forward(ctx, X, linear, ws.mlp.scratch);
    mlp_.forward(ctx, X, Y, ws.mlp);
    for (Index t = 0; t < rows; ++t) {
      const Scalar margin = scores(t) - gate_.threshold();
      const Scalar full_weight = Scalar(1) / (Scalar(1) + std::exp(margin));  // 1 - sigmoid
      Y.row(t) = full_weight * Y.row(t) + (Scalar(1) - full_weight) * linear.row(t);
    }
  }

  /// Width d (input and output).
  Index features() const { return mlp_.features(); }
  const MlpT& mlp() const { return mlp_; }
  const SurrogateT& surrogate() const { return surrogate_; }
  const GateT& gate() const { return gate_; }
  /// Mutable gate, to move its threshold (calibration) without rebuilding the layer.
  GateT& gate() { return gate_; }

 private:
  // ShapeError unless the parts' run-time widths agree.
  void check_parts() const {
    check_dim("GatedMLP: surrogate input width (MLP d)", mlp_.features(), surrogate_.features());
    check_dim("GatedMLP: surrogate output width (MLP d)", mlp_.features(),
              surrogate_.out_features());
    check_dim("GatedMLP: gate width (MLP d)", mlp_.features(), gate_.features());
  }

  MlpT mlp_;
  SurrogateT surrogate_;
  GateT gate_;
};

}  // namespace nlb
