// Umbrella for nlb/kernels: the row kernels (GELU, LayerNorm, softmax, rotary, softplus, ELU+1),
// each with a scalar reference and an xsimd form selected by the backend tag. See docs/kernels.md.
#pragma once

#include "nlb/kernels/elu_feature.hpp"
#include "nlb/kernels/gelu.hpp"
#include "nlb/kernels/half_weights.hpp"
#include "nlb/kernels/layer_norm.hpp"
#include "nlb/kernels/log_sum_exp.hpp"
#include "nlb/kernels/q8_weights.hpp"
#include "nlb/kernels/rms_norm.hpp"
#include "nlb/kernels/rotary.hpp"
#include "nlb/kernels/small_gemm.hpp"
#include "nlb/kernels/softmax.hpp"
#include "nlb/kernels/softplus.hpp"
