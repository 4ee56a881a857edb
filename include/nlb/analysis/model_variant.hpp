// Configurations of a loaded model for an analysis run — some layers' MLPs replaced by a
// surrogate or gated, some layers' attention replaced by a converted one — and their forward
// passes measured per position, reusing the unmodified model's prefix. Written once for every
// backend; the model is read only.
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nlb/mlp/route_counts.hpp"
#include "nlb/model/layer_override.hpp"
#include "nlb/model/loss.hpp"
#include "nlb/model/transformer.hpp"
#include "nlb/ops/loss.hpp"
#include "nlb/ops/rows.hpp"

namespace nlb {

/// One configuration of the model for an analysis run: the layers whose MLP is replaced, and
/// by what — a surrogate on every row, or a gate routing each row between the surrogate and the
/// layer's own full MLP — and the layers whose attention runs another attention (a converted
/// layer, analysis/attention/conversions.hpp). Empty lists are the unmodified model. Surrogates
/// and attention are referred to by pointer (caller-owned, e.g. a SurrogateFit, which must
/// outlive the variant); gates are held by value (d + 1 folded parameters and the variant's
/// threshold). A variant holds no model weights and the model is never changed: it runs through
/// overrides() (LayerOverride per layer).
template <class T, class Backend = backend::cpu>
struct ModelVariant {
  // The parts an MlpOverride points to (overrides() hands them to the model as MlpOverrides).
  using Surrogate = typename MlpOverride<T, Backend>::Surrogate;
  using Gate = typename MlpOverride<T, Backend>::Gate;
  struct Replacement {
    Index layer = 0;
    const Surrogate* surrogate = nullptr;
    std::optional<Gate> gate;  // none: every row linear
  };
  std::vector<Replacement> replace;  // layers distinct
  struct AttentionReplacement {
    Index layer = 0;
    const AttentionSlot<T, Backend>* attention = nullptr;
  };
  std::vector<AttentionReplacement> attention;  // layers distinct

  /// Layer `layer` runs `surrogate` on every row.
  void add_linear(Index layer, const Surrogate& surrogate) {
    replace.push_back(Replacement{layer, &surrogate, std::nullopt});
  }
  /// Layer `layer` routes rows with gate score > gate.threshold() to `surrogate`, the rest to
  /// its own full MLP.
  void add_gated(Index layer, const Surrogate& surrogate, Gate gate) {
    replace.push_back(Replacement{layer, &surrogate, std::move(gate)});
  }

  /// Layer `layer` runs `attn` (caller-owned) instead of its own attention.
  void add_attention(Index layer, const AttentionSlot<T, Backend>& attn) {
    attention.push_back(AttentionReplacement{layer, &attn});
  }

  /// The first replaced layer (layer_count when none): the prefix before it is unchanged.
  Index first_layer(Index layer_count) const {
    Index first = layer_count;
    for (const auto& r : replace)
      first = std::min(first, r.layer);
    for (const auto& a : attention)
      first = std::min(first, a.layer);
    return first;
  }

  /// One LayerOverride per layer [layer_count] for BasicTransformer::run_layers, pointing into
  /// this variant (keep it alive and unchanged while they are used). ArgumentError for a layer
  /// out of range, or an MLP or an attention replaced twice.
  std::vector<LayerOverride<T, Backend>> overrides(Index layer_count) const {
    std::vector<LayerOverride<T, Backend>> out(static_cast<std::size_t>(layer_count));
    const auto refuse = [&](const char* what, Index layer) {
      return ArgumentError(detail::expected_found(
          std::string("ModelVariant: replaced ") + what,
          "distinct layers in [0, " + std::to_string(layer_count) + ")", layer));
    };
    for (const auto& r : replace) {
      if (r.layer < 0 || r.layer >= layer_count ||
          out[static_cast<std::size_t>(r.layer)].mlp.active())
        throw refuse("layer", r.layer);
      out[static_cast<std::size_t>(r.layer)].mlp =
          r.gate ? MlpOverride<T, Backend>::gated(*r.surrogate, *r.gate)
                 : MlpOverride<T, Backend>::linear(*r.surrogate);
    }
    for (const auto& a : attention) {
      if (a.layer < 0 || a.layer >= layer_count ||
          out[static_cast<std::size_t>(a.layer)].attention != nullptr || a.attention == nullptr)
        throw refuse("attention layer", a.layer);
      out[static_cast<std::size_t>(a.layer)].attention = a.attention;
    }
    return out;
  }
};

/// One variant per layer ℓ: layer ℓ's MLP replaced by surrogates[ℓ] on every row, the rest
/// unchanged (the "one layer linear" runs of PAPERS §A1 and §A3).
template <class T, class Backend>
std::vector<ModelVariant<T, Backend>> one_layer_linear_variants(
    const std::vector<RidgeSurrogate<T, Dynamic, Dynamic, Backend>>& surrogates) {
  std::vector<ModelVariant<T, Backend>> variants(surrogates.size());
  for (std::size_t l = 0; l < surrogates.size(); ++l)
    variants[l].add_linear(static_cast<Index>(l), surrogates[l]);
  return variants;
}

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

  /// The empty result of a measurement of `variants` variants of a `layers`-layer model over
  /// `windows` windows of `context` tokens of `tokens` (storage reserved, counts zero), after the
  /// checks every runner makes: ArgumentError naming `what` for context < 2 or fewer than
  /// windows · context tokens.
  static VariantLosses prepare(const std::string& what, std::span<const std::int32_t> tokens,
                               Index windows, Index context, std::size_t variants, Index layers,
                               bool with_base) {
    if (context < 2)
      throw ArgumentError(detail::expected_found(what + ": context", "at least 2", context));
    if (static_cast<Index>(tokens.size()) < windows * context) {
      throw ArgumentError(detail::expected_found(
          what + ": tokens", "at least " + std::to_string(windows * context), tokens.size()));
    }
    const auto positions = static_cast<std::size_t>(windows * (context - 1));
    VariantLosses out;
    out.windows = windows;
    out.context = context;
    out.variant.resize(variants);
    out.counts.assign(variants, std::vector<RouteCounts>(static_cast<std::size_t>(layers)));
    if (with_base)
      out.base.reserve(positions);
    for (auto& v : out.variant)
      v.reserve(positions);
    return out;
  }
};

/// The unmodified model's residual stream at the input of every layer (and after the last), for
/// each of the first `windows` windows of `context` tokens of a token set, in the model's memory:
/// with it, a variant runs only from its first replaced layer (measure_variants' `prefix`).
/// Memory: bytes_needed().
template <class T, class Backend = backend::cpu>
struct PrefixStreams {
  using Model = Transformer<T, Backend>;
  using Stream = typename Model::Stream;
  std::vector<std::int32_t> tokens;  // the windows' tokens [windows · context], as given
  Index context = 0;
  std::vector<std::vector<Stream>> kept;         // [windows][layers + 1], each [context, d]
  std::vector<std::vector<RouteCounts>> counts;  // [windows][layers]: rows each layer routed

  /// The streams of `model` for the first `windows` windows of `tokens`: one unmodified pass.
  /// ArgumentError when `tokens` has fewer than windows · context tokens.
  static PrefixStreams keep(Context<Backend>& ctx, const Model& model,
                            std::span<const std::int32_t> tokens, Index windows, Index context) {
    VariantLosses::prepare("PrefixStreams::keep", tokens, windows, context, 0, 0, false);
    PrefixStreams out;
    out.tokens.assign(tokens.begin(), tokens.begin() + windows * context);
    out.context = context;
    out.kept.resize(static_cast<std::size_t>(windows));
    out.counts.assign(static_cast<std::size_t>(windows),
                      std::vector<RouteCounts>(static_cast<std::size_t>(model.layer_count())));
    typename Model::Workspace ws;
    const Index layers = model.layer_count();
    for (Index w = 0; w < windows; ++w) {
      auto& k = out.kept[static_cast<std::size_t>(w)];
      k.resize(static_cast<std::size_t>(layers) + 1);
      model.embed(
          ctx,
          tokens.subspan(static_cast<std::size_t>(w * context), static_cast<std::size_t>(context)),
          ws.x, ws);
      for (Index l = 0; l < layers; ++l) {
        keep_copy(ctx, ws.x, k[static_cast<std::size_t>(l)]);
        model.run_layers(ctx, ws.x, l, l + 1, ws, {}, nullptr, NoTaps{},
                         std::span(out.counts[static_cast<std::size_t>(w)]));
      }
      keep_copy(ctx, ws.x, k[static_cast<std::size_t>(layers)]);
    }
    return out;
  }

  /// True when these are the streams of exactly the first `windows` windows of `context` tokens
  /// of `t` (compared token by token).
  bool holds(std::span<const std::int32_t> t, Index windows, Index ctx) const {
    return ctx == context && static_cast<Index>(kept.size()) == windows &&
           static_cast<Index>(t.size()) >= windows * ctx &&
           std::equal(tokens.begin(), tokens.end(), t.begin());
  }

  /// Bytes keep() holds for `windows` windows: windows · (layers + 1) · context · d values of T.
  static double bytes_needed(const ModelConfig& config, Index windows, Index context) {
    return static_cast<double>(windows) * static_cast<double>(config.n_layers + 1) *
           static_cast<double>(context) * static_cast<double>(config.d_model) *
           static_cast<double>(sizeof(T));
  }

  /// `to` = `from`, resized: the stream kept, or restored.
  static void keep_copy(Context<Backend>& ctx, const Stream& from, Stream& to) {
    to.resize(from.rows(), from.cols());
    ops::copy(ctx, from, to);
  }
};

/// Measures `variants` of `model` (variants of the same backend, whose overrides refer to parts
/// in its memory) on the first `windows` windows of `context` tokens of `tokens`.
///
/// Per window: when `with_base`, the unmodified model runs once (firing `base_taps`) and keeps
/// the residual stream at every layer's input; each variant then runs only from its first
/// replaced layer, continuing from the kept stream (a variant replacing layer ℓ costs layers
/// ℓ .. L−1 plus the head). Without `with_base` every variant runs from the embedding, or, when
/// `prefix` holds these windows' streams (PrefixStreams::holds), from its first replaced layer
/// (the same arithmetic: the same losses, bit for bit). Variants run as per-layer overrides: the
/// model is neither changed nor copied. Losses are computed where the model runs
/// (ops::next_token_losses: on a device only they are read back). `progress(done, windows)`
/// after each window. Throws ArgumentError when `tokens` has fewer than windows · context
/// tokens. Memory: L · context · d values of kept stream.
template <class T, class Backend, class Taps = NoTaps>
VariantLosses measure_variants(Context<Backend>& ctx, const Transformer<T, Backend>& model,
                               std::span<const std::int32_t> tokens, Index windows, Index context,
                               const std::vector<std::vector<LayerOverride<T, Backend>>>& overrides,
                               const std::vector<Index>& first_layers, bool with_base,
                               Taps&& base_taps = {},
                               const std::function<void(Index, Index)>& progress = {},
                               const PrefixStreams<T, Backend>* prefix = nullptr) {
  using Model = Transformer<T, Backend>;
  using Prefix = PrefixStreams<T, Backend>;
  const Index layers = model.layer_count();
  VariantLosses out = VariantLosses::prepare("measure_variants", tokens, windows, context,
                                             overrides.size(), layers, with_base);
  if (with_base || (prefix && !prefix->holds(tokens, windows, context)))
    prefix = nullptr;
  // Kept streams are needed only when a variant continues from them.
  const bool keep = with_base && !overrides.empty();
  typename Model::Workspace ws;
  std::vector<typename Model::Stream> kept(keep ? static_cast<std::size_t>(layers) + 1 : 0);
  typename Model::Logits logits;
  for (Index w = 0; w < windows; ++w) {
    const auto window =
        tokens.subspan(static_cast<std::size_t>(w * context), static_cast<std::size_t>(context));
    if (with_base) {
      model.embed(ctx, window, ws.x, ws, 0, base_taps);
      for (Index l = 0; l < layers; ++l) {
        if (keep)
          Prefix::keep_copy(ctx, ws.x, kept[static_cast<std::size_t>(l)]);
        model.run_layers(ctx, ws.x, l, l + 1, ws, {}, nullptr, base_taps);
      }
      if (keep)
        Prefix::keep_copy(ctx, ws.x, kept[static_cast<std::size_t>(layers)]);
      model.head(ctx, ws.x, logits, ws);
      ops::next_token_losses(ctx, logits, window, out.base, ws.head);
    }
    for (std::size_t v = 0; v < overrides.size(); ++v) {
      const Index first = with_base || prefix ? first_layers[v] : 0;
      if (with_base) {
        Prefix::keep_copy(ctx, kept[static_cast<std::size_t>(first)], ws.x);
      } else if (prefix) {
        // The prefix's layers routed their rows when the prefix was kept: counted as if run.
        Prefix::keep_copy(
            ctx, prefix->kept[static_cast<std::size_t>(w)][static_cast<std::size_t>(first)], ws.x);
        for (Index l = 0; l < first; ++l) {
          out.counts[v][static_cast<std::size_t>(l)] +=
              prefix->counts[static_cast<std::size_t>(w)][static_cast<std::size_t>(l)];
        }
      } else {
        model.embed(ctx, window, ws.x, ws);
      }
      model.run_layers(ctx, ws.x, first, layers, ws, overrides[v], nullptr, NoTaps{},
                       std::span(out.counts[v]));
      model.head(ctx, ws.x, logits, ws);
      ops::next_token_losses(ctx, logits, window, out.variant[v], ws.head);
    }
    if (progress)
      progress(w + 1, windows);
  }
  return out;
}

/// measure_variants of ModelVariants of the model's own backend.
template <class T, class Backend, class Taps = NoTaps>
VariantLosses measure_variants(Context<Backend>& ctx, const Transformer<T, Backend>& model,
                               std::span<const std::int32_t> tokens, Index windows, Index context,
                               const std::vector<ModelVariant<T, Backend>>& variants,
                               bool with_base, Taps&& base_taps = {},
                               const std::function<void(Index, Index)>& progress = {},
                               const PrefixStreams<T, Backend>* prefix = nullptr) {
  std::vector<std::vector<LayerOverride<T, Backend>>> overrides;
  std::vector<Index> first;
  for (const auto& v : variants) {
    overrides.push_back(v.overrides(model.layer_count()));
    first.push_back(v.first_layer(model.layer_count()));
  }
  return measure_variants(ctx, model, tokens, windows, context, overrides, first, with_base,
                          base_taps, progress, prefix);
}

// Slots for building a changed copy of a model (tests, re-measurements by plain forward passes):
// analyses use ModelVariant / MlpOverride instead, which copy nothing.

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
  return MlpSlot<T, Backend>::gated(full, surrogate, gate);
}

}  // namespace nlb
