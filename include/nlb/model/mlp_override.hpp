// What an analysis runs in a layer instead of the layer's MLP, without touching the model
// (DESIGN.md §3: analyses never mutate a loaded model).
#pragma once

#include "nlb/core.hpp"
#include "nlb/mlp/hyperplane_gate.hpp"
#include "nlb/mlp/ridge_surrogate.hpp"

namespace nlb {

/// One layer's MLP in an analysis run: the layer's own MLP (no surrogate), a surrogate on
/// every row (surrogate only), or hard routing by `gate` between the surrogate and the layer's
/// OWN full MLP (both). Refers to caller-owned objects by pointer, which must outlive the run;
/// the model's weights are neither copied nor changed. Pass one per layer to
/// BasicTransformer::run_layers.
template <class T, class Backend = backend::cpu>
struct MlpOverride {
  using Surrogate = RidgeSurrogate<T, Dynamic, Dynamic, Backend>;
  using Gate = HyperplaneGate<T, Dynamic, Backend>;

  const Surrogate* surrogate = nullptr;  // null: the layer's own MLP
  const Gate* gate = nullptr;  // with a surrogate: route per row (score > threshold: linear)

  /// The layer's own MLP.
  static MlpOverride none() { return {}; }
  /// `s` on every row.
  static MlpOverride linear(const Surrogate& s) { return {&s, nullptr}; }
  /// Rows with g.score > g.threshold() through `s`, the rest through the layer's own full MLP
  /// (the layer must hold one: ArgumentError otherwise).
  static MlpOverride gated(const Surrogate& s, const Gate& g) { return {&s, &g}; }

  /// True unless the layer runs its own MLP.
  bool active() const { return surrogate != nullptr; }
};

}  // namespace nlb
