// Where an analysis runs its forward passes (DESIGN.md §4): a VariantRunner measures
// configurations of a host model — ModelVariants whose surrogates, gates and converted attention
// were fitted on the host — and times them, wherever it runs them: ModelRunner<T, Backend> on the
// host model itself or on a copy of it on another backend (backend::cuda), ShardedRunner
// (nlb/distributed/sharded_runner.hpp) over the ranks of an MPI job. The analyses call only this
// interface and never ask which runner they have; the fitting, the gate training, the searches
// and the bootstrap stay on the host, in double.
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlb/analysis/budget/label_rows.hpp"
#include "nlb/analysis/forward_timing.hpp"
#include "nlb/analysis/model_variant.hpp"
#include "nlb/model/loss.hpp"
#include "nlb/model/transformer.hpp"

namespace nlb {

/// The forward passes of an analysis over a host model (Transformer<T>, backend::cpu) and its
/// host variants.
template <class T>
class VariantRunner {
 public:
  using Model = Transformer<T>;
  using Variant = ModelVariant<T>;
  using Tokens = std::span<const std::int32_t>;
  using Progress = std::function<void(Index, Index)>;
  /// Observes the unmodified model's activations on the host (Tap, layer, [T, d]).
  using HostTaps = std::function<void(Tap, Index, const RowMatrix<T>&)>;

  virtual ~VariantRunner() = default;

  /// Where the passes run, for reports ("cpu", "cuda", "cpu, 4 ranks").
  virtual std::string name() const = 0;
  /// The analysed host model (the one the variants' parts were fitted on).
  virtual const Model& model() const = 0;

  /// Per-position losses of `variants` (and of the unmodified model with `with_base`) on the
  /// first `windows` windows of `context` tokens of `tokens`, in window order, and the rows each
  /// layer routed: measure_variants' result, wherever the passes run. `base_taps` observe the
  /// unmodified pass of the windows measured on this process (held_windows). Runs without the
  /// unmodified model continue from its kept prefix streams when the same windows come again.
  /// Every process of a sharded runner calls together.
  virtual VariantLosses measure(Tokens tokens, Index windows, Index context,
                                const std::vector<Variant>& variants, bool with_base,
                                const Progress& progress = {}, const HostTaps& base_taps = {}) = 0;

  /// The unmodified model over the first `windows` windows of `tokens`, all on this process,
  /// firing `taps` (an analysis that needs every window's activations here).
  virtual void collect(Tokens tokens, Index windows, Index context, const HostTaps& taps,
                       const Progress& progress = {}) = 0;

  /// The dense-vs-variant timings of forward_timing.hpp, measured where the passes run.
  virtual ForwardTiming time_forward(Tokens tokens, Index windows, Index context,
                                     const Variant& variant, Index repetitions) = 0;
  virtual ForwardTiming time_decode(Tokens tokens, Index steps, const Variant& variant,
                                    Index repetitions) = 0;

  /// Which of `windows` label windows measure() runs on this process, and how the processes
  /// combine per-row work over them (budget/label_rows.hpp); by default every window is here.
  virtual LabelRows held_windows(Index /*windows*/) const { return {}; }
};

/// The perplexity protocol's result from the per-position `losses` of one measurement `r` (its
/// base or a variant's): loss sums per window in window order, their total in that order.
inline PerplexityResult perplexity_of(const VariantLosses& r, const std::vector<double>& losses) {
  PerplexityResult out;
  out.windows = r.windows;
  out.context = r.context;
  double total = 0;
  for (Index w = 0; w < r.windows; ++w) {
    out.window_loss_sums.push_back(r.window_sum(losses, w));
    total += out.window_loss_sums.back();
  }
  out.predicted_tokens = r.windows * (r.context - 1);
  out.mean_loss = total / static_cast<double>(out.predicted_tokens);
  out.ppl = std::exp(out.mean_loss);
  return out;
}

/// The `nlb eval` protocol (evaluate_perplexity, model/loss.hpp) through a runner: the windows'
/// losses of the unmodified model, summed per window in window order (so equal to
/// evaluate_perplexity bit for bit). Throws ArgumentError when no full window fits.
template <class T>
PerplexityResult perplexity(VariantRunner<T>& runner, std::span<const std::int32_t> tokens,
                            Index context, Index max_windows = 0,
                            const std::function<void(Index, Index)>& progress = {}) {
  if (context < 2)
    throw ArgumentError(detail::expected_found("perplexity: context", "at least 2", context));
  Index windows = static_cast<Index>(tokens.size()) / context;
  if (max_windows > 0)
    windows = std::min(windows, max_windows);
  if (windows == 0)
    throw ArgumentError(detail::expected_found(
        "perplexity: tokens", "at least one window of " + std::to_string(context), tokens.size()));
  const VariantLosses r = runner.measure(tokens, windows, context, {}, true, progress);
  return perplexity_of(r, r.base);
}

namespace detail {

/// Host variants' parts in Backend's memory and their per-layer overrides: on the host the
/// variants' own parts (nothing copied); on another backend each distinct surrogate and
/// converted attention copied once, and each gate with its variant's threshold.
template <class T, class Backend>
class PlacedVariants {
 public:
  /// `variants` must outlive this object (on the host its overrides point into them).
  PlacedVariants(std::span<const ModelVariant<T>> variants, Index layers) {
    for (const auto& v : variants) {
      (void)v.overrides(layers);  // refuses a layer out of range or replaced twice
      first.push_back(v.first_layer(layers));
      auto& list = overrides.emplace_back(static_cast<std::size_t>(layers));
      for (const auto& r : v.replace) {
        auto& o = list[static_cast<std::size_t>(r.layer)].mlp;
        o.surrogate = place(*r.surrogate, surrogates_, placed_surrogates_);
        if (r.gate)
          o.gate = place_gate(*r.gate);
      }
      for (const auto& a : v.attention)
        list[static_cast<std::size_t>(a.layer)].attention =
            place(*a.attention, attention_, placed_attention_);
    }
  }
  PlacedVariants(const PlacedVariants&) = delete;
  PlacedVariants& operator=(const PlacedVariants&) = delete;

  std::vector<std::vector<LayerOverride<T, Backend>>> overrides;  // [variants][layers]
  std::vector<Index> first;                                       // [variants] first changed layer

 private:
  using Surrogate = RidgeSurrogate<T, Dynamic, Dynamic, Backend>;
  using Gate = HyperplaneGate<T, Dynamic, Backend>;
  using Attention = AttentionSlot<T, Backend>;
  static constexpr bool same = std::is_same_v<Backend, backend::cpu>;

  template <class Host, class Placed>
  static const Placed* place(const Host& host, std::deque<Placed>& store,
                             std::map<const void*, const Placed*>& seen) {
    if constexpr (same) {
      return &host;
    } else {
      auto [at, fresh] = seen.try_emplace(&host, nullptr);
      if (fresh)
        at->second = &store.emplace_back(host);
      return at->second;
    }
  }
  const Gate* place_gate(const HyperplaneGate<T>& host) {
    if constexpr (same)
      return &host;
    else
      return &gates_.emplace_back(host);
  }

  std::deque<Surrogate> surrogates_;  // stable addresses
  std::deque<Gate> gates_;
  std::deque<Attention> attention_;
  std::map<const void*, const Surrogate*> placed_surrogates_;
  std::map<const void*, const Attention*> placed_attention_;
};

}  // namespace detail

/// A runner on one process: the host model itself (Backend = backend::cpu), or a copy of it on
/// Backend made once at construction (backend::cuda: every weight uploaded; each call then copies
/// only the variants' surrogates, gates and converted attention, a few d × d matrices). Keeps
/// the unmodified model's prefix streams of the last token set measured without it, when they
/// need at most `prefix_bytes` (default 1 GiB), so repeated measurements of the same windows
/// (the joint calibration's candidate states) run from each variant's first replaced layer —
/// the same losses as from the embedding, bit for bit. `ctx` and the host model must outlive
/// the runner.
template <class T, class Backend = backend::cpu>
class ModelRunner final : public VariantRunner<T> {
  using Base = VariantRunner<T>;
  using DeviceModel = Transformer<T, Backend>;

 public:
  using typename Base::HostTaps, typename Base::Model, typename Base::Progress,
      typename Base::Tokens, typename Base::Variant;

  ModelRunner(Context<Backend>& ctx, const Model& host,
              double prefix_bytes = double(std::size_t{1} << 30))
      : ctx_(&ctx), host_(&host), prefix_bytes_(prefix_bytes) {
    if constexpr (std::is_same_v<Backend, backend::cpu>)
      model_ = &host;
    else
      model_ = &copy_.emplace(host);
  }

  std::string name() const override { return backend::is_host<Backend> ? "cpu" : "cuda"; }
  const Model& model() const override { return *host_; }
  /// The model the passes run on (the host model, or its copy on Backend).
  const DeviceModel& backend_model() const { return *model_; }
  Context<Backend>& context() const { return *ctx_; }

  VariantLosses measure(Tokens tokens, Index windows, Index context,
                        const std::vector<Variant>& variants, bool with_base,
                        const Progress& progress = {}, const HostTaps& base_taps = {}) override {
    const detail::PlacedVariants<T, Backend> placed(variants, model_->layer_count());
    if (!with_base && !prefix_.holds(tokens, windows, context) &&
        PrefixStreams<T, Backend>::bytes_needed(model_->config(), windows, context) <=
            prefix_bytes_) {
      // The last token set's streams go first, so one set is held at a time (the label and the
      // calibration sets together would add the smaller one to the run's peak memory).
      prefix_ = {};
      prefix_ = PrefixStreams<T, Backend>::keep(*ctx_, *model_, tokens, windows, context);
    }
    const auto* prefix = prefix_.holds(tokens, windows, context) ? &prefix_ : nullptr;
    if (base_taps) {
      return measure_variants(*ctx_, *model_, tokens, windows, context, placed.overrides,
                              placed.first, with_base, host_taps(base_taps), progress, prefix);
    }
    return measure_variants(*ctx_, *model_, tokens, windows, context, placed.overrides,
                            placed.first, with_base, NoTaps{}, progress, prefix);
  }

  void collect(Tokens tokens, Index windows, Index context, const HostTaps& taps,
               const Progress& progress = {}) override {
    measure_variants(*ctx_, *model_, tokens, windows, context,
                     std::vector<std::vector<LayerOverride<T, Backend>>>{}, {}, true,
                     host_taps(taps), progress);
  }

  ForwardTiming time_forward(Tokens tokens, Index windows, Index context, const Variant& variant,
                             Index repetitions) override {
    const detail::PlacedVariants<T, Backend> placed(std::span(&variant, 1), model_->layer_count());
    return nlb::time_forward(*ctx_, *model_, tokens, windows, context,
                             std::span(placed.overrides[0]), repetitions);
  }

  ForwardTiming time_decode(Tokens tokens, Index steps, const Variant& variant,
                            Index repetitions) override {
    const detail::PlacedVariants<T, Backend> placed(std::span(&variant, 1), model_->layer_count());
    return nlb::time_decode(*ctx_, *model_, tokens, steps, std::span(placed.overrides[0]),
                            repetitions);
  }

 private:
  // The host taps on this backend's activations: read in place on the host, copied to the host
  // first elsewhere (one read-back per tap).
  auto host_taps(const HostTaps& taps) const {
    return [this, &taps](Tap tap, Index layer, const auto& m) {
      if (!taps)
        return;
      if constexpr (std::is_same_v<std::decay_t<decltype(m)>, RowMatrix<T>>)
        taps(tap, layer, m);
      else
        taps(tap, layer, ops::to_host(*ctx_, m));
    };
  }

  Context<Backend>* ctx_;
  const Model* host_;
  const DeviceModel* model_ = nullptr;
  std::optional<DeviceModel> copy_;  // the host model on Backend (none on the host)
  double prefix_bytes_;
  PrefixStreams<T, Backend> prefix_;
};

}  // namespace nlb
