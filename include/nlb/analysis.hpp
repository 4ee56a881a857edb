// Umbrella for nlb/analysis: the papers' measurements: the MLP budget pipeline (PAPERS §A), the
// attention spectrum and conversions (§B), FLOP accounting and bootstrap intervals.
#pragma once

#include "nlb/analysis/attention_conversions.hpp"
#include "nlb/analysis/attention_spectrum.hpp"
#include "nlb/analysis/bootstrap.hpp"
#include "nlb/analysis/budget.hpp"
#include "nlb/analysis/budget_across.hpp"
#include "nlb/analysis/budget_allocation.hpp"
#include "nlb/analysis/budget_protocol.hpp"
#include "nlb/analysis/flops.hpp"
#include "nlb/analysis/gate_training.hpp"
#include "nlb/analysis/joint_gating.hpp"
#include "nlb/analysis/label_rows.hpp"
#include "nlb/analysis/mlp_variants.hpp"
#include "nlb/analysis/probes.hpp"
#include "nlb/analysis/tap_collection.hpp"
#include "nlb/analysis/variant_engine.hpp"
