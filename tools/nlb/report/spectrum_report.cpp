// The files of an `nlb spectrum` report (spectrum_report.hpp).
#include "report/spectrum_report.hpp"

#include <algorithm>
#include <sstream>

#include "report/format.hpp"
#include "svg_plot.hpp"

namespace nlb::cli {

namespace {

using report::fixed;
using report::json;

const char* kind_name(HeadKind k) {
  return k == HeadKind::standard ? "standard" : "skew-diagonal";
}

// --qk-bias's spelling, which the JSON's "qk_bias" repeats.
const char* qk_bias_name(BiasTreatment b) {
  return b == BiasTreatment::exclude ? "exclude" : "homogeneous";
}

json head_json(const HeadSpectrum& h) {
  return {{"layer", h.layer},
          {"head", h.head},
          {"key_head", h.key_head},
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

json stat_json(const CascadeStat& s) {
  return {{"mean", s.mean}, {"median", s.median}};
}

json cascade_json(const std::vector<CascadeRow>& cascade) {
  json out = json::array();
  for (const auto& r : cascade) {
    out.push_back({{"layer", r.layer},
                   {"heads", r.heads},
                   {"skew_energy_fraction", stat_json(r.skew_energy_fraction)},
                   {"effective_rank", stat_json(r.effective_rank)},
                   {"rank_90", stat_json(r.rank_90)},
                   {"sym_effective_rank", stat_json(r.sym_effective_rank)}});
  }
  return out;
}

json conversions_json(const ConversionReport& conversions, const std::string& text) {
  json c;
  c["text"] = text;
  c["context"] = conversions.baseline.context;
  c["windows"] = conversions.baseline.windows;
  c["predicted_tokens"] = conversions.baseline.predicted_tokens;
  c["baseline_ppl"] = conversions.baseline.ppl;
  c["rows"] = json::array();
  for (const auto& r : conversions.rows) {
    c["rows"].push_back({{"conversion", r.conversion},
                         {"parameter", r.parameter},
                         {"ppl", r.ppl},
                         {"delta_percent", r.delta_percent}});
  }
  c["not_applicable"] = conversions.not_applicable;
  return c;
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

std::string heads_table_md(const std::vector<HeadSpectrum>& heads) {
  std::ostringstream md;
  md << "| layer | head | skew share | planes 90% | effective rank | largest σ | symmetric "
        "effective rank | symmetric negative share |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& h : heads) {
    md << "| " << h.layer << " | " << h.head << " | " << fixed(h.skew_energy_fraction, 3) << " | "
       << h.skew.planes_90 << " | " << fixed(h.skew.effective_rank, 2) << " | "
       << fixed(h.skew.plane_values.empty() ? 0.0 : h.skew.plane_values.front(), 3) << " | "
       << fixed(h.symmetric.effective_rank, 2) << " | "
       << fixed(h.symmetric.negative_energy_fraction, 3) << " |\n";
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

// The score matrix each head contributes, in words (report.md).
const char* score_matrix_md(const SpectrumReport& s) {
  return s.sd() ? "M = S_h − D_h (skew part S_h, symmetric part −D_h); S–D heads have no q/k "
                  "projections, so `--qk-bias` does not apply."
         : s.bias == BiasTreatment::homogeneous
             ? "M̃ = W̃_Q W̃_Kᵀ = [W_Q; b_Q] [W_K; b_K]ᵀ over x̃ = [x, 1] (`--qk-bias homogeneous`: "
               "the q/k biases included as homogeneous coordinates), split into skew and symmetric "
               "parts."
             : "M = W_Q W_Kᵀ, the paper's matrix (PAPERS §B1; `--qk-bias exclude`, the default: "
               "the q/k biases left out), split into skew and symmetric parts.";
}

// The conversions' section of report.md.
std::string conversions_section_md(const SpectrumReport& s) {
  std::ostringstream md;
  md << "\n## Conversions\n\nText: " << s.text
     << (s.ranks > 1 ? ", its windows spread over " + std::to_string(s.ranks) + " MPI ranks"
                     : std::string())
     << ". (a) skew_rank r: each head's skew part truncated to rank min(r, its max); (b) "
        "linear_first_layers k: ELU+1 linear attention in layers 0 … k−1; (c) "
        "symmetric_diagonal / symmetric_scalar: the symmetric part replaced by its diagonal / "
        "the diagonal's mean. Conversions rewrite each head's exact score form, so for standard "
        "heads they always act on the homogeneous form with the q/k biases, whatever "
        "`--qk-bias` says.\n\n"
     << conversions_md(*s.conversions);
  return md.str();
}

}  // namespace

json spectrum_report_json(const SpectrumReport& s) {
  json j;
  j["model"] = s.model;
  j["architecture"] = to_string(s.config.architecture);
  j["layers"] = s.config.n_layers;
  j["heads_per_layer"] = s.config.n_heads;
  j["key_value_heads_per_layer"] = s.config.kv_heads();
  j["d_model"] = s.config.d_model;
  j["head_dim"] = s.config.head_dim();
  j["qk_bias"] = s.sd() ? json(nullptr) : json(qk_bias_name(s.bias));
  j["score_matrix"] = s.score_matrix();
  j["rotary_position_free"] = s.rotary();
  j["effective_rank_definition"] =
      "exp(H(s^2 / sum s^2)) over the singular values s of the skew part, each plane's pair "
      "counted twice (rank units: one plane = 2)";
  j["energy_fraction_for_counts"] = 0.9;
  j["heads"] = json::array();
  for (const auto& h : s.heads)
    j["heads"].push_back(head_json(h));
  j["cascade"] = cascade_json(s.cascade);
  j["conversions"] = s.conversions ? conversions_json(*s.conversions, s.text) : json(nullptr);
  return j;
}

std::string spectrum_report_markdown(const SpectrumReport& s) {
  std::ostringstream md;
  md << "# Attention spectrum: " << s.model << "\n\n"
     << "Architecture " << to_string(s.config.architecture) << ", " << s.config.n_layers
     << " layers × " << s.config.n_heads << " heads, d = " << s.config.d_model
     << ", d_h = " << s.config.head_dim()
     << ". Layers are numbered from 0. Method and definitions: docs/attention_spectrum.md "
        "(PAPERS §B1).\n\n"
     << "- Score matrix per head: " << score_matrix_md(s) << "\n"
     << (s.rotary() ? "- Rotary heads: the spectrum is that of the position-free form above "
                      "(relative offset 0), as in the paper.\n"
                    : "")
     << (s.config.kv_heads() != s.config.n_heads
             ? "- Grouped-query attention: " + std::to_string(s.config.kv_heads()) +
                   " key/value heads for " + std::to_string(s.config.n_heads) +
                   " query heads, so query head h reads key head g(h) = h / " +
                   std::to_string(s.config.n_heads / s.config.kv_heads()) +
                   " and its matrix is W_Q,h W_K,g(h)^T; the heads of one group share their "
                   "key factor (\"key_head\" in spectrum.json).\n"
             : std::string())
     << "- Effective rank: exp(H(s²/Σs²)) over the skew part's singular values (each ± pair "
        "counted twice, so one rotation plane is rank 2); rank for 90% = 2 × planes for 90% of "
        "the skew energy.\n\n"
     << "## Spectral cascade\n\n"
     << cascade_table_md(s.cascade) << "\n![cascade](cascade.svg)\n\n## Heads\n\n"
     << heads_table_md(s.heads);
  if (s.conversions)
    md << conversions_section_md(s);
  return md.str();
}

void stage_spectrum_report(ReportFiles& files, const SpectrumReport& s) {
  files.add("report.md", spectrum_report_markdown(s));
  files.add("report.json", spectrum_report_json(s).dump(2) + "\n");
  files.add("heads.csv", heads_csv(s.heads));
  files.add("cascade.svg", cascade_svg(s.model, s.heads, s.cascade));
}

}  // namespace nlb::cli
