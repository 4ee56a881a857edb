// The budget pipeline's stages 1–3 (baseline, float64 ridge surrogates, per-layer all-linear
// Δ%, all layers at once) against the independent PyTorch implementation
// tools/python/mlp_budget_reference.py, whose numbers are in tests/fixtures/*-mlp-budget.json.
// A missing fixture fails the test. Rebuild: /usr/bin/python3 tools/python/mlp_budget_reference.py
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nlb/analysis/budget/pipeline.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"
#include "tolerances.hpp"

namespace {

namespace fs = std::filesystem;
namespace tol = nlb::test::tol;
const fs::path source_dir = NLB_SOURCE_DIR;

void check_model(const std::string& model_name) {
  const fs::path fixture_path = source_dir / "tests/fixtures" / (model_name + "-mlp-budget.json");
  BOOST_REQUIRE_MESSAGE(
      fs::exists(fixture_path),
      "fixture missing: " << fixture_path << " (run tools/python/mlp_budget_reference.py)");
  std::ifstream in(fixture_path);
  const auto fx = nlohmann::json::parse(in);
  const auto& p = fx.at("protocol");

  nlb::BudgetProtocol protocol;  // the defaults are the fixture's protocol
  BOOST_REQUIRE_EQUAL(p.at("context").get<long long>(), protocol.context);
  BOOST_REQUIRE_EQUAL(p.at("fit_tokens").get<long long>(), protocol.fit_tokens);
  BOOST_REQUIRE_EQUAL(p.at("lambda").get<double>(), protocol.lambda);
  BOOST_REQUIRE_EQUAL(p.at("lambda_scaling").get<std::string>(), "absolute");
  protocol.bootstrap_resamples = 10;  // intervals are not compared here

  auto model = nlb::load_model<float>(source_dir / "models" / model_name);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ModelRunner<float> runner(ctx, model);
  const auto fit_tokens =
      nlb::io::read_text_tokens(source_dir / p.at("fit_text").get<std::string>());
  const auto eval_tokens =
      nlb::io::read_text_tokens(source_dir / p.at("eval_text").get<std::string>());

  const auto t0 = std::chrono::steady_clock::now();
  const auto fit = nlb::fit_surrogates(runner, fit_tokens, protocol);
  const auto t1 = std::chrono::steady_clock::now();
  const auto eval = nlb::run_eval_stage(runner, fit, nullptr, eval_tokens, protocol);
  const auto t2 = std::chrono::steady_clock::now();
  BOOST_TEST_MESSAGE(model_name << ": fit " << std::chrono::duration<double>(t1 - t0).count()
                                << " s, eval (6 configurations, " << eval.windows << " windows) "
                                << std::chrono::duration<double>(t2 - t1).count() << " s");

  BOOST_CHECK_EQUAL(eval.windows, fx.at("eval_windows").get<long long>());
  BOOST_CHECK_EQUAL(eval.predicted_tokens, fx.at("eval_predicted_tokens").get<long long>());
  const double base_ref = fx.at("baseline_ppl");
  BOOST_CHECK_LE(std::fabs(eval.baseline_ppl - base_ref), tol::budget_baseline_ppl_rel * base_ref);
  const auto& layers = fx.at("layers");
  BOOST_REQUIRE_EQUAL(static_cast<long long>(layers.size()), model.layer_count());
  double max_err = 0;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const auto& ref = layers[l];
    BOOST_REQUIRE_EQUAL(ref.at("layer").get<std::size_t>(), l);
    const double r2_err = std::fabs(fit.reports[l].r2 - ref.at("surrogate_r2").get<double>());
    const double d_err = std::fabs(eval.layers[l].all_linear_delta_pct.value -
                                   ref.at("all_linear_delta_pct").get<double>());
    max_err = std::max(max_err, d_err);
    BOOST_TEST_MESSAGE(model_name << " layer " << l << ": delta% "
                                  << eval.layers[l].all_linear_delta_pct.value << " vs "
                                  << ref.at("all_linear_delta_pct").get<double>() << " (|diff| "
                                  << d_err << " pp), R2 diff " << r2_err);
    BOOST_CHECK_LE(r2_err, tol::budget_r2_abs);
    BOOST_CHECK_LE(d_err, tol::budget_delta_pct_abs);
    BOOST_CHECK_LE(
        std::fabs(eval.layers[l].all_linear_ppl - ref.at("all_linear_ppl").get<double>()),
        tol::budget_delta_pct_abs / 100.0 * base_ref);
  }
  const double all_err = std::fabs(eval.all_layers_linear_delta_pct.value -
                                   fx.at("all_layers_linear_delta_pct").get<double>());
  BOOST_TEST_MESSAGE(model_name << " all layers: |diff| " << all_err << " pp; max per layer "
                                << max_err << " pp");
  BOOST_CHECK_LE(all_err, tol::budget_delta_pct_abs);
}

}  // namespace

BOOST_AUTO_TEST_CASE(tiny_gpt2_matches_pytorch_reference) {
  check_model("tiny-gpt2");
}

BOOST_AUTO_TEST_CASE(tiny_neox_matches_pytorch_reference) {
  check_model("tiny-neox");
}
