// The MLP budget pipeline of PAPERS §A: surrogates, per-layer all-linear cost, gates, probes,
// joint gating with measured savings. Each stage is a function of explicit token spans, so which
// data a stage reads is visible in its signature (split discipline, PAPERS §A7), and runs its
// forward passes through one VariantRunner:
//
//   fit_surrogates      fit tokens   → per-layer RidgeSurrogate + R²              (stage 2)
//   run_label_stage     label tokens → δ, gates + held-out AUC, probes, joint thresholds
//                                                                         (stages 4, 5, 6)
//   run_eval_stage      eval tokens  → baseline PPL, per-layer all-linear and gated Δ%, all
//                                      layers linear, joint Δ% per budget (stages 1, 3, 4, 6)
//   run_no_fly          eval + cross tokens → per-token δ lists compared    (stage 5)
//   run_across_stage    one budget across MLP gates and attention conversions
//   run_budget          all of the above and the timings → BudgetReport
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nlb/analysis/budget/across_stage.hpp"
#include "nlb/analysis/budget/eval_stage.hpp"
#include "nlb/analysis/budget/fit_stage.hpp"
#include "nlb/analysis/budget/label_stage.hpp"
#include "nlb/analysis/budget/no_fly_stage.hpp"
#include "nlb/analysis/budget/observer.hpp"
#include "nlb/analysis/forward_timing.hpp"
#include "nlb/analysis/variant_runner.hpp"

namespace nlb {

/// Everything `nlb budget` reports. Fields under `timing`, `forward_timing` and `decode_timing`
/// are wall-clock
/// measurements (not deterministic); everything else is a function of the inputs and the seed.
template <class T>
struct BudgetReport {
  BudgetProtocol protocol;
  ModelConfig config;
  std::string runner;  // where the forward passes ran (VariantRunner::name)
  SurrogateFit<T> fit;
  LabelStage<T> label;
  EvalStage eval;
  NoFlyStage no_fly;
  std::vector<ForwardTiming> forward_timing;           // [budgets] prefill: eval windows
  std::vector<ForwardTiming> decode_timing;            // [budgets] batch-1 decoding
  std::optional<AcrossStage<T>> across;                // protocol.across_attention only
  std::vector<std::pair<std::string, double>> timing;  // (stage, seconds)
};

/// The whole pipeline (stages 1–6) on explicit token sets, every forward pass through `runner`
/// (the host model itself, a device copy, or the host model over MPI ranks: the stages do not
/// ask which); everything fitted or searched stays on the host in double. The model is only
/// read: every replaced or gated MLP runs as a per-layer override. Throws ArgumentError
/// (protocol, too few tokens: the message names the set by `names` = {fit, label, eval, cross}),
/// FormatError (taps missing).
template <class T>
BudgetReport<T> run_budget(VariantRunner<T>& runner, std::span<const std::int32_t> fit_tokens,
                           std::span<const std::int32_t> label_tokens,
                           std::span<const std::int32_t> eval_tokens,
                           std::span<const std::int32_t> cross_tokens,
                           const BudgetProtocol& protocol, const BudgetObserver& obs = {},
                           const std::array<std::string, 4>& names = {
                               "fit tokens", "label tokens", "eval tokens", "cross tokens"}) {
  const auto& model = runner.model();
  protocol.validate();
  if (protocol.context > model.config().n_positions) {
    throw ArgumentError(detail::expected_found(
        "budget protocol: context",
        "at most n_positions = " + std::to_string(model.config().n_positions), protocol.context));
  }
  // Check every token set's length before the first long stage.
  require_windows(names[0], fit_tokens, protocol.fit_windows(), protocol.context,
                  std::to_string(protocol.fit_tokens) + " fit positions");
  require_windows(names[1], label_tokens, protocol.label_windows() + protocol.calibration_windows(),
                  protocol.context,
                  std::to_string(protocol.label_tokens) + " label positions and " +
                      std::to_string(protocol.calibration_tokens) + " calibration positions");
  require_windows(names[2], eval_tokens, 1, protocol.context, "one eval window");
  require_windows(names[3], cross_tokens, 1, protocol.context, "one window");
  BudgetReport<T> rep;
  rep.protocol = protocol;
  rep.config = model.config();
  rep.runner = runner.name();
  auto& times = rep.timing;
  rep.fit = detail::budget_stage(obs, times, "fit: surrogates", [&] {
    return fit_surrogates(runner, fit_tokens, protocol, names[0], detail::counter_of(obs));
  });
  rep.label = run_label_stage(runner, rep.fit, label_tokens, protocol, obs, times, names[1]);
  rep.eval = detail::budget_stage(obs, times, "eval: baseline, linear, gated, joint", [&] {
    return run_eval_stage(runner, rep.fit, &rep.label, eval_tokens, protocol,
                          detail::counter_of(obs), names[2]);
  });
  rep.no_fly = detail::budget_stage(obs, times, "cross: no-fly lists", [&] {
    return run_no_fly(runner, rep.fit, eval_tokens, rep.eval, cross_tokens, protocol,
                      detail::counter_of(obs), names[3]);
  });
  detail::budget_stage(obs, times, "timing: dense vs gated forward and decode", [&] {
    const auto gates = rep.label.plain_gates();
    const Index windows = std::min(protocol.timing_windows, rep.eval.windows);
    const Index steps = std::min(protocol.decode_steps, protocol.context);
    for (const auto& state : rep.label.joint) {
      const auto v = joint_variant(model, rep.fit.surrogates, gates, state);
      rep.forward_timing.push_back(runner.time_forward(eval_tokens, windows, protocol.context, v,
                                                       protocol.timing_repetitions));
      rep.decode_timing.push_back(
          runner.time_decode(eval_tokens, steps, v, protocol.timing_repetitions));
    }
  });
  if (protocol.across_attention) {
    rep.across = detail::budget_stage(obs, times, "across: MLP gates and attention", [&] {
      return run_across_stage(runner, rep.fit, rep.label, label_tokens, eval_tokens, protocol, obs);
    });
  }
  return rep;
}

}  // namespace nlb

// The pipeline's stages for float, written once: `template` in an instances file that compiles
// them (tools/instances/analysis_instances.cpp), `extern template` in every translation unit
// built with NLB_EXTERN_ANALYSIS_INSTANCES, which then links them instead of compiling them again
// (docs/architecture.md, "Compile time"). Without the macro the library stays header-only and
// nothing changes. The stages take a VariantRunner, so one instance serves every runner.
#define NLB_BUDGET_STAGE_INSTANCES(DECLARE, T)                                                     \
  DECLARE SurrogateFit<T> fit_surrogates<T>(VariantRunner<T>&, std::span<const std::int32_t>,      \
                                            const BudgetProtocol&, const std::string&,             \
                                            const std::function<void(Index, Index)>&);             \
  DECLARE LabelStage<T> run_label_stage<T>(                                                        \
      VariantRunner<T>&, const SurrogateFit<T>&, std::span<const std::int32_t>,                    \
      const BudgetProtocol&, const BudgetObserver&, std::vector<std::pair<std::string, double>>&,  \
      const std::string&);                                                                         \
  DECLARE EvalStage run_eval_stage<T>(                                                             \
      VariantRunner<T>&, const SurrogateFit<T>&, const LabelStage<T>*,                             \
      std::span<const std::int32_t>, const BudgetProtocol&,                                        \
      const std::function<void(Index, Index)>&, const std::string&);                               \
  DECLARE NoFlyStage run_no_fly<T>(VariantRunner<T>&, const SurrogateFit<T>&,                      \
                                   std::span<const std::int32_t>, const EvalStage&,                \
                                   std::span<const std::int32_t>, const BudgetProtocol&,           \
                                   const std::function<void(Index, Index)>&, const std::string&);  \
  DECLARE AcrossStage<T> run_across_stage<T>(VariantRunner<T>&, const SurrogateFit<T>&,            \
                                             const LabelStage<T>&, std::span<const std::int32_t>,  \
                                             std::span<const std::int32_t>, const BudgetProtocol&, \
                                             const BudgetObserver&);                               \
  DECLARE BudgetReport<T> run_budget<T>(                                                           \
      VariantRunner<T>&, std::span<const std::int32_t>, std::span<const std::int32_t>,             \
      std::span<const std::int32_t>, std::span<const std::int32_t>, const BudgetProtocol&,         \
      const BudgetObserver&, const std::array<std::string, 4>&);

#ifdef NLB_EXTERN_ANALYSIS_INSTANCES
namespace nlb {
NLB_BUDGET_STAGE_INSTANCES(extern template, float)
extern template class ModelRunner<float, backend::cpu>;
}  // namespace nlb
#endif
