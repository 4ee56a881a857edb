// The budget pipeline's forward passes spread over ranks (docs/scaling.md): a VariantEngine
// whose measure() runs each rank's shard of the windows on the host model and gathers the
// per-position losses back in window order, so every stage built on it (label δ, eval,
// cross-corpus, joint calibration) gets the single-process result on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nlb/analysis/joint_gating.hpp"
#include "nlb/analysis/label_rows.hpp"
#include "nlb/analysis/mlp_variants.hpp"
#include "nlb/analysis/variant_engine.hpp"
#include "nlb/distributed/communicator.hpp"
#include "nlb/distributed/row_parts.hpp"
#include "nlb/distributed/window_shard.hpp"
#include "nlb/model/transformer.hpp"

namespace nlb::distributed {

/// Puts the ranks' VariantLosses of their window shards (window_shard order) together into the
/// result for all `windows` windows, on every rank: losses concatenated in rank order (= window
/// order), route counts summed exactly. `out` comes from VariantLosses::prepare for the whole
/// set; `mine` is this rank's measurement of its shard with the same variants (and the unmodified
/// model's losses when `with_base`).
inline void gather_variant_losses(const Communicator& comm, const VariantLosses& mine,
                                  bool with_base, VariantLosses& out) {
  if (with_base)
    out.base = comm.all_gather(mine.base);
  for (std::size_t v = 0; v < out.variant.size(); ++v)
    out.variant[v] = comm.all_gather(mine.variant[v]);
  std::vector<std::int64_t> counts;
  for (const auto& layers : mine.counts) {
    for (const auto& c : layers) {
      counts.push_back(c.linear);
      counts.push_back(c.full);
    }
  }
  comm.all_sum(counts);
  std::size_t i = 0;
  for (auto& layers : out.counts) {
    for (auto& c : layers) {
      c.linear = counts[i++];
      c.full = counts[i++];
    }
  }
}

/// A VariantEngine that runs on `model` (the host) with the windows of every measurement shared
/// over the ranks of `comm` (window_shard): each rank measures its shard, then all ranks hold the
/// whole result. Per-position losses equal measure_variants on one process bit for bit (a
/// window's arithmetic does not depend on which rank runs it, at the same threads per process);
/// route counts are exact sums. Timings run on every rank's own model (the report takes rank
/// 0's). `progress(done, windows)` reports this rank's share, scaled to the whole set.
/// `model` and `comm` must outlive the engine. Every rank must call measure() together.
///
/// Measurements without the unmodified model (the joint calibration's, one per candidate state,
/// all on the same windows) run from each variant's first replaced layer: on the first such call
/// each rank keeps the unmodified stream of its shard (PrefixStreams, when it needs at most
/// `prefix_bytes` per rank; default 1 GiB, as calibrate_joint's own cache), and later calls on the
/// same windows reuse it — the same losses as from the embedding, bit for bit.
///
/// label_rows: each rank's label windows are its window_shard, the fit's sums are reduced with
/// row_parts(comm) and the scores gathered with all_gather (rank order = window order), for
/// BudgetProtocol::gate_features = split.
template <class T, class Backend>
VariantEngine<T, Backend> sharded_engine(const Transformer<T, Backend>& model,
                                         const Communicator& comm,
                                         double prefix_bytes = double(std::size_t{1} << 30)) {
  using Engine = VariantEngine<T, Backend>;
  auto prefix = std::make_shared<PrefixStreams<T, Backend>>();
  Engine engine;
  engine.name = "cpu, " + std::to_string(comm.size()) + " ranks";
  engine.measure = [&model, &comm, prefix, prefix_bytes](
                       typename Engine::Tokens tokens, Index windows, Index context,
                       const typename Engine::Variants& variants, bool with_base,
                       const typename Engine::Progress& progress) {
    VariantLosses out = VariantLosses::prepare("sharded_engine: measure", tokens, windows, context,
                                               variants.size(), model.layer_count(), with_base);
    const WindowShard shard = window_shard(windows, comm.rank(), comm.size());
    typename Engine::Progress scaled;
    if (progress) {
      scaled = [&](Index done, Index count) { progress(done * windows / count, windows); };
    }
    const auto shard_tokens = tokens.subspan(static_cast<std::size_t>(shard.first * context),
                                             static_cast<std::size_t>(shard.count * context));
    if (!with_base && !prefix->holds(shard_tokens, shard.count, context) &&
        PrefixStreams<T, Backend>::bytes_needed(model, shard.count, context) <= prefix_bytes) {
      *prefix = PrefixStreams<T, Backend>::keep(model, shard_tokens, shard.count, context);
    }
    const VariantLosses mine = measure_variants(model, shard_tokens, shard.count, context, variants,
                                                with_base, NoTaps{}, scaled, prefix.get());
    gather_variant_losses(comm, mine, with_base, out);
    return out;
  };
  engine.label_rows = [&comm](Index windows) {
    const WindowShard shard = window_shard(windows, comm.rank(), comm.size());
    LabelRows rows;
    rows.first_window = shard.first;
    rows.windows = shard.count;
    rows.parts = row_parts(comm);
    rows.concatenate = [&comm](std::span<const double> mine) { return comm.all_gather(mine); };
    return rows;
  };
  engine.time_forward = [&model](typename Engine::Tokens tokens, Index windows, Index context,
                                 const MlpVariant<T, Backend>& variant, Index repetitions) {
    return time_forward(model, tokens, windows, context, variant, repetitions);
  };
  engine.time_decode = [&model](typename Engine::Tokens tokens, Index steps,
                                const MlpVariant<T, Backend>& variant, Index repetitions) {
    return time_decode(model, tokens, steps, variant, repetitions);
  };
  return engine;
}

}  // namespace nlb::distributed
