// report.md of `nlb budget`, second half (budget_report.hpp): joint gating per budget, a short
// reading of the results, and one budget across MLP and attention.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "report/budget_report.hpp"
#include "report/format.hpp"

namespace nlb::cli::report {

namespace {

// How the joint thresholds were searched, in one sentence.
std::string joint_search_text(const BudgetReport<float>& r) {
  const auto& p = r.protocol;
  return p.calibration_search == CalibrationSearch::allocation
             ? "Per-layer thresholds allocated on the calibration split (cost curve per layer, "
               "knapsack, corrected by joint measurement until the upper end of the 95% interval "
               "of the calibration Δ% is within the budget; step " +
                   fmt("%g", p.calibration_step) + ", " +
                   std::to_string(r.label.calibration.evaluations) + " joint calibration passes)"
             : "Per-layer thresholds calibrated on the label set (greedy, step " +
                   fmt("%g", p.calibration_step) + ", " +
                   std::to_string(r.label.calibration.evaluations) + " label passes)";
}

// One row of the joint table: budget b's deltas, linear fraction, FLOPs and times.
std::string joint_row(const BudgetReport<float>& r, std::size_t b) {
  const auto& j = r.eval.joint[b];
  const auto& s = r.label.joint[b];
  const auto& t = r.forward_timing[b];
  const auto& dt = r.decode_timing[b];
  std::ostringstream md;
  md << "| " << fmt("%g", j.budget_pct) << "% | " << fmt("%+.2f", s.label_delta_pct) << " | "
     << fmt("%+.2f", s.calibration_delta_pct.value) << " ["
     << fmt("%+.2f", s.calibration_delta_pct.low) << ", "
     << fmt("%+.2f", s.calibration_delta_pct.high) << "] | " << fmt("%+.2f", j.delta_pct.value)
     << " [" << fmt("%+.2f", j.delta_pct.low) << ", " << fmt("%+.2f", j.delta_pct.high) << "] | "
     << fmt("%.1f", 100 * j.linear_fraction) << " | " << fmt("%.1f", j.flops.mlp_pct) << "% | "
     << fmt("%.1f", j.flops.forward_pct) << "% | " << fmt("%.2f", t.dense_ms) << " | "
     << fmt("%.2f", t.gated_ms) << " | " << fmt("%+.1f", t.saved_pct) << "% | "
     << fmt("%.2f", dt.dense_ms) << " | " << fmt("%.2f", dt.gated_ms) << " | "
     << fmt("%+.1f", dt.saved_pct) << "% |\n";
  return md.str();
}

// Each budget's eval linear fraction per layer.
std::string joint_layer_fractions(const BudgetReport<float>& r) {
  const Index layers = r.config.n_layers;
  std::ostringstream md;
  md << "\nPer-layer eval linear fractions (%):\n\n| budget |";
  for (Index l = 0; l < layers; ++l)
    md << " L" << l << " |";
  md << "\n|---|";
  for (Index l = 0; l < layers; ++l)
    md << "---|";
  md << "\n";
  for (const auto& j : r.eval.joint) {
    md << "| " << fmt("%g", j.budget_pct) << "% |";
    for (double f : j.layer_linear_fraction)
      md << " " << fmt("%.1f", 100 * f) << " |";
    md << "\n";
  }
  md << "\n![joint budget curve](joint_budget_curve.svg)\n\n";
  return md.str();
}

// The cheapest and the most expensive layer to make linear alone (eval Δ%).
std::pair<Index, Index> cheapest_and_dearest(const BudgetReport<float>& r) {
  const auto& e = r.eval.layers;
  Index cheapest = 0, dearest = 0;
  for (Index l = 1; l < r.config.n_layers; ++l) {
    if (e[static_cast<std::size_t>(l)].all_linear_delta_pct.value <
        e[static_cast<std::size_t>(cheapest)].all_linear_delta_pct.value)
      cheapest = l;
    if (e[static_cast<std::size_t>(l)].all_linear_delta_pct.value >
        e[static_cast<std::size_t>(dearest)].all_linear_delta_pct.value)
      dearest = l;
  }
  return {cheapest, dearest};
}

// One line of the reading per budget.
std::string reading_budgets(const BudgetReport<float>& r) {
  std::ostringstream md;
  for (std::size_t b = 0; b < r.eval.joint.size(); ++b) {
    const auto& j = r.eval.joint[b];
    const auto& t = r.forward_timing[b];
    md << "- Budget " << fmt("%g", j.budget_pct) << "%: eval Δ% " << fmt("%+.2f", j.delta_pct.value)
       << " (" << (j.delta_pct.value <= j.budget_pct ? "within" : "over")
       << " the budget on held-out text), " << fmt("%.1f", 100 * j.linear_fraction)
       << "% of MLP rows linear, " << fmt("%.1f", j.flops.forward_pct)
       << "% of forward FLOPs saved, measured time saved " << fmt("%+.1f", t.saved_pct)
       << "% (prefill) and " << fmt("%+.1f", r.decode_timing[b].saved_pct) << "% (decode).\n";
  }
  return md.str();
}

// Layer l's conversions: what each costs and saves, whether it was offered and its cost alone.
std::string across_option_rows(const AcrossStage<float>& a, std::size_t l) {
  const auto& lo = a.options[l];
  std::ostringstream md;
  for (std::size_t o = 0; o < lo.options.size(); ++o) {
    const auto& opt = lo.options[o];
    const auto& offered = a.groups.offered[l];
    const auto at = std::find(offered.begin(), offered.end(), o);
    const double cost =
        at == offered.end()
            ? std::nan("")
            : a.groups.curves.delta_pct[a.options.size() + l]
                                       [static_cast<std::size_t>(at - offered.begin()) + 1];
    md << "| L" << l << " | " << fmt("%.0f", lo.flops_per_token) << " | "
       << conversion_name(opt.conversion, opt.parameter) << " | "
       << fmt("%.0f", opt.flops_per_token) << " | " << fmt("%+.0f", opt.saving_per_token) << " | "
       << (at == offered.end() ? "no (saves nothing)" : "yes") << " | " << fmt("%+.2f", cost)
       << " |\n";
  }
  for (const auto& why : lo.not_applicable)
    md << "| L" << l << " | | not applicable: " << why << " | | | | |\n";
  return md.str();
}

// One row of the results across MLP and attention.
std::string across_result_row(const AcrossResult& res) {
  std::string attention;
  for (std::size_t l = 0; l < res.attention.size(); ++l)
    if (!res.attention[l].empty())
      attention += (attention.empty() ? "" : ", ") + std::string("L") + std::to_string(l) + " " +
                   conversion_name(res.attention[l], res.attention_parameter[l]);
  std::ostringstream md;
  md << "| " << fmt("%g", res.budget_pct) << "% | " << fmt("%+.2f", res.calibration_delta_pct.value)
     << " [" << fmt("%+.2f", res.calibration_delta_pct.low) << ", "
     << fmt("%+.2f", res.calibration_delta_pct.high) << "] | "
     << fmt("%+.2f", res.eval_delta_pct.value) << " [" << fmt("%+.2f", res.eval_delta_pct.low)
     << ", " << fmt("%+.2f", res.eval_delta_pct.high) << "] | "
     << fmt("%.1f", 100 * res.eval_linear_fraction) << " | "
     << (attention.empty() ? "unchanged" : attention) << " | "
     << fmt("%.1f", res.mlp_flops_saved_pct) << "% | " << fmt("%.1f", res.attention_flops_saved_pct)
     << "% | " << fmt("%.1f", res.forward_flops_saved_pct) << "% | "
     << fmt("%.0f", 100 * res.attention_share) << "% | " << fmt("%+.1f", res.prefill.saved_pct)
     << "% | "
     << (res.decode ? fmt("%+.1f", res.decode->saved_pct) + "%"
                    : std::string("n/a (linear attention has no KV cache)"))
     << " |\n";
  return md.str();
}

}  // namespace

std::string budget_md_joint(const BudgetReport<float>& r) {
  const auto& p = r.protocol;
  std::ostringstream md;
  md << "## Joint gating, measured jointly (PAPERS §A7)\n\n"
     << "All gates on at once. " << joint_search_text(r)
     << ". Label Δ%: the positions the gates were fitted on; calibration Δ%: the calibration "
        "split; eval Δ%: text the calibration never saw, with every gate on. FLOPs: PAPERS §A5"
     << (r.config.mlp_matrices() == 3
             ? " generalised to the SwiGLU MLP: a dense MLP costs 6·d·h per token (W_gate, W_up "
               "and W_down, three d×h products) against 4·d·h for a two-matrix MLP, and its "
               "surrogate still 2·d², so a linear row saves 6·d·h − 2·d² (here d = " +
                   std::to_string(r.config.d_model) + ", h = " + std::to_string(r.config.d_hidden) +
                   ")"
             : std::string())
     << ". Time: median of " << p.timing_repetitions << " alternating repetitions over "
     << std::min(p.timing_windows, r.eval.windows)
     << " eval windows (prefill), and of decoding the first " << std::min(p.decode_steps, p.context)
     << " eval tokens one at a time through the KV cache (decode), this machine, this run.\n\n"
     << "| budget | label Δ% | calibration Δ% [95% CI] | eval Δ% [95% CI] | % MLP rows linear | "
        "FLOPs saved (MLPs) | FLOPs saved (forward) | prefill dense ms | prefill gated ms | "
        "prefill time saved | decode dense ms | decode gated ms | decode time saved |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (std::size_t b = 0; b < r.eval.joint.size(); ++b)
    md << joint_row(r, b);
  return md.str() + joint_layer_fractions(r);
}

std::string budget_md_reading(const BudgetReport<float>& r) {
  const auto layers = static_cast<double>(r.config.n_layers);
  double sum_single_linear = 0, sum_single_gate = 0, mean_e = 0, mean_c = 0;
  for (const auto& e : r.eval.layers) {
    sum_single_linear += e.all_linear_delta_pct.value;
    sum_single_gate += e.gate_delta_pct.value;
  }
  for (const auto& pr : r.label.probes) {
    mean_e += pr.embedding / layers;
    mean_c += pr.context / layers;
  }
  const auto [cheapest, dearest] = cheapest_and_dearest(r);
  std::ostringstream md;
  md << "## Reading\n\n"
     << "- Cheapest layer to make linear: L" << cheapest << " ("
     << fmt("%+.2f", r.eval.layers[static_cast<std::size_t>(cheapest)].all_linear_delta_pct.value)
     << "%); most expensive: L" << dearest << " ("
     << fmt("%+.2f", r.eval.layers[static_cast<std::size_t>(dearest)].all_linear_delta_pct.value)
     << "%).\n"
     << "- All layers linear at once costs "
     << fmt("%+.1f", r.eval.all_layers_linear_delta_pct.value) << "%, against "
     << fmt("%+.1f", sum_single_linear)
     << "% for the sum of the single-layer costs: per-layer costs do not add up.\n"
     << "- The single-layer gates (threshold 0) together would suggest "
     << fmt("%+.2f", sum_single_gate)
     << "% if their costs added; the joint rows above are what all gates on at once cost.\n"
     << "- Probes: mean held-out AUC " << fmt("%.3f", mean_e) << " on the embedding vs "
     << fmt("%.3f", mean_c)
     << " on the context part (PAPERS §A4 expects token identity near chance, context near the "
        "full gate).\n";
  return md.str() + reading_budgets(r);
}

std::string budget_md_across(const BudgetReport<float>& r) {
  const auto& a = *r.across;
  std::ostringstream md;
  md << "\n## One budget across MLP and attention\n\n"
     << "Each budget spent on MLP gates and attention conversions together: every layer's "
        "conversions costed by the FLOPs this library runs (context "
     << r.protocol.context
     << "), the ones that save measured alone on the calibration split, one knapsack over "
        "gates and conversions, corrected by joint measurement until the upper end of the 95% "
        "interval of the calibration Δ% meets the budget; then the chosen state on the eval "
        "text and timed against the unmodified model.\n\n"
     << "| layer | own attention FLOPs/token | conversion | FLOPs/token | saving | offered | "
        "calibration Δ% alone |\n|---|---|---|---|---|---|---|\n";
  for (std::size_t l = 0; l < a.options.size(); ++l)
    md << across_option_rows(a, l);
  md << "\n| budget | calibration Δ% [95% CI] | eval Δ% [95% CI] | % MLP rows linear | "
        "attention | FLOPs saved (MLPs) | FLOPs saved (attention) | FLOPs saved (forward) | "
        "attention share | prefill time saved | decode time saved |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& res : a.results)
    md << across_result_row(res);
  md << "\n![across allocation](across_allocation.svg)\n";
  return md.str();
}

}  // namespace nlb::cli::report
