// The SVG plots of an `nlb budget` report (budget_report.hpp; svg_plot.hpp draws them).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "report/budget_report.hpp"
#include "svg_plot.hpp"

namespace nlb::cli::report {

namespace {

// "L0", "L1", …: one tick per layer.
std::vector<std::string> layer_ticks(const BudgetReport<float>& r) {
  std::vector<std::string> ticks;
  // Appended rather than `"L" + std::to_string(l)`: GCC 12 at -O3 reports a false -Wrestrict
  // overlap in the inlined string concatenation (its bug 105329), which -Werror makes fatal.
  for (Index l = 0; l < r.config.n_layers; ++l) {
    std::string tick = "L";
    tick += std::to_string(l);
    ticks.push_back(std::move(tick));
  }
  return ticks;
}

// A bar chart with one group of bars per layer, ticked "L0", "L1", ….
svg::Chart per_layer_bar_chart(const BudgetReport<float>& r, std::string title,
                               std::string y_label) {
  svg::Chart c;
  c.title = std::move(title);
  c.x_label = "layer";
  c.y_label = std::move(y_label);
  c.bars = true;
  c.x_tick_labels = layer_ticks(r);
  return c;
}

// A chart of perplexity deltas against `x_label`, with the no-change line (0) dashed.
svg::Chart delta_chart(std::string title, std::string x_label, std::string y_label) {
  svg::Chart c;
  c.title = std::move(title);
  c.x_label = std::move(x_label);
  c.y_label = std::move(y_label);
  c.y_reference = 0.0;
  return c;
}

// "WHAT, budget P%": the label of a series drawn for one budget.
std::string budget_label(const char* what, double budget_pct) {
  char label[64];
  std::snprintf(label, sizeof label, "%s, budget %g%%", what, budget_pct);
  return label;
}

// Appends the point (x, y.value) with y's interval as its error bar.
void add_point(svg::Series& s, double x, const Interval& y) {
  s.x.push_back(x);
  s.y.push_back(y.value);
  s.y_low.push_back(y.low);
  s.y_high.push_back(y.high);
}

// all_linear_delta.svg: each layer's eval Δ% linear and gated alone, with intervals.
std::string all_linear_delta_svg(const BudgetReport<float>& r) {
  svg::Chart c =
      delta_chart("All-linear cost per layer (eval, 95% bootstrap CI)", "layer", "delta PPL %");
  c.x_tick_labels = layer_ticks(r);
  svg::Series lin{"one layer linear", {}, {}, {}, {}, false, true};
  svg::Series gate{"one layer gated", {}, {}, {}, {}, false, true};
  for (Index l = 0; l < r.config.n_layers; ++l) {
    const auto& e = r.eval.layers[static_cast<std::size_t>(l)];
    add_point(lin, static_cast<double>(l) - 0.1, e.all_linear_delta_pct);
    add_point(gate, static_cast<double>(l) + 0.1, e.gate_delta_pct);
  }
  c.series = {lin, gate};
  return svg::render(c);
}

// linear_fraction.svg: the rows each layer routes linear, its gate alone and per budget.
std::string linear_fraction_svg(const BudgetReport<float>& r) {
  const Index layers = r.config.n_layers;
  svg::Chart c = per_layer_bar_chart(r, "% of MLP rows routed linear per layer (eval)", "% linear");
  svg::Series single{"gate alone (threshold 0)", {}, {}, {}, {}, true, true};
  for (Index l = 0; l < layers; ++l) {
    single.x.push_back(static_cast<double>(l));
    single.y.push_back(100 * r.eval.layers[static_cast<std::size_t>(l)].gate_linear_fraction);
  }
  c.series.push_back(single);
  for (const auto& j : r.eval.joint) {
    svg::Series js{budget_label("joint", j.budget_pct), {}, {}, {}, {}, true, true};
    for (Index l = 0; l < layers; ++l) {
      js.x.push_back(static_cast<double>(l));
      js.y.push_back(100 * j.layer_linear_fraction[static_cast<std::size_t>(l)]);
    }
    c.series.push_back(js);
  }
  return svg::render(c);
}

// delta_distribution.svg: δ on the label positions of the middle layer.
std::string delta_distribution_svg(const BudgetReport<float>& r) {
  const auto mid = static_cast<std::size_t>(r.config.n_layers / 2);
  std::vector<double> d = r.label.delta[mid];
  std::vector<double> sorted = d;
  std::sort(sorted.begin(), sorted.end());
  const double lo = sorted_percentile(sorted, 0.01), hi = sorted_percentile(sorted, 0.99);
  char title[96];
  std::snprintf(title, sizeof title,
                "delta = L_lin - L_full, layer %zu, label positions (1st-99th percentile)", mid);
  auto c = svg::histogram(title, "delta (nats)", d, 60, lo, hi);
  c.y_reference.reset();
  return svg::render(c);
}

// The joint states the calibration tried: the greedy path on the label set, or every measured
// try of the allocation search on the calibration split.
svg::Series calibration_tries_series(const BudgetReport<float>& r) {
  if (r.protocol.calibration_search == CalibrationSearch::greedy) {
    svg::Series path{"greedy path (label set)", {}, {}, {}, {}, true, true};
    for (const auto& st : r.label.calibration.path) {
      path.x.push_back(100 * st.label_linear_fraction);
      path.y.push_back(st.label_delta_pct);
    }
    return path;
  }
  svg::Series tried{"joint tries (calibration split)", {}, {}, {}, {}, false, true};
  for (const auto& a : r.label.allocations) {
    for (const auto& t : a.tries) {
      if (!t.measured)
        continue;
      tried.x.push_back(100 * t.calibration.linear_fraction);
      tried.y.push_back(t.calibration.delta_pct.value);
    }
  }
  return tried;
}

// joint_budget_curve.svg: Δ% against the rows made linear, all gates on at once.
std::string joint_budget_curve_svg(const BudgetReport<float>& r) {
  svg::Chart c = delta_chart("Joint budget curve: all gates on at once", "% of MLP rows linear",
                             "joint delta PPL %");
  c.series.push_back(calibration_tries_series(r));
  svg::Series cal{"chosen (calibration split, 95% CI)", {}, {}, {}, {}, false, true};
  for (const auto& st : r.label.joint) {
    if (!std::isfinite(st.calibration_linear_fraction))
      continue;
    add_point(cal, 100 * st.calibration_linear_fraction, st.calibration_delta_pct);
  }
  c.series.push_back(cal);
  svg::Series ev{"chosen (eval set, 95% CI)", {}, {}, {}, {}, false, true};
  for (const auto& j : r.eval.joint)
    add_point(ev, 100 * j.linear_fraction, j.delta_pct);
  c.series.push_back(ev);
  return svg::render(c);
}

// cost_curves.svg: each layer gated alone at every fraction, on the calibration split.
std::string cost_curves_svg(const BudgetReport<float>& r) {
  svg::Chart c = delta_chart("Per-layer cost curves on the calibration split (one layer gated)",
                             "% of the layer's rows linear", "delta PPL %");
  const auto& cc = r.label.cost_curves;
  for (std::size_t l = 0; l < cc.delta_pct.size(); ++l) {
    svg::Series sl{"L" + std::to_string(l), {}, {}, {}, {}, true, true};
    for (std::size_t k = 0; k < cc.delta_pct[l].size(); ++k) {
      sl.x.push_back(100 * cc.linear_fraction[l][k]);
      sl.y.push_back(cc.delta_pct[l][k]);
    }
    c.series.push_back(sl);
  }
  return svg::render(c);
}

// The FLOPs budget `res` saved in layer l by its gate and by its attention conversion, in % of
// the layer's own FLOPs (its attention and dense MLP).
std::pair<double, double> across_layer_saving(const BudgetReport<float>& r, const AcrossResult& res,
                                              std::size_t l) {
  const auto& a = *r.across;
  const auto d = static_cast<double>(r.config.d_model), h = static_cast<double>(r.config.d_hidden);
  const auto m = static_cast<double>(r.config.mlp_matrices());
  const double own = a.options[l].flops_per_token + flops::dense_mlp_per_token(d, h, m);
  const double gate_saved =
      res.gate_fractions[l] > 0
          ? flops::mlp_saving_per_token(d, h, res.eval_layer_linear_fraction[l], m)
          : 0.0;
  double attn_saved = 0;
  for (const auto& opt : a.options[l].options)
    if (opt.conversion == res.attention[l] && opt.parameter == res.attention_parameter[l])
      attn_saved = opt.saving_per_token;
  return {100 * gate_saved / own, 100 * attn_saved / own};
}

// across_allocation.svg: what the one budget chose per layer, in FLOPs saved.
std::string across_allocation_svg(const BudgetReport<float>& r) {
  svg::Chart c =
      per_layer_bar_chart(r, "One budget across MLP and attention: FLOPs saved per layer",
                          "% of the layer's FLOPs saved");
  for (const auto& res : r.across->results) {
    svg::Series gate{budget_label("MLP gate", res.budget_pct), {}, {}, {}, {}, true, true};
    svg::Series attn{budget_label("attention", res.budget_pct), {}, {}, {}, {}, true, true};
    for (std::size_t l = 0; l < res.attention.size(); ++l) {
      const auto [gate_pct, attn_pct] = across_layer_saving(r, res, l);
      gate.x.push_back(static_cast<double>(l));
      gate.y.push_back(gate_pct);
      attn.x.push_back(static_cast<double>(l));
      attn.y.push_back(attn_pct);
    }
    c.series.push_back(gate);
    c.series.push_back(attn);
  }
  return svg::render(c);
}

}  // namespace

void stage_budget_plots(ReportFiles& files, const BudgetReport<float>& r) {
  files.add("all_linear_delta.svg", all_linear_delta_svg(r));
  files.add("linear_fraction.svg", linear_fraction_svg(r));
  files.add("delta_distribution.svg", delta_distribution_svg(r));
  files.add("joint_budget_curve.svg", joint_budget_curve_svg(r));
  if (!r.label.cost_curves.delta_pct.empty())
    files.add("cost_curves.svg", cost_curves_svg(r));
  if (r.across)
    files.add("across_allocation.svg", across_allocation_svg(r));
}

}  // namespace nlb::cli::report
