// Forward passes of a loaded model with some layers' MLPs swapped (a surrogate, a gated MLP),
// measured per position, reusing the unmodified model's prefix: the budget pipeline's engine.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "nlb/kernels/layer_norm.hpp"
#include "nlb/mlp/route_counts.hpp"
#include "nlb/model/loss.hpp"
#include "nlb/model/transformer.hpp"

namespace nlb {

/// One configuration of the model: the layers whose MLP slot is replaced, and by what.
/// An empty list is the unmodified model.
template <class T, class Backend = backend::cpu>
struct MlpVariant {
  std::vector<std::pair<Index, MlpSlot<T, Backend>>> replace;  // (layer, slot), layers distinct
  /// The first replaced layer (layer_count when none): the prefix before it is unchanged.
  Index first_layer(Index layer_count) const {
    Index first = layer_count;
    for (const auto& r : replace)
      first = std::min(first, r.first);
    return first;
  }
};

/// Per-position next-token losses of one token set (windows × (context − 1) positions, window
/// order) for the unmodified model and for each variant, and the rows each layer routed.
struct VariantLosses {
  Index windows = 0;
  Index context = 0;
  std::vector<double> base;                      // [windows · (context − 1)]; empty if not run
  std::vector<std::vector<double>> variant;      // [variants][windows · (context − 1)]
  std::vector<std::vector<RouteCounts>> counts;  // [variants][layers], summed over windows
  /// Sum of the losses of window w in `losses` (the bootstrap unit).
  double window_sum(const std::vector<double>& losses, Index w) const {
    double s = 0;
    const Index p = context - 1;
    for (Index i = w * p; i < (w + 1) * p; ++i)
      s += losses[static_cast<std::size_t>(i)];
    return s;
  }
};

namespace detail {

// Swaps the variant's slots into the model and back out at scope exit (also on a throw), so
// the model is unchanged afterwards.
template <class T, class Backend>
class SlotSwap {
 public:
  SlotSwap(Transformer<T, Backend>& model, MlpVariant<T, Backend>& variant)
      : model_(model), variant_(variant) {
    swap_all();
  }
  SlotSwap(const SlotSwap&) = delete;
  SlotSwap& operator=(const SlotSwap&) = delete;
  ~SlotSwap() { swap_all(); }

 private:
  void swap_all() {
    for (auto& [layer, slot] : variant_.replace) {
      using std::swap;
      swap(model_.layers()[static_cast<std::size_t>(layer)].mlp(), slot);
    }
  }
  Transformer<T, Backend>& model_;
  MlpVariant<T, Backend>& variant_;
};

}  // namespace detail

/// Runs a Transformer's forward pass in stages — embedding, a range of layers, the head — with
/// exactly the operations of Transformer::forward (tested bit for bit), so a caller can keep the
/// residual stream at a layer's input and continue from it with other MLPs in later layers.
template <class T, class Backend = backend::cpu>
class StagedForward {
 public:
  using Model = Transformer<T, Backend>;
  using Stream = typename Model::Stream;  // [T, d]

  explicit StagedForward(const Model& model) : model_(model) {}

  /// x = E[tokens] + P[0 .. T) (positions from 0; no cache). Fires Tap::embedding.
  template <class Taps = NoTaps>
  void embed(std::span<const std::int32_t> tokens, Stream& x, Taps&& taps = {}) const {
    const auto& emb = model_.embeddings();
    check_tokens(tokens);
    x.resize(static_cast<Index>(tokens.size()), model_.config().d_model);
    for (Index t = 0; t < x.rows(); ++t) {
      x.row(t) = emb.token.row(tokens[static_cast<std::size_t>(t)]);
      if (emb.position.size() > 0)
        x.row(t) += emb.position.row(t);
    }
    detail::fire(taps, Tap::embedding, 0, x);
  }

  /// Advances x through layers [from, to); layer ℓ's routed rows are added to counts[ℓ] when
  /// `counts` is not empty (size = layer count).
  template <class Taps = NoTaps>
  void layers(Stream& x, Index from, Index to, Taps&& taps = {},
              std::span<RouteCounts> counts = {}) {
    for (Index l = from; l < to; ++l) {
      const auto& block = model_.layers()[static_cast<std::size_t>(l)];
      RouteCounts* c = counts.empty() ? nullptr : &counts[static_cast<std::size_t>(l)];
      block.forward(x, ws_, l, nullptr, taps, c);
    }
  }

  /// Final LayerNorm (in place on x) and logits = x Uᵀ [T, vocab].
  void head(Stream& x, RowMatrix<T>& logits) const {
    const auto& emb = model_.embeddings();
    kernels::layer_norm_rows(Backend{}, x, x, emb.final_norm.gamma, emb.final_norm.beta,
                             static_cast<T>(model_.config().layer_norm_eps));
    const auto& u = emb.unembedding.size() > 0 ? emb.unembedding : emb.token;
    logits.resize(x.rows(), model_.config().vocab_size);
    logits.noalias() = x * u.transpose();
  }

 private:
  void check_tokens(std::span<const std::int32_t> tokens) const {
    if (tokens.empty())
      throw ArgumentError("StagedForward::embed: expected at least one token, found none");
    if (static_cast<Index>(tokens.size()) > model_.config().n_positions) {
      throw ArgumentError(detail::expected_found(
          "StagedForward::embed: tokens",
          "at most n_positions = " + std::to_string(model_.config().n_positions), tokens.size()));
    }
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      if (tokens[t] < 0 || tokens[t] >= model_.config().vocab_size) {
        throw ArgumentError(detail::expected_found(
            "StagedForward::embed: token " + std::to_string(t),
            "an id in [0, " + std::to_string(model_.config().vocab_size) + ")", tokens[t]));
      }
    }
  }

  const Model& model_;
  typename DynamicBlock<T, Backend>::Workspace ws_;
};

/// Measures `variants` on the first `windows` windows of `context` tokens of `tokens`.
///
/// Per window: when `with_base`, the unmodified model runs once (firing `base_taps`) and keeps
/// the residual stream at every layer's input; each variant then swaps its slots in and runs
/// only from its first replaced layer, continuing from the kept stream (a variant replacing
/// layer ℓ costs layers ℓ .. L−1 plus the head). Without `with_base` every variant runs from
/// the embedding. The model is restored after each variant, also on a throw.
/// `progress(done, windows)` after each window. Throws ArgumentError when `tokens` has fewer
/// than windows · context tokens. Memory: L · context · d values of kept stream.
template <class T, class Backend, class Taps = NoTaps>
VariantLosses measure_variants(Transformer<T, Backend>& model, std::span<const std::int32_t> tokens,
                               Index windows, Index context,
                               std::vector<MlpVariant<T, Backend>>& variants, bool with_base,
                               Taps&& base_taps = {},
                               const std::function<void(Index, Index)>& progress = {}) {
  if (context < 2)
    throw ArgumentError(detail::expected_found("measure_variants: context", "at least 2", context));
  if (static_cast<Index>(tokens.size()) < windows * context) {
    throw ArgumentError(detail::expected_found("measure_variants: tokens",
                                               "at least " + std::to_string(windows * context),
                                               tokens.size()));
  }
  const Index layers = model.layer_count();
  const auto per_window = static_cast<std::size_t>(context - 1);
  VariantLosses out;
  out.windows = windows;
  out.context = context;
  out.variant.resize(variants.size());
  out.counts.assign(variants.size(), std::vector<RouteCounts>(static_cast<std::size_t>(layers)));
  if (with_base)
    out.base.reserve(static_cast<std::size_t>(windows) * per_window);
  for (auto& v : out.variant)
    v.reserve(static_cast<std::size_t>(windows) * per_window);
  StagedForward<T, Backend> staged(model);
  std::vector<typename StagedForward<T, Backend>::Stream> kept(static_cast<std::size_t>(layers) +
                                                               1);
  typename StagedForward<T, Backend>::Stream x;
  RowMatrix<T> logits;
  for (Index w = 0; w < windows; ++w) {
    const auto window =
        tokens.subspan(static_cast<std::size_t>(w * context), static_cast<std::size_t>(context));
    if (with_base) {
      staged.embed(window, x, base_taps);
      for (Index l = 0; l < layers; ++l) {
        kept[static_cast<std::size_t>(l)] = x;
        staged.layers(x, l, l + 1, base_taps);
      }
      kept[static_cast<std::size_t>(layers)] = x;
      staged.head(x, logits);
      const auto loss = next_token_losses(logits, window);
      out.base.insert(out.base.end(), loss.begin(), loss.end());
    }
    for (std::size_t v = 0; v < variants.size(); ++v) {
      const Index first = with_base ? variants[v].first_layer(layers) : 0;
      const detail::SlotSwap<T, Backend> swap(model, variants[v]);
      if (with_base) {
        x = kept[static_cast<std::size_t>(first)];
      } else {
        staged.embed(window, x);
      }
      staged.layers(x, first, layers, NoTaps{}, std::span(out.counts[v]));
      staged.head(x, logits);
      const auto loss = next_token_losses(logits, window);
      out.variant[v].insert(out.variant[v].end(), loss.begin(), loss.end());
    }
    if (progress)
      progress(w + 1, windows);
  }
  return out;
}

}  // namespace nlb

namespace nlb {

/// A slot that runs `surrogate` (all rows linear).
template <class T, class Backend>
MlpSlot<T, Backend> linear_slot(const RidgeSurrogate<T, Dynamic, Dynamic, Backend>& surrogate) {
  return MlpSlot<T, Backend>(surrogate);
}

/// A slot that gates between the full MLP held by `full` and `surrogate` with `gate`
/// (GatedMLP, hard routing). Throws ArgumentError when `full` does not hold a full MLP.
template <class T, class Backend>
MlpSlot<T, Backend> gated_slot(const MlpSlot<T, Backend>& full,
                               const RidgeSurrogate<T, Dynamic, Dynamic, Backend>& surrogate,
                               const HyperplaneGate<T, Dynamic, Backend>& gate) {
  using Slot = MlpSlot<T, Backend>;
  if (const auto* m = std::get_if<typename Slot::MlpTanh>(&full.kind()))
    return Slot(typename Slot::GatedTanh(*m, surrogate, gate));
  if (const auto* m = std::get_if<typename Slot::MlpErf>(&full.kind()))
    return Slot(typename Slot::GatedErf(*m, surrogate, gate));
  throw ArgumentError(detail::expected_found("gated_slot: the layer's MLP slot", "a full MLP",
                                             "a surrogate or gated MLP"));
}

}  // namespace nlb
