// The files of an `nlb spectrum` report (report.md, report.json, heads.csv, cascade.svg) made from
// the head spectra, the spectral cascade and the conversions' perplexities;
// docs/attention_spectrum.md explains every number.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nlb/analysis/attention/conversions.hpp"
#include "nlb/analysis/attention/spectrum.hpp"
#include "report_files.hpp"

namespace nlb::cli {

/// What `nlb spectrum` measured.
struct SpectrumReport {
  std::string model;  // the model directory
  ModelConfig config;
  BiasTreatment bias = BiasTreatment::exclude;  // --qk-bias
  std::vector<HeadSpectrum> heads;
  std::vector<CascadeRow> cascade;
  std::optional<ConversionReport> conversions;  // with --text or --tokens
  std::string text;                             // the file the conversions read
  int ranks = 1;  // processes the conversions' windows were spread over

  /// S–D heads: no q/k projections, so --qk-bias does not apply.
  bool sd() const { return config.architecture == Architecture::nlb_sd; }
  /// Rotary heads: their spectrum is the position-free form's.
  bool rotary() const { return config.rotary_dims() > 0 && !sd(); }
  /// The decomposed matrix, as the JSON and report.md state it.
  const char* score_matrix() const {
    return sd()                                 ? "S_h - D_h"
           : bias == BiasTreatment::homogeneous ? "[W_Q; b_Q] [W_K; b_K]^T over x~ = [x, 1]"
                                                : "W_Q W_K^T";
  }
};

/// report.json (and `--json`'s line).
nlohmann::json spectrum_report_json(const SpectrumReport& report);
/// report.md.
std::string spectrum_report_markdown(const SpectrumReport& report);
/// Stages every report file into `files`.
void stage_spectrum_report(ReportFiles& files, const SpectrumReport& report);

}  // namespace nlb::cli
