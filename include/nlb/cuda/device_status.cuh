// Is there a usable CUDA device, and if not, why not (docs/cuda.md).
//
// Asked before anything touches the device: creating a stream, a cuBLAS handle or a
// thrust::device_vector on a machine without a driver throws or aborts, and the runtime's error
// is sticky. The answer distinguishes the cases a user can act on: no driver, no device, a
// device this build has no kernel image for.
#pragma once

#include <string>

#include "nlb/core/errors.hpp"
#include "nlb/cuda/detail/config.cuh"

namespace nlb {

/// The CUDA runtime or cuBLAS reported an error, or no usable device is present.
class DeviceError : public Error {
 public:
  using Error::Error;
};

namespace cuda {

/// Whether the CUDA backend can run here; `description` names the device or says why not.
struct DeviceStatus {
  bool usable = false;
  std::string description;
};

#if NLB_CUDA_DEVICE_BUILD
namespace detail {
// An empty kernel: launching it tells whether this binary has code the device can run. A
// template, so that every translation unit may define it.
template <int = 0>
__global__ void probe_kernel() {}
}  // namespace detail
#endif

/// Device 0's status. Never throws; safe to call on a machine with no driver.
inline DeviceStatus device_status() {
#if NLB_CUDA_DEVICE_BUILD
  // Every failure is reported with the error of the call that failed.
  const auto failed = [](const std::string& what, cudaError_t status) {
    return DeviceStatus{
        false, what + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")"};
  };
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted == cudaErrorInsufficientDriver || counted == cudaErrorStubLibrary)
    return failed("no CUDA driver is installed (or it is older than this build's runtime)",
                  counted);
  if (counted == cudaErrorNoDevice || (counted == cudaSuccess && count == 0))
    return {false, "the CUDA driver reports no device"};
  if (counted != cudaSuccess)
    return failed("the CUDA runtime cannot count devices", counted);
  cudaDeviceProp prop{};
  if (const cudaError_t read = cudaGetDeviceProperties(&prop, 0); read != cudaSuccess)
    return failed("cannot read the properties of device 0", read);
  const std::string name = std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
                           std::to_string(prop.minor) + ")";
  detail::probe_kernel<><<<1, 1>>>();
  const cudaError_t launched = cudaGetLastError();
  if (launched == cudaErrorNoKernelImageForDevice || launched == cudaErrorInvalidDeviceFunction)
    return failed(name +
                      ": this build has no kernel image for it (add its architecture to "
                      "CMAKE_CUDA_ARCHITECTURES)",
                  launched);
  if (launched != cudaSuccess)
    return failed(name + ": a test kernel failed to launch", launched);
  if (const cudaError_t finished = cudaDeviceSynchronize(); finished != cudaSuccess)
    return failed(name + ": a test kernel failed to run", finished);
  return {true, name};
#else
  return {true, "host-system build (thrust's host device system; no GPU is used)"};
#endif
}

}  // namespace cuda
}  // namespace nlb
