// Causal ELU+1 linear attention on backend::cuda (PAPERS.md §B3; docs/attention.md): the
// specialisation LinearAttention<T, D, backend::cuda> of nlb/attention/linear_attention.hpp.
#pragma once

#include <algorithm>

#include "nlb/attention/linear_attention.hpp"
#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/host_device.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/detail/qkv_projection.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/kv_cache.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/cuda/row_ops.cuh"
#include "nlb/kernels/elementwise.hpp"

namespace nlb::cuda::detail {

// out[t, :] = [v[t, :] | 1]: a head's values with a column of ones appended, so that one product
// gives the numerator and (in the last column) the denominator of linear attention.
template <class T>
struct ValuesWithOnes {
  const T* v;
  Index v_stride;
  T* out;
  Index out_stride, cols;  // cols = d_v + 1
  NLB_HOST_DEVICE void operator()(Index i) const {
    const Index t = i / cols, j = i % cols;
    out[t * out_stride + j] = j + 1 < cols ? v[t * v_stride + j] : T(1);
  }
};

// a[i, j] = 0 for j > i (the strictly upper triangle of a square chunk of scores).
template <class T>
struct ZeroStrictlyUpper {
  T* a;
  Index stride, cols;
  NLB_HOST_DEVICE void operator()(Index i) const {
    const Index r = i / cols, j = i % cols;
    if (j > r)
      a[r * stride + j] = T(0);
  }
};

// out[t, j] = numerator[t, j] / numerator[t, d_v]: the last column holds the denominator.
template <class T>
struct DivideByLastColumn {
  const T* numerator;
  Index numerator_stride;
  T* out;
  Index out_stride, cols;  // cols = d_v
  NLB_HOST_DEVICE void operator()(Index i) const {
    const Index t = i / cols, j = i % cols;
    const T* row = numerator + t * numerator_stride;
    out[t * out_stride + j] = row[j] / row[cols];
  }
};

}  // namespace nlb::cuda::detail

namespace nlb {

/// Linear attention whose weights live in device memory, built from a host LinearAttention
/// (to_backend). The host component's formula and layout (DenseAttention's weights):
///   [Q K V] = X w_qkv + b_qkv;  Q, K rotated (first rotary_dims per head);
///   per head: C_h = φ(Q_h) Σ_{j<=i} φ(K_h,j)ᵀ V_h,j / (φ(Q_h) Σ_{j<=i} φ(K_h,j)ᵀ),  φ = elu + 1;
///   Y = C w_out + b_out.
/// X, Y [T, d]. Per head the prefix sums run over chunks of 64 rows, as on the host, with the
/// values extended by a column of ones [V_h | 1] so that the running state [d_h, d_h + 1] carries
/// the denominator's sums in its last column: per chunk c, A = tril(φ(Q_c) φ(K_c)ᵀ),
/// N_c = φ(Q_c) S + A [V_c | 1], S += φ(K_c)ᵀ [V_c | 1] (four cuBLAS products), then
/// C_c = N_c[:, :d_h] / N_c[:, d_h]. Cost: 8·T·d² + O(T·d·(d_h + 64)) FLOPs, linear in T.
/// No KV cache, as on the host (ArgumentError when given one).
template <class T, int D>
class LinearAttention<T, D, backend::cuda> {
 public:
  using Scalar = T;
  using backend_type = backend::cuda;
  static constexpr int size = D;

  /// Scratch for forward(): qkv [T, 3d], one head's [V_h | 1] and numerators [T, d_h + 1], the
  /// state [d_h, d_h + 1], one chunk's scores [64, 64], the context [T, d]. Grows to the largest
  /// call and keeps its memory.
  struct Workspace {
    cuda::DeviceMatrix<T> qkv, values, numerators, state, chunk, context;
  };

  /// Uploads a host linear attention's weights, head count and rotary settings.
  template <class HostBackend>
  explicit LinearAttention(const LinearAttention<T, D, HostBackend>& host) : projection_(host) {}

  /// Y = linear_attention(X) over positions [0, T) on the device. X [T, d], Y [T, d] (Y must not
  /// alias X). `cache` must be null (ArgumentError otherwise). ShapeError on a mismatch.
  void forward(Context<backend::cuda>& ctx, cuda::DeviceView<const T> X, cuda::DeviceView<T> Y,
               Workspace& ws, cuda::KVCacheLayer<T>* cache = nullptr) const {
    if (cache) {
      throw ArgumentError(nlb::detail::expected_found("LinearAttention<cuda>::forward: KV cache",
                                                      "none (not supported)", "a cache"));
    }
    const Index d = features(), rows = X.rows, dh = head_dim();
    cuda::detail::check_attention_call<T>("LinearAttention<cuda>::forward", d, X, Y, nullptr);
    if (rows == 0)
      return;
    ws.qkv.resize(rows, 3 * d);
    const cuda::DeviceView<T> qkv = ws.qkv.view();  // [T, 3d]
    projection_.project(ctx, X, qkv, 0);
    ops::transform<T>(ctx, qkv.middle_cols(0, 2 * d), kernels::EluFeatureOp{});  // φ on Q and K

    ws.values.resize(rows, dh + 1);
    ws.numerators.resize(rows, dh + 1);
    ws.state.resize(dh, dh + 1);
    ws.context.resize(rows, d);
    const cuda::DeviceView<T> values = ws.values.view(), numerators = ws.numerators.view(),
                              state = ws.state.view(), context = ws.context.view();
    for (Index h = 0; h < heads(); ++h) {
      cuda::detail::for_each_index(
          ctx, rows * (dh + 1),
          cuda::detail::ValuesWithOnes<T>{qkv.data + 2 * d + h * dh, qkv.stride, values.data,
                                          values.stride, dh + 1});
      const cuda::DeviceView<const T> fq = qkv.middle_cols(h * dh, dh),  // [T, d_h]
          fk = qkv.middle_cols(d + h * dh, dh);
      for (Index c0 = 0; c0 < rows; c0 += nlb::detail::linear_chunk) {
        const Index n = std::min(nlb::detail::linear_chunk, rows - c0);
        const auto q = fq.middle_rows(c0, n), k = fk.middle_rows(c0, n);
        const cuda::DeviceView<const T> v = values.middle_rows(c0, n);  // [n, d_h + 1]
        const auto out = numerators.middle_rows(c0, n);
        ws.chunk.resize(n, n);
        const cuda::DeviceView<T> a = ws.chunk.view();
        ops::gemm<T>(ctx, q, k, a, T(1), T(0), false, true);  // [n, n]
        cuda::detail::for_each_index(ctx, n * n,
                                     cuda::detail::ZeroStrictlyUpper<T>{a.data, a.stride, n});
        const bool first = c0 == 0;  // the state is still zero: skip its product
        if (!first)
          ops::gemm<T>(ctx, q, state, out);
        ops::gemm<T>(ctx, a, v, out, T(1), first ? T(0) : T(1));
        ops::gemm<T>(ctx, k, v, state, T(1), first ? T(0) : T(1), true, false);
      }
      cuda::detail::for_each_index(
          ctx, rows * dh,
          cuda::detail::DivideByLastColumn<T>{numerators.data, numerators.stride,
                                              context.data + h * dh, context.stride, dh});
    }
    projection_.output(ctx, context, Y);  // [T, d]
  }

  Index features() const { return projection_.features(); }
  Index heads() const { return projection_.heads(); }
  Index head_dim() const { return projection_.head_dim(); }
  Index rotary_dims() const { return projection_.rotary_dims(); }
  double rotary_base() const { return projection_.rotary_base(); }

 private:
  cuda::detail::QkvProjection<T> projection_;  // w_qkv, b_qkv, w_out, b_out, heads, rotary
};

/// The device copy of a host linear attention (uploads its weights once).
template <class T, int D, class HostBackend>
LinearAttention<T, D, backend::cuda> to_backend(backend::cuda,
                                                const LinearAttention<T, D, HostBackend>& host) {
  return LinearAttention<T, D, backend::cuda>(host);
}

}  // namespace nlb
