// The analyses' forward passes spread over ranks (docs/scaling.md): a VariantRunner whose
// measure() runs each rank's shard of the windows on its own runner (the host model) and gathers
// the per-position losses back in window order, so every stage built on it (fit, label δ, eval,
// cross-corpus, joint calibration, attention conversions, `nlb eval`) gets the single-process
// result on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nlb/analysis/budget/label_rows.hpp"
#include "nlb/analysis/variant_runner.hpp"
#include "nlb/distributed/communicator.hpp"
#include "nlb/distributed/row_parts.hpp"
#include "nlb/distributed/window_shard.hpp"

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

/// A VariantRunner over the ranks of `comm`: each rank measures its shard of the windows
/// (window_shard) on its `local` runner, then all ranks hold the whole result. Per-position
/// losses equal the local runner's over all windows bit for bit (a window's arithmetic does not
/// depend on which rank runs it, at the same threads per process); route counts are exact sums.
/// collect() and the timings run on every rank's own runner (reports take rank 0's).
/// `progress(done, windows)` reports this rank's share, scaled to the whole set. held_windows:
/// each rank's label windows are its window_shard, the fit's sums are reduced with
/// row_parts(comm) and the scores gathered with all_gather (rank order = window order).
/// `local` and `comm` must outlive it; every rank must call measure() together.
template <class T>
class ShardedRunner final : public VariantRunner<T> {
  using Base = VariantRunner<T>;

 public:
  using typename Base::HostTaps, typename Base::Model, typename Base::Progress,
      typename Base::Tokens, typename Base::Variant;

  ShardedRunner(VariantRunner<T>& local, const Communicator& comm) : local_(&local), comm_(&comm) {}

  std::string name() const override {
    return local_->name() + ", " + std::to_string(comm_->size()) + " ranks";
  }
  const Model& model() const override { return local_->model(); }

  VariantLosses measure(Tokens tokens, Index windows, Index context,
                        const std::vector<Variant>& variants, bool with_base,
                        const Progress& progress = {}, const HostTaps& base_taps = {}) override {
    VariantLosses out = VariantLosses::prepare("ShardedRunner::measure", tokens, windows, context,
                                               variants.size(), model().layer_count(), with_base);
    const WindowShard shard = window_shard(windows, comm_->rank(), comm_->size());
    Progress scaled;
    if (progress)
      scaled = [&](Index done, Index count) { progress(done * windows / count, windows); };
    const auto mine_tokens = tokens.subspan(static_cast<std::size_t>(shard.first * context),
                                            static_cast<std::size_t>(shard.count * context));
    const VariantLosses mine =
        local_->measure(mine_tokens, shard.count, context, variants, with_base, scaled, base_taps);
    gather_variant_losses(*comm_, mine, with_base, out);
    return out;
  }

  void collect(Tokens tokens, Index windows, Index context, const HostTaps& taps,
               const Progress& progress = {}) override {
    local_->collect(tokens, windows, context, taps, progress);
  }

  ForwardTiming time_forward(Tokens tokens, Index windows, Index context, const Variant& variant,
                             Index repetitions) override {
    return local_->time_forward(tokens, windows, context, variant, repetitions);
  }
  ForwardTiming time_decode(Tokens tokens, Index steps, const Variant& variant,
                            Index repetitions) override {
    return local_->time_decode(tokens, steps, variant, repetitions);
  }

  LabelRows held_windows(Index windows) const override {
    const WindowShard shard = window_shard(windows, comm_->rank(), comm_->size());
    LabelRows rows;
    rows.first_window = shard.first;
    rows.windows = shard.count;
    rows.parts = row_parts(*comm_);
    const Communicator* comm = comm_;
    rows.concatenate = [comm](std::span<const double> mine) { return comm->all_gather(mine); };
    return rows;
  }

 private:
  VariantRunner<T>* local_;
  const Communicator* comm_;
};

}  // namespace nlb::distributed
