// Umbrella for nlb/cuda: the CUDA backend (backend::cuda) — its context, device matrices and
// views, and the device implementations of the ops layer — followed by the components and the
// model, which are the same class templates on every backend (DESIGN.md §4). Builds under nvcc,
// or with g++ and a thrust host device system (docs/cuda.md).
//
// Include this header before any component header: the components call the ops by qualified name
// (ops::gemm, …), and such a call sees the overloads declared before the component's template, so
// the device ops must come first (nlb/cuda/ops.cuh stops the build with a message otherwise).
#pragma once

#include "nlb/cuda/context.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/device_status.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/cuda/row_ops.cuh"

#include "nlb/model.hpp"
