// Umbrella for nlb/mlp: the MLP-budget components: Mlp, SwiGluMlp, RidgeStats and RidgeSurrogate,
// HyperplaneGate (with its labels and calibration) and GatedMLP (PAPERS §A). See docs/mlp.md.
#pragma once

#include "nlb/mlp/activation.hpp"
#include "nlb/mlp/gate_labels.hpp"
#include "nlb/mlp/gated_mlp.hpp"
#include "nlb/mlp/hyperplane_gate.hpp"
#include "nlb/mlp/mlp.hpp"
#include "nlb/mlp/ridge_stats.hpp"
#include "nlb/mlp/ridge_surrogate.hpp"
#include "nlb/mlp/route_counts.hpp"
#include "nlb/mlp/row_parts.hpp"
#include "nlb/mlp/swiglu_mlp.hpp"
