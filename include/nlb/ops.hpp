// Umbrella for nlb/ops: the heavy operations of the CPU backends, dispatched on the backend tag
// (matrix products from the backend's GEMM provider). See docs/ops.md.
#pragma once

#include "nlb/ops/gemm.hpp"
