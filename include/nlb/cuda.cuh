// Umbrella for nlb/cuda: the CUDA backend (backend::cuda) — device matrices, its context and
// operations, the MLP family's and attention's device components, and the whole model. Builds under
// nvcc, or with g++ and a thrust host device system (docs/cuda.md).
#pragma once

#include "nlb/cuda/context.cuh"
#include "nlb/cuda/dense_attention.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/device_status.cuh"
#include "nlb/cuda/gated_mlp.cuh"
#include "nlb/cuda/hyperplane_gate.cuh"
#include "nlb/cuda/kv_cache.cuh"
#include "nlb/cuda/mlp.cuh"
#include "nlb/cuda/ops.cuh"
#include "nlb/cuda/ridge_surrogate.cuh"
#include "nlb/cuda/row_ops.cuh"
#include "nlb/cuda/sd_attention.cuh"
#include "nlb/cuda/transformer.cuh"
#include "nlb/cuda/variant_engine.cuh"
