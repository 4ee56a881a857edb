// Umbrella for nlb/analysis: the papers' measurements. Shared: the variants of a model and the
// runners that measure them, forward timings, FLOP accounting and bootstrap intervals; budget/:
// the MLP budget pipeline (PAPERS §A); attention/: the attention spectrum and conversions (§B).
#pragma once

#include "nlb/analysis/attention/conversions.hpp"
#include "nlb/analysis/attention/spectrum.hpp"
#include "nlb/analysis/bootstrap.hpp"
#include "nlb/analysis/budget/across.hpp"
#include "nlb/analysis/budget/across_stage.hpp"
#include "nlb/analysis/budget/allocation.hpp"
#include "nlb/analysis/budget/eval_stage.hpp"
#include "nlb/analysis/budget/fit_stage.hpp"
#include "nlb/analysis/budget/gate_training.hpp"
#include "nlb/analysis/budget/greedy_calibration.hpp"
#include "nlb/analysis/budget/joint_state.hpp"
#include "nlb/analysis/budget/label_rows.hpp"
#include "nlb/analysis/budget/label_stage.hpp"
#include "nlb/analysis/budget/no_fly_stage.hpp"
#include "nlb/analysis/budget/observer.hpp"
#include "nlb/analysis/budget/pipeline.hpp"
#include "nlb/analysis/budget/probes.hpp"
#include "nlb/analysis/budget/protocol.hpp"
#include "nlb/analysis/budget/tap_collection.hpp"
#include "nlb/analysis/flops.hpp"
#include "nlb/analysis/forward_timing.hpp"
#include "nlb/analysis/model_variant.hpp"
#include "nlb/analysis/variant_runner.hpp"
