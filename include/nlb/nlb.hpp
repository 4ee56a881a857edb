// nlbudget: everything CPU-side. Include this, or the one header you need.
#pragma once

#include "nlb/analysis/flops.hpp"
#include "nlb/core.hpp"
#include "nlb/kernels.hpp"
#include "nlb/mlp/activation.hpp"
#include "nlb/mlp/gate_labels.hpp"
#include "nlb/mlp/gated_mlp.hpp"
#include "nlb/mlp/hyperplane_gate.hpp"
#include "nlb/mlp/mlp.hpp"
#include "nlb/mlp/ridge_stats.hpp"
#include "nlb/mlp/ridge_surrogate.hpp"
#include "nlb/mlp/route_counts.hpp"
