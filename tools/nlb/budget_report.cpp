// The files of an `nlb budget` report; see budget_report.hpp and docs/budget.md.
#include "budget_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nlb/io/safetensors_writer.hpp"
#include "svg_plot.hpp"

namespace nlb::cli {

namespace {

using json = nlohmann::json;

// NaN and ±Inf are not JSON numbers: they become null.
json num(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}
json interval(const Interval& i) {
  return json::array({num(i.low), num(i.high)});
}

std::string fmt(const char* format, double v) {
  if (!std::isfinite(v))
    return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}
// Shortest round-trip text of a double, as in the JSON (CSV cells); NaN → empty cell.
std::string exact(double v) {
  return std::isfinite(v) ? json(v).dump() : std::string();
}

std::string token_text(std::int32_t token, Index vocab) {
  if (vocab > 256)
    return "id " + std::to_string(token);
  if (token >= 33 && token < 127 && token != '|' && token != '`' && token != '\\')
    return std::string(1, static_cast<char>(token));
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", static_cast<unsigned>(token));
  return buf;
}

Index middle_layer(const BudgetReport<float>& r) {
  return r.config.n_layers / 2;
}

// "skew_rank 4", "linear", "" (unchanged).
std::string conversion_name(const std::string& conversion, Index parameter) {
  return conversion == "skew_rank" ? conversion + " " + std::to_string(parameter) : conversion;
}

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

// The "across" section: one budget across MLP gates and attention conversions.
json across_json(const AcrossStage<float>& a, const BudgetProtocol& p) {
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
  json allocations = json::array();
  for (const auto& al : a.allocations) {
    allocations.push_back(allocation_json(al, p.calibration_step, layers, [&](const auto& t) {
      std::vector<std::string> attention;
      for (std::size_t l = 0; l < layers; ++l) {
        const auto* o = chosen_attention(a.options, a.groups, t.steps, l);
        attention.push_back(o ? conversion_name(o->conversion, o->parameter) : "");
      }
      return attention;
    }));
  }
  json results = json::array();
  for (const auto& res : a.results) {
    std::vector<std::string> attention;
    for (std::size_t l = 0; l < layers; ++l)
      attention.push_back(conversion_name(res.attention[l], res.attention_parameter[l]));
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
  return {{"options", options}, {"allocation", allocations}, {"results", results}};
}

}  // namespace

const std::vector<std::string>& budget_csv_columns() {
  static const std::vector<std::string> columns{"layer",
                                                "surrogate_r2",
                                                "all_linear_ppl",
                                                "all_linear_delta_pct",
                                                "all_linear_delta_pct_low",
                                                "all_linear_delta_pct_high",
                                                "gate_linear_fraction",
                                                "gate_ppl",
                                                "gate_delta_pct",
                                                "gate_delta_pct_low",
                                                "gate_delta_pct_high",
                                                "gate_auc",
                                                "probe_auc_embedding",
                                                "probe_auc_context",
                                                "no_fly_correlation"};
  return columns;
}

std::string budget_gates_file_name(double budget_pct) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "gates-%gpct.safetensors", budget_pct);
  return buf;
}

std::string budget_report_json(const BudgetReport<float>& r, const BudgetSources& src) {
  const auto& p = r.protocol;
  const Index layers = r.config.n_layers;
  json out;
  out["format"] = "nlb-budget-report";
  out["version"] = 1;
  out["model"] = {{"path", src.model},
                  {"architecture", to_string(r.config.architecture)},
                  {"d_model", r.config.d_model},
                  {"d_hidden", r.config.d_hidden},
                  {"n_layers", layers},
                  {"vocab_size", r.config.vocab_size},
                  {"n_positions", r.config.n_positions},
                  {"dtype", "float32"}};
  out["protocol"] = {
      {"fit_text", src.fit},
      {"label_text", src.label},
      {"eval_text", src.eval},
      {"cross_text", src.cross},
      {"token_format", src.token_format},
      {"device", src.device},
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
      {"calibration",
       p.calibration_search == CalibrationSearch::allocation
           ? "allocation on the calibration split: per-layer cost curves (one layer gated at "
             "fractions k * calibration_step), a knapsack for the most FLOPs saved, re-measured "
             "jointly and corrected until the upper end of the 95% bootstrap interval of the "
             "joint calibration delta meets the budget"
           : "greedy on the label set: raise one layer's linear fraction by "
             "calibration_step, the cheapest joint label delta first (lazy)"},
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
  out["baseline_ppl"] = num(r.eval.baseline_ppl);
  out["label_baseline_ppl"] = num(r.label.baseline_ppl);
  out["cross_baseline_ppl"] = num(r.no_fly.cross_baseline_ppl);
  out["all_layers_linear_ppl"] = num(r.eval.all_layers_linear_ppl);
  out["all_layers_linear_delta_pct"] = num(r.eval.all_layers_linear_delta_pct.value);
  out["all_layers_linear_delta_pct_ci"] = interval(r.eval.all_layers_linear_delta_pct);
  json ls = json::array();
  for (Index l = 0; l < layers; ++l) {
    const auto i = static_cast<std::size_t>(l);
    const auto& e = r.eval.layers[i];
    const auto& g = r.label.gates[i];
    const auto& nf = r.no_fly.layers[i];
    json top = json::array();
    for (std::size_t k = 0; k < nf.no_fly_a.size() && k < 10; ++k) {
      const auto& t = nf.no_fly_a[k];
      top.push_back({{"token", t.token},
                     {"text", token_text(t.token, r.config.vocab_size)},
                     {"mean_delta", num(t.mean)},
                     {"count", t.count}});
    }
    ls.push_back({{"layer", l},
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
                  {"no_fly",
                   {{"common_tokens", nf.common_tokens},
                    {"correlation", num(nf.correlation)},
                    {"eval_count", nf.no_fly_a.size()},
                    {"cross_count", nf.no_fly_b.size()},
                    {"overlap", nf.overlap},
                    {"eval_top", top}}}});
  }
  out["layers"] = ls;
  json joint = json::array();
  for (std::size_t b = 0; b < r.eval.joint.size(); ++b) {
    const auto& j = r.eval.joint[b];
    const auto& s = r.label.joint[b];
    const auto& t = r.forward_timing[b];
    const auto& dt = r.decode_timing[b];
    json thresholds = json::array();
    for (double v : s.thresholds)
      thresholds.push_back(num(v));
    joint.push_back({{"budget_pct", j.budget_pct},
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
                     {"decode_time_gated_linear_fraction", num(dt.gated_linear_fraction)}});
  }
  out["joint"] = joint;
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
    allocations.push_back(allocation_json(a, p.calibration_step, cc.delta_pct.size()));
  out["allocation"] = allocations;
  if (r.across)
    out["across"] = across_json(*r.across, p);
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

std::string budget_layers_csv(const BudgetReport<float>& r) {
  std::string out;
  const auto& cols = budget_csv_columns();
  for (std::size_t c = 0; c < cols.size(); ++c)
    out += (c ? "," : "") + cols[c];
  out += "\n";
  for (Index l = 0; l < r.config.n_layers; ++l) {
    const auto i = static_cast<std::size_t>(l);
    const auto& e = r.eval.layers[i];
    const std::vector<std::string> cells{std::to_string(l),
                                         exact(r.fit.reports[i].r2),
                                         exact(e.all_linear_ppl),
                                         exact(e.all_linear_delta_pct.value),
                                         exact(e.all_linear_delta_pct.low),
                                         exact(e.all_linear_delta_pct.high),
                                         exact(e.gate_linear_fraction),
                                         exact(e.gate_ppl),
                                         exact(e.gate_delta_pct.value),
                                         exact(e.gate_delta_pct.low),
                                         exact(e.gate_delta_pct.high),
                                         exact(r.label.gates[i].holdout_auc),
                                         exact(r.label.probes[i].embedding),
                                         exact(r.label.probes[i].context),
                                         exact(r.no_fly.layers[i].correlation)};
    for (std::size_t c = 0; c < cells.size(); ++c)
      out += (c ? "," : "") + cells[c];
    out += "\n";
  }
  return out;
}

std::string budget_gates_file(const BudgetReport<float>& r, std::size_t b) {
  io::SafetensorsWriter w;
  const auto& state = r.label.joint[b];
  const Index d = r.config.d_model;
  for (Index l = 0; l < r.config.n_layers; ++l) {
    const auto i = static_cast<std::size_t>(l);
    const auto& s = r.fit.surrogates[i];
    const auto& g = r.label.gates[i].gate;
    const std::string prefix = "layers." + std::to_string(l) + ".";
    w.add(prefix + "surrogate.weight", io::DType::F32, {d, d},
          std::span<const float>(s.weight().data(), static_cast<std::size_t>(d * d)));
    w.add(prefix + "surrogate.bias", io::DType::F32, {d},
          std::span<const float>(s.bias().data(), static_cast<std::size_t>(d)));
    w.add(prefix + "gate.weight", io::DType::F32, {d},
          std::span<const float>(g.folded_weight().data(), static_cast<std::size_t>(d)));
    const std::vector<float> bias{g.folded_bias()};
    const std::vector<float> threshold{static_cast<float>(state.thresholds[i])};
    w.add(prefix + "gate.bias", io::DType::F32, {1}, std::span<const float>(bias));
    w.add(prefix + "gate.threshold", io::DType::F32, {1}, std::span<const float>(threshold));
  }
  w.set_metadata("format", "nlb-gates");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", r.protocol.budgets_pct[b]);
  w.set_metadata("budget_pct", buf);
  const auto bytes = w.to_bytes();
  return std::string(bytes.begin(), bytes.end());
}

std::string budget_report_markdown(const BudgetReport<float>& r, const BudgetSources& src) {
  const auto& p = r.protocol;
  const Index layers = r.config.n_layers;
  std::ostringstream md;
  md << "# MLP budget report\n\n"
     << "Model `" << src.model << "` (" << to_string(r.config.architecture) << ", " << layers
     << " layers, d = " << r.config.d_model << ", h = " << r.config.d_hidden << ", vocab "
     << r.config.vocab_size << "), float32. What every number means: "
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
     << " windows: second corpus for the no-fly lists |\n\n"
     << "Windows of " << p.context << " tokens (" << src.token_format
     << "), non-overlapping; forward passes and timings on the " << src.device
     << (src.device == "cpu" ? "" : " device (fits and searches on the host, in float64)")
     << (src.ranks > 1 ? ", their windows spread over " + std::to_string(src.ranks) + " MPI ranks"
                       : std::string())
     << (src.ranks > 1 && p.gate_features == GateFeatures::split
             ? " (each rank collecting the gate features of its own label windows; the gates "
               "fitted over the ranks)"
             : std::string())
     << ". Intervals: paired bootstrap over eval windows, " << p.bootstrap_resamples
     << " resamples, seed " << p.seed << ", 95%.\n\n";
  md << "## Baseline and all-linear cost per layer\n\n"
     << "Baseline eval PPL **" << fmt("%.4f", r.eval.baseline_ppl) << "**. All layers linear at "
     << "once: PPL " << fmt("%.4f", r.eval.all_layers_linear_ppl) << ", "
     << fmt("%+.2f", r.eval.all_layers_linear_delta_pct.value) << "% ["
     << fmt("%+.2f", r.eval.all_layers_linear_delta_pct.low) << ", "
     << fmt("%+.2f", r.eval.all_layers_linear_delta_pct.high) << "].\n\n"
     << "| layer | surrogate R² | all-linear PPL | all-linear Δ% [95% CI] | gate % linear | "
        "gated-layer Δ% [95% CI] | gate AUC |\n|---|---|---|---|---|---|---|\n";
  double sum_single_linear = 0, sum_single_gate = 0;
  for (Index l = 0; l < layers; ++l) {
    const auto i = static_cast<std::size_t>(l);
    const auto& e = r.eval.layers[i];
    sum_single_linear += e.all_linear_delta_pct.value;
    sum_single_gate += e.gate_delta_pct.value;
    md << "| " << l << " | " << fmt("%.4f", r.fit.reports[i].r2) << " | "
       << fmt("%.4f", e.all_linear_ppl) << " | " << fmt("%+.2f", e.all_linear_delta_pct.value)
       << " [" << fmt("%+.2f", e.all_linear_delta_pct.low) << ", "
       << fmt("%+.2f", e.all_linear_delta_pct.high) << "] | "
       << fmt("%.1f", 100 * e.gate_linear_fraction) << " | " << fmt("%+.2f", e.gate_delta_pct.value)
       << " [" << fmt("%+.2f", e.gate_delta_pct.low) << ", " << fmt("%+.2f", e.gate_delta_pct.high)
       << "] | " << fmt("%.3f", r.label.gates[i].holdout_auc) << " |\n";
  }
  md << "\n![all-linear cost](all_linear_delta.svg)\n\n![% linear](linear_fraction.svg)\n\n";
  md << "## Probes: token identity vs context (PAPERS §A4)\n\n"
     << "Held-out AUC of the same gate on the embedding e, on the context part c = x − e and on "
        "x; no-fly lists (mean delta > "
     << p.no_fly_delta << " over ≥ " << p.no_fly_min_count
     << " occurrences) on the eval file vs the cross file.\n\n"
     << "| layer | AUC e | AUC c | AUC x | tokens in both | r(eval, cross) | no-fly eval | "
        "no-fly cross | on both |\n|---|---|---|---|---|---|---|---|---|\n";
  for (Index l = 0; l < layers; ++l) {
    const auto i = static_cast<std::size_t>(l);
    const auto& pr = r.label.probes[i];
    const auto& nf = r.no_fly.layers[i];
    md << "| " << l << " | " << fmt("%.3f", pr.embedding) << " | " << fmt("%.3f", pr.context)
       << " | " << fmt("%.3f", pr.full) << " | " << nf.common_tokens << " | "
       << fmt("%.3f", nf.correlation) << " | " << nf.no_fly_a.size() << " | " << nf.no_fly_b.size()
       << " | " << nf.overlap << " |\n";
  }
  const Index mid = middle_layer(r);
  md << "\n![delta distribution](delta_distribution.svg) (layer " << mid
     << ", label positions)\n\n";
  md << "## Joint gating, measured jointly (PAPERS §A7)\n\n"
     << "All gates on at once. "
     << (p.calibration_search == CalibrationSearch::allocation
             ? "Per-layer thresholds allocated on the calibration split (cost curve per layer, "
               "knapsack, corrected by joint measurement until the upper end of the 95% interval "
               "of the calibration Δ% is within the budget; step " +
                   fmt("%g", p.calibration_step) + ", " +
                   std::to_string(r.label.calibration.evaluations) + " joint calibration passes)"
             : "Per-layer thresholds calibrated on the label set (greedy, step " +
                   fmt("%g", p.calibration_step) + ", " +
                   std::to_string(r.label.calibration.evaluations) + " label passes)")
     << ". Label Δ%: the positions the gates were fitted on; calibration Δ%: the calibration "
        "split; eval Δ%: text the calibration never saw, with every gate on. FLOPs: PAPERS §A5. "
        "Time: median of "
     << p.timing_repetitions << " alternating repetitions over "
     << std::min(p.timing_windows, r.eval.windows)
     << " eval windows (prefill), and of decoding the first " << std::min(p.decode_steps, p.context)
     << " eval tokens one at a time through the KV cache (decode), this machine, this run.\n\n"
     << "| budget | label Δ% | calibration Δ% [95% CI] | eval Δ% [95% CI] | % MLP rows linear | "
        "FLOPs saved (MLPs) | FLOPs saved (forward) | prefill dense ms | prefill gated ms | "
        "prefill time saved | decode dense ms | decode gated ms | decode time saved |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (std::size_t b = 0; b < r.eval.joint.size(); ++b) {
    const auto& j = r.eval.joint[b];
    const auto& s = r.label.joint[b];
    const auto& t = r.forward_timing[b];
    const auto& dt = r.decode_timing[b];
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
  }
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
  // A short reading, computed from the numbers above.
  Index cheapest = 0, dearest = 0;
  for (Index l = 1; l < layers; ++l) {
    const auto& e = r.eval.layers;
    if (e[static_cast<std::size_t>(l)].all_linear_delta_pct.value <
        e[static_cast<std::size_t>(cheapest)].all_linear_delta_pct.value)
      cheapest = l;
    if (e[static_cast<std::size_t>(l)].all_linear_delta_pct.value >
        e[static_cast<std::size_t>(dearest)].all_linear_delta_pct.value)
      dearest = l;
  }
  double mean_e = 0, mean_c = 0;
  for (const auto& pr : r.label.probes) {
    mean_e += pr.embedding / static_cast<double>(layers);
    mean_c += pr.context / static_cast<double>(layers);
  }
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
  if (r.across) {
    const auto& a = *r.across;
    md << "\n## One budget across MLP and attention\n\n"
       << "Each budget spent on MLP gates and attention conversions together: every layer's "
          "conversions costed by the FLOPs this library runs (context "
       << p.context
       << "), the ones that save measured alone on the calibration split, one knapsack over "
          "gates and conversions, corrected by joint measurement until the upper end of the 95% "
          "interval of the calibration Δ% meets the budget; then the chosen state on the eval "
          "text and timed against the unmodified model.\n\n"
       << "| layer | own attention FLOPs/token | conversion | FLOPs/token | saving | offered | "
          "calibration Δ% alone |\n|---|---|---|---|---|---|---|\n";
    for (std::size_t l = 0; l < a.options.size(); ++l) {
      const auto& lo = a.options[l];
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
           << fmt("%.0f", opt.flops_per_token) << " | " << fmt("%+.0f", opt.saving_per_token)
           << " | " << (at == offered.end() ? "no (saves nothing)" : "yes") << " | "
           << fmt("%+.2f", cost) << " |\n";
      }
      for (const auto& why : lo.not_applicable)
        md << "| L" << l << " | | not applicable: " << why << " | | | | |\n";
    }
    md << "\n| budget | calibration Δ% [95% CI] | eval Δ% [95% CI] | % MLP rows linear | "
          "attention | FLOPs saved (MLPs) | FLOPs saved (attention) | FLOPs saved (forward) | "
          "attention share | prefill time saved | decode time saved |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& res : a.results) {
      std::string attention;
      for (std::size_t l = 0; l < res.attention.size(); ++l)
        if (!res.attention[l].empty())
          attention += (attention.empty() ? "" : ", ") + std::string("L") + std::to_string(l) +
                       " " + conversion_name(res.attention[l], res.attention_parameter[l]);
      md << "| " << fmt("%g", res.budget_pct) << "% | "
         << fmt("%+.2f", res.calibration_delta_pct.value) << " ["
         << fmt("%+.2f", res.calibration_delta_pct.low) << ", "
         << fmt("%+.2f", res.calibration_delta_pct.high) << "] | "
         << fmt("%+.2f", res.eval_delta_pct.value) << " [" << fmt("%+.2f", res.eval_delta_pct.low)
         << ", " << fmt("%+.2f", res.eval_delta_pct.high) << "] | "
         << fmt("%.1f", 100 * res.eval_linear_fraction) << " | "
         << (attention.empty() ? "unchanged" : attention) << " | "
         << fmt("%.1f", res.mlp_flops_saved_pct) << "% | "
         << fmt("%.1f", res.attention_flops_saved_pct) << "% | "
         << fmt("%.1f", res.forward_flops_saved_pct) << "% | "
         << fmt("%.0f", 100 * res.attention_share) << "% | " << fmt("%+.1f", res.prefill.saved_pct)
         << "% | "
         << (res.decode ? fmt("%+.1f", res.decode->saved_pct) + "%"
                        : std::string("n/a (linear attention has no KV cache)"))
         << " |\n";
    }
    md << "\n![across allocation](across_allocation.svg)\n";
  }
  md << "\nStage times (s):";
  for (const auto& [name, seconds] : r.timing)
    md << " " << name << " " << fmt("%.1f", seconds) << ";";
  md << "\n";
  return md.str();
}

void stage_budget_report(ReportFiles& files, const BudgetReport<float>& r,
                         const BudgetSources& sources) {
  namespace s = svg;
  const Index layers = r.config.n_layers;
  files.add("report.json", budget_report_json(r, sources));
  files.add("report.md", budget_report_markdown(r, sources));
  files.add("layers.csv", budget_layers_csv(r));
  std::vector<std::string> ticks;
  for (Index l = 0; l < layers; ++l)
    ticks.push_back("L" + std::to_string(l));
  {
    s::Chart c;
    c.title = "All-linear cost per layer (eval, 95% bootstrap CI)";
    c.x_label = "layer";
    c.y_label = "delta PPL %";
    c.x_tick_labels = ticks;
    c.y_reference = 0.0;
    s::Series lin{"one layer linear", {}, {}, {}, {}, false, true};
    s::Series gate{"one layer gated", {}, {}, {}, {}, false, true};
    for (Index l = 0; l < layers; ++l) {
      const auto& e = r.eval.layers[static_cast<std::size_t>(l)];
      lin.x.push_back(static_cast<double>(l) - 0.1);
      lin.y.push_back(e.all_linear_delta_pct.value);
      lin.y_low.push_back(e.all_linear_delta_pct.low);
      lin.y_high.push_back(e.all_linear_delta_pct.high);
      gate.x.push_back(static_cast<double>(l) + 0.1);
      gate.y.push_back(e.gate_delta_pct.value);
      gate.y_low.push_back(e.gate_delta_pct.low);
      gate.y_high.push_back(e.gate_delta_pct.high);
    }
    c.series = {lin, gate};
    files.add("all_linear_delta.svg", s::render(c));
  }
  {
    s::Chart c;
    c.title = "% of MLP rows routed linear per layer (eval)";
    c.x_label = "layer";
    c.y_label = "% linear";
    c.bars = true;
    c.x_tick_labels = ticks;
    s::Series single{"gate alone (threshold 0)", {}, {}, {}, {}, true, true};
    for (Index l = 0; l < layers; ++l) {
      single.x.push_back(static_cast<double>(l));
      single.y.push_back(100 * r.eval.layers[static_cast<std::size_t>(l)].gate_linear_fraction);
    }
    c.series.push_back(single);
    for (const auto& j : r.eval.joint) {
      char name[64];
      std::snprintf(name, sizeof name, "joint, budget %g%%", j.budget_pct);
      s::Series js{name, {}, {}, {}, {}, true, true};
      for (Index l = 0; l < layers; ++l) {
        js.x.push_back(static_cast<double>(l));
        js.y.push_back(100 * j.layer_linear_fraction[static_cast<std::size_t>(l)]);
      }
      c.series.push_back(js);
    }
    files.add("linear_fraction.svg", s::render(c));
  }
  {
    const auto mid = static_cast<std::size_t>(middle_layer(r));
    std::vector<double> d = r.label.delta[mid];
    std::vector<double> sorted = d;
    std::sort(sorted.begin(), sorted.end());
    const double lo = sorted_percentile(sorted, 0.01), hi = sorted_percentile(sorted, 0.99);
    char title[96];
    std::snprintf(title, sizeof title,
                  "delta = L_lin - L_full, layer %zu, label positions (1st-99th percentile)", mid);
    auto c = s::histogram(title, "delta (nats)", d, 60, lo, hi);
    c.y_reference.reset();
    files.add("delta_distribution.svg", s::render(c));
  }
  {
    s::Chart c;
    c.title = "Joint budget curve: all gates on at once";
    c.x_label = "% of MLP rows linear";
    c.y_label = "joint delta PPL %";
    c.y_reference = 0.0;
    std::vector<s::Series> series;
    if (r.protocol.calibration_search == CalibrationSearch::greedy) {
      s::Series path{"greedy path (label set)", {}, {}, {}, {}, true, true};
      for (const auto& st : r.label.calibration.path) {
        path.x.push_back(100 * st.label_linear_fraction);
        path.y.push_back(st.label_delta_pct);
      }
      series.push_back(path);
    } else {
      s::Series tried{"joint tries (calibration split)", {}, {}, {}, {}, false, true};
      for (const auto& a : r.label.allocations) {
        for (const auto& t : a.tries) {
          if (!t.measured)
            continue;
          tried.x.push_back(100 * t.calibration.linear_fraction);
          tried.y.push_back(t.calibration.delta_pct.value);
        }
      }
      series.push_back(tried);
    }
    s::Series cal{"chosen (calibration split, 95% CI)", {}, {}, {}, {}, false, true};
    for (const auto& st : r.label.joint) {
      if (!std::isfinite(st.calibration_linear_fraction))
        continue;
      cal.x.push_back(100 * st.calibration_linear_fraction);
      cal.y.push_back(st.calibration_delta_pct.value);
      cal.y_low.push_back(st.calibration_delta_pct.low);
      cal.y_high.push_back(st.calibration_delta_pct.high);
    }
    series.push_back(cal);
    s::Series ev{"chosen (eval set, 95% CI)", {}, {}, {}, {}, false, true};
    for (const auto& j : r.eval.joint) {
      ev.x.push_back(100 * j.linear_fraction);
      ev.y.push_back(j.delta_pct.value);
      ev.y_low.push_back(j.delta_pct.low);
      ev.y_high.push_back(j.delta_pct.high);
    }
    series.push_back(ev);
    c.series = series;
    files.add("joint_budget_curve.svg", s::render(c));
  }
  if (!r.label.cost_curves.delta_pct.empty()) {
    s::Chart c;
    c.title = "Per-layer cost curves on the calibration split (one layer gated)";
    c.x_label = "% of the layer's rows linear";
    c.y_label = "delta PPL %";
    c.y_reference = 0.0;
    const auto& cc = r.label.cost_curves;
    for (std::size_t l = 0; l < cc.delta_pct.size(); ++l) {
      s::Series sl{"L" + std::to_string(l), {}, {}, {}, {}, true, true};
      for (std::size_t k = 0; k < cc.delta_pct[l].size(); ++k) {
        sl.x.push_back(100 * cc.linear_fraction[l][k]);
        sl.y.push_back(cc.delta_pct[l][k]);
      }
      c.series.push_back(sl);
    }
    files.add("cost_curves.svg", s::render(c));
  }
  if (r.across) {
    // What the one budget chose per layer: FLOPs saved by the gate and by the attention
    // conversion, in % of the layer's own FLOPs (its attention and dense MLP).
    s::Chart c;
    c.title = "One budget across MLP and attention: FLOPs saved per layer";
    c.x_label = "layer";
    c.y_label = "% of the layer's FLOPs saved";
    c.bars = true;
    c.x_tick_labels = ticks;
    const auto& a = *r.across;
    const double mlp = flops::dense_mlp_per_token(static_cast<double>(r.config.d_model),
                                                  static_cast<double>(r.config.d_hidden));
    for (const auto& res : a.results) {
      char name[64];
      std::snprintf(name, sizeof name, "MLP gate, budget %g%%", res.budget_pct);
      s::Series gate{name, {}, {}, {}, {}, true, true};
      std::snprintf(name, sizeof name, "attention, budget %g%%", res.budget_pct);
      s::Series attn{name, {}, {}, {}, {}, true, true};
      for (std::size_t l = 0; l < res.attention.size(); ++l) {
        const double own = a.options[l].flops_per_token + mlp;
        const double gate_saved =
            res.gate_fractions[l] > 0
                ? flops::mlp_saving_per_token(static_cast<double>(r.config.d_model),
                                              static_cast<double>(r.config.d_hidden),
                                              res.eval_layer_linear_fraction[l])
                : 0.0;
        double attn_saved = 0;
        for (const auto& opt : a.options[l].options)
          if (opt.conversion == res.attention[l] && opt.parameter == res.attention_parameter[l])
            attn_saved = opt.saving_per_token;
        gate.x.push_back(static_cast<double>(l));
        gate.y.push_back(100 * gate_saved / own);
        attn.x.push_back(static_cast<double>(l));
        attn.y.push_back(100 * attn_saved / own);
      }
      c.series.push_back(gate);
      c.series.push_back(attn);
    }
    files.add("across_allocation.svg", s::render(c));
  }
  for (std::size_t b = 0; b < r.eval.joint.size(); ++b)
    files.add(budget_gates_file_name(r.protocol.budgets_pct[b]), budget_gates_file(r, b));
}

}  // namespace nlb::cli
