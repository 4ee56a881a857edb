// What an analysis runs in a layer instead of the layer's own attention and MLP, without
// touching the model (DESIGN.md §3: analyses never mutate or copy a loaded model).
#pragma once

#include "nlb/model/attention_slot.hpp"
#include "nlb/model/mlp_override.hpp"

namespace nlb {

/// One layer of an analysis run: `attention` (null: the layer's own) and `mlp` (MlpOverride:
/// the layer's own MLP, a surrogate, or gated routing to the layer's own MLP). Pointers to
/// caller-owned objects, which must outlive the run. Pass one per layer to
/// BasicTransformer::run_layers.
template <class T, class Backend = backend::cpu>
struct LayerOverride {
  const AttentionSlot<T, Backend>* attention = nullptr;
  MlpOverride<T, Backend> mlp;
};

}  // namespace nlb
