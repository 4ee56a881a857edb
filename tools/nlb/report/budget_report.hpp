// The files of an `nlb budget` report (report.md, report.json, layers.csv, SVG plots, gate
// files), made from a BudgetReport; docs/budget.md explains every number, and
// docs/budget-report.schema.json is the JSON's schema. One file per kind: budget_json.cpp,
// budget_markdown.cpp (+ budget_markdown_joint.cpp), budget_tables.cpp (CSV and gate files),
// budget_plots.cpp (SVG), budget_report.cpp (the directory's files staged together).
#pragma once

#include <string>
#include <vector>

#include "nlb/analysis/budget/pipeline.hpp"
#include "report_files.hpp"

namespace nlb::cli {

/// Where a report's inputs came from (for the protocol section).
struct BudgetSources {
  std::string model, fit, label, eval, cross;
  std::string token_format;    // "bytes" or "u16"/"u32" token ids
  std::string device = "cpu";  // where the forward passes and timings ran: "cpu" or "cuda"
  // How the passes' model kept its weight matrices (--weights): "f32", "f16", "bf16" or "q8".
  std::string weights = "f32";
  int ranks = 1;  // processes the forward passes were spread over (MPI ranks)
  // Set when nlb budget lowered its default position counts to what the texts hold (the
  // sentence the report prints); empty when the defaults or the user's counts were used.
  std::string scaled_defaults;
};

/// The columns of layers.csv, in order.
const std::vector<std::string>& budget_csv_columns();

/// report.json (pretty-printed, keys sorted; NaN written as null). Every field whose name
/// starts with "time" is a wall-clock measurement; all others are deterministic.
std::string budget_report_json(const BudgetReport<float>& report, const BudgetSources& sources);
/// report.md: tables and a short reading of the results.
std::string budget_report_markdown(const BudgetReport<float>& report, const BudgetSources& sources);
/// layers.csv: one row per layer, budget_csv_columns().
std::string budget_layers_csv(const BudgetReport<float>& report);
/// The gates of budget index b as a safetensors file (format "nlb-gates", docs/budget.md).
std::string budget_gates_file(const BudgetReport<float>& report, std::size_t b);
/// "gates-<P>pct.safetensors" for budget P.
std::string budget_gates_file_name(double budget_pct);

/// Stages every report file into `files`.
void stage_budget_report(ReportFiles& files, const BudgetReport<float>& report,
                         const BudgetSources& sources);

namespace report {

/// The parts of report.md and the SVG plots, one concern each (budget_markdown*.cpp,
/// budget_plots.cpp).
std::string budget_md_joint(const BudgetReport<float>& r);
std::string budget_md_reading(const BudgetReport<float>& r);
std::string budget_md_across(const BudgetReport<float>& r);
void stage_budget_plots(ReportFiles& files, const BudgetReport<float>& r);

}  // namespace report

}  // namespace nlb::cli
