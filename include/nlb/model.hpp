// Umbrella for nlb/model: the reference transformer: Block, the per-layer slots, Transformer,
// configs, model-directory loaders, losses, sampling and taps. See docs/architectures.md.
#pragma once

#include "nlb/model/attention_slot.hpp"
#include "nlb/model/block.hpp"
#include "nlb/model/config.hpp"
#include "nlb/model/hf_loader.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/loss.hpp"
#include "nlb/model/mlp_slot.hpp"
#include "nlb/model/model_summary.hpp"
#include "nlb/model/sampling.hpp"
#include "nlb/model/sd_loader.hpp"
#include "nlb/model/taps.hpp"
#include "nlb/model/transformer.hpp"
#include "nlb/model/weights.hpp"
