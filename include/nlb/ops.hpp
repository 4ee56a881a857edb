// Umbrella for nlb/ops: the heavy operations of the CPU backends, dispatched on the backend tag
// (matrix products from the backend's GEMM provider, row gathers and scatters, elementwise maps).
// nlb/cuda/ops.cuh has the same operations for backend::cuda. See docs/ops.md.
#pragma once

#include "nlb/ops/elementwise.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/half_gemm.hpp"
#include "nlb/ops/layer_norm.hpp"
#include "nlb/ops/rotary.hpp"
#include "nlb/ops/rows.hpp"
