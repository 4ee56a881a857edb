// How nlb/cuda is being compiled. Internal to nlb/cuda.
//
// The CUDA backend's headers build in two ways (docs/cuda.md):
// - under nvcc (__CUDACC__): thrust's CUDA system, cuBLAS, own __global__ kernels; the real
//   backend (NLB_CUDA_DEVICE_BUILD 1);
// - under a plain C++ compiler with one of thrust's host device systems
//   (-DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_CPP or _OMP): "device" memory is host memory,
//   every kernel runs its host fallback and cuBLAS is replaced by a column-major reference GEMM
//   called with the same arguments. The algorithms (operand swaps, leading dimensions, partition
//   order, scatter indices) are then tested on any machine (NLB_CUDA_DEVICE_BUILD 0).
#pragma once

#include <thrust/detail/config.h>

#if defined(__CUDACC__)
#define NLB_CUDA_DEVICE_BUILD 1
#else
#define NLB_CUDA_DEVICE_BUILD 0
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
#error \
    "nlb/cuda: compile with nvcc, or with a host device system: \
-DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_CPP (or _OMP) for the host-system build"
#endif
#endif

#if NLB_CUDA_DEVICE_BUILD
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif
