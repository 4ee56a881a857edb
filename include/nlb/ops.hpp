// Umbrella for nlb/ops: the heavy operations of the CPU backends (matrix products from the
// backend's GEMM provider, row operations, LayerNorm, rotary positions, attention products,
// losses), each taking the backend's Context first. nlb/cuda/ops.cuh has the same operations for
// backend::cuda. See docs/ops.md.
#pragma once

#include "nlb/ops/attention.hpp"
#include "nlb/ops/elementwise.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/layer_norm.hpp"
#include "nlb/ops/loss.hpp"
#include "nlb/ops/narrow_gemm.hpp"
#include "nlb/ops/rms_norm.hpp"
#include "nlb/ops/rotary.hpp"
#include "nlb/ops/rows.hpp"
#include "nlb/ops/scratch.hpp"
