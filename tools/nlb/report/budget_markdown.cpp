// report.md of `nlb budget` (budget_report.hpp): the protocol, the per-layer costs and the
// probes here; the joint gating, the reading and the budget across MLP and attention in
// budget_markdown_joint.cpp.
#include <sstream>

#include "report/budget_report.hpp"
#include "report/format.hpp"

namespace nlb::cli {

namespace {

using report::fmt;

// The title, the model and the table of the token sets and what each is used for.
std::string budget_md_protocol(const BudgetReport<float>& r, const BudgetSources& src) {
  const auto& p = r.protocol;
  std::ostringstream md;
  md << "# MLP budget report\n\n"
     << "Model `" << src.model << "` (" << to_string(r.config.architecture) << ", "
     << r.config.n_layers << " layers, d = " << r.config.d_model << ", h = " << r.config.d_hidden
     << ", vocab " << r.config.vocab_size << "), float32. What every number means: "
     << "docs/budget.md.\n\n"
     << "## Protocol\n\n"
     << "| set | file | use |\n|---|---|---|\n"
     << "| fit | `" << src.fit << "` | first " << p.fit_tokens << " positions (" << p.fit_windows()
     << " windows): ridge surrogates, lambda = " << p.lambda << " (absolute, float64) |\n"
     << "| label | `" << src.label << "` | first " << p.label_tokens << " predicted positions ("
     << p.label_windows() << " windows): delta, gates (first " << p.label_train_positions()
     << "), AUC (last " << p.label_tokens - p.label_train_positions() << ")"
     << (p.calibration_search == CalibrationSearch::greedy ? ", greedy joint calibration" : "")
     << " |\n"
     << "| calibration | `" << src.label << "` | the next " << p.calibration_windows()
     << " windows (" << p.calibration_windows() * (p.context - 1)
     << " predicted positions, none used to fit a gate): "
     << (p.calibration_search == CalibrationSearch::allocation
             ? "per-layer cost curves and the joint calibration"
             : "the chosen states measured")
     << " |\n"
     << "| eval | `" << src.eval << "` | every full window: " << r.eval.windows << " windows, "
     << r.eval.predicted_tokens << " predicted tokens |\n"
     << "| cross | `" << src.cross << "` | " << r.no_fly.cross_windows
     << " windows: second corpus for the no-fly lists |\n\n";
  return md.str();
}

// Where the passes ran and how the intervals were drawn.
std::string budget_md_passes(const BudgetReport<float>& r, const BudgetSources& src) {
  const auto& p = r.protocol;
  std::ostringstream md;
  md << "Windows of " << p.context << " tokens (" << src.token_format
     << "), non-overlapping; forward passes and timings on the " << src.device
     << (src.device == "cpu" ? "" : " device (fits and searches on the host, in float64)")
     << (src.weights == "f32" ? std::string()
                              : ", with " + src.weights +
                                    " weight matrices (every pass, the surrogates' fit inputs "
                                    "and the timings are this model's)")
     << (src.ranks > 1 ? ", their windows spread over " + std::to_string(src.ranks) + " MPI ranks"
                       : std::string())
     << (src.ranks > 1 && p.gate_features == GateFeatures::split
             ? " (each rank collecting the gate features of its own label windows; the gates "
               "fitted over the ranks)"
             : std::string())
     << ". Intervals: paired bootstrap over eval windows, " << p.bootstrap_resamples
     << " resamples, seed " << p.seed << ", 95%.\n\n";
  if (!src.scaled_defaults.empty())
    md << "**Scaled defaults.** " << src.scaled_defaults << "\n\n";
  return md.str();
}

// The baseline, all layers linear at once, and each layer linear or gated alone.
std::string budget_md_layers(const BudgetReport<float>& r) {
  std::ostringstream md;
  md << "## Baseline and all-linear cost per layer\n\n"
     << "Baseline eval PPL **" << fmt("%.4f", r.eval.baseline_ppl) << "**. All layers linear at "
     << "once: PPL " << fmt("%.4f", r.eval.all_layers_linear_ppl) << ", "
     << fmt("%+.2f", r.eval.all_layers_linear_delta_pct.value) << "% ["
     << fmt("%+.2f", r.eval.all_layers_linear_delta_pct.low) << ", "
     << fmt("%+.2f", r.eval.all_layers_linear_delta_pct.high) << "].\n\n"
     << "| layer | surrogate R² | all-linear PPL | all-linear Δ% [95% CI] | gate % linear | "
        "gated-layer Δ% [95% CI] | gate AUC |\n|---|---|---|---|---|---|---|\n";
  for (Index l = 0; l < r.config.n_layers; ++l) {
    const auto i = static_cast<std::size_t>(l);
    const auto& e = r.eval.layers[i];
    md << "| " << l << " | " << fmt("%.4f", r.fit.reports[i].r2) << " | "
       << fmt("%.4f", e.all_linear_ppl) << " | " << fmt("%+.2f", e.all_linear_delta_pct.value)
       << " [" << fmt("%+.2f", e.all_linear_delta_pct.low) << ", "
       << fmt("%+.2f", e.all_linear_delta_pct.high) << "] | "
       << fmt("%.1f", 100 * e.gate_linear_fraction) << " | " << fmt("%+.2f", e.gate_delta_pct.value)
       << " [" << fmt("%+.2f", e.gate_delta_pct.low) << ", " << fmt("%+.2f", e.gate_delta_pct.high)
       << "] | " << fmt("%.3f", r.label.gates[i].holdout_auc) << " |\n";
  }
  md << "\n![all-linear cost](all_linear_delta.svg)\n\n![% linear](linear_fraction.svg)\n\n";
  return md.str();
}

// The probes (token identity vs context) and the no-fly lists per layer.
std::string budget_md_probes(const BudgetReport<float>& r) {
  const auto& p = r.protocol;
  std::ostringstream md;
  md << "## Probes: token identity vs context (PAPERS §A4)\n\n"
     << "Held-out AUC of the same gate on the embedding e, on the context part c = x − e and on "
        "x; no-fly lists (mean delta > "
     << p.no_fly_delta << " over ≥ " << p.no_fly_min_count
     << " occurrences) on the eval file vs the cross file."
     << (r.config.rotary_dims() > 0
             ? " This model has no position embedding (its positions enter by rotating q and k "
               "inside attention), so e is the token embedding alone."
             : "")
     << "\n\n"
     << "| layer | AUC e | AUC c | AUC x | tokens in both | r(eval, cross) | no-fly eval | "
        "no-fly cross | on both |\n|---|---|---|---|---|---|---|---|---|\n";
  for (Index l = 0; l < r.config.n_layers; ++l) {
    const auto i = static_cast<std::size_t>(l);
    const auto& pr = r.label.probes[i];
    const auto& nf = r.no_fly.layers[i];
    md << "| " << l << " | " << fmt("%.3f", pr.embedding) << " | " << fmt("%.3f", pr.context)
       << " | " << fmt("%.3f", pr.full) << " | " << nf.common_tokens << " | "
       << fmt("%.3f", nf.correlation) << " | " << nf.no_fly_a.size() << " | " << nf.no_fly_b.size()
       << " | " << nf.overlap << " |\n";
  }
  md << "\n![delta distribution](delta_distribution.svg) (layer " << r.config.n_layers / 2
     << ", label positions)\n\n";
  return md.str();
}

}  // namespace

std::string budget_report_markdown(const BudgetReport<float>& r, const BudgetSources& src) {
  std::string md = budget_md_protocol(r, src) + budget_md_passes(r, src) + budget_md_layers(r) +
                   budget_md_probes(r) + report::budget_md_joint(r) + report::budget_md_reading(r);
  if (r.across)
    md += report::budget_md_across(r);
  md += "\nStage times (s):";
  for (const auto& [name, seconds] : r.timing)
    md += " " + name + " " + fmt("%.1f", seconds) + ";";
  return md + "\n";
}

}  // namespace nlb::cli
