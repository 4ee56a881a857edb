// report.json of `nlb budget` (budget_report.hpp); docs/budget-report.schema.json is its schema.
#include <algorithm>
#include <functional>

#include "report/budget_report.hpp"
#include "report/format.hpp"

namespace nlb::cli {

namespace {

using report::interval;
using report::json;
using report::num;

// One budget's allocation search: every try (its first `layers` steps are gate fractions, in
// steps of `step`; `attention(try)`, when given, names each layer's attention conversion) and the
// chosen one.
json allocation_json(
    const BudgetAllocation& a, double step, std::size_t layers,
    const std::function<std::vector<std::string>(const AllocationTry&)>& attention = {}) {
  json tries = json::array();
  for (const auto& t : a.tries) {
    std::vector<double> fractions;
    for (std::size_t l = 0; l < layers; ++l)
      fractions.push_back(static_cast<double>(t.steps[l]) * step);
    json entry = {{"capacity_pct", num(t.capacity_pct)},
                  {"predicted_pct", num(t.predicted_pct)},
                  {"label_layer_fraction", fractions},
                  {"calibration_delta_pct", num(t.calibration.delta_pct.value)},
                  {"calibration_delta_pct_ci", interval(t.calibration.delta_pct)},
                  {"calibration_linear_fraction", num(t.calibration.linear_fraction)},
                  {"meets", t.meets},
                  {"measured", t.measured}};
    if (attention)
      entry["attention"] = attention(t);
    tries.push_back(std::move(entry));
  }
  return {{"budget_pct", a.budget_pct},
          {"chosen", a.chosen},
          {"evaluations", a.evaluations},
          {"tries", tries}};
}

json timing_json(const ForwardTiming& t) {
  return {{"time_dense_ms", num(t.dense_ms)},
          {"time_ms", num(t.gated_ms)},
          {"time_saved_pct", num(t.saved_pct)}};
}

// Every layer's attention conversions, what they cost and save, and whether they were offered.
json across_options_json(const AcrossStage<float>& a) {
  const std::size_t layers = a.options.size();
  json options = json::array();
  for (std::size_t l = 0; l < layers; ++l) {
    const auto& lo = a.options[l];
    json list = json::array();
    for (std::size_t o = 0; o < lo.options.size(); ++o) {
      const auto& opt = lo.options[o];
      const auto& offered = a.groups.offered[l];
      const auto at = std::find(offered.begin(), offered.end(), o);
      json entry = {{"conversion", opt.conversion},
                    {"parameter", opt.parameter},
                    {"flops_per_token", num(opt.flops_per_token)},
                    {"saving_per_token", num(opt.saving_per_token)},
                    {"offered", at != offered.end()},
                    {"calibration_delta_pct", nullptr}};
      if (at != offered.end()) {
        const auto k = static_cast<std::size_t>(at - offered.begin()) + 1;
        entry["calibration_delta_pct"] = num(a.groups.curves.delta_pct[layers + l][k]);
      }
      list.push_back(entry);
    }
    options.push_back({{"layer", l},
                       {"flops_per_token", num(lo.flops_per_token)},
                       {"options", list},
                       {"not_applicable", lo.not_applicable}});
  }
  return options;
}

// What each budget chose across MLP and attention, measured.
json across_results_json(const AcrossStage<float>& a) {
  json results = json::array();
  for (const auto& res : a.results) {
    std::vector<std::string> attention;
    for (std::size_t l = 0; l < a.options.size(); ++l)
      attention.push_back(report::conversion_name(res.attention[l], res.attention_parameter[l]));
    results.push_back({{"budget_pct", res.budget_pct},
                       {"label_layer_fraction", res.gate_fractions},
                       {"attention", attention},
                       {"calibration_delta_pct", num(res.calibration_delta_pct.value)},
                       {"calibration_delta_pct_ci", interval(res.calibration_delta_pct)},
                       {"eval_ppl", num(res.eval_ppl)},
                       {"eval_delta_pct", num(res.eval_delta_pct.value)},
                       {"eval_delta_pct_ci", interval(res.eval_delta_pct)},
                       {"eval_linear_fraction", num(res.eval_linear_fraction)},
                       {"eval_layer_linear_fraction", res.eval_layer_linear_fraction},
                       {"flops_saved_mlp_pct", num(res.mlp_flops_saved_pct)},
                       {"flops_saved_attention_pct", num(res.attention_flops_saved_pct)},
                       {"flops_saved_forward_pct", num(res.forward_flops_saved_pct)},
                       {"attention_share_of_saving", num(res.attention_share)},
                       {"time_prefill", timing_json(res.prefill)},
                       {"time_decode", res.decode ? timing_json(*res.decode) : json(nullptr)}});
  }
  return results;
}

// The "across" section: one budget across MLP gates and attention conversions.
json across_json(const AcrossStage<float>& a, const BudgetProtocol& p) {
  const std::size_t layers = a.options.size();
  json allocations = json::array();
  for (const auto& al : a.allocations) {
    allocations.push_back(allocation_json(al, p.calibration_step, layers, [&](const auto& t) {
      std::vector<std::string> attention;
      for (std::size_t l = 0; l < layers; ++l) {
        const auto* o = chosen_attention(a.options, a.groups, t.steps, l);
        attention.push_back(o ? report::conversion_name(o->conversion, o->parameter) : "");
      }
      return attention;
    }));
  }
  return {{"options", across_options_json(a)},
          {"allocation", allocations},
          {"results", across_results_json(a)}};
}

json model_json(const BudgetReport<float>& r, const BudgetSources& src) {
  return {{"path", src.model},
          {"architecture", to_string(r.config.architecture)},
          {"d_model", r.config.d_model},
          {"d_hidden", r.config.d_hidden},
          {"n_layers", r.config.n_layers},
          {"vocab_size", r.config.vocab_size},
          {"n_positions", r.config.n_positions},
          {"dtype", "float32"}};
}

// How the calibration searched, in words.
const char* calibration_text(CalibrationSearch search) {
  return search == CalibrationSearch::allocation
             ? "allocation on the calibration split: per-layer cost curves (one layer gated at "
               "fractions k * calibration_step), a knapsack for the most FLOPs saved, re-measured "
               "jointly and corrected until the upper end of the 95% bootstrap interval of the "
               "joint calibration delta meets the budget"
             : "greedy on the label set: raise one layer's linear fraction by "
               "calibration_step, the cheapest joint label delta first (lazy)";
}

json protocol_json(const BudgetReport<float>& r, const BudgetSources& src) {
  const auto& p = r.protocol;
  return {
      {"fit_text", src.fit},
      {"label_text", src.label},
      {"eval_text", src.eval},
      {"cross_text", src.cross},
      {"token_format", src.token_format},
      {"scaled_defaults", src.scaled_defaults.empty() ? json(nullptr) : json(src.scaled_defaults)},
      {"device", src.device},
      {"weights", src.weights},
      {"ranks", src.ranks},
      {"gate_features", to_string(p.gate_features)},
      {"context", p.context},
      {"windows",
       "non-overlapping, consecutive from the file start, a shorter last window dropped"},
      {"fit_tokens", p.fit_tokens},
      {"fit_windows", p.fit_windows()},
      {"label_tokens", p.label_tokens},
      {"label_windows", p.label_windows()},
      {"label_train_positions", p.label_train_positions()},
      {"label_holdout_positions", p.label_tokens - p.label_train_positions()},
      {"eval_windows", r.eval.windows},
      {"eval_predicted_tokens", r.eval.predicted_tokens},
      {"cross_windows", r.no_fly.cross_windows},
      {"lambda", p.lambda},
      {"lambda_scaling", "absolute"},
      {"surrogate_fit_dtype", "float64"},
      {"budget_pct", p.budgets_pct},
      {"seed", p.seed},
      {"bootstrap_resamples", p.bootstrap_resamples},
      {"bootstrap", "paired percentile bootstrap over eval windows, 95%"},
      {"holdout_fraction", p.holdout_fraction},
      {"gate_labels",
       "1 iff delta <= median(delta) of the training positions (25th percentile "
       "if fewer than 5% of delta are negative)"},
      {"gate", "L2 logistic regression, C = 1, z-scored MLP input, threshold 0 (p > 0.5)"},
      {"calibration_search", to_string(p.calibration_search)},
      {"calibration", calibration_text(p.calibration_search)},
      {"calibration_tokens", p.calibration_tokens},
      {"calibration_windows", p.calibration_windows()},
      {"calibration_split", "the label file's windows after the label windows"},
      {"calibration_step", p.calibration_step},
      {"allocation_tries", p.allocation_tries},
      {"no_fly_delta", p.no_fly_delta},
      {"no_fly_min_count", p.no_fly_min_count},
      {"timing_windows", std::min(p.timing_windows, r.eval.windows)},
      {"timing_repetitions", p.timing_repetitions},
      {"decode_steps", std::min(p.decode_steps, p.context)}};
}

// Layer l's no-fly lists: sizes, overlap, correlation and the eval list's top tokens.
json no_fly_json(const BudgetReport<float>& r, std::size_t l) {
  const auto& nf = r.no_fly.layers[l];
  json top = json::array();
  for (std::size_t k = 0; k < nf.no_fly_a.size() && k < 10; ++k) {
    const auto& t = nf.no_fly_a[k];
    top.push_back({{"token", t.token},
                   {"text", report::token_text(t.token, r.config.vocab_size)},
                   {"mean_delta", num(t.mean)},
                   {"count", t.count}});
  }
  return {{"common_tokens", nf.common_tokens},
          {"correlation", num(nf.correlation)},
          {"eval_count", nf.no_fly_a.size()},
          {"cross_count", nf.no_fly_b.size()},
          {"overlap", nf.overlap},
          {"eval_top", top}};
}

json layer_json(const BudgetReport<float>& r, Index l) {
  const auto i = static_cast<std::size_t>(l);
  const auto& e = r.eval.layers[i];
  const auto& g = r.label.gates[i];
  return {{"layer", l},
          {"surrogate_r2", num(r.fit.reports[i].r2)},
          {"surrogate_fit_rows", r.fit.reports[i].count},
          {"all_linear_ppl", num(e.all_linear_ppl)},
          {"all_linear_delta_pct", num(e.all_linear_delta_pct.value)},
          {"all_linear_delta_pct_ci", interval(e.all_linear_delta_pct)},
          {"label_all_linear_delta_pct",
           num(100.0 * (r.label.all_linear_ppl[i] / r.label.baseline_ppl - 1.0))},
          {"gate_linear_fraction", num(e.gate_linear_fraction)},
          {"gate_ppl", num(e.gate_ppl)},
          {"gate_delta_pct", num(e.gate_delta_pct.value)},
          {"gate_delta_pct_ci", interval(e.gate_delta_pct)},
          {"gate_auc", num(g.holdout_auc)},
          {"gate_label_rule", to_string(g.rule)},
          {"gate_label_threshold", num(g.label_threshold)},
          {"gate_fit_iterations", g.fit.iterations},
          {"probe_auc_embedding", num(r.label.probes[i].embedding)},
          {"probe_auc_context", num(r.label.probes[i].context)},
          {"probe_auc_full", num(r.label.probes[i].full)},
          {"no_fly", no_fly_json(r, i)}};
}

// Budget b's joint gating: eval, label and calibration deltas, thresholds, FLOPs and times.
json joint_json(const BudgetReport<float>& r, std::size_t b) {
  const auto& j = r.eval.joint[b];
  const auto& s = r.label.joint[b];
  const auto& t = r.forward_timing[b];
  const auto& dt = r.decode_timing[b];
  json thresholds = json::array();
  for (double v : s.thresholds)
    thresholds.push_back(num(v));
  return {{"budget_pct", j.budget_pct},
          {"ppl", num(j.ppl)},
          {"delta_pct", num(j.delta_pct.value)},
          {"delta_pct_ci", interval(j.delta_pct)},
          {"linear_fraction", num(j.linear_fraction)},
          {"layer_linear_fraction", j.layer_linear_fraction},
          {"label_delta_pct", num(s.label_delta_pct)},
          {"label_linear_fraction", num(s.label_linear_fraction)},
          {"label_layer_fraction", s.fractions},
          {"calibration_delta_pct", num(s.calibration_delta_pct.value)},
          {"calibration_delta_pct_ci", interval(s.calibration_delta_pct)},
          {"calibration_linear_fraction", num(s.calibration_linear_fraction)},
          {"thresholds", thresholds},
          {"flops_saved_pct", num(j.flops.forward_pct)},
          {"mlp_flops_saved_pct", num(j.flops.mlp_pct)},
          {"gates_file", budget_gates_file_name(j.budget_pct)},
          {"time_saved_pct", num(t.saved_pct)},
          {"time_dense_ms", num(t.dense_ms)},
          {"time_gated_ms", num(t.gated_ms)},
          {"time_gated_linear_fraction", num(t.gated_linear_fraction)},
          {"decode_time_saved_pct", num(dt.saved_pct)},
          {"decode_time_dense_ms", num(dt.dense_ms)},
          {"decode_time_gated_ms", num(dt.gated_ms)},
          {"decode_time_gated_linear_fraction", num(dt.gated_linear_fraction)}};
}

// The calibration's path (greedy), its evaluations, the per-layer cost curves and the
// allocation searches, into `out`.
void add_calibration_json(const BudgetReport<float>& r, json& out) {
  json path = json::array();
  for (std::size_t i = 0; i < r.label.calibration.path.size(); ++i) {
    const auto& s = r.label.calibration.path[i];
    path.push_back({{"step", i},
                    {"layer", s.changed_layer},
                    {"label_delta_pct", num(s.label_delta_pct)},
                    {"label_linear_fraction", num(s.label_linear_fraction)}});
  }
  out["calibration_path"] = path;
  out["calibration_evaluations"] = r.label.calibration.evaluations;
  json curves = json::array();
  const auto& cc = r.label.cost_curves;
  for (std::size_t l = 0; l < cc.delta_pct.size(); ++l) {
    json d = json::array(), f = json::array();
    for (std::size_t k = 0; k < cc.delta_pct[l].size(); ++k) {
      d.push_back(num(cc.delta_pct[l][k]));
      f.push_back(num(cc.linear_fraction[l][k]));
    }
    curves.push_back({{"layer", l}, {"delta_pct", d}, {"linear_fraction", f}});
  }
  out["cost_curves"] = curves;
  json allocations = json::array();
  for (const auto& a : r.label.allocations)
    allocations.push_back(allocation_json(a, r.protocol.calibration_step, cc.delta_pct.size()));
  out["allocation"] = allocations;
}

}  // namespace

std::string budget_report_json(const BudgetReport<float>& r, const BudgetSources& src) {
  json out;
  out["format"] = "nlb-budget-report";
  out["version"] = 1;
  out["model"] = model_json(r, src);
  out["protocol"] = protocol_json(r, src);
  out["baseline_ppl"] = num(r.eval.baseline_ppl);
  out["label_baseline_ppl"] = num(r.label.baseline_ppl);
  out["cross_baseline_ppl"] = num(r.no_fly.cross_baseline_ppl);
  out["all_layers_linear_ppl"] = num(r.eval.all_layers_linear_ppl);
  out["all_layers_linear_delta_pct"] = num(r.eval.all_layers_linear_delta_pct.value);
  out["all_layers_linear_delta_pct_ci"] = interval(r.eval.all_layers_linear_delta_pct);
  out["layers"] = json::array();
  for (Index l = 0; l < r.config.n_layers; ++l)
    out["layers"].push_back(layer_json(r, l));
  out["joint"] = json::array();
  for (std::size_t b = 0; b < r.eval.joint.size(); ++b)
    out["joint"].push_back(joint_json(r, b));
  add_calibration_json(r, out);
  if (r.across)
    out["across"] = across_json(*r.across, r.protocol);
  json stages = json::array();
  double total = 0;
  for (const auto& [name, seconds] : r.timing) {
    stages.push_back({{"stage", name}, {"seconds", seconds}});
    total += seconds;
  }
  out["time_stages"] = stages;  // wall-clock, like every "time*" field
  out["time_total_seconds"] = total;
  return out.dump(2) + "\n";
}

}  // namespace nlb::cli
