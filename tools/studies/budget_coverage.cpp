// budget_coverage: how often does a calibrated budget hold on held-out text? (docs/budget.md,
// "Does the budget hold?"). For S splits of the label file, the allocation and the greedy joint
// calibration (BudgetProtocol::calibration_search) each choose gates for every budget; each
// choice is then measured on the whole eval file. Prints one row per (split, search, budget) and
// the coverage: the share of splits whose eval Δ% is within the budget.
//
// Split s: the label file rotated left by s · ⌊tokens / S⌋ tokens, so the label windows (δ, gate
// fitting, the greedy search) and the calibration windows after them are different text in
// every split; the bootstrap seed is s. The surrogates come from the fit file once (the fit set
// is not what the study varies) and the eval file is the same for every split.
//
// Usage: budget_coverage --model DIR [--splits S] [--budget-pct P ...] [--fit-positions N]
//        [--label-positions N] [--calibration-positions N] [--eval-windows W] [--json FILE]
// Byte-level models only (the texts' bytes are the tokens); defaults: the shipped texts, S = 10,
// budgets 1 and 3, the nlb budget protocol.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "nlb/analysis/budget/pipeline.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Model = nlb::Transformer<float>;

struct Options {
  std::string model;
  int splits = 10;
  std::vector<double> budgets;
  long long fit_positions = -1, label_positions = -1, calibration_positions = -1, eval_windows = -1;
  std::string json_out;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "budget_coverage: %s\nusage: budget_coverage --model DIR [--splits S] "
               "[--budget-pct P ...] [--fit-positions N] [--label-positions N] "
               "[--calibration-positions N] [--eval-windows W] [--json FILE]\n",
               why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc)
      usage("option " + a + " needs a value");
    const std::string v = argv[++i];
    try {
      if (a == "--model")
        o.model = v;
      else if (a == "--splits")
        o.splits = std::stoi(v);
      else if (a == "--budget-pct")
        o.budgets.push_back(std::stod(v));
      else if (a == "--fit-positions")
        o.fit_positions = std::stoll(v);
      else if (a == "--label-positions")
        o.label_positions = std::stoll(v);
      else if (a == "--calibration-positions")
        o.calibration_positions = std::stoll(v);
      else if (a == "--eval-windows")
        o.eval_windows = std::stoll(v);
      else if (a == "--json")
        o.json_out = v;
      else
        usage("unknown option " + a);
    } catch (const std::logic_error&) {
      usage("option " + a + ": not a number: " + v);
    }
  }
  if (o.model.empty())
    usage("--model DIR is required");
  if (o.splits < 1)
    usage("--splits must be at least 1");
  return o;
}

std::vector<std::int32_t> rotated(const std::vector<std::int32_t>& t, std::size_t by) {
  std::vector<std::int32_t> out(t.begin() + static_cast<std::ptrdiff_t>(by), t.end());
  out.insert(out.end(), t.begin(), t.begin() + static_cast<std::ptrdiff_t>(by));
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
  const fs::path data = fs::path(NLB_SOURCE_DIR) / "data";
  const Model model = nlb::load_model<float>(opt.model);
  if (model.config().vocab_size > 256)
    usage("byte-level models only (vocabulary 256); this one has " +
          std::to_string(model.config().vocab_size));
  nlb::BudgetProtocol protocol;
  if (!opt.budgets.empty())
    protocol.budgets_pct = opt.budgets;
  if (opt.fit_positions > 0)
    protocol.fit_tokens = opt.fit_positions;
  if (opt.label_positions > 0)
    protocol.label_tokens = opt.label_positions,
    protocol.calibration_tokens = 3 * opt.label_positions;
  if (opt.calibration_positions > 0)
    protocol.calibration_tokens = opt.calibration_positions;
  protocol.context = std::min(protocol.context, model.config().n_positions);
  protocol.validate();
  const auto fit_tokens = nlb::io::read_text_tokens(data / "kjv-fit.txt");
  const auto label_file = nlb::io::read_text_tokens(data / "kjv-label.txt");
  const auto eval_tokens = nlb::io::read_text_tokens(data / "kjv-eval.txt");
  const nlb::Index ctx = protocol.context;
  nlb::Index eval_windows = static_cast<nlb::Index>(eval_tokens.size()) / ctx;
  if (opt.eval_windows > 0)
    eval_windows = std::min<nlb::Index>(eval_windows, opt.eval_windows);

  // Every pass on this process, on every core (the GEMM provider's threads).
  nlb::Context<nlb::backend::cpu> host(static_cast<int>(std::thread::hardware_concurrency()));
  nlb::ModelRunner<float> runner(host, model);
  const auto fit = nlb::fit_surrogates(runner, fit_tokens, protocol);
  const nlb::CalibrationSearch searches[] = {nlb::CalibrationSearch::allocation,
                                             nlb::CalibrationSearch::greedy};
  json rows = json::array();
  std::printf(
      "| split | search | budget | label Δ%% | calibration Δ%% [95%% CI] | eval Δ%% [95%% CI] "
      "| within | %% MLP rows linear (eval) |\n|---|---|---|---|---|---|---|---|\n");
  for (int s = 0; s < opt.splits; ++s) {
    const auto shift =
        static_cast<std::size_t>(s) * (label_file.size() / static_cast<std::size_t>(opt.splits));
    const auto label_tokens = rotated(label_file, shift);
    std::vector<nlb::ModelVariant<float>> variants;
    std::vector<std::pair<nlb::CalibrationSearch, nlb::JointState>> chosen;
    for (const auto search : searches) {
      auto p = protocol;
      p.seed = static_cast<std::uint64_t>(s);
      p.calibration_search = search;
      std::vector<std::pair<std::string, double>> times;
      const auto label = nlb::run_label_stage(runner, fit, label_tokens, p, {}, times);
      const auto gates = label.plain_gates();
      for (const auto& state : label.joint) {
        variants.push_back(nlb::joint_variant(model, fit.surrogates, gates, state));
        chosen.emplace_back(search, state);
      }
    }
    const auto r = runner.measure(eval_tokens, eval_windows, ctx, variants, true);
    std::vector<double> base_sums;
    for (nlb::Index w = 0; w < eval_windows; ++w)
      base_sums.push_back(r.window_sum(r.base, w));
    for (std::size_t v = 0; v < variants.size(); ++v) {
      const double budget = protocol.budgets_pct[v % protocol.budgets_pct.size()];
      const auto m = nlb::joint_measurement(r, v, base_sums, protocol.bootstrap_resamples,
                                            static_cast<std::uint64_t>(s));
      const auto& st = chosen[v].second;
      const bool within = m.delta_pct.value <= budget;
      std::printf(
          "| %d | %s | %g%% | %+.2f | %+.2f [%+.2f, %+.2f] | %+.2f [%+.2f, %+.2f] | %s | "
          "%.1f |\n",
          s, nlb::to_string(chosen[v].first), budget, st.label_delta_pct,
          st.calibration_delta_pct.value, st.calibration_delta_pct.low,
          st.calibration_delta_pct.high, m.delta_pct.value, m.delta_pct.low, m.delta_pct.high,
          within ? "yes" : "no", 100 * m.linear_fraction);
      std::fflush(stdout);
      rows.push_back({{"split", s},
                      {"search", nlb::to_string(chosen[v].first)},
                      {"budget_pct", budget},
                      {"label_delta_pct", st.label_delta_pct},
                      {"calibration_delta_pct", st.calibration_delta_pct.value},
                      {"calibration_delta_pct_ci",
                       {st.calibration_delta_pct.low, st.calibration_delta_pct.high}},
                      {"eval_delta_pct", m.delta_pct.value},
                      {"eval_delta_pct_ci", {m.delta_pct.low, m.delta_pct.high}},
                      {"eval_linear_fraction", m.linear_fraction},
                      {"within", within}});
    }
  }
  std::printf(
      "\n| search | budget | within (of %d splits) | eval Δ%% mean | max | %% MLP rows "
      "linear (eval) mean |\n|---|---|---|---|---|---|\n",
      opt.splits);
  json summary = json::array();
  for (const auto search : searches) {
    for (double budget : protocol.budgets_pct) {
      int within = 0, count = 0;
      double mean = 0, most = -1e300, linear = 0;
      for (const auto& row : rows) {
        if (row["search"] != nlb::to_string(search) || row["budget_pct"] != budget)
          continue;
        ++count;
        within += row["within"].get<bool>() ? 1 : 0;
        mean += row["eval_delta_pct"].get<double>();
        most = std::max(most, row["eval_delta_pct"].get<double>());
        linear += row["eval_linear_fraction"].get<double>();
      }
      mean /= count;
      linear /= count;
      std::printf("| %s | %g%% | %d | %+.2f | %+.2f | %.1f |\n", nlb::to_string(search), budget,
                  within, mean, most, 100 * linear);
      summary.push_back({{"search", nlb::to_string(search)},
                         {"budget_pct", budget},
                         {"splits", count},
                         {"within", within},
                         {"eval_delta_pct_mean", mean},
                         {"eval_delta_pct_max", most},
                         {"eval_linear_fraction_mean", linear}});
    }
  }
  if (!opt.json_out.empty()) {
    const json out{{"model", opt.model},
                   {"splits", opt.splits},
                   {"eval_windows", eval_windows},
                   {"rows", rows},
                   {"summary", summary}};
    const fs::path tmp = opt.json_out + ".tmp";
    std::ofstream(tmp) << out.dump(2) << "\n";
    fs::rename(tmp, opt.json_out);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "budget_coverage: %s\n", e.what());
  return 1;
}
