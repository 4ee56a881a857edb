// An MLP whose tokens a hyperplane gate routes either through the full MLP or through its
// linear surrogate (PAPERS.md §A3, §A5), skipping the MLP's work for the linear rows.
#pragma once

#include <cmath>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlb/core.hpp"
#include "nlb/core/gemm_scratch.hpp"
#include "nlb/mlp/route_counts.hpp"
#include "nlb/ops/rows.hpp"

namespace nlb {

/// Scratch memory of gated_route: the gate scores, the two row groups and the gathered blocks.
/// Every buffer keeps its capacity, so after a call with T rows a call with at most T rows
/// allocates nothing.
template <class T, int D = Dynamic>
struct RoutingWorkspace {
  ColVector<T> scores;             // [T]
  std::vector<Index> linear_rows;  // rows routed to the surrogate, ascending
  std::vector<Index> full_rows;    // rows routed to the MLP, ascending
  Activations<T, D> gathered_in;   // [≥ T, d]: one group's rows at the top
  Activations<T, D> gathered_out;  // [≥ T, d]
};

namespace detail {
// Gathers X's `rows` into a contiguous block, runs `path` on it and scatters into Y.
template <class Backend, class T, int D, class X_, class Y_, class Path>
void run_route_group(const X_& X, Y_& Y, const std::vector<Index>& rows, RoutingWorkspace<T, D>& ws,
                     Path&& path) {
  const auto n = static_cast<Index>(rows.size());
  // Buffers sized for the whole batch once, then reused: the groups change size every call.
  if (ws.gathered_in.rows() < X.rows() || ws.gathered_in.cols() != X.cols()) {
    ws.gathered_in.resize(X.rows(), X.cols());
    ws.gathered_out.resize(X.rows(), X.cols());
  }
  auto in = ws.gathered_in.topRows(n);  // [n, d], contiguous
  auto out = ws.gathered_out.topRows(n);
  const std::span<const Index> index(rows);
  ops::gather_rows(Backend{}, X, index, in);
  path(in, out);
  ops::scatter_rows(Backend{}, out, index, Y);
}
}  // namespace detail

/// Hard routing of X [T, d] into Y [T, d] (Y must not alias X): `gate` scores every row; rows
/// with score > gate.threshold() go through `linear(in, out)`, the rest through `full(in, out)`,
/// each group gathered into a contiguous block and scattered back. When every row takes one
/// path, that path runs on X directly (no copies). Returns the rows per path. The one routing
/// code of the library: GatedMLP::forward and a model layer run with a gated override
/// (Block::forward, MlpOverride) both call it.
template <class Gate, class T, int D, class LinearPath, class FullPath>
RouteCounts gated_route(const Eigen::Ref<const Activations<std::type_identity_t<T>>>& X,
                        Eigen::Ref<Activations<std::type_identity_t<T>>> Y, const Gate& gate,
                        RoutingWorkspace<T, D>& ws, LinearPath&& linear, FullPath&& full) {
  const Index rows = X.rows();
  ws.scores.resize(rows);
  gate.score(X, ws.scores);
  const T threshold = gate.threshold();
  ws.linear_rows.clear();
  ws.full_rows.clear();
  ws.linear_rows.reserve(static_cast<std::size_t>(rows));
  ws.full_rows.reserve(static_cast<std::size_t>(rows));
  for (Index t = 0; t < rows; ++t)
    (ws.scores(t) > threshold ? ws.linear_rows : ws.full_rows).push_back(t);
  const RouteCounts counts{static_cast<Index>(ws.linear_rows.size()),
                           static_cast<Index>(ws.full_rows.size())};
  if (counts.full == 0) {
    if (rows > 0)
      linear(X, Y);
    return counts;
  }
  if (counts.linear == 0) {
    full(X, Y);
    return counts;
  }
  using Backend = typename Gate::backend_type;
  detail::run_route_group<Backend>(X, Y, ws.linear_rows, ws, linear);
  detail::run_route_group<Backend>(X, Y, ws.full_rows, ws, full);
  return counts;
}

namespace detail {
/// The three parts of a gated MLP, their accessors, and the check that their run-time widths fit
/// together: shared by the host GatedMLP and its device specialisation (nlb/cuda/gated_mlp.cuh).
template <class MlpT, class SurrogateT, class GateT>
class GatedParts {
 public:
  /// Composes the three parts; throws ShapeError if their run-time widths differ.
  GatedParts(MlpT mlp, SurrogateT surrogate, GateT gate)
      : mlp_(std::move(mlp)), surrogate_(std::move(surrogate)), gate_(std::move(gate)) {
    check_dim("GatedMLP: surrogate input width (MLP d)", mlp_.features(), surrogate_.features());
    check_dim("GatedMLP: surrogate output width (MLP d)", mlp_.features(),
              surrogate_.out_features());
    check_dim("GatedMLP: gate width (MLP d)", mlp_.features(), gate_.features());
  }

  Index features() const { return mlp_.features(); }
  const MlpT& mlp() const { return mlp_; }
  const SurrogateT& surrogate() const { return surrogate_; }
  const GateT& gate() const { return gate_; }
  /// Mutable gate, to move its threshold (calibration) without rebuilding the layer.
  GateT& gate() { return gate_; }

 protected:
  MlpT mlp_;
  SurrogateT surrogate_;
  GateT gate_;
};
}  // namespace detail

/// Gated MLP: per token, `score = x·w' + b'` (the gate); rows with score > threshold go to
/// the surrogate `x W + b`, the rest to the MLP.
///
/// Hard routing (forward) really skips work: it scores, partitions the row indices, gathers
/// each group into a contiguous block, runs the surrogate on the linear block and the MLP on
/// the full block, and scatters the results back. When every row takes one path, it runs that
/// path on X directly (no copies), so threshold = +inf equals the Mlp bit for bit and
/// threshold = -inf the surrogate. Cost: 2Td (gate) + (1-f)·4Tdh + f·2Td² FLOPs plus O(Td)
/// copies (PAPERS.md §A5). Soft mode (forward_soft) blends both paths for analysis.
///
/// MlpT: Mlp<T, D, H, ...>; SurrogateT: RidgeSurrogate<T, D, D, ...>; GateT: HyperplaneGate<T, D,
/// ...>.
template <class MlpT, class SurrogateT, class GateT>
class GatedMLP : public detail::GatedParts<MlpT, SurrogateT, GateT> {
  using Parts = detail::GatedParts<MlpT, SurrogateT, GateT>;
  using Parts::gate_;
  using Parts::mlp_;
  using Parts::surrogate_;

 public:
  // Scalar, backend and width are the parts': each pair that must agree is checked on its own,
  // so the message names the two sides that differ.
  using Scalar = typename MlpT::Scalar;
  static_assert(std::is_same_v<Scalar, typename SurrogateT::Scalar>,
                "GatedMLP: the MLP and the surrogate must share one scalar type "
                "(MlpT::Scalar vs SurrogateT::Scalar)");
  static_assert(std::is_same_v<Scalar, typename GateT::Scalar>,
                "GatedMLP: the MLP and the gate must share one scalar type "
                "(MlpT::Scalar vs GateT::Scalar)");
  using backend_type = typename MlpT::backend_type;
  static_assert(std::is_same_v<backend_type, typename SurrogateT::backend_type>,
                "GatedMLP: the MLP, surrogate and gate must run on one backend "
                "(MlpT::backend_type vs SurrogateT::backend_type)");
  static_assert(std::is_same_v<backend_type, typename GateT::backend_type>,
                "GatedMLP: the MLP, surrogate and gate must run on one backend "
                "(MlpT::backend_type vs GateT::backend_type)");
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
  using Input = Activations<Scalar, in_size>;
  using Output = Activations<Scalar, in_size>;
  // Arguments bind as width-Dynamic references, never as fixed-width ones: a fixed-width
  // Eigen::Ref bound to data of another width is undefined behaviour in release builds (Eigen
  // only asserts), so the width could not be checked. With these the check below is real.
  using AnyInput = Activations<Scalar>;
  using AnyOutput = Activations<Scalar>;

  /// Scratch memory for forward(); reuse one across calls to avoid allocations per call.
  struct Workspace : RoutingWorkspace<Scalar, in_size> {
    typename MlpT::Workspace mlp;
    GemmScratch<Scalar> surrogate_gemm;  // packing buffers of the surrogate's product
  };

  /// Composes the three parts; throws ShapeError if their run-time widths differ.
  using Parts::Parts;

  /// Hard routing. X [T, d] -> Y [T, d] (Y must not alias X). Returns the rows per path.
  RouteCounts forward(const Eigen::Ref<const AnyInput>& X, Eigen::Ref<AnyOutput> Y,
                      Workspace& ws) const {
    check_dim("GatedMLP::forward: input width (d)", features(), X.cols());
    check_dim("GatedMLP::forward: output rows (T)", X.rows(), Y.rows());
    check_dim("GatedMLP::forward: output width (d)", features(), Y.cols());
    return gated_route(
        X, Y, gate_, static_cast<RoutingWorkspace<Scalar, in_size>&>(ws),
        [&](const auto& in, auto& out) { surrogate_.forward(in, out, ws.surrogate_gemm); },
        [&](const auto& in, auto& out) { mlp_.forward(in, out, ws.mlp); });
  }

  /// Hard routing with a temporary workspace.
  RouteCounts forward(const Eigen::Ref<const AnyInput>& X, Eigen::Ref<AnyOutput> Y) const {
    Workspace ws;
    return forward(X, Y, ws);
  }

  /// Soft mode for analysis: Y = g ⊙ MLP(X) + (1 − g) ⊙ (X W + b), per row
  /// g = 1 − sigmoid(score − threshold), the gate's probability that the row needs the MLP.
  /// Runs both paths on every row: 4Tdh + 2Td² FLOPs.
  void forward_soft(const Eigen::Ref<const AnyInput>& X, Eigen::Ref<AnyOutput> Y) const {
    check_dim("GatedMLP::forward_soft: input width (d)", features(), X.cols());
    check_dim("GatedMLP::forward_soft: output rows (T)", X.rows(), Y.rows());
    check_dim("GatedMLP::forward_soft: output width (d)", features(), Y.cols());
    ColVector<Scalar> scores(X.rows());
    gate_.score(X, scores);
    Output linear(X.rows(), features());
    surrogate_.forward(X, linear);
    mlp_.forward(X, Y);
    for (Index t = 0; t < X.rows(); ++t) {
      const Scalar margin = scores(t) - gate_.threshold();
      const Scalar full_weight = Scalar(1) / (Scalar(1) + std::exp(margin));  // 1 - sigmoid
      Y.row(t) = full_weight * Y.row(t) + (Scalar(1) - full_weight) * linear.row(t);
    }
  }

  using Parts::features;
  using Parts::gate;
  using Parts::mlp;
  using Parts::surrogate;
};

}  // namespace nlb
