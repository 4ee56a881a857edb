// `nlb budget` as a user runs it: a small complete report (every file, report.json valid against
// docs/budget-report.schema.json, layers.csv consistent with it, gate files readable, the same
// inputs giving the same report), token-id inputs giving the report of the same text, the help
// page's defaults being the protocol's, and bad input — missing or too-short files, a model
// without MLP tensors, budgets <= 0, renamed options, token-id and text inputs mixed — failing
// with a clear message, a non-zero exit and no report left.
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_runner.hpp"
#include "nlb/analysis/budget/protocol.hpp"
#include "nlb/io/safetensors.hpp"
#include "nlb/io/safetensors_writer.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/config.hpp"
#include "report_json.hpp"
#include "scratch_dir.hpp"
#include "tolerances.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
const fs::path source_dir = NLB_SOURCE_DIR;

using nlb::test::contains;
using nlb::test::slurp;

// Runs `nlb budget <args>` in `dir`.
nlb::test::CliResult run_budget(const nlb::test::ScratchDir& dir, const std::string& args) {
  return nlb::test::run_nlb(dir.path, "budget " + args);
}

// ---- a validator for the subset of JSON Schema the report's schema uses ---------------------
// type (a name or a list), enum, required, properties, items, minItems, minimum, maximum,
// $ref "#/$defs/NAME". Every violation is reported with its JSON pointer.
bool has_type(const json& v, const std::string& t) {
  if (t == "object")
    return v.is_object();
  if (t == "array")
    return v.is_array();
  if (t == "string")
    return v.is_string();
  if (t == "integer")
    return v.is_number_integer();
  if (t == "number")
    return v.is_number();
  if (t == "boolean")
    return v.is_boolean();
  if (t == "null")
    return v.is_null();
  throw std::runtime_error("schema: unsupported type " + t);
}

void validate(const json& v, const json& schema, const json& root, const std::string& where,
              std::vector<std::string>& errors) {
  static const std::set<std::string> known{
      "$schema",    "$id",   "title",    "description", "type",    "enum", "required",
      "properties", "items", "minItems", "minimum",     "maximum", "$ref", "$defs"};
  for (const auto& [key, _] : schema.items())
    if (!known.count(key))
      throw std::runtime_error("schema: unsupported keyword " + key + " at " + where);
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    const std::string prefix = "#/$defs/";
    if (ref.rfind(prefix, 0) != 0)
      throw std::runtime_error("schema: unsupported $ref " + ref);
    validate(v, root.at("$defs").at(ref.substr(prefix.size())), root, where, errors);
    return;
  }
  if (schema.contains("type")) {
    const auto& t = schema["type"];
    bool ok = false;
    if (t.is_string()) {
      ok = has_type(v, t);
    } else {
      for (const auto& one : t)
        ok = ok || has_type(v, one);
    }
    if (!ok) {
      errors.push_back(where + ": type " + t.dump() + " expected, found " + v.dump());
      return;
    }
  }
  if (schema.contains("enum")) {
    bool ok = false;
    for (const auto& e : schema["enum"])
      ok = ok || e == v;
    if (!ok)
      errors.push_back(where + ": one of " + schema["enum"].dump() + " expected, found " +
                       v.dump());
  }
  if (v.is_number()) {
    if (schema.contains("minimum") && v.get<double>() < schema["minimum"].get<double>())
      errors.push_back(where + ": >= " + schema["minimum"].dump() + " expected, found " + v.dump());
    if (schema.contains("maximum") && v.get<double>() > schema["maximum"].get<double>())
      errors.push_back(where + ": <= " + schema["maximum"].dump() + " expected, found " + v.dump());
  }
  if (v.is_object()) {
    if (schema.contains("required"))
      for (const auto& r : schema["required"])
        if (!v.contains(r.get<std::string>()))
          errors.push_back(where + ": missing required field " + r.get<std::string>());
    if (schema.contains("properties"))
      for (const auto& [key, sub] : schema["properties"].items())
        if (v.contains(key))
          validate(v[key], sub, root, where + "/" + key, errors);
  }
  if (v.is_array()) {
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<std::size_t>())
      errors.push_back(where + ": at least " + schema["minItems"].dump() + " items expected");
    if (schema.contains("items"))
      for (std::size_t i = 0; i < v.size(); ++i)
        validate(v[i], schema["items"], root, where + "/" + std::to_string(i), errors);
  }
}

std::vector<std::string> schema_errors(const json& report) {
  const json schema = json::parse(slurp(source_dir / "docs/budget-report.schema.json"));
  std::vector<std::string> errors;
  validate(report, schema, schema, "", errors);
  return errors;
}

using nlb::test::without_timing;

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, sep))
    out.push_back(cell);
  if (!line.empty() && line.back() == sep)
    out.push_back("");
  return out;
}

// Short eval and cross texts: 12 windows each from the shipped files.
struct Inputs {
  nlb::test::ScratchDir dir{"budget-cli"};
  fs::path eval, cross;
  Inputs() {
    const std::string e = slurp(source_dir / "data/kjv-eval.txt");
    const std::string c = slurp(source_dir / "data/jargon-eval.txt");
    eval = dir.write_text("eval.txt", e.substr(0, 12 * 128));
    cross = dir.write_text("cross.txt", c.substr(0, 12 * 128));
  }
  std::string args(const fs::path& out) const {
    return "--fit-positions 1000 --label-positions 2000 --eval-text '" + eval.string() +
           "' --cross-text '" + cross.string() +
           "' --seed 7 --budget-pct 1 --budget-pct 3 --decode-steps 8 --out '" + out.string() + "'";
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(small_report_is_complete_and_consistent) {
  Inputs in;
  const fs::path out = in.dir.path / "report";
  // A calibration split as large as the label set keeps this suite quick under the sanitizers.
  const std::string small_split = " --calibration-positions 2000";
  const auto r = run_budget(in.dir, in.args(out) + small_split);
  BOOST_TEST_MESSAGE(r.err);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_CHECK(contains(r.out, "report written to"));
  // Progress: a line per stage with its time, even though stderr is a file here.
  for (const char* stage : {"fit: surrogates", "label: delta per position",
                            "label: joint calibration", "eval: baseline, linear, gated, joint",
                            "cross: no-fly lists", "timing: dense vs gated forward and decode"})
    BOOST_CHECK_MESSAGE(contains(r.err, std::string("nlb budget: ") + stage + " done in"), stage);
  for (const char* f : {"report.md", "report.json", "layers.csv", "all_linear_delta.svg",
                        "linear_fraction.svg", "delta_distribution.svg", "joint_budget_curve.svg",
                        "cost_curves.svg", "gates-1pct.safetensors", "gates-3pct.safetensors"})
    BOOST_CHECK_MESSAGE(fs::is_regular_file(out / f), f);
  for (const char* svg : {"all_linear_delta.svg", "joint_budget_curve.svg"})
    BOOST_CHECK(contains(slurp(out / svg), "<svg"));

  const json report = json::parse(slurp(out / "report.json"));
  const auto errors = schema_errors(report);
  for (const auto& e : errors)
    BOOST_ERROR("schema: " << e);
  BOOST_CHECK(errors.empty());
  const auto layers = report.at("layers");
  BOOST_REQUIRE_EQUAL(layers.size(), 4u);
  BOOST_CHECK_EQUAL(report.at("protocol").at("fit_tokens"), 1000);
  BOOST_CHECK_EQUAL(report.at("protocol").at("label_tokens"), 2000);
  BOOST_CHECK_EQUAL(report.at("protocol").at("seed"), 7);
  BOOST_CHECK_EQUAL(report.at("protocol").at("eval_windows"), 12);
  BOOST_CHECK_EQUAL(report.at("protocol").at("budget_pct"), json::array({1.0, 3.0}));
  BOOST_REQUIRE_EQUAL(report.at("joint").size(), 2u);
  for (std::size_t b = 0; b < 2; ++b) {
    const auto& j = report["joint"][b];
    // The default search's rule: the upper end of the calibration interval meets the budget.
    BOOST_CHECK_LE(j.at("calibration_delta_pct_ci").at(1).get<double>(),
                   j.at("budget_pct").get<double>());
    BOOST_CHECK_LE(j.at("calibration_delta_pct_ci").at(0).get<double>(),
                   j.at("calibration_delta_pct").get<double>());
    double mean = 0;
    for (const auto& f : j.at("layer_linear_fraction"))
      mean += f.get<double>() / 4;
    BOOST_CHECK_CLOSE(mean, j.at("linear_fraction").get<double>(), 1e-9);
    // The timed Transformer::forward routed what the measured pass routed, on its own windows:
    // both are shares of MLP rows, so they must at least be fractions.
    BOOST_CHECK_GE(j.at("time_gated_linear_fraction").get<double>(), 0.0);
    // Decoding was timed for this budget too: positive times, a saving below 100%.
    BOOST_CHECK_GT(j.at("decode_time_dense_ms").get<double>(), 0.0);
    BOOST_CHECK_GT(j.at("decode_time_gated_ms").get<double>(), 0.0);
    BOOST_CHECK_LT(j.at("decode_time_saved_pct").get<double>(), 100.0);
    BOOST_CHECK_GE(j.at("decode_time_gated_linear_fraction").get<double>(), 0.0);
  }
  BOOST_CHECK_EQUAL(report.at("protocol").at("decode_steps"), 8);  // --decode-steps 8

  // layers.csv: the documented columns, one row per layer, the same values as report.json.
  std::istringstream csv(slurp(out / "layers.csv"));
  std::string line;
  std::getline(csv, line);
  const auto header = split(line, ',');
  const std::vector<std::string> expected_columns{"layer",
                                                  "surrogate_r2",
                                                  "all_linear_ppl",
                                                  "all_linear_delta_pct",
                                                  "all_linear_delta_pct_low",
                                                  "all_linear_delta_pct_high",
                                                  "gate_linear_fraction",
                                                  "gate_ppl",
                                                  "gate_delta_pct",
                                                  "gate_delta_pct_low",
                                                  "gate_delta_pct_high",
                                                  "gate_auc",
                                                  "probe_auc_embedding",
                                                  "probe_auc_context",
                                                  "no_fly_correlation"};
  BOOST_CHECK(header == expected_columns);
  for (std::size_t l = 0; l < 4; ++l) {
    BOOST_REQUIRE(std::getline(csv, line));
    const auto cells = split(line, ',');
    BOOST_REQUIRE_EQUAL(cells.size(), header.size());
    const auto& jl = layers[l];
    auto value = [&](const std::string& column) {
      const auto i = static_cast<std::size_t>(std::find(header.begin(), header.end(), column) -
                                              header.begin());
      return cells[i].empty() ? std::nan("") : std::stod(cells[i]);
    };
    BOOST_CHECK_EQUAL(value("layer"), static_cast<double>(l));
    for (const char* key :
         {"surrogate_r2", "all_linear_ppl", "all_linear_delta_pct", "gate_linear_fraction",
          "gate_ppl", "gate_delta_pct", "gate_auc", "probe_auc_embedding", "probe_auc_context"}) {
      if (jl.at(key).is_null())
        BOOST_CHECK(std::isnan(value(key)));
      else
        BOOST_CHECK_EQUAL(value(key), jl.at(key).get<double>());
    }
    BOOST_CHECK_EQUAL(value("all_linear_delta_pct_low"),
                      jl["all_linear_delta_pct_ci"][0].get<double>());
    BOOST_CHECK_EQUAL(value("gate_delta_pct_high"), jl["gate_delta_pct_ci"][1].get<double>());
    BOOST_CHECK_LE(value("all_linear_delta_pct_low"), value("all_linear_delta_pct"));
    BOOST_CHECK_GE(value("all_linear_delta_pct_high"), value("all_linear_delta_pct"));
  }
  BOOST_CHECK(!std::getline(csv, line) || line.empty());

  // The gates file: every layer's surrogate and gate, F32, with the documented metadata.
  const auto gates = nlb::io::SafetensorsFile::open(out / "gates-3pct.safetensors");
  BOOST_CHECK_EQUAL(gates.metadata().at("format"), "nlb-gates");
  BOOST_CHECK_EQUAL(gates.metadata().at("budget_pct"), "3");
  for (int l = 0; l < 4; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const std::vector<std::int64_t> dd{128, 128}, d{128}, one{1};
    BOOST_CHECK_EQUAL(gates.read<float>(p + "surrogate.weight", dd).size(), 128u * 128u);
    BOOST_CHECK_EQUAL(gates.read<float>(p + "surrogate.bias", d).size(), 128u);
    BOOST_CHECK_EQUAL(gates.read<float>(p + "gate.weight", d).size(), 128u);
    BOOST_CHECK_EQUAL(gates.read<float>(p + "gate.bias", one).size(), 1u);
    const auto th = gates.read<float>(p + "gate.threshold", one);
    const auto& jt = report["joint"][1]["thresholds"][static_cast<std::size_t>(l)];
    if (jt.is_null())
      BOOST_CHECK(std::isinf(th[0]));
    else
      BOOST_CHECK_EQUAL(th[0], static_cast<float>(jt.get<double>()));
  }
}

// Same inputs, same seed: the same report, wall-clock fields aside. Its own case (label
// "numerics", tests/CMakeLists.txt) so that the asan preset, which runs the case above, does
// not run the whole pipeline twice more.
BOOST_AUTO_TEST_CASE(small_report_is_reproducible) {
  Inputs in;
  const std::string small_split = " --calibration-positions 2000";
  const fs::path out = in.dir.path / "report", out2 = in.dir.path / "report2";
  BOOST_REQUIRE_EQUAL(run_budget(in.dir, in.args(out) + small_split).exit_code, 0);
  BOOST_REQUIRE_EQUAL(run_budget(in.dir, in.args(out2) + small_split).exit_code, 0);
  const json report = json::parse(slurp(out / "report.json"));
  const json again = json::parse(slurp(out2 / "report.json"));
  BOOST_CHECK(without_timing(report) == without_timing(again));
  BOOST_CHECK(slurp(out / "layers.csv") == slurp(out2 / "layers.csv"));
}

// --weights: every pass of the report runs on the model with that weight storage. Its baseline
// is the perplexity `nlb eval --weights q8` measures (another command over the same session
// kind), which is not the float model's; the report names the storage; an unknown kind is refused.
BOOST_AUTO_TEST_CASE(weights_option_runs_every_pass_on_that_storage) {
  Inputs in;
  const fs::path out = in.dir.path / "report";
  const auto r = run_budget(in.dir, in.args(out) + " --calibration-positions 2000 --weights q8");
  BOOST_TEST_MESSAGE(r.err);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  const json report = json::parse(slurp(out / "report.json"));
  for (const auto& e : schema_errors(report))
    BOOST_ERROR("schema: " << e);
  BOOST_TEST(report.at("protocol").at("weights").get<std::string>() == "q8");
  BOOST_TEST(contains(slurp(out / "report.md"), "with q8 weight matrices"));
  const auto eval_ppl = [&](const std::string& weights) {
    const auto e = nlb::test::run_nlb(
        in.dir.path, "eval --text '" + in.eval.string() + "' --weights " + weights + " --json");
    BOOST_REQUIRE_EQUAL(e.exit_code, 0);
    return json::parse(e.out).at("ppl").get<double>();
  };
  const double q8 = eval_ppl("q8"), f32 = eval_ppl("f32");
  BOOST_TEST(report.at("baseline_ppl").get<double>() == q8,
             boost::test_tools::tolerance(nlb::test::tol::budget_baseline_ppl_rel));
  BOOST_TEST(q8 != f32);  // the 8-bit copy's rounding reaches the perplexity

  const fs::path refused = in.dir.path / "refused";
  const auto bad = run_budget(in.dir, in.args(refused) + " --weights q4");
  BOOST_TEST(bad.exit_code != 0);
  BOOST_TEST(contains(bad.err, "--weights"));
  BOOST_TEST(!fs::exists(refused));
}

BOOST_AUTO_TEST_CASE(attention_spends_one_budget_across_mlp_and_attention) {
  // tiny-sd: the report's "across" section (schema-checked), its table and per-layer chart.
  Inputs in;
  const fs::path out = in.dir.path / "report";
  const std::string model = " --model '" + (source_dir / "models/tiny-sd").string() + "'";
  const auto r =
      run_budget(in.dir, in.args(out) + model + " --calibration-positions 2000 --attention");
  BOOST_TEST_MESSAGE(r.err);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_CHECK(contains(r.err, "nlb budget: across: MLP gates and attention done in"));
  BOOST_CHECK(contains(r.out, "across MLP and attention: eval"));
  const json report = json::parse(slurp(out / "report.json"));
  const auto errors = schema_errors(report);
  for (const auto& e : errors)
    BOOST_ERROR("schema: " << e);
  const json& across = report.at("across");
  BOOST_REQUIRE_EQUAL(across.at("options").size(), 4u);
  BOOST_REQUIRE_EQUAL(across.at("results").size(), 2u);
  for (const auto& res : across.at("results")) {
    BOOST_CHECK_LE(res.at("calibration_delta_pct_ci").at(1).get<double>(),
                   res.at("budget_pct").get<double>());
    BOOST_CHECK_EQUAL(res.at("attention").size(), 4u);
  }
  BOOST_CHECK(contains(slurp(out / "report.md"), "## One budget across MLP and attention"));
  BOOST_CHECK(contains(slurp(out / "across_allocation.svg"), "<svg"));
  // The search across needs the cost curves of the allocation search, and runs on the host.
  const auto greedy =
      run_budget(in.dir, in.args(in.dir.path / "g") + " --attention --calibration greedy");
  BOOST_CHECK_EQUAL(greedy.exit_code, 2);
  BOOST_CHECK(contains(greedy.err, "--attention"));
  BOOST_CHECK(!fs::exists(in.dir.path / "g"));
}

namespace {
// The first `bytes` of the shipped eval text and of the second corpus, written to `dir` (used by
// the tests that the sanitizer build leaves out).
// The report.json of a budget run `r` that wrote `out`, after checking that it succeeded and that
// the report meets the schema.
[[maybe_unused]] json checked_report(const nlb::test::CliResult& r, const fs::path& out) {
  BOOST_TEST_MESSAGE(r.err);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  const json report = json::parse(slurp(out / "report.json"));
  for (const auto& e : schema_errors(report))
    BOOST_ERROR("schema: " << e);
  return report;
}

[[maybe_unused]] std::pair<fs::path, fs::path> short_eval_and_cross(
    const nlb::test::ScratchDir& dir, std::size_t bytes) {
  return {dir.write_text("eval.txt", slurp(source_dir / "data/kjv-eval.txt").substr(0, bytes)),
          dir.write_text("cross.txt", slurp(source_dir / "data/jargon-eval.txt").substr(0, bytes))};
}
}  // namespace

// Not under the sanitizers (asan preset): the 50 257-way log-sum-exp of every position is
// instrumented there and the run takes tens of minutes; the dev build runs it in CI.
#if NLB_WITH_TEXT && !defined(__SANITIZE_ADDRESS__)
BOOST_AUTO_TEST_CASE(real_vocabulary_model_runs_through_budget) {
  // models/tiny-gpt2-bpe: GPT-2's 50 257-token vocabulary; every text is encoded with the
  // model directory's own tokenizer. 8 KB of eval and cross text are about 15 windows of 128
  // tokens each.
  nlb::test::ScratchDir dir{"budget-bpe"};
  const fs::path model = source_dir / "models/tiny-gpt2-bpe";
  const auto [eval, cross] = short_eval_and_cross(dir, 8000);
  const fs::path out = dir.path / "report";
  const auto r = run_budget(dir, "--model '" + model.string() +
                                     "' --fit-positions 1000 --label-positions 2000 "
                                     "--calibration-positions 1000 --eval-text '" +
                                     eval.string() + "' --cross-text '" + cross.string() +
                                     "' --seed 7 --budget-pct 3 --out '" + out.string() + "'");
  const json report = checked_report(r, out);
  BOOST_TEST(report.at("layers").size() == 4u);
  BOOST_TEST(report.at("protocol").at("eval_windows").get<int>() >= 12);
  BOOST_TEST(report.at("joint").at(0).at("calibration_delta_pct_ci").at(1).get<double>() <= 3.0);
  // The report's baseline is the model's perplexity on the eval text, as `nlb eval` measures it.
  const auto eval_run = nlb::test::run_nlb(
      dir.path, "eval --model '" + model.string() + "' --text '" + eval.string() + "' --json");
  BOOST_REQUIRE_EQUAL(eval_run.exit_code, 0);
  BOOST_TEST(
      report.at("baseline_ppl").get<double>() == json::parse(eval_run.out).at("ppl").get<double>(),
      boost::test_tools::tolerance(nlb::test::tol::budget_baseline_ppl_rel));
}
#endif

// The Llama family through the whole job: models/tiny-llama (SwiGLU, grouped-query heads, RMSNorm,
// its own tokenizer.json) through budget, linearize with the budget's gates, eval of the new
// directory, and spectrum. Not under the sanitizers: as above, the 3 261-way log-sum-exp of every
// label position is slow there; the dev build runs it in CI.
#if NLB_WITH_TEXT && !defined(__SANITIZE_ADDRESS__)
BOOST_AUTO_TEST_CASE(llama_family_model_through_budget_linearize_and_spectrum) {
  nlb::test::ScratchDir dir{"budget-llama"};
  const fs::path model = source_dir / "models/tiny-llama";
  const auto [eval, cross] = short_eval_and_cross(dir, 12000);
  // Fit and label texts shorter than the default position counts need: the defaults are scaled
  // to them, and the report says so.
  const fs::path fit_text =
      dir.write_text("fit.txt", slurp(source_dir / "data/kjv-fit.txt").substr(0, 12000));
  const fs::path label_text =
      dir.write_text("label.txt", slurp(source_dir / "data/kjv-label.txt").substr(0, 16000));
  const fs::path out = dir.path / "report";
  const auto r =
      run_budget(dir, "--model '" + model.string() + "' --fit-text '" + fit_text.string() +
                          "' --label-text '" + label_text.string() + "' --eval-text '" +
                          eval.string() + "' --cross-text '" + cross.string() +
                          "' --seed 7 --budget-pct 3 --out '" + out.string() + "'");
  const json report = checked_report(r, out);
  const json& protocol = report.at("protocol");
  BOOST_TEST(protocol.at("scaled_defaults").is_string());
  BOOST_TEST(protocol.at("label_tokens").get<int>() < 25000);
  const double ratio =
      protocol.at("calibration_tokens").get<double>() / protocol.at("label_tokens").get<double>();
  BOOST_TEST(std::abs(ratio - 3.0) < 0.5, "calibration/label positions " << ratio);
  BOOST_TEST(contains(protocol.at("token_format").get<std::string>(), "tokenizer.json"));
  BOOST_TEST(report.at("model").at("architecture") == "llama");
  BOOST_TEST(report.at("layers").size() == 4u);
  BOOST_TEST(report.at("joint").at(0).at("calibration_delta_pct_ci").at(1).get<double>() <= 3.0);
  const std::string md = slurp(out / "report.md");
  BOOST_TEST(contains(md, "Scaled defaults"));
  BOOST_TEST(contains(md, "6·d·h per token"), "the report explains the SwiGLU FLOPs");
  BOOST_TEST(contains(md, "e is the token embedding alone"));
  // The report's baseline is `nlb eval`'s perplexity of the same text.
  const auto eval_run = nlb::test::run_nlb(
      dir.path, "eval --model '" + model.string() + "' --text '" + eval.string() + "' --json");
  BOOST_REQUIRE_EQUAL(eval_run.exit_code, 0);
  const double baseline = json::parse(eval_run.out).at("ppl").get<double>();
  BOOST_TEST(report.at("baseline_ppl").get<double>() == baseline,
             boost::test_tools::tolerance(nlb::test::tol::budget_baseline_ppl_rel));

  // linearize with the 3% gates: a directory nlb eval loads, with a gated SwiGLU layer.
  const std::string gates = report.at("joint").at(0).at("gates_file").get<std::string>();
  const fs::path linearized = dir.path / "gated";
  const auto lin = nlb::test::run_nlb(
      dir.path, "linearize --model '" + model.string() + "' --layers 1 --gates '" +
                    (out / gates).string() + "' --out '" + linearized.string() + "'");
  BOOST_TEST_MESSAGE(lin.err);
  BOOST_REQUIRE_EQUAL(lin.exit_code, 0);
  const json config = json::parse(slurp(linearized / "config.json"));
  BOOST_TEST(config.at("nlb_mlp_kinds").at(1) == "gated");
  const auto gated_eval = nlb::test::run_nlb(
      dir.path, "eval --model '" + linearized.string() + "' --text '" + eval.string() + "' --json");
  BOOST_REQUIRE_EQUAL(gated_eval.exit_code, 0);
  const double gated = json::parse(gated_eval.out).at("ppl").get<double>();
  BOOST_TEST_MESSAGE("tiny-llama eval PPL " << baseline << ", layer 1 gated " << gated);
  BOOST_TEST(gated != baseline);
  BOOST_TEST(std::abs(gated / baseline - 1) < 0.2);
  // A fitted linear layer from the fit text.
  const fs::path linear = dir.path / "linear";
  const auto fit = nlb::test::run_nlb(dir.path, "linearize --model '" + model.string() +
                                                    "' --layers 0 --fit-positions 2000 --out '" +
                                                    linear.string() + "'");
  BOOST_REQUIRE_EQUAL(fit.exit_code, 0);
  BOOST_TEST(nlb::test::run_nlb(dir.path, "eval --model '" + linear.string() + "' --text '" +
                                              eval.string() + "' --json")
                 .exit_code == 0);

  // spectrum: per query head W_Q,h W_K,g(h)^T, the report naming the shared key head.
  const fs::path spectrum = dir.path / "spectrum";
  const auto sp = nlb::test::run_nlb(
      dir.path, "spectrum --model '" + model.string() + "' --text '" + eval.string() +
                    "' --max-windows 2 --out '" + spectrum.string() + "' --json");
  BOOST_TEST_MESSAGE(sp.err);
  BOOST_REQUIRE_EQUAL(sp.exit_code, 0);
  const json spec = json::parse(sp.out);
  BOOST_TEST(spec.at("key_value_heads_per_layer") == 2);
  BOOST_TEST(spec.at("heads").size() == 16u);
  for (const auto& h : spec.at("heads"))
    BOOST_TEST(h.at("key_head").get<int>() == h.at("head").get<int>() / 2);
  BOOST_TEST(contains(slurp(spectrum / "report.md"), "Grouped-query attention"));
}
#endif

BOOST_AUTO_TEST_CASE(bad_inputs_fail_cleanly_and_leave_no_report) {
  Inputs in;
  const fs::path out = in.dir.path / "never";
  const std::string base =
      "--out '" + out.string() + "' --fit-positions 1000 --label-positions 2000 ";
  struct Case {
    std::string name, args;
    int exit_code;
    std::vector<std::string> phrases;
  };
  const fs::path tiny = in.dir.write_text("tiny.txt", "In the beginning");
  // A model directory whose layer 1 has no MLP weights.
  const fs::path broken = in.dir.path / "no-mlp";
  {
    fs::create_directories(broken);
    const auto f =
        nlb::io::SafetensorsFile::open(source_dir / "models/tiny-gpt2/model.safetensors");
    nlb::io::SafetensorsWriter w;
    for (const auto& t : f.tensors()) {
      if (t.name.find("h.1.mlp.c_fc") != std::string::npos)
        continue;
      w.add(t.name, nlb::io::DType::F32, t.shape, std::span<const float>(f.read<float>(t.name)));
    }
    w.write(broken / "model.safetensors");
    fs::copy_file(source_dir / "models/tiny-gpt2/config.json", broken / "config.json");
  }
  const std::vector<Case> cases{
      {"missing fit file",
       "--fit-text '" + (in.dir.path / "absent.txt").string() + "'",
       1,
       {"absent.txt"}},
      {"too-short fit file",
       "--fit-text '" + tiny.string() + "'",
       1,
       {"--fit-text", "tiny.txt", "expected at least 1024 tokens", "found 16 tokens"}},
      {"too-short label file",
       "--label-text '" + in.eval.string() + "'",
       1,
       {"--label-text", "eval.txt",
        "expected at least 8192 tokens (64 windows of 128 for 2000 label positions and 6000 "
        "calibration positions)",
        "found 1536 tokens"}},
      {"too-short eval file",
       "--eval-text '" + tiny.string() + "'",
       1,
       {"--eval-text", "expected at least 128 tokens", "found 16 tokens"}},
      {"model without MLP taps", "--model '" + broken.string() + "'", 1, {"h.1.mlp.c_fc"}},
      {"budget 0", "--budget-pct 0", 2, {"--budget-pct", "> 0", "\"0\""}},
      {"negative budget", "--budget-pct 1 --budget-pct -2", 2, {"--budget-pct", "\"-2\""}},
      {"budget not a number", "--budget-pct x", 2, {"--budget-pct"}},
      {"no decode steps", "--decode-steps 0", 2, {"--decode-steps", "\"0\""}},
      {"unknown gate features",
       "--gate-features some",
       2,
       {"--gate-features", "replicated or split", "\"some\""}},
  };
  for (const auto& c : cases) {
    const auto r = run_budget(in.dir, base + c.args);
    BOOST_TEST_MESSAGE(c.name << ": exit " << r.exit_code << ": " << r.err);
    BOOST_CHECK_MESSAGE(r.exit_code == c.exit_code, c.name << ": exit " << r.exit_code);
    for (const auto& p : c.phrases)
      BOOST_CHECK_MESSAGE(contains(r.err, p), c.name << ": stderr lacks \"" << p << "\"");
    BOOST_CHECK_MESSAGE(!fs::exists(out), c.name << ": a report directory was left behind");
  }
}

// Token-id files (one option per input) give the report of the same tokens read as text: only
// the file names and the stated token format differ. Small protocol: this is about the inputs.
BOOST_AUTO_TEST_CASE(token_id_files_give_the_text_report) {
  Inputs in;
  const std::string small = "--fit-positions 256 --label-positions 400 --budget-pct 2 --seed 3 ";
  const std::vector<std::string> sets{"fit", "label", "eval", "cross"};
  const std::vector<fs::path> texts{source_dir / "data/kjv-fit.txt",
                                    source_dir / "data/kjv-label.txt", in.eval, in.cross};
  std::string as_text = small, as_ids = small + "--token-dtype u32 ";
  std::vector<fs::path> id_files;
  for (std::size_t i = 0; i < sets.size(); ++i) {
    id_files.push_back(in.dir.path / (sets[i] + ".u32.bin"));
    nlb::io::write_token_file(id_files[i], nlb::io::read_text_tokens(texts[i]),
                              nlb::io::TokenDType::U32);
    as_text += "--" + sets[i] + "-text '" + texts[i].string() + "' ";
    as_ids += "--" + sets[i] + "-tokens-file '" + id_files[i].string() + "' ";
  }
  const auto t = run_budget(in.dir, as_text + "--out text-report");
  BOOST_TEST_REQUIRE(t.exit_code == 0, t.err);
  const auto b = run_budget(in.dir, as_ids + "--out ids-report");
  BOOST_TEST_REQUIRE(b.exit_code == 0, b.err);
  json text_report = json::parse(slurp(in.dir.path / "text-report/report.json"));
  json ids_report = json::parse(slurp(in.dir.path / "ids-report/report.json"));
  BOOST_TEST(text_report["protocol"]["token_format"] == "bytes");
  BOOST_TEST(ids_report["protocol"]["token_format"] == "token ids (u32)");
  for (std::size_t i = 0; i < sets.size(); ++i) {
    const std::string key = sets[i] + "_text";
    BOOST_TEST(ids_report["protocol"][key] == id_files[i].string(), key);
    BOOST_TEST(text_report["protocol"][key] == texts[i].string(), key);
  }
  BOOST_TEST(ids_report["protocol"]["fit_tokens"] == 256);
  BOOST_TEST(ids_report["protocol"]["label_tokens"] == 400);
  for (auto* r : {&text_report, &ids_report}) {
    for (const auto& key : sets)
      (*r)["protocol"].erase(key + "_text");
    (*r)["protocol"].erase("token_format");
  }
  BOOST_CHECK(without_timing(text_report) == without_timing(ids_report));
}

BOOST_AUTO_TEST_CASE(token_id_inputs_are_all_four_and_named_in_errors) {
  Inputs in;
  const fs::path out = in.dir.path / "never";
  const fs::path fit = in.dir.path / "fit.u16.bin", label = in.dir.path / "label.u16.bin",
                 eval = in.dir.path / "eval.u16.bin", cross = in.dir.path / "cross.u16.bin";
  nlb::io::write_token_file(fit, nlb::io::read_text_tokens(source_dir / "data/kjv-fit.txt"));
  nlb::io::write_token_file(label, nlb::io::read_text_tokens(in.eval));  // 1536 tokens: short
  nlb::io::write_token_file(eval, nlb::io::read_text_tokens(in.eval));
  nlb::io::write_token_file(cross, nlb::io::read_text_tokens(in.cross));
  const std::string four = "--fit-tokens-file '" + fit.string() + "' --label-tokens-file '" +
                           label.string() + "' --eval-tokens-file '" + eval.string() +
                           "' --cross-tokens-file '" + cross.string() + "' ";
  struct Case {
    std::string name, args;
    int exit_code;
    std::vector<std::string> phrases;
  };
  const std::vector<Case> cases{
      {"a short label token file",
       four + "--fit-positions 1000 --label-positions 2000",
       1,
       {"--label-tokens-file", "label.u16.bin",
        "expected at least 8192 tokens (64 windows of 128 for 2000 label positions and 6000 "
        "calibration positions)",
        "found 1536 tokens"}},
      {"one token-id file and default texts",
       "--fit-tokens-file '" + fit.string() + "'",
       2,
       {"--fit-tokens-file is a token-id file", "--label-tokens-file FILE"}},
      {"token ids mixed with a text",
       "--fit-tokens-file '" + fit.string() + "' --label-tokens-file '" + label.string() +
           "' --eval-tokens-file '" + eval.string() + "' --cross-text '" + in.cross.string() + "'",
       2,
       {"--cross-tokens-file FILE", "instead of --cross-text"}},
      {"a text and a token-id file for one input",
       four + "--fit-text '" + in.eval.string() + "'",
       2,
       {"at most one of --fit-text FILE and --fit-tokens-file FILE"}},
      {"--token-dtype with texts", "--token-dtype u32", 2, {"--token-dtype", "--fit-tokens-file"}},
  };
  for (const auto& c : cases) {
    const auto r = run_budget(in.dir, "--out '" + out.string() + "' " + c.args);
    BOOST_CHECK_MESSAGE(r.exit_code == c.exit_code,
                        c.name << ": exit " << r.exit_code << ": " << r.err);
    for (const auto& p : c.phrases)
      BOOST_CHECK_MESSAGE(contains(r.err, p),
                          c.name << ": stderr lacks \"" << p << "\": " << r.err);
    BOOST_CHECK_MESSAGE(!fs::exists(out), c.name << ": a report directory was left behind");
  }
}

// The options renamed so that "tokens" always names a token-id file (CHANGELOG.md): each old
// spelling is a usage error that names its replacement, before any work.
BOOST_AUTO_TEST_CASE(old_spellings_name_their_replacements) {
  Inputs in;
  const fs::path out = in.dir.path / "never";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
      {"--tokens",
       {"option --tokens was renamed", "--fit-tokens-file FILE", "--label-tokens-file FILE",
        "--eval-tokens-file FILE", "--cross-tokens-file FILE"}},
      {"--fit-tokens 1000", {"option --fit-tokens was renamed", "--fit-positions N"}},
      {"--label-tokens 2000", {"option --label-tokens was renamed", "--label-positions N"}},
  };
  for (const auto& [args, phrases] : cases) {
    const auto r = run_budget(in.dir, args + " --out '" + out.string() + "'");
    BOOST_CHECK_MESSAGE(r.exit_code == 2, args << ": exit " << r.exit_code << ": " << r.err);
    for (const auto& p : phrases)
      BOOST_CHECK_MESSAGE(contains(r.err, p), args << ": stderr lacks \"" << p << "\": " << r.err);
    BOOST_CHECK_MESSAGE(!contains(r.err, "nlb budget: fit"), args << ": the pipeline started");
    BOOST_CHECK(!fs::exists(out));
  }
}

// `nlb help budget` prints the protocol's own defaults (BudgetProtocol{}), not a copy.
BOOST_AUTO_TEST_CASE(help_page_prints_the_protocol_defaults) {
  Inputs in;
  const auto r = nlb::test::run_nlb(in.dir.path, "help budget");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlb::BudgetProtocol p;
  auto line = [&](const std::string& option) {
    const auto at = r.out.find("\n  " + option + " ");
    BOOST_TEST_REQUIRE(at != std::string::npos, option);
    return r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  };
  std::ostringstream lambda, budgets;
  lambda << p.lambda;
  for (std::size_t i = 0; i < p.budgets_pct.size(); ++i)
    budgets << (i == 0 ? "" : i + 1 == p.budgets_pct.size() ? " and " : ", ") << p.budgets_pct[i];
  BOOST_TEST(contains(line("--fit-positions"), "(default " + std::to_string(p.fit_tokens)));
  BOOST_TEST(contains(line("--label-positions"), "(default " + std::to_string(p.label_tokens)));
  BOOST_TEST(contains(line("--context"), "(default min(" + std::to_string(p.context) + ","));
  BOOST_TEST(contains(line("--lambda"), "(default " + lambda.str() + ")"));
  BOOST_TEST(contains(line("--budget-pct"), "(default " + budgets.str() + ")"));
  BOOST_TEST(contains(line("--seed"), "(default " + std::to_string(p.seed) + ")"));
  BOOST_TEST(contains(line("--decode-steps"), "(default " + std::to_string(p.decode_steps) + ","));
}
