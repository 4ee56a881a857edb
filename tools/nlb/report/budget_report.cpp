// The files of an `nlb budget` report staged together (budget_report.hpp): the JSON, the
// markdown, the CSV, the plots and one gates file per budget.
#include "report/budget_report.hpp"

namespace nlb::cli {

void stage_budget_report(ReportFiles& files, const BudgetReport<float>& r,
                         const BudgetSources& sources) {
  files.add("report.json", budget_report_json(r, sources));
  files.add("report.md", budget_report_markdown(r, sources));
  files.add("layers.csv", budget_layers_csv(r));
  report::stage_budget_plots(files, r);
  for (std::size_t b = 0; b < r.eval.joint.size(); ++b)
    files.add(budget_gates_file_name(r.protocol.budgets_pct[b]), budget_gates_file(r, b));
}

}  // namespace nlb::cli
