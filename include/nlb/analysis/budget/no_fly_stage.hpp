// Stage 5 of the MLP budget pipeline (PAPERS §A4): per-token δ on a second corpus, compared
// with the eval file's, so the tokens that need their MLP in one text can be checked in another.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nlb/analysis/budget/eval_stage.hpp"
#include "nlb/analysis/budget/fit_stage.hpp"
#include "nlb/analysis/budget/gate_training.hpp"
#include "nlb/analysis/budget/probes.hpp"
#include "nlb/analysis/variant_runner.hpp"

namespace nlb {

/// Per layer, the no-fly comparison of the eval file (δ from run_eval_stage) and the cross file.
struct NoFlyStage {
  Index cross_windows = 0;
  double cross_baseline_ppl = 0;
  std::vector<NoFlyComparison> layers;  // [layers]: a = eval file, b = cross file
};

/// δ per position on every full window of `cross_tokens` (each layer linear alone), then per
/// layer compare_no_fly(eval, cross) with the protocol's threshold and minimum count
/// (PAPERS §A4). Reads `cross_tokens` and the eval stage's δ.
template <class T>
NoFlyStage run_no_fly(VariantRunner<T>& runner, const SurrogateFit<T>& fit,
                      std::span<const std::int32_t> eval_tokens, const EvalStage& eval,
                      std::span<const std::int32_t> cross_tokens, const BudgetProtocol& protocol,
                      const std::function<void(Index, Index)>& progress = {},
                      const std::string& what = "cross tokens") {
  const Index layers = runner.model().layer_count();
  const Index ctx = protocol.context;
  NoFlyStage out;
  out.cross_windows = static_cast<Index>(cross_tokens.size()) / ctx;
  require_windows(what, cross_tokens, std::max<Index>(out.cross_windows, 1), ctx,
                  "one window of the second corpus");
  const auto variants = one_layer_linear_variants(fit.surrogates);
  const VariantLosses r =
      runner.measure(cross_tokens, out.cross_windows, ctx, variants, true, progress);
  out.cross_baseline_ppl = detail::ppl_of(r.base);
  const Index cross_positions = out.cross_windows * (ctx - 1);
  for (Index l = 0; l < layers; ++l) {
    const auto ls = static_cast<std::size_t>(l);
    const auto a = token_delta_means(eval_tokens, eval.delta[ls], ctx);
    const auto b =
        token_delta_means(cross_tokens, loss_delta(r.variant[ls], r.base, cross_positions), ctx);
    out.layers.push_back(compare_no_fly(a, b, protocol.no_fly_delta, protocol.no_fly_min_count));
  }
  return out;
}

}  // namespace nlb
