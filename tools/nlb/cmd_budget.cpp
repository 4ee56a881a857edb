// nlb budget: the MLP budget report of PAPERS §A (issue 4) — surrogates, per-layer cost, gates,
// probes, joint gating with measured savings. Pipeline: include/nlb/analysis/budget.hpp;
// report files: budget_report.cpp; guide: docs/budget.md.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>

#include "budget_report.hpp"
#include "common.hpp"
#include "nlb/analysis/budget.hpp"
#include "nlb/model/load_model.hpp"
#include "report_files.hpp"

namespace nlb::cli {

namespace {

// The budgets: every --budget-pct value, each a finite number > 0, none repeated.
std::vector<double> parse_budgets(const Args& args) {
  const auto texts = args.all("budget-pct");
  if (texts.empty())
    return {1.0, 3.0};
  std::vector<double> out;
  for (const auto& text : texts) {
    double v = 0;
    try {
      std::size_t used = 0;
      v = std::stod(text, &used);
      if (used != text.size())
        throw std::invalid_argument(text);
    } catch (const std::exception&) {
      throw UsageError("option --budget-pct: expected a number > 0, found \"" + text + "\"");
    }
    if (!(v > 0.0) || !std::isfinite(v))
      throw UsageError("option --budget-pct: expected a number > 0, found \"" + text + "\"");
    for (double seen : out)
      if (seen == v)
        throw UsageError("option --budget-pct: the budget " + text + " is given twice");
    out.push_back(v);
  }
  return out;
}

// The tokens of one input file: its bytes (text), or token ids with --tokens.
std::vector<std::int32_t> read_set(const Args& args, const std::string& option,
                                   const std::string& fallback, const ModelConfig& config,
                                   std::string& path_out) {
  path_out = args.get(option, fallback);
  if (args.flag("tokens")) {
    const std::string dtype = args.get("token-dtype", "u16");
    if (dtype != "u16" && dtype != "u32")
      throw UsageError("--token-dtype: expected u16 or u32, found \"" + dtype + "\"");
    return io::read_token_file(path_out, dtype == "u16" ? io::TokenDType::U16 : io::TokenDType::U32,
                               config.vocab_size);
  }
  if (config.vocab_size > 256) {
    throw UsageError("--" + option +
                     " reads a file's bytes as tokens, but this model's vocabulary "
                     "has " +
                     std::to_string(config.vocab_size) +
                     " entries: pass token-id files (uint16) and --tokens (docs/budget.md)");
  }
  return io::read_text_tokens(path_out);
}

// Stage lines on stderr (always, with times) and a \r counter on a terminal.
BudgetObserver stderr_observer() {
  BudgetObserver obs;
  const bool tty = isatty(2) != 0;
  obs.begin = [](const std::string& stage) {
    std::fprintf(stderr, "nlb budget: %s ...\n", stage.c_str());
    std::fflush(stderr);
  };
  if (tty) {
    obs.counter = [](long long done, long long total) {
      std::fprintf(stderr, "\r  %lld/%lld", done, total);
      std::fflush(stderr);
    };
  }
  obs.end = [tty](const std::string& stage, double seconds) {
    std::fprintf(stderr, "%snlb budget: %s done in %.1f s\n", tty ? "\r\033[K" : "", stage.c_str(),
                 seconds);
    std::fflush(stderr);
  };
  return obs;
}

}  // namespace

int run_budget(const std::vector<std::string>& argv) {
  const Args args(
      argv,
      {"model", "fit-text", "label-text", "eval-text", "cross-text", "context", "fit-tokens",
       "label-tokens", "lambda", "budget-pct", "seed", "out", "token-dtype"},
      {"json", "tokens"});
  const auto t0 = std::chrono::steady_clock::now();
  BudgetProtocol protocol;
  protocol.budgets_pct = parse_budgets(args);
  protocol.fit_tokens = args.integer("fit-tokens", protocol.fit_tokens, 2, 1LL << 40);
  protocol.label_tokens = args.integer("label-tokens", protocol.label_tokens, 10, 1LL << 40);
  protocol.lambda = args.real("lambda", protocol.lambda, 1e-300, 1e300);
  protocol.seed = static_cast<std::uint64_t>(args.integer("seed", 0, 0, (1LL << 62)));
  const std::string out_dir = args.get("out", "budget-report");
  const std::string model_dir = args.get("model", default_model().string());
  const std::string data = (source_dir() / "data").string();

  const auto model = load_model<float>(model_dir);  // read only: run_budget takes a const model
  const auto& config = model.config();
  protocol.context =
      args.integer("context", std::min<long long>(128, config.n_positions), 2, config.n_positions);
  BudgetSources sources;
  sources.model = model_dir;
  sources.token_format =
      args.flag("tokens") ? "token ids (" + args.get("token-dtype", "u16") + ")" : "bytes";
  const auto fit = read_set(args, "fit-text", data + "/kjv-fit.txt", config, sources.fit);
  const auto label = read_set(args, "label-text", data + "/kjv-label.txt", config, sources.label);
  const auto eval = read_set(args, "eval-text", data + "/kjv-eval.txt", config, sources.eval);
  const auto cross = read_set(args, "cross-text", data + "/jargon-eval.txt", config, sources.cross);

  const auto report = run_budget(model, fit, label, eval, cross, protocol, stderr_observer(),
                                 {"--fit-text " + sources.fit, "--label-text " + sources.label,
                                  "--eval-text " + sources.eval, "--cross-text " + sources.cross});
  ReportFiles files(out_dir);
  stage_budget_report(files, report, sources);
  files.write();  // everything computed: only now does the report directory appear
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (args.flag("json")) {
    std::fputs(budget_report_json(report, sources).c_str(), stdout);
  } else {
    std::printf("baseline eval PPL %.4f; all layers linear %+.2f%%\n", report.eval.baseline_ppl,
                report.eval.all_layers_linear_delta_pct.value);
    for (std::size_t b = 0; b < report.eval.joint.size(); ++b) {
      const auto& j = report.eval.joint[b];
      std::printf(
          "budget %g%%: joint eval %+.2f%%, %.1f%% of MLP rows linear, FLOPs saved %.1f%% "
          "(forward), time saved %+.1f%%\n",
          j.budget_pct, j.delta_pct.value, 100 * j.linear_fraction, j.flops.forward_pct,
          report.forward_timing[b].saved_pct);
    }
    std::printf("report written to %s/ (report.md, report.json, layers.csv, *.svg) in %.1f s\n",
                out_dir.c_str(), total);
  }
  return 0;
}

}  // namespace nlb::cli
