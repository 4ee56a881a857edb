// nlb spectrum: the routing/filtering spectrum of every attention head (PAPERS §B1), the
// spectral cascade table and plot, and with --text (or --tokens) the perplexity table of the
// attention conversions (PAPERS §B1, §B3). Math: include/nlb/analysis/attention_spectrum.hpp,
// attention_conversions.hpp; guide: docs/attention_spectrum.md.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common.hpp"
#include "nlb/analysis/attention_conversions.hpp"
#include "nlb/analysis/attention_spectrum.hpp"
#include "nlb/distributed/sharded_perplexity.hpp"
#include "nlb/model/load_model.hpp"
#include "ranks.hpp"
#include "report_files.hpp"
#include "svg_plot.hpp"

namespace nlb::cli {

namespace {

constexpr const char* default_out = spectrum_default_out;  // shared with the usage text
constexpr long long default_conversion_windows = spectrum_default_windows;

const char* kind_name(HeadKind k) {
  return k == HeadKind::standard ? "standard" : "skew-diagonal";
}

// --qk-bias: which score matrix a standard head contributes (docs/attention_spectrum.md §1). The
// values are the JSON's "qk_bias" spelling too.
BiasTreatment parse_qk_bias(const Args& args) {
  // exclude: the paper's M = W_Q W_Kᵀ (PAPERS §B1), the default.
  return args.choice("qk-bias", "exclude", {"exclude", "homogeneous"}) == "exclude"
             ? BiasTreatment::exclude
             : BiasTreatment::homogeneous;
}

const char* qk_bias_name(BiasTreatment b) {
  return b == BiasTreatment::exclude ? "exclude" : "homogeneous";
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

nlohmann::json head_json(const HeadSpectrum& h) {
  return {{"layer", h.layer},
          {"head", h.head},
          {"kind", kind_name(h.kind)},
          {"skew_energy_fraction", h.skew_energy_fraction},
          {"skew_planes_90", h.skew.planes_90},
          {"skew_rank_90", h.skew.rank_90()},
          {"effective_rank", h.skew.effective_rank},
          {"skew_energy", h.skew.energy},
          {"skew_plane_values", h.skew.plane_values},
          {"sym_energy", h.symmetric.energy},
          {"sym_eigenvalues", h.symmetric.eigenvalues},
          {"sym_rank_90", h.symmetric.rank_90},
          {"sym_effective_rank", h.symmetric.effective_rank},
          {"sym_negative_energy_fraction", h.symmetric.negative_energy_fraction},
          {"span_dim", h.span_dim},
          {"position_free", h.position_free},
          {"bias_included", h.bias_included}};
}

nlohmann::json stat_json(const CascadeStat& s) {
  return {{"mean", s.mean}, {"median", s.median}};
}

// Min and max of one measure over a layer's heads (error bars of the plot).
void layer_range(const std::vector<HeadSpectrum>& heads, Index layer, bool rank90, double& low,
                 double& high) {
  low = 1e300;
  high = -1e300;
  for (const auto& h : heads) {
    if (h.layer != layer)
      continue;
    const double v = rank90 ? static_cast<double>(h.skew.rank_90()) : h.skew.effective_rank;
    low = std::min(low, v);
    high = std::max(high, v);
  }
}

std::string cascade_svg(const std::string& model_name, const std::vector<HeadSpectrum>& heads,
                        const std::vector<CascadeRow>& cascade) {
  svg::Chart chart;
  chart.title = "Spectral cascade: " + model_name;
  chart.x_label = "layer (0 = first)";
  chart.y_label = "routing rank (mean over heads; bars: min..max)";
  svg::Series entropy{"entropy effective rank", {}, {}, {}, {}, true, true};
  svg::Series r90{"rank for 90% of skew energy", {}, {}, {}, {}, true, true};
  for (const auto& row : cascade) {
    double lo = 0, hi = 0;
    entropy.x.push_back(static_cast<double>(row.layer));
    entropy.y.push_back(row.effective_rank.mean);
    layer_range(heads, row.layer, false, lo, hi);
    entropy.y_low.push_back(lo);
    entropy.y_high.push_back(hi);
    r90.x.push_back(static_cast<double>(row.layer));
    r90.y.push_back(row.rank_90.mean);
    layer_range(heads, row.layer, true, lo, hi);
    r90.y_low.push_back(lo);
    r90.y_high.push_back(hi);
  }
  chart.series = {entropy, r90};
  for (const auto& row : cascade)
    chart.x_tick_labels.push_back(std::to_string(row.layer));
  return svg::render(chart);
}

std::string heads_csv(const std::vector<HeadSpectrum>& heads) {
  std::ostringstream out;
  out << "layer,head,kind,skew_energy_fraction,skew_planes_90,skew_rank_90,effective_rank,"
         "skew_energy,sym_energy,sym_rank_90,sym_effective_rank,sym_negative_energy_fraction,"
         "span_dim,position_free,skew_plane_values\n";
  out.precision(10);
  for (const auto& h : heads) {
    out << h.layer << ',' << h.head << ',' << kind_name(h.kind) << ',' << h.skew_energy_fraction
        << ',' << h.skew.planes_90 << ',' << h.skew.rank_90() << ',' << h.skew.effective_rank << ','
        << h.skew.energy << ',' << h.symmetric.energy << ',' << h.symmetric.rank_90 << ','
        << h.symmetric.effective_rank << ',' << h.symmetric.negative_energy_fraction << ','
        << h.span_dim << ',' << (h.position_free ? 1 : 0) << ',';
    for (std::size_t k = 0; k < h.skew.plane_values.size(); ++k)
      out << (k ? ";" : "") << h.skew.plane_values[k];
    out << '\n';
  }
  return out.str();
}

std::string cascade_table_md(const std::vector<CascadeRow>& cascade) {
  std::ostringstream md;
  md << "| layer | heads | skew energy share (mean / median) | effective rank (mean / median) | "
        "rank for 90% (mean / median) | symmetric effective rank (mean / median) |\n"
        "|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : cascade) {
    md << "| " << r.layer << " | " << r.heads << " | " << fixed(r.skew_energy_fraction.mean, 3)
       << " / " << fixed(r.skew_energy_fraction.median, 3) << " | "
       << fixed(r.effective_rank.mean, 2) << " / " << fixed(r.effective_rank.median, 2) << " | "
       << fixed(r.rank_90.mean, 1) << " / " << fixed(r.rank_90.median, 1) << " | "
       << fixed(r.sym_effective_rank.mean, 2) << " / " << fixed(r.sym_effective_rank.median, 2)
       << " |\n";
  }
  return md.str();
}

std::string conversions_md(const ConversionReport& c) {
  std::ostringstream md;
  md << "Baseline PPL " << fixed(c.baseline.ppl, 4) << " over " << c.baseline.windows
     << " windows of " << c.baseline.context << " tokens (" << c.baseline.predicted_tokens
     << " predicted).\n\n| conversion | parameter | PPL | Δ% |\n|---|---:|---:|---:|\n";
  for (const auto& r : c.rows) {
    md << "| " << r.conversion << " | " << (r.parameter > 0 ? std::to_string(r.parameter) : "–")
       << " | " << fixed(r.ppl, 4) << " | " << fixed(r.delta_percent, 2) << " |\n";
  }
  for (const auto& n : c.not_applicable)
    md << "\nNot applicable: " << n << ".\n";
  return md.str();
}

}  // namespace

int run_spectrum(const std::vector<std::string>& argv) {
  auto options = token_options;
  options.insert({"model", "context", "max-windows", "out", "qk-bias"});
  const Args args(argv, options, {"json"});
  const std::string model_dir = args.get("model", default_model().string());
  const std::string out_dir = args.get("out", default_out);
  if (out_dir.empty())
    throw UsageError("option --out: expected a directory name, found an empty one");
  const bool with_text = args.has("text") || args.has("tokens");
  const auto& group = ranks();
  if (group.size() > 1 && !with_text) {
    throw UsageError(
        "without --text or --tokens there is nothing to spread over the ranks: run it as one "
        "process (under an MPI launcher spectrum spreads its conversions' windows)");
  }
  if (!with_text && (args.has("context") || args.has("max-windows") || args.has("token-dtype"))) {
    throw UsageError(
        "--context, --max-windows and --token-dtype need --text FILE or --tokens FILE");
  }
  const Index max_windows =
      args.integer("max-windows", default_conversion_windows, 0, 1LL << 40);  // 0: all
  SpectrumOptions spectrum_options;
  spectrum_options.bias = parse_qk_bias(args);

  const auto model = load_model<float>(model_dir);
  const ModelConfig& config = model.config();
  const Index context = args.integer("context", config.n_positions, 2, config.n_positions);
  std::vector<std::int32_t> tokens;
  if (with_text)
    tokens = read_token_stream(args, config, model_dir);

  const auto heads = model_attention_spectrum(model, spectrum_options);
  const auto cascade = spectral_cascade(heads);
  // The library's name of the architecture, as in nlb budget's report (model_type spelling).
  const std::string arch = to_string(config.architecture);
  const bool sd = config.architecture == Architecture::nlb_sd;
  const bool rotary = config.rotary_dims() > 0 && !sd;
  const bool homogeneous = spectrum_options.bias == BiasTreatment::homogeneous;
  // The decomposed matrix, stated in the JSON and report.md. S–D heads have no q/k projections,
  // so --qk-bias does not apply to them.
  const char* score_matrix = sd            ? "S_h - D_h"
                             : homogeneous ? "[W_Q; b_Q] [W_K; b_K]^T over x~ = [x, 1]"
                                           : "W_Q W_K^T";

  ConversionReport conversions;
  if (with_text) {
    // Under mpirun every evaluation's windows are spread over the ranks (docs/scaling.md); the
    // head spectra above are cheap and computed on every rank.
    WindowedPerplexity<float> windowed;
    if (group.size() > 1)
      windowed = distributed::sharded_windowed_perplexity<float>(group);
    const Progress progress("spectrum conversions", group.leader());
    conversions =
        measure_attention_conversions(model, tokens, context, max_windows, progress, windowed);
  }

  // ---- the report -----------------------------------------------------------------------
  nlohmann::json j;
  j["model"] = model_dir;
  j["architecture"] = arch;
  j["layers"] = config.n_layers;
  j["heads_per_layer"] = config.n_heads;
  j["d_model"] = config.d_model;
  j["head_dim"] = config.head_dim();
  j["qk_bias"] = sd ? nlohmann::json(nullptr) : nlohmann::json(qk_bias_name(spectrum_options.bias));
  j["score_matrix"] = score_matrix;
  j["rotary_position_free"] = rotary;
  j["effective_rank_definition"] =
      "exp(H(s^2 / sum s^2)) over the singular values s of the skew part, each plane's pair "
      "counted twice (rank units: one plane = 2)";
  j["energy_fraction_for_counts"] = 0.9;
  j["heads"] = nlohmann::json::array();
  for (const auto& h : heads)
    j["heads"].push_back(head_json(h));
  j["cascade"] = nlohmann::json::array();
  for (const auto& r : cascade) {
    j["cascade"].push_back({{"layer", r.layer},
                            {"heads", r.heads},
                            {"skew_energy_fraction", stat_json(r.skew_energy_fraction)},
                            {"effective_rank", stat_json(r.effective_rank)},
                            {"rank_90", stat_json(r.rank_90)},
                            {"sym_effective_rank", stat_json(r.sym_effective_rank)}});
  }
  if (with_text) {
    nlohmann::json c;
    c["text"] = args.has("text") ? args.get("text") : args.get("tokens");
    c["context"] = conversions.baseline.context;
    c["windows"] = conversions.baseline.windows;
    c["predicted_tokens"] = conversions.baseline.predicted_tokens;
    c["baseline_ppl"] = conversions.baseline.ppl;
    c["rows"] = nlohmann::json::array();
    for (const auto& r : conversions.rows) {
      c["rows"].push_back({{"conversion", r.conversion},
                           {"parameter", r.parameter},
                           {"ppl", r.ppl},
                           {"delta_percent", r.delta_percent}});
    }
    c["not_applicable"] = conversions.not_applicable;
    j["conversions"] = c;
  } else {
    j["conversions"] = nullptr;
  }

  std::ostringstream md;
  md << "# Attention spectrum: " << model_dir << "\n\n"
     << "Architecture " << arch << ", " << config.n_layers << " layers × " << config.n_heads
     << " heads, d = " << config.d_model << ", d_h = " << config.head_dim()
     << ". Layers are numbered from 0. Method and definitions: docs/attention_spectrum.md "
        "(PAPERS §B1).\n\n"
     << "- Score matrix per head: "
     << (sd ? "M = S_h − D_h (skew part S_h, symmetric part −D_h); S–D heads have no q/k "
              "projections, so `--qk-bias` does not apply."
         : homogeneous
             ? "M̃ = W̃_Q W̃_Kᵀ = [W_Q; b_Q] [W_K; b_K]ᵀ over x̃ = [x, 1] (`--qk-bias homogeneous`: "
               "the q/k biases included as homogeneous coordinates), split into skew and symmetric "
               "parts."
             : "M = W_Q W_Kᵀ, the paper's matrix (PAPERS §B1; `--qk-bias exclude`, the default: "
               "the q/k biases left out), split into skew and symmetric parts.")
     << "\n"
     << (rotary ? "- Rotary heads: the spectrum is that of the position-free form above (relative "
                  "offset 0), as in the paper.\n"
                : "")
     << "- Effective rank: exp(H(s²/Σs²)) over the skew part's singular values (each ± pair "
        "counted twice, so one rotation plane is rank 2); rank for 90% = 2 × planes for 90% of "
        "the skew energy.\n\n"
     << "## Spectral cascade\n\n"
     << cascade_table_md(cascade) << "\n![cascade](cascade.svg)\n\n## Heads\n\n"
     << "| layer | head | skew share | planes 90% | effective rank | largest σ | symmetric "
        "effective rank | symmetric negative share |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& h : heads) {
    md << "| " << h.layer << " | " << h.head << " | " << fixed(h.skew_energy_fraction, 3) << " | "
       << h.skew.planes_90 << " | " << fixed(h.skew.effective_rank, 2) << " | "
       << fixed(h.skew.plane_values.empty() ? 0.0 : h.skew.plane_values.front(), 3) << " | "
       << fixed(h.symmetric.effective_rank, 2) << " | "
       << fixed(h.symmetric.negative_energy_fraction, 3) << " |\n";
  }
  if (with_text) {
    md << "\n## Conversions\n\nText: " << j["conversions"]["text"].get<std::string>()
       << (group.size() > 1
               ? ", its windows spread over " + std::to_string(group.size()) + " MPI ranks"
               : std::string())
       << ". (a) skew_rank r: each head's skew part truncated to rank min(r, its max); (b) "
          "linear_first_layers k: ELU+1 linear attention in layers 0 … k−1; (c) "
          "symmetric_diagonal / symmetric_scalar: the symmetric part replaced by its diagonal / "
          "the diagonal's mean. Conversions rewrite each head's exact score form, so for standard "
          "heads they always act on the homogeneous form with the q/k biases, whatever "
          "`--qk-bias` says.\n\n"
       << conversions_md(conversions);
  }

  if (!group.leader())
    return 0;  // only rank 0 writes and prints
  ReportFiles files(out_dir);
  files.add("report.md", md.str());
  files.add("report.json", j.dump(2) + "\n");
  files.add("heads.csv", heads_csv(heads));
  files.add("cascade.svg", cascade_svg(model_dir, heads, cascade));
  files.write();

  if (args.flag("json")) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("spectral cascade (%s, %lld layers x %lld heads, M = %s)\n", arch.c_str(),
                static_cast<long long>(config.n_layers), static_cast<long long>(config.n_heads),
                score_matrix);
    std::printf("%5s %10s %16s %12s\n", "layer", "skew share", "effective rank", "rank 90%");
    for (const auto& r : cascade) {
      std::printf("%5lld %10.3f %16.2f %12.1f\n", static_cast<long long>(r.layer),
                  r.skew_energy_fraction.mean, r.effective_rank.mean, r.rank_90.mean);
    }
    if (with_text) {
      std::printf("baseline PPL %.4f\n", conversions.baseline.ppl);
      for (const auto& r : conversions.rows) {
        std::printf("%-20s %4lld  PPL %10.4f  delta %+8.2f%%\n", r.conversion.c_str(),
                    static_cast<long long>(r.parameter), r.ppl, r.delta_percent);
      }
      for (const auto& n : conversions.not_applicable)
        std::printf("not applicable: %s\n", n.c_str());
    }
    std::printf("report written to %s\n", out_dir.c_str());
  }
  return 0;
}

}  // namespace nlb::cli
