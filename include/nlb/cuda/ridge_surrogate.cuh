// The ridge surrogate applied on backend::cuda, Y = X W + b (PAPERS.md §A1): the
// specialisation RidgeSurrogate<T, DIn, DOut, backend::cuda> of nlb/mlp/ridge_surrogate.hpp.
// Fitting stays on the host, in double (RidgeStats, RidgeSurrogate::fit); the device copy only
// applies the fitted map.
#pragma once

#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/mlp/ridge_surrogate.hpp"
#include "nlb/mlp/route_counts.hpp"

namespace nlb {

/// A fitted linear surrogate whose W [d_in, d_out] and b [d_out] live in device memory.
/// Cost: 2·T·d_in·d_out FLOPs, one cuBLAS product with the bias folded in.
template <class T, int DIn, int DOut>
class RidgeSurrogate<T, DIn, DOut, backend::cuda> {
 public:
  using Scalar = T;
  using backend_type = backend::cuda;
  static constexpr int in_size = DIn;
  static constexpr int out_size = DOut;

  /// Uploads a host surrogate's W and b.
  template <class HostBackend>
  explicit RidgeSurrogate(const RidgeSurrogate<T, DIn, DOut, HostBackend>& host)
      : weight_(cuda::upload(host.weight())), bias_(cuda::upload(host.bias())) {}

  /// Y = X W + b on the device. X [T, d_in], Y [T, d_out] (must not alias X). Returns the rows
  /// that took the linear path (all). Throws ShapeError on a mismatch.
  RouteCounts forward(Context<backend::cuda>& ctx, cuda::DeviceView<const T> X,
                      cuda::DeviceView<T> Y) const {
    check_dim("RidgeSurrogate<cuda>::forward: input width (d_in)", features(), X.cols);
    check_dim("RidgeSurrogate<cuda>::forward: output rows (T)", X.rows, Y.rows);
    check_dim("RidgeSurrogate<cuda>::forward: output width (d_out)", out_features(), Y.cols);
    if (X.rows > 0)
      ops::gemm_bias<T>(ctx, X, weight_.view(), bias_.view(), Y);
    return {X.rows, 0};
  }

  Index features() const { return weight_.rows(); }
  Index out_features() const { return weight_.cols(); }

 private:
  cuda::DeviceMatrix<T> weight_;  // [d_in, d_out]
  cuda::DeviceMatrix<T> bias_;    // [1, d_out]
};

/// The device copy of a host surrogate.
template <class T, int DIn, int DOut, class HostBackend>
RidgeSurrogate<T, DIn, DOut, backend::cuda> to_backend(
    backend::cuda, const RidgeSurrogate<T, DIn, DOut, HostBackend>& host) {
  return RidgeSurrogate<T, DIn, DOut, backend::cuda>(host);
}

}  // namespace nlb
