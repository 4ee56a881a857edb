// Next-token choice for generation: greedy, or top-k sampling with a temperature and a seed.
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "nlb/core.hpp"
#include "nlb/model/taps.hpp"
#include "nlb/ops/rows.hpp"

namespace nlb {

/// temperature == 0 or top_k == 1: greedy (argmax, lowest id on ties). Otherwise sample from
/// softmax(logits / temperature) restricted to the top_k largest logits (top_k == 0: all).
struct SamplingOptions {
  Index top_k = 0;
  double temperature = 1.0;
  std::uint64_t seed = 0;
};

/// Draws token ids from logit rows. Deterministic for a seed on every platform: uniforms come
/// from the top 53 bits of std::mt19937_64 (whose output sequence the standard fixes).
class TokenSampler {
 public:
  explicit TokenSampler(SamplingOptions options) : options_(options), rng_(options.seed) {
    if (!(options_.temperature >= 0.0) || !std::isfinite(options_.temperature)) {
      throw ArgumentError(detail::expected_found("sampling temperature", "a finite value >= 0",
                                                 options_.temperature));
    }
    if (options_.top_k < 0) {
      throw ArgumentError(detail::expected_found("sampling top-k", ">= 0", options_.top_k));
    }
  }

  /// The next token for one row of logits [vocab]. O(vocab log k).
  template <class Derived>
  std::int32_t next(const Eigen::MatrixBase<Derived>& logits) {
    const Index vocab = logits.size();
    if (options_.temperature == 0.0 || options_.top_k == 1) {
      Index best = 0;
      for (Index i = 1; i < vocab; ++i) {
        if (logits(i) > logits(best))
          best = i;
      }
      return static_cast<std::int32_t>(best);
    }
    std::vector<Index> ids(static_cast<std::size_t>(vocab));
    std::iota(ids.begin(), ids.end(), Index{0});
    const Index k = options_.top_k == 0 ? vocab : std::min(options_.top_k, vocab);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](Index a, Index b) {
      return logits(a) > logits(b) || (logits(a) == logits(b) && a < b);
    });
    std::vector<double> weights(static_cast<std::size_t>(k));
    const double top = static_cast<double>(logits(ids[0]));
    double total = 0;
    for (Index i = 0; i < k; ++i) {
      total += weights[static_cast<std::size_t>(i)] =
          std::exp((static_cast<double>(logits(ids[static_cast<std::size_t>(i)])) - top) /
                   options_.temperature);
    }
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
    double cumulative = 0;
    for (Index i = 0; i < k; ++i) {
      cumulative += weights[static_cast<std::size_t>(i)];
      if (u < cumulative)
        return static_cast<std::int32_t>(ids[static_cast<std::size_t>(i)]);
    }
    return static_cast<std::int32_t>(ids[static_cast<std::size_t>(k - 1)]);
  }

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

/// Generates up to `count` tokens after `prompt` with a KV cache (one forward per new token),
/// stopping early at the model's n_positions or when `on_token(id)` returns false. on_token sees
/// each new token as soon as it is sampled (streaming output; a stop token such as
/// "<|endoftext|>" is seen, then the run ends). Returns the new tokens only, the refused one
/// included. One workspace serves every step, so after the first decoded token a step
/// allocates nothing in the model (the sampler's top-k path keeps its own buffers per call).
/// The last row of logits is read to the host per step (on a device: one wait per token).
template <class Model, class OnToken>
std::vector<std::int32_t> generate(Context<typename Model::backend_type>& ctx, const Model& model,
                                   std::span<const std::int32_t> prompt, Index count,
                                   TokenSampler& sampler, OnToken&& on_token) {
  // Room for the prompt and the new tokens only (at most n_positions).
  auto cache = model.make_cache(static_cast<Index>(prompt.size()) + std::max<Index>(count, 1));
  typename Model::Workspace ws;
  typename Model::Logits logits;
  const auto last_row = [&] {
    if constexpr (backend::is_host<typename Model::backend_type>)
      return logits.row(logits.rows() - 1);
    else
      return ops::to_host(ctx, logits.bottomRows(1));
  };
  model.forward(ctx, prompt, logits, ws, NoTaps{}, &cache);
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(std::max<Index>(count, 0)));
  for (Index i = 0; i < count; ++i) {
    const std::int32_t next = sampler.next(last_row());
    out.push_back(next);
    if (!on_token(next) || cache.length() >= cache.capacity() || i + 1 == count)
      break;
    model.forward(ctx, std::span<const std::int32_t>(&out.back(), 1), logits, ws, NoTaps{}, &cache);
  }
  return out;
}

/// generate() without a callback: exactly `count` tokens unless the context fills first.
template <class Model>
std::vector<std::int32_t> generate(Context<typename Model::backend_type>& ctx, const Model& model,
                                   std::span<const std::int32_t> prompt, Index count,
                                   TokenSampler& sampler) {
  return generate(ctx, model, prompt, count, sampler, [](std::int32_t) { return true; });
}

}  // namespace nlb
