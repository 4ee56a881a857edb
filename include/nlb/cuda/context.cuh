// The run-time context of backend::cuda: a stream, a cuBLAS handle on it and the float GEMMs'
// math mode (DESIGN.md §4; the CUTLASS `run(..., stream)` and Eigen `GpuDevice` idea). Device
// ops (nlb/cuda/ops.cuh) are queued on the stream and return without waiting; the host waits only
// where it reads a value back, and the context counts those waits (synchronizations()). The
// stream is non-blocking: nothing is ordered through the legacy default stream.
#pragma once

#include <thrust/execution_policy.h>
#include <cstdint>
#include <string>

#include "nlb/core/backend.hpp"
#include "nlb/core/context.hpp"
#include "nlb/cuda/detail/config.cuh"
#include "nlb/cuda/device_status.cuh"

namespace nlb::cuda {

/// How cuBLAS multiplies float matrices (the compute type of every float product). fp32: full
/// single precision (the default; the tolerance table's float bounds hold). tf32: the tensor
/// cores' 10-bit-mantissa inputs, an explicit fast-math choice (about 1e-3 relative error).
enum class GemmMath { fp32, tf32 };

namespace detail {
#if NLB_CUDA_DEVICE_BUILD
inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw DeviceError(std::string(what) + ": " + cudaGetErrorName(status) + " (" +
                      cudaGetErrorString(status) + ")");
}
inline void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw DeviceError(std::string(what) + ": " + cublasGetStatusName(status));
}
#endif
}  // namespace detail

}  // namespace nlb::cuda

namespace nlb {

/// The context every backend::cuda op runs in: one stream and a cuBLAS handle bound to it; ops
/// on one context run in order. Not copyable. In the host-system build (detail/config.cuh) ops
/// finish before they return, and waits are counted all the same (tested on any machine).
template <>
class Context<backend::cuda, void> {
 public:
  using backend_type = backend::cuda;

  /// A context on device 0. DeviceError naming the reason when no usable device is present (no
  /// driver, no device, no kernel image for it).
  explicit Context(cuda::GemmMath gemm_math = cuda::GemmMath::fp32) : gemm_math_(gemm_math) {
    const cuda::DeviceStatus status = cuda::device_status();
    if (!status.usable)
      throw DeviceError("backend::cuda: no usable device: " + status.description);
#if NLB_CUDA_DEVICE_BUILD
    cuda::detail::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                        "cudaStreamCreateWithFlags");
    cuda::detail::check(cublasCreate(&blas_), "cublasCreate");
    cuda::detail::check(cublasSetStream(blas_, stream_), "cublasSetStream");
#endif
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() {
#if NLB_CUDA_DEVICE_BUILD
    if (blas_)
      cublasDestroy(blas_);
    if (stream_)
      cudaStreamDestroy(stream_);
#endif
  }

  /// Waits for every op queued on this context and counts the wait; DeviceError if one failed.
  /// The read-backs (partition_rows, to_host, next_token_losses, cuda::download) call it.
  void synchronize() const {
    ++synchronizations_;
#if NLB_CUDA_DEVICE_BUILD
    cuda::detail::check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
#endif
  }
  /// How many times the host has waited for this context since it was made.
  std::int64_t synchronizations() const {
    return synchronizations_;
  }

  cuda::GemmMath gemm_math() const {
    return gemm_math_;
  }

  /// thrust's policy: the stream, without the wait thrust::cuda::par adds after every algorithm
  /// (one that reads a value back still waits); thrust's host system in the host-system build.
  auto policy() const {
#if NLB_CUDA_DEVICE_BUILD
    return thrust::cuda::par_nosync.on(stream_);
#else
    return thrust::device;
#endif
  }

#if NLB_CUDA_DEVICE_BUILD
  cudaStream_t stream() const {
    return stream_;
  }
  cublasHandle_t blas() const {
    return blas_;
  }
#endif

 private:
  cuda::GemmMath gemm_math_;
  mutable std::int64_t synchronizations_ = 0;  // a wait changes no observable state
#if NLB_CUDA_DEVICE_BUILD
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
#endif
};

}  // namespace nlb
