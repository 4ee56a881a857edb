// `nlb spectrum` as a user runs it: the --json report and the report directory agree, the
// numbers are the library's, the default decomposes the paper's W_Q W_Kᵀ and matches PyTorch's
// float64 decomposition (PAPERS §B1), --qk-bias homogeneous keeps the biased form, the
// conversions table appears with --text (and the same with --tokens), and bad input leaves no
// report behind (exit 1), a bad command line exits 2.

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_runner.hpp"
#include "model_copy.hpp"
#include "nlb/analysis/attention/spectrum.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"
#include "scratch_dir.hpp"
#include "tolerances.hpp"

namespace {

namespace fs = std::filesystem;
const fs::path source_dir = NLB_SOURCE_DIR;
const fs::path eval_text = source_dir / "data/kjv-eval.txt";
const fs::path tiny_gpt2 = source_dir / "models/tiny-gpt2";
// The PyTorch float64 reference of the per-head measures (tools/python/spectrum_reference.py).
const fs::path spectrum_fixture = source_dir / "tests/fixtures/tiny-gpt2-spectrum.json";

using nlb::test::slurp;

// Runs `nlb spectrum <args>` in `dir`; captures stdout and stderr.
nlb::test::CliResult run_spectrum(const nlb::test::ScratchDir& dir, const std::string& args) {
  return nlb::test::run_nlb(dir.path, "spectrum " + args);
}

// The --json stdout of a successful run, equal to the report.json it wrote.
nlohmann::json run_json(const nlb::test::ScratchDir& dir, const std::string& args) {
  const auto r = run_spectrum(dir, args + " --out report --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, "nlb spectrum " << args << " failed: " << r.err);
  const auto j = nlohmann::json::parse(r.out);
  BOOST_TEST((j == nlohmann::json::parse(slurp(dir.path / "report/report.json"))));
  for (const char* name : {"report.md", "heads.csv", "cascade.svg"})
    BOOST_TEST(fs::file_size(dir.path / "report" / name) > 0u, name);
  return j;
}

// The two values of --qk-bias, as the command line spells them and as the library takes them.
struct QkBias {
  const char* name;
  nlb::BiasTreatment treatment;
  const char* score_matrix;   // report.json "score_matrix"
  const char* report_phrase;  // in report.md's "Score matrix per head" line
};
const QkBias qk_bias_forms[] = {
    {"exclude", nlb::BiasTreatment::exclude, "W_Q W_K^T", "M = W_Q W_Kᵀ, the paper's matrix"},
    {"homogeneous", nlb::BiasTreatment::homogeneous, "[W_Q; b_Q] [W_K; b_K]^T over x~ = [x, 1]",
     "(`--qk-bias homogeneous`"}};

// The heads of a report without "bias_included", the one per-head field --qk-bias must change
// even where the numbers cannot.
nlohmann::json heads_without_bias_flag(const nlohmann::json& report) {
  nlohmann::json heads = report.at("heads");
  for (auto& h : heads)
    h.erase("bias_included");
  return heads;
}

}  // namespace

BOOST_AUTO_TEST_CASE(json_report_matches_files_and_library) {
  const auto model = nlb::load_model<float>(tiny_gpt2);
  // no option (the default, exclude), then each value given explicitly
  for (const std::string option : {"", " --qk-bias exclude", " --qk-bias homogeneous"}) {
    const QkBias& form = qk_bias_forms[option.find("homogeneous") == std::string::npos ? 0 : 1];
    BOOST_TEST_CONTEXT("nlb spectrum" << option) {
      const nlb::test::ScratchDir dir("spectrum");
      const auto j = run_json(dir, "--model '" + tiny_gpt2.string() + "'" + option);
      BOOST_TEST(j.at("qk_bias").get<std::string>() == form.name);
      BOOST_TEST(j.at("score_matrix").get<std::string>() == form.score_matrix);
      BOOST_TEST(
          nlb::test::contains(nlb::test::slurp(dir.path / "report/report.md"), form.report_phrase));
      nlb::SpectrumOptions options;
      options.bias = form.treatment;
      const auto want = nlb::model_attention_spectrum(model, options);
      BOOST_TEST_REQUIRE(j.at("heads").size() == want.size());
      BOOST_TEST(want.size() == 16u);  // 4 layers × 4 heads
      for (std::size_t i = 0; i < want.size(); ++i) {
        const auto& h = j.at("heads")[i];
        BOOST_TEST(h.at("layer").get<long long>() == want[i].layer);
        BOOST_TEST(h.at("head").get<long long>() == want[i].head);
        BOOST_TEST(h.at("skew_energy_fraction").get<double>() == want[i].skew_energy_fraction);
        BOOST_TEST(h.at("skew_planes_90").get<long long>() == want[i].skew.planes_90);
        BOOST_TEST(h.at("effective_rank").get<double>() == want[i].skew.effective_rank);
        BOOST_TEST(h.at("skew_plane_values").size() == 32u);  // m = 2·d_h = 64 → 32 planes
        BOOST_TEST(!h.at("position_free").get<bool>());
        BOOST_TEST(h.at("bias_included").get<bool>() ==
                   (form.treatment == nlb::BiasTreatment::homogeneous));
      }
      BOOST_TEST(j.at("cascade").size() == 4u);
      BOOST_TEST(j.at("conversions").is_null());
      const std::string csv = slurp(dir.path / "report/heads.csv");
      BOOST_TEST(std::count(csv.begin(), csv.end(), '\n') == 17);  // header + 16 heads
      BOOST_TEST(slurp(dir.path / "report/cascade.svg").find("<svg") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(both_forms_match_the_pytorch_float64_reference) {
  // PAPERS §B1's M = W_Q W_Kᵀ by default, and the homogeneous form on request, against a dense
  // float64 decomposition in PyTorch; a missing fixture fails.
  std::ifstream in(spectrum_fixture);
  BOOST_TEST_REQUIRE(
      in.good(), "missing fixture " << spectrum_fixture << " (tools/python/spectrum_reference.py)");
  const auto ref = nlohmann::json::parse(in);
  BOOST_TEST(ref.at("model").get<std::string>() == "models/tiny-gpt2");
  BOOST_TEST(ref.at("energy_fraction_for_counts").get<double>() == 0.9);
  const auto& ref_exclude = ref.at("forms").at("exclude");
  const auto& ref_homogeneous = ref.at("forms").at("homogeneous");
  BOOST_TEST_REQUIRE(ref_exclude.size() == 16u);
  BOOST_TEST_REQUIRE(ref_homogeneous.size() == 16u);
  // The two forms differ by far more than the bound on some heads, so a report of the wrong
  // form cannot pass either comparison below.
  double form_gap = 0;
  for (std::size_t i = 0; i < ref_exclude.size(); ++i) {
    form_gap =
        std::max(form_gap, std::abs(ref_exclude[i].at("skew_energy_fraction").get<double>() -
                                    ref_homogeneous[i].at("skew_energy_fraction").get<double>()));
  }
  BOOST_TEST_MESSAGE("largest skew-share difference between the two forms (PyTorch) " << form_gap);
  BOOST_TEST(form_gap > 100 * nlb::test::tol::spectrum_vs_pytorch_share_abs);

  for (const std::string option : {"", " --qk-bias homogeneous"}) {
    const bool homogeneous = !option.empty();
    const auto& want = homogeneous ? ref_homogeneous : ref_exclude;
    const nlb::test::ScratchDir dir("spectrum");
    const auto j = run_json(dir, "--model '" + tiny_gpt2.string() + "'" + option);
    const auto& heads = j.at("heads");
    BOOST_TEST_REQUIRE(heads.size() == want.size());
    double worst = 0;
    long long plane_mismatches = 0;
    for (std::size_t i = 0; i < heads.size(); ++i) {
      BOOST_TEST(heads[i].at("layer") == want[i].at("layer"));
      BOOST_TEST(heads[i].at("head") == want[i].at("head"));
      worst = std::max(worst, std::abs(heads[i].at("skew_energy_fraction").get<double>() -
                                       want[i].at("skew_energy_fraction").get<double>()));
      if (heads[i].at("skew_planes_90").get<long long>() !=
          want[i].at("skew_planes_90").get<long long>())
        ++plane_mismatches;
    }
    BOOST_TEST_MESSAGE("nlb spectrum" << (homogeneous ? option : " (default)")
                                      << " vs PyTorch float64: max |skew share difference| "
                                      << worst << ", planes-for-90% mismatches " << plane_mismatches
                                      << " of " << heads.size());
    BOOST_TEST(worst <= nlb::test::tol::spectrum_vs_pytorch_share_abs);
    BOOST_TEST(plane_mismatches == 0);
  }
}

BOOST_AUTO_TEST_CASE(zero_qk_biases_give_identical_reports) {
  // A copy of tiny-gpt2 whose q/k biases are zero (values, v bias and everything else kept):
  // both forms are then the same matrix, and the reports must agree in every number.
  const nlb::test::ScratchDir dir("spectrum");
  auto tensors = nlb::test::read_all_tensors(tiny_gpt2 / "model.safetensors");
  const auto config = nlohmann::json::parse(slurp(tiny_gpt2 / "config.json"));
  const std::size_t d = config.at("n_embd").get<std::size_t>();
  for (int layer = 0; layer < config.at("n_layer").get<int>(); ++layer) {
    auto& bias = tensors.at("transformer.h." + std::to_string(layer) + ".attn.c_attn.bias").values;
    BOOST_TEST_REQUIRE(bias.size() == 3 * d);
    std::fill(bias.begin(), bias.begin() + static_cast<std::ptrdiff_t>(2 * d), 0.0f);  // q | k
  }
  nlb::test::write_model_dir(dir.path / "zero-qk", tensors, config);
  const auto excluded = run_json(dir, "--model zero-qk");
  const auto homogeneous = run_json(dir, "--model zero-qk --qk-bias homogeneous");
  BOOST_TEST(excluded.at("qk_bias").get<std::string>() == "exclude");
  BOOST_TEST(homogeneous.at("qk_bias").get<std::string>() == "homogeneous");
  BOOST_TEST(homogeneous.at("heads")[0].at("bias_included").get<bool>());
  BOOST_TEST(!excluded.at("heads")[0].at("bias_included").get<bool>());
  BOOST_TEST((heads_without_bias_flag(excluded) == heads_without_bias_flag(homogeneous)));
  BOOST_TEST((excluded.at("cascade") == homogeneous.at("cascade")));
  // W_Q, W_K are tiny-gpt2's own: the default report is the shipped model's default report
  const nlb::test::ScratchDir original("spectrum");
  const auto shipped = run_json(original, "--model '" + tiny_gpt2.string() + "'");
  BOOST_TEST((heads_without_bias_flag(excluded) == heads_without_bias_flag(shipped)));
}

BOOST_AUTO_TEST_CASE(conversions_table_with_text) {
  const nlb::test::ScratchDir dir("spectrum");
  const auto j =
      run_json(dir, "--model '" + (source_dir / "models/tiny-gpt2").string() + "' --text '" +
                        eval_text.string() + "' --context 32 --max-windows 1");
  const auto& c = j.at("conversions");
  BOOST_TEST(c.at("windows").get<int>() == 1);
  BOOST_TEST(c.at("context").get<int>() == 32);
  BOOST_TEST_REQUIRE(c.at("rows").size() == 12u);  // 6 ranks, 4 linear depths, 2 symmetric
  const double base = c.at("baseline_ppl").get<double>();
  for (const auto& row : c.at("rows")) {
    const double ppl = row.at("ppl").get<double>();
    BOOST_TEST(std::abs(row.at("delta_percent").get<double>() - 100.0 * (ppl / base - 1.0)) <=
               1e-9);
  }
  // full rank (64) reproduces the baseline
  BOOST_TEST(c.at("rows")[5].at("parameter").get<int>() == 64);
  BOOST_TEST(std::abs(c.at("rows")[5].at("ppl").get<double>() / base - 1.0) <=
             nlb::test::tol::conversion_f32_rel);
}

// --tokens FILE (token ids) gives the conversions of the same tokens read with --text.
BOOST_AUTO_TEST_CASE(token_file_gives_the_text_conversions) {
  const nlb::test::ScratchDir dir("spectrum");
  const fs::path ids = dir.path / "eval.u16.bin";
  nlb::io::write_token_file(ids, nlb::io::read_text_tokens(eval_text));
  const std::string common =
      "--model '" + (source_dir / "models/tiny-gpt2").string() + "' --context 32 --max-windows 1 ";
  auto text = run_json(dir, common + "--text '" + eval_text.string() + "'");
  auto tokens = run_json(dir, common + "--tokens '" + ids.string() + "'");
  BOOST_TEST(text.at("conversions").at("text") == eval_text.string());
  BOOST_TEST(tokens.at("conversions").at("text") == ids.string());
  text["conversions"].erase("text");
  tokens["conversions"].erase("text");
  BOOST_TEST((text == tokens));
}

BOOST_AUTO_TEST_CASE(rotary_model_is_flagged) {
  const nlb::test::ScratchDir dir("spectrum");
  const auto j = run_json(dir, "--model '" + (source_dir / "models/tiny-neox").string() + "'");
  BOOST_TEST(j.at("rotary_position_free").get<bool>());
  for (const auto& h : j.at("heads"))
    BOOST_TEST(h.at("position_free").get<bool>());
}

BOOST_AUTO_TEST_CASE(bad_input_exits_1_without_a_report) {
  const nlb::test::ScratchDir dir("spectrum");
  auto r = run_spectrum(dir, "--model '" + (dir.path / "no-such-model").string() + "' --out bad");
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(!r.err.empty());
  BOOST_TEST(!fs::exists(dir.path / "bad"));
  r = run_spectrum(dir, "--model '" + (source_dir / "models/tiny-gpt2").string() + "' --text '" +
                            (dir.path / "missing.txt").string() + "' --out bad");
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(!fs::exists(dir.path / "bad"));
  // a text shorter than one window
  dir.write_text("short.txt", "too short");
  r = run_spectrum(dir, "--model '" + (source_dir / "models/tiny-gpt2").string() +
                            "' --text short.txt --out bad");
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(!fs::exists(dir.path / "bad"));
}

BOOST_AUTO_TEST_CASE(bad_command_line_exits_2) {
  const nlb::test::ScratchDir dir("spectrum");
  const std::string model = "--model '" + (source_dir / "models/tiny-gpt2").string() + "' ";
  for (const std::string& args :
       {model + "--bogus", model + "--out", model + "--context 16",
        model + "--text '" + eval_text.string() + "' --max-windows -1",
        model + "--text '" + eval_text.string() + "' --context 1",
        model + "--text '" + eval_text.string() + "' --context 100000", model + "stray",
        model + "--text '" + eval_text.string() + "' --token-dtype u32", model + "--qk-bias bogus",
        model + "--qk-bias ignore", model + "--qk-bias Homogeneous",
        model + "--qk-bias exclude --qk-bias homogeneous"}) {
    const auto r = run_spectrum(dir, args + " --out bad");
    BOOST_TEST(r.exit_code == 2, args);
    BOOST_TEST(!fs::exists(dir.path / "bad"), args);
  }
}

BOOST_AUTO_TEST_CASE(sd_model_reports_its_routing_and_filter) {
  const nlb::test::ScratchDir dir("spectrum");
  const fs::path model_dir = source_dir / "models/tiny-sd";
  const auto j = run_json(dir, "--model '" + model_dir.string() + "'");
  BOOST_TEST(j.at("architecture").get<std::string>() == "nlb-sd");  // as nlb budget names it
  // S–D heads have no q/k projections: --qk-bias does not apply and changes nothing
  BOOST_TEST(j.at("qk_bias").is_null());
  BOOST_TEST(j.at("score_matrix").get<std::string>() == "S_h - D_h");
  const auto with_option =
      run_json(dir, "--model '" + model_dir.string() + "' --qk-bias homogeneous");
  BOOST_TEST((with_option.at("heads") == j.at("heads")));
  const auto want = nlb::model_attention_spectrum(nlb::load_model<float>(model_dir));
  BOOST_TEST_REQUIRE(j.at("heads").size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto& h = j.at("heads")[i];
    BOOST_TEST(h.at("kind").get<std::string>() == "skew-diagonal");
    BOOST_TEST(h.at("effective_rank").get<double>() == want[i].skew.effective_rank);
    // the symmetric part is −D: every eigenvalue ≤ 0
    BOOST_TEST(h.at("sym_negative_energy_fraction").get<double>() == 1.0);
  }
}
