// The projections that dense and linear attention share on backend::cuda: [Q K V] = X w_qkv +
// b_qkv with rotary positions on Q and K, and Y = C w_out + b_out. Internal to nlb/cuda.
#pragma once

#include "nlb/core/matrix.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/cuda/row_ops.cuh"

namespace nlb::cuda::detail {

/// The uploaded weights of an attention with DenseAttention's layout (w_qkv [d, 3d] = [Q K V],
/// head h in columns [h·d_h, (h+1)·d_h) of each block), its head count and rotary settings.
template <class T>
class QkvProjection {
 public:
  QkvProjection() = default;

  /// Uploads a host attention's weights (weights(), heads(), rotary_dims(), rotary_base()).
  template <class HostAttention>
  explicit QkvProjection(const HostAttention& host)
      : w_qkv_(upload(host.weights().w_qkv)),
        b_qkv_(upload(host.weights().b_qkv)),
        w_out_(upload(host.weights().w_out)),
        b_out_(upload(host.weights().b_out)),
        heads_(host.heads()),
        rotary_dims_(host.rotary_dims()),
        rotary_base_(host.rotary_base()) {}

  /// qkv [T, 3d] = X w_qkv + b_qkv, then Q and K rotated for positions [past, past + T).
  void project(Context<backend::cuda>& ctx, DeviceView<const T> X, DeviceView<T> qkv,
               Index past) const {
    ops::gemm_bias<T>(ctx, X, w_qkv_.view(), b_qkv_.view(), qkv);
    ops::rotate_queries_keys<T>(ctx, qkv, heads_, rotary_dims_, past, rotary_base_);
  }

  /// Y [T, d] = context w_out + b_out.
  void output(Context<backend::cuda>& ctx, DeviceView<const T> context, DeviceView<T> Y) const {
    ops::gemm_bias<T>(ctx, context, w_out_.view(), b_out_.view(), Y);
  }

  Index features() const { return w_out_.rows(); }
  Index heads() const { return heads_; }
  Index head_dim() const { return heads_ > 0 ? features() / heads_ : 0; }
  Index rotary_dims() const { return rotary_dims_; }
  double rotary_base() const { return rotary_base_; }

 private:
  DeviceMatrix<T> w_qkv_;  // [d, 3d]
  DeviceMatrix<T> b_qkv_;  // [1, 3d]
  DeviceMatrix<T> w_out_;  // [d, d]
  DeviceMatrix<T> b_out_;  // [1, d]
  Index heads_ = 0;
  Index rotary_dims_ = 0;
  double rotary_base_ = 10000.0;
};

}  // namespace nlb::cuda::detail
