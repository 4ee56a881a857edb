// `nlb spectrum` as a user runs it: the --json report and the report directory agree, the
// numbers are the library's, the conversions table appears with --text (and the same with
// --tokens), and bad input leaves no report behind (exit 1), a bad command line exits 2.

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_runner.hpp"
#include "nlb/analysis/attention_spectrum.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"
#include "scratch_dir.hpp"
#include "tolerances.hpp"

namespace {

namespace fs = std::filesystem;
const fs::path source_dir = NLB_SOURCE_DIR;
const fs::path eval_text = source_dir / "data/kjv-eval.txt";

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

}  // namespace

BOOST_AUTO_TEST_CASE(json_report_matches_files_and_library) {
  const nlb::test::ScratchDir dir("spectrum");
  const fs::path model_dir = source_dir / "models/tiny-gpt2";
  const auto j = run_json(dir, "--model '" + model_dir.string() + "'");
  const auto model = nlb::load_model<float>(model_dir);
  const auto want = nlb::model_attention_spectrum(model);
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
  }
  BOOST_TEST(j.at("cascade").size() == 4u);
  BOOST_TEST(j.at("conversions").is_null());
  const std::string csv = slurp(dir.path / "report/heads.csv");
  BOOST_TEST(std::count(csv.begin(), csv.end(), '\n') == 17);  // header + 16 heads
  BOOST_TEST(slurp(dir.path / "report/cascade.svg").find("<svg") != std::string::npos);
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
        model + "--text '" + eval_text.string() + "' --token-dtype u32"}) {
    const auto r = run_spectrum(dir, args + " --out bad");
    BOOST_TEST(r.exit_code == 2, args);
    BOOST_TEST(!fs::exists(dir.path / "bad"), args);
  }
}

BOOST_AUTO_TEST_CASE(sd_model_reports_its_routing_and_filter) {
  const nlb::test::ScratchDir dir("spectrum");
  const fs::path model_dir = source_dir / "models/tiny-sd";
  const auto j = run_json(dir, "--model '" + model_dir.string() + "'");
  BOOST_TEST(j.at("architecture").get<std::string>() == "s-d");
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
