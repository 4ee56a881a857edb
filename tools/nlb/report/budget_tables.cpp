// The table files of an `nlb budget` report (budget_report.hpp): layers.csv and the gates of
// each budget as a safetensors file (format "nlb-gates", read by nlb linearize --gates).
#include <cstdio>

#include "nlb/io/safetensors_writer.hpp"
#include "report/budget_report.hpp"
#include "report/format.hpp"

namespace nlb::cli {

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

std::string budget_layers_csv(const BudgetReport<float>& r) {
  using report::exact;
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

std::string budget_gates_file_name(double budget_pct) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "gates-%gpct.safetensors", budget_pct);
  return buf;
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

}  // namespace nlb::cli
