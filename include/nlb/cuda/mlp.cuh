// The transformer MLP on backend::cuda, Y = Act(X W_fc + b_fc) W_proj + b_proj (PAPERS.md §A1):
// the specialisation Mlp<T, D, H, Act, backend::cuda> of nlb/mlp/mlp.hpp.
#pragma once

#include <utility>

#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/mlp/mlp.hpp"
#include "nlb/mlp/route_counts.hpp"

namespace nlb {

/// An MLP whose weights live in device memory. Built from a host Mlp (to_backend); the same
/// shapes and formula as the host component (nlb/mlp/mlp.hpp): X, Y [T, d]; W_fc [d, h];
/// W_proj [h, d]. Cost: 4·T·d·h FLOPs in two cuBLAS products, the activation one elementwise
/// pass over [T, h] with the functor Act::op (nlb/kernels/elementwise.hpp), the biases folded
/// into the products (rows preset to the bias, then an accumulating GEMM).
template <class T, int D, int H, class Act>
class Mlp<T, D, H, Act, backend::cuda> {
 public:
  using Scalar = T;
  using backend_type = backend::cuda;
  using Activation = Act;
  static constexpr int in_size = D;
  static constexpr int hidden_size = H;
  static constexpr int out_size = D;

  /// Scratch for forward(): the hidden block [≥ T, h]; grows to the largest batch, never shrinks.
  struct Workspace {
    cuda::DeviceMatrix<T> hidden;
  };

  /// Uploads the weights of a host MLP of the same scalar, sizes and activation.
  template <class HostBackend>
  explicit Mlp(const Mlp<T, D, H, Act, HostBackend>& host)
      : w_fc_(cuda::upload(host.w_fc())),
        b_fc_(cuda::upload(host.b_fc())),
        w_proj_(cuda::upload(host.w_proj())),
        b_proj_(cuda::upload(host.b_proj())) {}

  /// Y = MLP(X) on the device. X [T, d], Y [T, d] (device views; Y must not alias X). Returns
  /// the rows that took the full path (all). Throws ShapeError on a width or row mismatch.
  RouteCounts forward(Context<backend::cuda>& ctx, cuda::DeviceView<const T> X,
                      cuda::DeviceView<T> Y, Workspace& ws) const {
    check_dim("Mlp<cuda>::forward: input width (d)", features(), X.cols);
    check_dim("Mlp<cuda>::forward: output rows (T)", X.rows, Y.rows);
    check_dim("Mlp<cuda>::forward: output width (d)", features(), Y.cols);
    if (X.rows == 0)
      return {0, 0};
    if (ws.hidden.rows() < X.rows || ws.hidden.cols() != hidden_features())
      ws.hidden.resize(X.rows, hidden_features());
    const cuda::DeviceView<T> hidden = ws.hidden.view().top_rows(X.rows);  // [T, h]
    ops::gemm_bias<T>(ctx, X, w_fc_.view(), b_fc_.view(), hidden);
    ops::transform(ctx, hidden, typename Act::template op<>{});
    ops::gemm_bias<T>(ctx, hidden, w_proj_.view(), b_proj_.view(), Y);  // [T, d]
    return {0, X.rows};
  }

  Index features() const { return w_fc_.rows(); }
  Index hidden_features() const { return w_fc_.cols(); }

 private:
  cuda::DeviceMatrix<T> w_fc_;    // [d, h]
  cuda::DeviceMatrix<T> b_fc_;    // [1, h]
  cuda::DeviceMatrix<T> w_proj_;  // [h, d]
  cuda::DeviceMatrix<T> b_proj_;  // [1, d]
};

/// The device copy of a host MLP (uploads its weights once).
template <class T, int D, int H, class Act, class HostBackend>
Mlp<T, D, H, Act, backend::cuda> to_backend(backend::cuda,
                                            const Mlp<T, D, H, Act, HostBackend>& host) {
  return Mlp<T, D, H, Act, backend::cuda>(host);
}

}  // namespace nlb
