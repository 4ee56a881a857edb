// Function qualifiers for code shared by the host and the CUDA device (DESIGN.md §4).
//
// Elementwise math (nlb/kernels/elementwise.hpp) is written once and called from the scalar
// loops, the xsimd kernels and the CUDA kernels. Under nvcc it must be `__host__ __device__`;
// under a plain C++ compiler those words do not exist (CCCL 3 no longer defines them for g++),
// so the library spells them through these macros.
#pragma once

#if defined(__CUDACC__)
/// Callable on the host and on the device.
#define NLB_HOST_DEVICE __host__ __device__
/// Before a `NLB_HOST_DEVICE` template whose host-only instantiations (xsimd batches) would
/// otherwise draw nvcc's "calling a __host__ function from a __host__ __device__ function".
#define NLB_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#define NLB_HOST_DEVICE
#define NLB_EXEC_CHECK_DISABLE
#endif
