// The run-time context of backend::cuda: a stream, a cuBLAS handle, the GEMM math mode and a
// scratch arena (DESIGN.md §4; the CUTLASS `run(..., stream)` and Eigen `GpuDevice` idea).
#pragma once

#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "nlb/core/backend.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/cuda/detail/config.cuh"
#include "nlb/cuda/device_status.cuh"

namespace nlb::cuda {

/// How cuBLAS multiplies float matrices. fp32: full single precision (the default; the
/// tolerance table's float bounds hold). tf32: the tensor cores' 10-bit-mantissa inputs, an
/// explicit fast-math choice whose error is bounded only loosely (about 1e-3 relative).
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
    throw DeviceError(std::string(what) + ": cuBLAS status " +
                      std::to_string(static_cast<int>(status)));
}
#endif
}  // namespace detail

}  // namespace nlb::cuda

namespace nlb {

/// The context every backend::cuda operation runs in. Owns one stream and one cuBLAS handle
/// bound to it (device build); operations on one context run in order on its stream, and
/// results are read back by cuda::download (which waits for them). Not copyable.
/// In the host-system build (docs/cuda.md) it holds only the math mode and the arena.
template <>
class Context<backend::cuda, void> {
 public:
  using backend_type = backend::cuda;

  /// A context on device 0. Throws DeviceError naming the reason when no usable device is
  /// present (no driver, no device, no kernel image for it).
  explicit Context(cuda::GemmMath gemm_math = cuda::GemmMath::fp32) : gemm_math_(gemm_math) {
    const cuda::DeviceStatus status = cuda::device_status();
    if (!status.usable)
      throw DeviceError("backend::cuda: no usable device: " + status.description);
#if NLB_CUDA_DEVICE_BUILD
    // A blocking stream (not cudaStreamNonBlocking): copies and allocations on the legacy
    // default stream (cuda::upload, cuda::download, growing a DeviceMatrix) then wait for the
    // work queued here and this stream waits for them, so results read back are complete.
    cuda::detail::check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    cuda::detail::check(cublasCreate(&blas_), "cublasCreate");
    cuda::detail::check(cublasSetStream(blas_, stream_), "cublasSetStream");
    cuda::detail::check(
        cublasSetMathMode(blas_, gemm_math == cuda::GemmMath::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                   : CUBLAS_DEFAULT_MATH),
        "cublasSetMathMode");
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

  /// thrust's execution policy for this context: the stream's in the device build (never a
  /// bare call, which would run on the host), the host system's otherwise.
  auto policy() const {
#if NLB_CUDA_DEVICE_BUILD
    return thrust::cuda::par.on(stream_);
#else
    return thrust::device;
#endif
  }

  /// Waits until every operation queued on this context has finished; throws DeviceError if one
  /// failed.
  void synchronize() const {
#if NLB_CUDA_DEVICE_BUILD
    cuda::detail::check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
#endif
  }

  cuda::GemmMath gemm_math() const {
    return gemm_math_;
  }

#if NLB_CUDA_DEVICE_BUILD
  cudaStream_t stream() const {
    return stream_;
  }
  cublasHandle_t blas() const {
    return blas_;
  }
#endif

  /// A grow-only scratch region of at least `count` values of T (64-byte aligned), valid until
  /// the next call of scratch(). For temporaries of one operation.
  template <class T>
  T* scratch(Index count) {
    const auto bytes = static_cast<std::size_t>(count) * sizeof(T) + 64;
    if (arena_.size() < bytes)
      arena_.resize(bytes);
    auto address = reinterpret_cast<std::uintptr_t>(thrust::raw_pointer_cast(arena_.data()));
    address = (address + 63) / 64 * 64;
    return reinterpret_cast<T*>(address);
  }

 private:
  cuda::GemmMath gemm_math_;
  thrust::device_vector<unsigned char> arena_;
#if NLB_CUDA_DEVICE_BUILD
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
#endif
};

}  // namespace nlb
