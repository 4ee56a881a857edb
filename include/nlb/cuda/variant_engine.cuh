// The budget pipeline's forward passes on backend::cuda: cuda::DeviceVariants runs the host's
// MlpVariants (surrogates and gates fitted on the host) on a device copy of the model, and gives
// the host's VariantLosses and timings back — a VariantEngine (nlb/analysis/variant_engine.hpp)
// for run_budget. Per window the unmodified model runs once with the residual stream kept on the
// device at every layer's input; each variant continues from its first replaced layer; the
// next-token losses are computed on the device (in double) and only they come back.
#pragma once

#include <thrust/copy.h>
#include <thrust/device_vector.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nlb/analysis/joint_gating.hpp"
#include "nlb/analysis/mlp_variants.hpp"
#include "nlb/analysis/variant_engine.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/device_matrix.cuh"
#include "nlb/cuda/hyperplane_gate.cuh"
#include "nlb/cuda/ridge_surrogate.cuh"
#include "nlb/cuda/row_ops.cuh"
#include "nlb/cuda/transformer.cuh"
#include "nlb/model/mlp_override.hpp"

namespace nlb::cuda {

/// A host model's analysis passes on the device. Holds the device copy of the model (uploaded
/// once) and refers to the caller's context (which must outlive it). Every call uploads the
/// variants' surrogates (each distinct one once) and gates, a few d × d matrices: the model's
/// weights are never copied again. Results equal the host engine's (measure_variants,
/// time_forward/time_decode) within the tolerance table: losses to the model tolerance, route
/// counts equal unless a gate score lies within rounding of its threshold.
template <class T>
class DeviceVariants {
 public:
  using HostModel = Transformer<T, backend::cpu>;
  using HostVariant = MlpVariant<T, backend::cpu>;

  /// Uploads `host` to the device of `ctx`.
  DeviceVariants(Context<backend::cuda>& ctx, const HostModel& host)
      : ctx_(&ctx), model_(to_backend(backend::cuda{}, host)) {}

  /// measure_variants (nlb/analysis/mlp_variants.hpp) on the device, without taps: the same
  /// arguments, checks and VariantLosses. Memory on the device: (L + 1) · context · d values of
  /// kept stream, one window's logits and the workspace.
  VariantLosses measure(std::span<const std::int32_t> tokens, Index windows, Index context,
                        const std::vector<HostVariant>& variants, bool with_base,
                        const std::function<void(Index, Index)>& progress = {}) {
    const Index layers = model_.layer_count(), d = model_.config().d_model;
    VariantLosses out = VariantLosses::prepare("cuda::DeviceVariants::measure", tokens, windows,
                                               context, variants.size(), layers, with_base);
    const Uploaded parts(variants, layers);
    std::vector<DeviceMatrix<T>> kept(with_base ? static_cast<std::size_t>(layers) + 1 : 0);
    for (auto& k : kept)
      k.resize(context, d);
    x_.resize(context, d);
    for (Index w = 0; w < windows; ++w) {
      const auto window =
          tokens.subspan(static_cast<std::size_t>(w * context), static_cast<std::size_t>(context));
      upload_ids(window);
      if (with_base) {
        model_.embed(*ctx_, window, x_.view(), ws_);
        for (Index l = 0; l < layers; ++l) {
          ops::copy<T>(*ctx_, x_.view(), kept[static_cast<std::size_t>(l)].view());
          model_.run_layers(*ctx_, x_.view(), l, l + 1, ws_);
        }
        ops::copy<T>(*ctx_, x_.view(), kept[static_cast<std::size_t>(layers)].view());
        append_losses(model_.head(*ctx_, x_.view(), ws_), out.base);
      }
      for (std::size_t v = 0; v < variants.size(); ++v) {
        const Index first = with_base ? variants[v].first_layer(layers) : 0;
        if (with_base)
          ops::copy<T>(*ctx_, kept[static_cast<std::size_t>(first)].view(), x_.view());
        else
          model_.embed(*ctx_, window, x_.view(), ws_);
        model_.run_layers(*ctx_, x_.view(), first, layers, ws_, parts.overrides[v], nullptr,
                          std::span(out.counts[v]));
        append_losses(model_.head(*ctx_, x_.view(), ws_), out.variant[v]);
      }
      if (progress)
        progress(w + 1, windows);
    }
    return out;
  }

  /// time_forward (nlb/analysis/joint_gating.hpp) on the device: forward passes over the first
  /// `windows` windows, dense and with `variant`, alternating; each run ends with a
  /// synchronisation and the logits stay on the device.
  ForwardTiming time_forward(std::span<const std::int32_t> tokens, Index windows, Index context,
                             const HostVariant& variant, Index repetitions) {
    const Index layers = model_.layer_count();
    const Uploaded parts(std::vector<HostVariant>{variant}, layers);
    std::vector<RouteCounts> counts(static_cast<std::size_t>(layers));
    auto window = [&](Index w) {
      return tokens.subspan(static_cast<std::size_t>(w * context),
                            static_cast<std::size_t>(context));
    };
    auto run = [&](bool gated) {
      return timed([&] {
        for (Index w = 0; w < windows; ++w)
          pass(window(w), 0, gated, parts, nullptr, counts);
      });
    };
    return nlb::detail::alternate_timing([&] { return run(false); }, [&] { return run(true); },
                                         counts, repetitions);
  }

  /// time_decode (nlb/analysis/joint_gating.hpp) on the device: batch-1 decoding of tokens[0,
  /// steps) through a device KV cache, dense and with `variant`, alternating; the logits of
  /// every step stay on the device. Throws ArgumentError for steps outside [1, min(tokens,
  /// n_positions)].
  ForwardTiming time_decode(std::span<const std::int32_t> tokens, Index steps,
                            const HostVariant& variant, Index repetitions) {
    const Index most = std::min(static_cast<Index>(tokens.size()), model_.config().n_positions);
    if (steps < 1 || steps > most) {
      throw ArgumentError(
          nlb::detail::expected_found("cuda::DeviceVariants::time_decode: steps",
                                      "a value in [1, " + std::to_string(most) + "]", steps));
    }
    const Index layers = model_.layer_count();
    const Uploaded parts(std::vector<HostVariant>{variant}, layers);
    std::vector<RouteCounts> counts(static_cast<std::size_t>(layers));
    auto cache = model_.make_cache();
    auto run = [&](bool gated) {
      cache.clear();
      return timed([&] {
        for (Index i = 0; i < steps; ++i)
          pass(tokens.subspan(static_cast<std::size_t>(i), 1), i, gated, parts, &cache, counts);
      });
    };
    return nlb::detail::alternate_timing([&] { return run(false); }, [&] { return run(true); },
                                         counts, repetitions);
  }

  /// This object as run_budget's engine (refers to it: keep it alive while the engine is used).
  VariantEngine<T> engine() {
    VariantEngine<T> e;
    e.name = "cuda";
    e.measure = [this](auto&&... a) { return measure(a...); };
    e.time_forward = [this](auto&&... a) { return time_forward(a...); };
    e.time_decode = [this](auto&&... a) { return time_decode(a...); };
    return e;
  }

  const Transformer<T, backend::cuda>& model() const { return model_; }

 private:
  using Override = MlpOverride<T, backend::cuda>;

  // The device copies of some host variants' parts and one override list per variant.
  struct Uploaded {
    std::deque<RidgeSurrogate<T, Dynamic, Dynamic, backend::cuda>> surrogates;  // stable addresses
    std::deque<HyperplaneGate<T, Dynamic, backend::cuda>> gates;
    std::vector<std::vector<Override>> overrides;  // [variants][layers]
    Uploaded(const std::vector<HostVariant>& variants, Index layers) {
      std::map<const void*, const RidgeSurrogate<T, Dynamic, Dynamic, backend::cuda>*> uploaded;
      for (const auto& v : variants) {
        (void)v.overrides(layers);  // refuses a layer out of range or replaced twice
        if (!v.attention.empty()) {
          throw ArgumentError(nlb::detail::expected_found(
              "cuda::DeviceVariants: variant", "MLP replacements only",
              "a replaced attention layer (attention conversions run on the host)"));
        }
        auto& list = overrides.emplace_back(static_cast<std::size_t>(layers));
        for (const auto& r : v.replace) {
          auto [at, fresh] = uploaded.try_emplace(r.surrogate, nullptr);
          if (fresh)
            at->second = &surrogates.emplace_back(to_backend(backend::cuda{}, *r.surrogate));
          auto& o = list[static_cast<std::size_t>(r.layer)];
          o.surrogate = at->second;
          if (r.gate)
            o.gate = &gates.emplace_back(to_backend(backend::cuda{}, *r.gate));
        }
      }
    }
  };

  // One timed pass of `tokens` at positions [past, past + T), dense or with the one uploaded
  // variant (its route counts added to `counts`); the logits stay on the device.
  void pass(std::span<const std::int32_t> tokens, Index past, bool gated, const Uploaded& parts,
            KVCache<T>* cache, std::vector<RouteCounts>& counts) {
    x_.resize(static_cast<Index>(tokens.size()), model_.config().d_model);
    model_.embed(*ctx_, tokens, x_.view(), ws_, past);
    if (gated)
      model_.run_layers(*ctx_, x_.view(), 0, model_.layer_count(), ws_, parts.overrides[0], cache,
                        counts);
    else
      model_.run_layers(*ctx_, x_.view(), 0, model_.layer_count(), ws_, {}, cache);
    model_.head(*ctx_, x_.view(), ws_);
  }

  template <class F>
  double timed(F&& f) {
    ctx_->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ctx_->synchronize();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  void upload_ids(std::span<const std::int32_t> window) {
    if (ids_.size() < window.size())
      ids_.resize(window.size());
    thrust::copy(window.begin(), window.end(), ids_.begin());
  }

  // The next-token losses of the window whose ids were uploaded, appended to `out`.
  void append_losses(DeviceView<const T> logits, std::vector<double>& out) {
    const auto n = static_cast<std::size_t>(logits.rows - 1);
    if (losses_.size() < n)
      losses_.resize(n);
    ops::next_token_losses<T>(*ctx_, logits, thrust::raw_pointer_cast(ids_.data()),
                              thrust::raw_pointer_cast(losses_.data()));
    const std::size_t at = out.size();
    out.resize(at + n);
    thrust::copy(losses_.begin(), losses_.begin() + static_cast<std::ptrdiff_t>(n),
                 out.begin() + static_cast<std::ptrdiff_t>(at));
  }

  Context<backend::cuda>* ctx_;
  Transformer<T, backend::cuda> model_;
  typename Transformer<T, backend::cuda>::Workspace ws_;
  DeviceMatrix<T> x_;                        // [T, d] the residual stream
  thrust::device_vector<std::int32_t> ids_;  // [context] the window's ids
  thrust::device_vector<double> losses_;     // [context − 1]
};

}  // namespace nlb::cuda
