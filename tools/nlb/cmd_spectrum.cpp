// nlb spectrum: the routing/filtering spectrum of every attention head (PAPERS §B1), the
// spectral cascade table and plot, and with --text (or --tokens) the perplexity table of the
// attention conversions (PAPERS §B1, §B3), measured through the session's runner. Math:
// include/nlb/analysis/attention/spectrum.hpp, conversions.hpp; report files:
// report/spectrum_report.cpp; guide: docs/attention_spectrum.md.
#include <cstdio>
#include <string>
#include <vector>

#include "common.hpp"
#include "nlb/model/load_model.hpp"
#include "ranks.hpp"
#include "report/spectrum_report.hpp"
#include "session.hpp"

namespace nlb::cli {

namespace {

// --qk-bias: which score matrix a standard head contributes (docs/attention_spectrum.md §1). The
// values are the JSON's "qk_bias" spelling too.
BiasTreatment parse_qk_bias(const Args& args) {
  // exclude: the paper's M = W_Q W_Kᵀ (PAPERS §B1), the default.
  return args.choice("qk-bias", "exclude", {"exclude", "homogeneous"}) == "exclude"
             ? BiasTreatment::exclude
             : BiasTreatment::homogeneous;
}

// The options that need a text, refused without one; under MPI a text is needed at all.
void check_spectrum_text(const Args& args, bool with_text) {
  if (ranks().size() > 1 && !with_text) {
    throw UsageError(
        "without --text or --tokens there is nothing to spread over the ranks: run it as one "
        "process (under an MPI launcher spectrum spreads its conversions' windows)");
  }
  if (!with_text && (args.has("context") || args.has("max-windows") || args.has("token-dtype"))) {
    throw UsageError(
        "--context, --max-windows and --token-dtype need --text FILE or --tokens FILE");
  }
}

// The conversions' perplexities on the text's windows; under mpirun every evaluation's windows
// are spread over the ranks (docs/scaling.md).
ConversionReport measure_conversions(const Transformer<float>& model,
                                     std::span<const std::int32_t> tokens, Index context,
                                     Index max_windows) {
  const auto session = make_session(model, false);
  AnalysisRunner runner(session->runner());
  const Progress progress("spectrum conversions", ranks().leader());
  return measure_attention_conversions(runner.get(), tokens, context, max_windows, progress);
}

// The cascade on stdout, then the conversions.
void print_spectrum_summary(const SpectrumReport& s, const std::string& out_dir) {
  std::printf("spectral cascade (%s, %lld layers x %lld heads, M = %s)\n",
              to_string(s.config.architecture), static_cast<long long>(s.config.n_layers),
              static_cast<long long>(s.config.n_heads), s.score_matrix());
  std::printf("%5s %10s %16s %12s\n", "layer", "skew share", "effective rank", "rank 90%");
  for (const auto& r : s.cascade) {
    std::printf("%5lld %10.3f %16.2f %12.1f\n", static_cast<long long>(r.layer),
                r.skew_energy_fraction.mean, r.effective_rank.mean, r.rank_90.mean);
  }
  if (s.conversions) {
    std::printf("baseline PPL %.4f\n", s.conversions->baseline.ppl);
    for (const auto& r : s.conversions->rows) {
      std::printf("%-20s %4lld  PPL %10.4f  delta %+8.2f%%\n", r.conversion.c_str(),
                  static_cast<long long>(r.parameter), r.ppl, r.delta_percent);
    }
    for (const auto& n : s.conversions->not_applicable)
      std::printf("not applicable: %s\n", n.c_str());
  }
  std::printf("report written to %s\n", out_dir.c_str());
}

}  // namespace

int run_spectrum(const std::vector<std::string>& argv) {
  auto options = token_options;
  options.insert({"model", "context", "max-windows", "out", "qk-bias"});
  const Args args(argv, options, {"json"});
  SpectrumReport s;
  s.model = args.get("model", default_model().string());
  const std::string out_dir = args.get("out", spectrum_default_out);
  if (out_dir.empty())
    throw UsageError("option --out: expected a directory name, found an empty one");
  const bool with_text = args.has("text") || args.has("tokens");
  check_spectrum_text(args, with_text);
  const Index max_windows =
      args.integer("max-windows", spectrum_default_windows, 0, 1LL << 40);  // 0: all
  s.bias = parse_qk_bias(args);
  const auto model = load_model<float>(s.model);
  s.config = model.config();
  const Index context = args.integer("context", s.config.n_positions, 2, s.config.n_positions);
  std::vector<std::int32_t> tokens;
  if (with_text)
    tokens = read_token_stream(args, s.config, s.model);
  // The head spectra are cheap: every rank computes them.
  s.heads = model_attention_spectrum(model, SpectrumOptions{.bias = s.bias});
  s.cascade = spectral_cascade(s.heads);
  if (with_text) {
    s.conversions = measure_conversions(model, tokens, context, max_windows);
    s.text = args.has("text") ? args.get("text") : args.get("tokens");
    s.ranks = ranks().size();
  }
  if (!ranks().leader())
    return 0;  // only rank 0 writes and prints
  ReportFiles files(out_dir);
  stage_spectrum_report(files, s);
  files.write();
  if (args.flag("json"))
    std::printf("%s\n", spectrum_report_json(s).dump().c_str());
  else
    print_spectrum_summary(s, out_dir);
  return 0;
}

}  // namespace nlb::cli
