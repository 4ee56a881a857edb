// nlb budget: the MLP budget report of PAPERS §A (issue 4) — surrogates, per-layer cost, gates,
// probes, joint gating with measured savings. Pipeline: include/nlb/analysis/budget/pipeline.hpp;
// report files: report/; guide: docs/budget.md.
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>

#include "common.hpp"
#include "nlb/analysis/budget/pipeline.hpp"
#include "nlb/model/load_model.hpp"
#include "ranks.hpp"
#include "report/budget_report.hpp"
#include "report_files.hpp"
#include "session.hpp"

namespace nlb::cli {

namespace {

// The budgets: every --budget-pct value, each a finite number > 0, none repeated; without one,
// the protocol's defaults.
std::vector<double> parse_budgets(const Args& args, const std::vector<double>& defaults) {
  const auto texts = args.all("budget-pct");
  if (texts.empty())
    return defaults;
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

// The four inputs, each a text (--fit-text, default the shipped one) or a token-id file
// (--fit-tokens-file). All four are of one kind: the report states one token format, and there
// are no default token-id files to fill in for a missing one.
const std::vector<TokenInput>& budget_inputs() {
  static const std::vector<TokenInput> inputs{{"fit-text", "fit-tokens-file"},
                                              {"label-text", "label-tokens-file"},
                                              {"eval-text", "eval-tokens-file"},
                                              {"cross-text", "cross-tokens-file"}};
  return inputs;
}

// Checks how the inputs are given (before the model is loaded: a usage error should not wait
// for it) and returns the token-id width.
io::TokenDType check_budget_inputs(const Args& args) {
  const auto& inputs = budget_inputs();
  const TokenInput* with_ids = nullptr;
  for (const auto& input : inputs) {
    has_token_input(args, input);  // both options of one input: a usage error
    if (!with_ids && args.has(input.ids_option))
      with_ids = &input;
  }
  if (with_ids) {
    for (const auto& input : inputs) {
      if (!args.has(input.ids_option)) {
        throw UsageError("--" + with_ids->ids_option + " is a token-id file, so every input must " +
                         "be one: pass --" + input.ids_option + " FILE too" +
                         (args.has(input.text_option) ? " instead of --" + input.text_option : ""));
      }
    }
  }
  return token_dtype(args, inputs);
}

std::vector<TokenStream> read_budget_inputs(const Args& args, const ModelConfig& config,
                                            const std::filesystem::path& model_dir,
                                            io::TokenDType dtype) {
  const std::vector<std::string> default_texts{"kjv-fit.txt", "kjv-label.txt", "kjv-eval.txt",
                                               "jargon-eval.txt"};
  std::vector<TokenStream> out;
  for (std::size_t i = 0; i < budget_inputs().size(); ++i) {
    out.push_back(read_token_input(args, config, model_dir, budget_inputs()[i], dtype,
                                   source_dir() / "data" / default_texts[i]));
  }
  return out;
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

// The options of nlb budget; renamed ones fail with their new spelling.
Args budget_args(const std::vector<std::string>& argv) {
  return Args(argv,
              {"model",
               "fit-text",
               "label-text",
               "eval-text",
               "cross-text",
               "fit-tokens-file",
               "label-tokens-file",
               "eval-tokens-file",
               "cross-tokens-file",
               "token-dtype",
               "context",
               "fit-positions",
               "label-positions",
               "calibration-positions",
               "calibration",
               "lambda",
               "budget-pct",
               "seed",
               "decode-steps",
               "out",
               "device",
               "weights",
               "gate-features"},
              {"json", "attention"},
              {{"tokens",
                "--fit-tokens-file FILE, --label-tokens-file FILE, --eval-tokens-file FILE and "
                "--cross-tokens-file FILE",
                "one token-id file per input, instead of a flag that made the --*-text files "
                "token ids"},
               {"fit-tokens", "--fit-positions N",
                "the number of fit positions; --fit-tokens-file FILE is a fit token-id file"},
               {"label-tokens", "--label-positions N",
                "the number of label positions; --label-tokens-file FILE is a label token-id "
                "file"}});
}

// The protocol the options set (all but the context, which needs the model); BudgetProtocol{}'s
// defaults are the documented ones (nlb help budget).
BudgetProtocol budget_protocol(const Args& args) {
  BudgetProtocol protocol;
  protocol.budgets_pct = parse_budgets(args, protocol.budgets_pct);
  protocol.fit_tokens = args.integer("fit-positions", protocol.fit_tokens, 2, 1LL << 40);
  protocol.label_tokens = args.integer("label-positions", protocol.label_tokens, 10, 1LL << 40);
  // The calibration split is three times the label set unless given (docs/budget.md).
  protocol.calibration_tokens =
      args.integer("calibration-positions", 3 * protocol.label_tokens, 10, 1LL << 40);
  protocol.calibration_search = args.choice("calibration", to_string(protocol.calibration_search),
                                            {"allocation", "greedy"}) == "allocation"
                                    ? CalibrationSearch::allocation
                                    : CalibrationSearch::greedy;
  protocol.gate_features = args.choice("gate-features", to_string(protocol.gate_features),
                                       {"replicated", "split"}) == "replicated"
                               ? GateFeatures::replicated
                               : GateFeatures::split;
  protocol.across_attention = args.flag("attention");
  if (protocol.across_attention && protocol.calibration_search != CalibrationSearch::allocation)
    throw UsageError("option --attention: needs --calibration allocation (per-layer cost curves)");
  protocol.lambda = args.real("lambda", protocol.lambda, 1e-300, 1e300);
  protocol.seed = static_cast<std::uint64_t>(
      args.integer("seed", static_cast<long long>(protocol.seed), 0, (1LL << 62)));
  protocol.decode_steps = args.integer("decode-steps", protocol.decode_steps, 1, 1LL << 20);
  return protocol;
}

// Where the report's inputs came from and where its passes ran.
BudgetSources budget_sources(const std::string& model_dir, const std::vector<TokenStream>& inputs,
                             io::TokenDType dtype, const std::string& device,
                             const std::string& weights) {
  BudgetSources sources;
  sources.model = model_dir;
  sources.fit = inputs[0].path;
  sources.label = inputs[1].path;
  sources.eval = inputs[2].path;
  sources.cross = inputs[3].path;
  const auto files = text::find_tokenizer_files(model_dir);
  sources.token_format = inputs[0].ids ? "token ids (" + std::string(io::to_string(dtype)) + ")"
                         : files == text::TokenizerFiles::tokenizer_json
                             ? "text, by the model's tokenizer.json"
                         : files == text::TokenizerFiles::vocab_and_merges
                             ? "text, by the model's vocab.json and merges.txt"
                             : "bytes";
  sources.device = device;
  sources.weights = weights;
  sources.ranks = ranks().size();
  return sources;
}

// The summary lines on stdout.
void print_budget_summary(const BudgetReport<float>& report, const std::string& out_dir,
                          double seconds) {
  std::printf("baseline eval PPL %.4f; all layers linear %+.2f%%\n", report.eval.baseline_ppl,
              report.eval.all_layers_linear_delta_pct.value);
  for (std::size_t b = 0; b < report.eval.joint.size(); ++b) {
    const auto& j = report.eval.joint[b];
    std::printf(
        "budget %g%%: joint eval %+.2f%%, %.1f%% of MLP rows linear, FLOPs saved %.1f%% "
        "(forward), time saved %+.1f%% (prefill), %+.1f%% (decode)\n",
        j.budget_pct, j.delta_pct.value, 100 * j.linear_fraction, j.flops.forward_pct,
        report.forward_timing[b].saved_pct, report.decode_timing[b].saved_pct);
  }
  if (report.across) {
    for (const auto& res : report.across->results) {
      std::printf(
          "budget %g%% across MLP and attention: eval %+.2f%%, FLOPs saved %.1f%% (forward; "
          "%.0f%% of it in attention), time saved %+.1f%% (prefill)\n",
          res.budget_pct, res.eval_delta_pct.value, res.forward_flops_saved_pct,
          100 * res.attention_share, res.prefill.saved_pct);
    }
  }
  std::printf("report written to %s/ (report.md, report.json, layers.csv, *.svg) in %.1f s\n",
              out_dir.c_str(), seconds);
}

// The protocol's default position counts (PAPERS §A1, §A3: 10,000 fit rows, 25,000 label
// positions, 3 × that for calibration) need texts of about 100,000 tokens at the default context;
// a model whose tokenizer packs the shipped texts into fewer tokens (BPE: ~30,000) would fail.
// When none of the three counts is given, lower them to what the fit and label texts hold, keeping
// the label/calibration ratio, and return the sentence the report prints; empty when unchanged.
std::string scale_default_positions(const Args& args, BudgetProtocol& p,
                                    const std::vector<TokenStream>& inputs) {
  if (args.has("fit-positions") || args.has("label-positions") || args.has("calibration-positions"))
    return {};
  const Index c = p.context;
  const auto windows_in = [c](const TokenStream& s) {
    return static_cast<Index>(s.tokens.size()) / c;
  };
  const Index fit_windows = windows_in(inputs[0]), label_windows = windows_in(inputs[1]);
  const bool fit_short = p.fit_windows() > fit_windows;
  const bool label_short = p.label_windows() + p.calibration_windows() > label_windows;
  if (!fit_short && !label_short)
    return {};
  const Index old_fit = p.fit_tokens, old_label = p.label_tokens, old_cal = p.calibration_tokens;
  if (fit_short)
    p.fit_tokens = std::max<Index>(2, fit_windows * c);
  if (label_short) {
    // One label window for every three calibration windows, as 25,000 : 75,000.
    const Index per_quarter = label_windows / 4;
    p.label_tokens = std::max<Index>(10, per_quarter * (c - 1));
    p.calibration_tokens = std::max<Index>(10, (label_windows - per_quarter) * (c - 1));
  }
  return "The texts hold fewer tokens than the default position counts need (" +
         std::to_string(inputs[0].tokens.size()) + " fit and " +
         std::to_string(inputs[1].tokens.size()) + " label-file tokens in windows of " +
         std::to_string(c) +
         "), so they were scaled to the texts: " + std::to_string(p.fit_tokens) +
         " fit positions (default " + std::to_string(old_fit) + "), " +
         std::to_string(p.label_tokens) + " label positions (default " + std::to_string(old_label) +
         ") and " + std::to_string(p.calibration_tokens) + " calibration positions (default " +
         std::to_string(old_cal) +
         "). Give --fit-positions, --label-positions or --calibration-positions to choose them.";
}

}  // namespace

int run_budget(const std::vector<std::string>& argv) {
  const Args args = budget_args(argv);
  const auto t0 = std::chrono::steady_clock::now();
  BudgetProtocol protocol = budget_protocol(args);
  const std::string out_dir = args.get("out", budget_default_out);
  const std::string model_dir = args.get("model", default_model().string());
  const io::TokenDType dtype = check_budget_inputs(args);
  const auto model = load_model<float>(model_dir);  // read only: every variant is an override
  protocol.context = args.integer("context", std::min(protocol.context, model.config().n_positions),
                                  2, model.config().n_positions);
  const auto inputs = read_budget_inputs(args, model.config(), model_dir, dtype);
  const std::string scaled = scale_default_positions(args, protocol, inputs);
  if (!scaled.empty() && ranks().leader())
    std::fprintf(stderr, "nlb budget: %s\n", scaled.c_str());
  std::array<std::string, 4> names;  // "--fit-text FILE": how errors about a set name it
  for (std::size_t i = 0; i < names.size(); ++i)
    names[i] = inputs[i].option + " " + inputs[i].path;
  const std::string weights = weights_option(args);
  const auto session = make_session(model, cuda_device_option(args), weights);
  BudgetSources sources =
      budget_sources(model_dir, inputs, dtype, session->runner().name(), weights);
  sources.scaled_defaults = scaled;
  // Under MPI every rank runs the pipeline; the forward passes' windows are spread over the
  // ranks and their losses gathered, so every rank holds the whole report (docs/scaling.md).
  AnalysisRunner runner(session->runner());
  const auto report = nlb::run_budget(
      runner.get(), inputs[0].tokens, inputs[1].tokens, inputs[2].tokens, inputs[3].tokens,
      protocol, ranks().leader() ? stderr_observer() : BudgetObserver{}, names);
  if (!ranks().leader())
    return 0;  // only rank 0 writes
  ReportFiles files(out_dir);
  stage_budget_report(files, report, sources);
  files.write();  // everything computed: only now does the report directory appear
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (args.flag("json"))
    std::fputs(budget_report_json(report, sources).c_str(), stdout);
  else
    print_budget_summary(report, out_dir, total);
  return 0;
}

}  // namespace nlb::cli
