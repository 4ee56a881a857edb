// The gated MLP on backend::cuda (PAPERS.md §A3, §A5): the specialisation of
// GatedMLP<MlpT, SurrogateT, GateT> (nlb/mlp/gated_mlp.hpp) for device parts. Hard routing that
// really skips work on the device: the gate scores every row, one stable partition orders the
// row indices (linear rows first, each group ascending, as on the host), one gather packs the
// rows into that order, the surrogate runs on the top block and the MLP on the rest, and one
// scatter puts the results back.
#pragma once

#include <thrust/device_vector.h>
#include <type_traits>
#include <utility>

#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/hyperplane_gate.cuh"
#include "nlb/cuda/mlp.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/cuda/ridge_surrogate.cuh"
#include "nlb/mlp/gated_mlp.hpp"
#include "nlb/mlp/route_counts.hpp"

namespace nlb {

namespace cuda {

/// Scratch of route_rows: scores, row order, the gathered blocks, the MLP's hidden block. Every
/// buffer keeps its capacity.
template <class MlpT>
struct RoutingWorkspace {
  using Scalar = typename MlpT::Scalar;
  DeviceMatrix<Scalar> scores;         // [T, 1]
  thrust::device_vector<Index> order;  // [T]: linear rows first, then the MLP's
  DeviceMatrix<Scalar> gathered_in;    // [T, d]
  DeviceMatrix<Scalar> gathered_out;   // [T, d]
  typename MlpT::Workspace mlp;
};

/// Hard routing of X [T, d] between three device parts referred to, not owned: rows with
/// gate.score > gate.threshold() through `surrogate`, the rest through `mlp`, into Y [T, d] (Y
/// must not alias X). One stable partition of the row indices (linear rows first, each group
/// ascending, as on the host), one gather, each part on its contiguous block, one scatter; when
/// every row takes one path, that part runs on X directly. GatedMLP<cuda> is this with owned
/// parts; an analysis routes between a layer's own MLP and its own surrogate with it (no weight
/// is copied). Returns the rows per path (the partition's count is read back: one
/// synchronisation per call). Widths are checked by the caller.
template <class MlpT, class SurrogateT, class GateT>
RouteCounts route_rows(Context<backend::cuda>& ctx, const MlpT& mlp, const SurrogateT& surrogate,
                       const GateT& gate, DeviceView<const typename MlpT::Scalar> X,
                       DeviceView<typename MlpT::Scalar> Y, RoutingWorkspace<MlpT>& ws) {
  using Scalar = typename MlpT::Scalar;
  const Index rows = X.rows;
  if (rows == 0)
    return {0, 0};
  ws.scores.resize(rows, 1);
  gate.score(ctx, X, ws.scores.view());
  if (ws.order.size() < static_cast<std::size_t>(rows))
    ws.order.resize(static_cast<std::size_t>(rows));
  Index* order = thrust::raw_pointer_cast(ws.order.data());
  const Index linear = ops::partition_rows<Scalar>(ctx, ws.scores.view(), gate.threshold(), order);
  const RouteCounts counts{linear, rows - linear};
  if (counts.full == 0) {
    surrogate.forward(ctx, X, Y);
    return counts;
  }
  if (counts.linear == 0) {
    mlp.forward(ctx, X, Y, ws.mlp);
    return counts;
  }
  ws.gathered_in.resize(rows, X.cols);
  ws.gathered_out.resize(rows, X.cols);
  const auto in = ws.gathered_in.view(), out = ws.gathered_out.view();
  ops::gather_rows<Scalar>(ctx, X, order, in);
  surrogate.forward(ctx, in.top_rows(linear), out.top_rows(linear));
  mlp.forward(ctx, in.middle_rows(linear, counts.full), out.middle_rows(linear, counts.full),
              ws.mlp);
  ops::scatter_rows<Scalar>(ctx, out, order, Y);
  return counts;
}

}  // namespace cuda

/// GatedMLP of device parts: Mlp<T, D, H, Act, backend::cuda>, RidgeSurrogate<T, D, D,
/// backend::cuda>, HyperplaneGate<T, D, backend::cuda>. Rows with score > threshold take the
/// surrogate, the rest the MLP; when every row takes one path, that path runs on X directly, so
/// threshold +inf equals the device Mlp and -inf the device surrogate. Cost: 2Td (gate) +
/// (1-f)·4Tdh + f·2Td² FLOPs, an O(T log T) partition and O(Td) copies.
template <class MlpT, class SurrogateT, class GateT>
requires std::is_same_v<typename MlpT::backend_type, backend::cuda>
class GatedMLP<MlpT, SurrogateT, GateT> : public detail::GatedParts<MlpT, SurrogateT, GateT> {
  using Parts = detail::GatedParts<MlpT, SurrogateT, GateT>;
  using Parts::gate_;
  using Parts::mlp_;
  using Parts::surrogate_;

 public:
  using Scalar = typename MlpT::Scalar;
  using backend_type = backend::cuda;
  static_assert(std::is_same_v<Scalar, typename SurrogateT::Scalar> &&
                    std::is_same_v<Scalar, typename GateT::Scalar>,
                "GatedMLP<cuda>: the MLP, surrogate and gate must share one scalar type");
  static_assert(std::is_same_v<typename SurrogateT::backend_type, backend::cuda> &&
                    std::is_same_v<typename GateT::backend_type, backend::cuda>,
                "GatedMLP<cuda>: the MLP, surrogate and gate must all run on backend::cuda "
                "(to_backend(backend::cuda{}, part) uploads a host part)");
  static_assert(sizes_compatible<MlpT::in_size, SurrogateT::in_size> &&
                    sizes_compatible<MlpT::in_size, GateT::size>,
                "GatedMLP<cuda>: MLP, surrogate and gate widths differ at compile time");

  /// Scratch for forward() (see cuda::RoutingWorkspace).
  using Workspace = cuda::RoutingWorkspace<MlpT>;

  /// Composes three device parts; throws ShapeError if their widths differ.
  using Parts::Parts;

  /// Hard routing on the device. X [T, d] -> Y [T, d] (Y must not alias X). Returns the rows per
  /// path (the partition's count is read back: one synchronisation per call).
  RouteCounts forward(Context<backend::cuda>& ctx, cuda::DeviceView<const Scalar> X,
                      cuda::DeviceView<Scalar> Y, Workspace& ws) const {
    check_dim("GatedMLP<cuda>::forward: input width (d)", features(), X.cols);
    check_dim("GatedMLP<cuda>::forward: output rows (T)", X.rows, Y.rows);
    check_dim("GatedMLP<cuda>::forward: output width (d)", features(), Y.cols);
    return cuda::route_rows(ctx, mlp_, surrogate_, gate_, X, Y, ws);
  }

  using Parts::features;
  using Parts::gate;
  using Parts::mlp;
  using Parts::surrogate;
};

/// The device copy of a host GatedMLP (uploads its three parts).
template <class HostMlp, class HostSurrogate, class HostGate>
auto to_backend(backend::cuda device, const GatedMLP<HostMlp, HostSurrogate, HostGate>& host) {
  auto mlp = to_backend(device, host.mlp());
  auto surrogate = to_backend(device, host.surrogate());
  auto gate = to_backend(device, host.gate());
  return GatedMLP<decltype(mlp), decltype(surrogate), decltype(gate)>(
      std::move(mlp), std::move(surrogate), std::move(gate));
}

}  // namespace nlb
