// The hyperplane gate's scores on backend::cuda, score(x) = x·w' + b' (PAPERS.md §A3): the
// specialisation HyperplaneGate<T, D, backend::cuda> of nlb/mlp/hyperplane_gate.hpp. Training
// and calibration stay on the host, in double; the device copy scores and routes.
#pragma once

#include <cmath>

#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/mlp/hyperplane_gate.hpp"

namespace nlb {

/// A fitted gate whose folded weight w' [d] lives in device memory; the folded bias b' and the
/// threshold stay on the host (they are scalars passed to each call). A row takes the linear
/// path iff its score > threshold, as on the host. Cost: 2·T·d FLOPs per score().
template <class T, int D>
class HyperplaneGate<T, D, backend::cuda> {
 public:
  using Scalar = T;
  using backend_type = backend::cuda;
  static constexpr int size = D;

  /// Uploads a host gate's folded weight and bias and takes its threshold.
  template <class HostBackend>
  explicit HyperplaneGate(const HyperplaneGate<T, D, HostBackend>& host)
      : weight_(cuda::upload(host.folded_weight())),
        bias_(cuda::upload(RowMatrix<T>::Constant(1, 1, host.folded_bias()))),
        threshold_(host.threshold()) {}

  /// scores[i] = X[i]·w' + b' on the device, X [N, d], scores [N, 1]. Throws ShapeError.
  void score(Context<backend::cuda>& ctx, cuda::DeviceView<const T> X,
             cuda::DeviceView<T> scores) const {
    check_dim("HyperplaneGate<cuda>::score activation columns", features(), X.cols);
    check_dim("HyperplaneGate<cuda>::score output rows", X.rows, scores.rows);
    check_dim("HyperplaneGate<cuda>::score output cols", 1, scores.cols);
    if (X.rows > 0)
      ops::gemm_bias<T>(ctx, X, weight_.view(), bias_.view(), scores);
  }

  Index features() const { return weight_.rows(); }
  T threshold() const { return threshold_; }
  /// Moves the threshold (calibration happens on the host). Throws ArgumentError for NaN.
  void set_threshold(T threshold) {
    if (std::isnan(threshold))
      throw ArgumentError("HyperplaneGate<cuda>::set_threshold: expected a number, found NaN");
    threshold_ = threshold;
  }

 private:
  cuda::DeviceMatrix<T> weight_;  // [d, 1]
  cuda::DeviceMatrix<T> bias_;    // [1, 1]
  T threshold_;
};

/// The device copy of a host gate.
template <class T, int D, class HostBackend>
HyperplaneGate<T, D, backend::cuda> to_backend(backend::cuda,
                                               const HyperplaneGate<T, D, HostBackend>& host) {
  return HyperplaneGate<T, D, backend::cuda>(host);
}

}  // namespace nlb
