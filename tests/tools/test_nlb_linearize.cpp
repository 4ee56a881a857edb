// `nlb linearize` as a user runs it (docs/linearize.md): the written directory loads in
// `nlb eval` with the perplexity of the in-memory swap, its surrogate matches the independent
// PyTorch fit (tests/fixtures/tiny-gpt2-mlp-budget.json), a fit token-id file fits what the text
// does with nlb budget's defaults, gates files make gated layers, and bad input (renamed options
// included) fails cleanly with nothing left behind.

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_runner.hpp"
#include "nlb/analysis/budget/protocol.hpp"
#include "nlb/analysis/budget/tap_collection.hpp"
#include "nlb/io/safetensors.hpp"
#include "nlb/io/safetensors_writer.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/mlp/ridge_surrogate.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/loss.hpp"
#include "scratch_dir.hpp"
#include "test_random.hpp"
#include "tolerances.hpp"

namespace {

namespace fs = std::filesystem;
const fs::path source_dir = NLB_SOURCE_DIR;
const fs::path tiny_gpt2 = source_dir / "models/tiny-gpt2";
const fs::path eval_text = source_dir / "data/kjv-eval.txt";

const nlb::test::ScratchDir& scratch() {
  static const nlb::test::ScratchDir dir("linearize-cli");
  return dir;
}

using nlb::test::contains;
using nlb::test::slurp;
using RunResult = nlb::test::CliResult;

// Runs `nlb <args>` in the scratch directory; captures stdout and stderr.
RunResult run_nlb(const std::string& args) {
  return nlb::test::run_nlb(scratch().path, args);
}

std::string q(const fs::path& p) {
  return "'" + p.string() + "'";
}

// Entries of the scratch directory whose names contain `part` (leftover temporaries).
int entries_containing(const std::string& part) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(scratch().path))
    n += contains(e.path().filename().string(), part) ? 1 : 0;
  return n;
}

// The surrogate of layer `layer` fitted by the library as the protocol says: taps of the model
// in double on the first 10,000 positions of data/kjv-fit.txt in windows of 128, λ = 0.01.
nlb::RidgeSurrogate<double> library_surrogate(nlb::Index layer) {
  const auto model = nlb::load_model<double>(tiny_gpt2);
  const auto tokens = nlb::io::read_text_tokens(source_dir / "data/kjv-fit.txt");
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ModelRunner<double> runner(ctx, model);
  const auto stats = nlb::collect_ridge_stats(runner, tokens, 128, 10000);
  nlb::RidgeSurrogate<double> s;
  s.fit(stats[static_cast<std::size_t>(layer)], 0.01);
  return s;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

const nlohmann::json& fixture_layer(const nlohmann::json& fixture, int layer) {
  for (const auto& l : fixture.at("layers")) {
    if (l.at("layer") == layer)
      return l;
  }
  throw std::runtime_error("fixture has no layer " + std::to_string(layer));
}

}  // namespace

BOOST_AUTO_TEST_CASE(linearize_layer_1_then_eval_equals_in_memory_swap) {
  const fs::path out = scratch().path / "lin1";
  const RunResult r = run_nlb("linearize --layers 1 --out " + q(out));
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.out, "layer 1: linear"));

  // The directory: config with the kinds, the surrogate instead of layer 1's MLP, a record.
  const auto config = read_json(out / "config.json");
  BOOST_TEST(config.at("nlb_mlp_kinds") == nlohmann::json({"full", "linear", "full", "full"}));
  BOOST_TEST(config.at("n_embd") == 128);
  const auto file = nlb::io::SafetensorsFile::open(out / "model.safetensors");
  BOOST_TEST(file.contains("transformer.h.1.mlp.surrogate.weight"));
  BOOST_TEST(!file.contains("transformer.h.1.mlp.c_fc.weight"));
  BOOST_TEST(file.contains("transformer.h.2.mlp.c_fc.weight"));
  BOOST_TEST(fs::exists(out / "linearize.json"));
  BOOST_TEST(entries_containing(".tmp-linearize") == 0);
  // Fitted with nlb budget's defaults (BudgetProtocol{}), as the record says.
  const nlb::BudgetProtocol protocol;
  const auto fit = read_json(out / "linearize.json").at("fit");
  BOOST_TEST(fit.at("positions") == protocol.fit_tokens);
  BOOST_TEST(fit.at("context") == protocol.context);
  BOOST_TEST(fit.at("lambda") == protocol.lambda);
  BOOST_TEST(fit.at("tokens") == (source_dir / "data/kjv-fit.txt").string());

  // nlb eval of the written model against the shipped model with layer 1 swapped in memory.
  const RunResult e =
      run_nlb("eval --model " + q(out) + " --text " + q(eval_text) + " --max-windows 8 --json");
  BOOST_TEST_REQUIRE(e.exit_code == 0, e.err);
  const double got = nlohmann::json::parse(e.out).at("ppl");

  const auto surrogate = library_surrogate(1);
  auto swapped = nlb::load_model<float>(tiny_gpt2);
  using Slot = nlb::MlpSlot<float>;
  swapped.layers()[1].mlp() =
      Slot(Slot::Surrogate(surrogate.weight().cast<float>(), surrogate.bias().cast<float>()));
  const auto tokens = nlb::io::read_text_tokens(eval_text);
  nlb::Context<nlb::backend::cpu> ctx;
  const double want = nlb::evaluate_perplexity(ctx, swapped, tokens, 128, 8).ppl;
  const double base =
      nlb::evaluate_perplexity(ctx, nlb::load_model<float>(tiny_gpt2), tokens, 128, 8).ppl;
  BOOST_TEST(std::abs(got / want - 1.0) <= nlb::test::tol::linearize_same_ops_rel,
             "nlb eval " << got << " vs in-memory swap " << want);
  BOOST_TEST(got / base - 1.0 > 0.01);  // layer 1 costs tens of percent (fixture: +27%)
}

BOOST_AUTO_TEST_CASE(fitted_surrogate_matches_pytorch_reference) {
  // The R² recorded by nlb linearize vs the independent PyTorch fit (SVD form, residuals).
  const fs::path out = scratch().path / "lin-r2";
  const RunResult r = run_nlb("linearize --layers 1,3 --out " + q(out));
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const auto record = read_json(out / "linearize.json");
  const auto fixture = read_json(source_dir / "tests/fixtures/tiny-gpt2-mlp-budget.json");
  BOOST_TEST_REQUIRE(record.at("layers").size() == 2u);
  for (const auto& l : record.at("layers")) {
    const double want = fixture_layer(fixture, l.at("layer")).at("surrogate_r2");
    const double got = l.at("surrogate_r2");
    BOOST_TEST(std::abs(got - want) <= nlb::test::tol::linearize_r2_vs_pytorch_abs,
               "layer " << l.at("layer") << ": R2 " << got << " vs PyTorch " << want);
  }
  BOOST_TEST(read_json(out / "config.json").at("nlb_mlp_kinds") ==
             nlohmann::json({"full", "linear", "full", "linear"}));
}

// Opt-in (ctest -L heavy): the whole eval text, against PyTorch's all-linear PPL of layer 1.
BOOST_AUTO_TEST_CASE(linearized_full_text_ppl_matches_pytorch, *boost::unit_test::disabled()) {
  const fs::path out = scratch().path / "lin-full";
  BOOST_TEST_REQUIRE(run_nlb("linearize --layers 1 --out " + q(out)).exit_code == 0);
  const RunResult e = run_nlb("eval --model " + q(out) + " --text " + q(eval_text) + " --json");
  BOOST_TEST_REQUIRE(e.exit_code == 0, e.err);
  const double got = nlohmann::json::parse(e.out).at("ppl");
  const auto fixture = read_json(source_dir / "tests/fixtures/tiny-gpt2-mlp-budget.json");
  const double want = fixture_layer(fixture, 1).at("all_linear_ppl");
  BOOST_TEST(std::abs(got / want - 1.0) <= nlb::test::tol::model_ppl_rel,
             "nlb eval " << got << " vs PyTorch " << want);
}

BOOST_AUTO_TEST_CASE(gates_file_makes_gated_layers) {
  // A gates file as `nlb budget` writes it, with known parts for layer 2.
  const nlb::Index d = 128;
  const Eigen::MatrixXd w = 0.05 * nlb::test::gaussian(d, d, 21);
  const Eigen::MatrixXd b = 0.1 * nlb::test::gaussian(1, d, 22);
  const Eigen::MatrixXd g = nlb::test::gaussian(1, d, 23);
  const nlb::RowMatrix<double> w_rows = w;
  nlb::io::SafetensorsWriter writer;
  writer.add("layers.2.surrogate.weight", nlb::io::DType::F64, {d, d},
             std::span<const double>(w_rows.data(), static_cast<std::size_t>(d * d)));
  writer.add("layers.2.surrogate.bias", nlb::io::DType::F64, {d},
             std::span<const double>(b.data(), static_cast<std::size_t>(d)));
  writer.add("layers.2.gate.weight", nlb::io::DType::F64, {d},
             std::span<const double>(g.data(), static_cast<std::size_t>(d)));
  const double gate_bias = 0.25, threshold = 0.5;
  writer.add("layers.2.gate.bias", nlb::io::DType::F64, {1},
             std::span<const double>(&gate_bias, 1));
  writer.add("layers.2.gate.threshold", nlb::io::DType::F64, {1},
             std::span<const double>(&threshold, 1));
  writer.set_metadata("format", "nlb-gates");
  const fs::path gates = scratch().path / "gates.safetensors";
  writer.write(gates);

  const fs::path out = scratch().path / "gated2";
  const RunResult r = run_nlb("linearize --layers 2 --gates " + q(gates) + " --out " + q(out));
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(read_json(out / "config.json").at("nlb_mlp_kinds") ==
             nlohmann::json({"full", "full", "gated", "full"}));

  // Loaded, it equals the shipped model with layer 2 gated in memory by the same parts
  // (the file stores them as F32).
  const auto loaded = nlb::load_model<double>(out);
  const auto weights = nlb::load_model_weights<double>(tiny_gpt2);
  const auto& m = weights.blocks[2].mlp;
  using Slot = nlb::MlpSlot<double>;
  auto swapped = nlb::make_transformer(weights);
  const auto f32 = [](const Eigen::MatrixXd& x) -> Eigen::MatrixXd {
    return x.cast<float>().cast<double>();
  };
  const nlb::ColVector<double> gate_col = f32(g).transpose();
  swapped.layers()[2].mlp() = Slot(Slot::GatedTanh(
      Slot::MlpTanh(m.w_fc, m.b_fc, m.w_proj, m.b_proj), Slot::Surrogate(f32(w), f32(b)),
      Slot::Gate(gate_col, static_cast<double>(static_cast<float>(gate_bias)),
                 static_cast<double>(static_cast<float>(threshold)))));
  const auto text = nlb::io::read_text_tokens(eval_text);
  const std::vector<std::int32_t> tokens(text.begin(), text.begin() + 128);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::Transformer<double>::Workspace loaded_ws, swapped_ws;
  nlb::RowMatrix<double> got, want;
  nlb::RouteCounts counts;
  loaded.forward(ctx, tokens, got, loaded_ws, nlb::NoTaps{}, nullptr, &counts);
  swapped.forward(ctx, tokens, want, swapped_ws);
  BOOST_TEST((got - want).cwiseAbs().maxCoeff() == 0.0);
  BOOST_TEST(counts.linear > 0);
  BOOST_TEST(counts.linear < 128);

  // A layer the gates file does not hold: error, nothing written.
  const fs::path out3 = scratch().path / "gated3";
  const RunResult bad = run_nlb("linearize --layers 3 --gates " + q(gates) + " --out " + q(out3));
  BOOST_TEST(bad.exit_code == 1);
  BOOST_TEST(contains(bad.err, "layers.3.surrogate.weight"));
  BOOST_TEST(!fs::exists(out3));
}

BOOST_AUTO_TEST_CASE(bad_input_fails_cleanly) {
  const fs::path out = scratch().path / "never";
  struct Case {
    std::string args;
    int exit_code;
    std::string message;
  };
  const fs::path plain = scratch().write_text("not-gates.safetensors", "");
  const std::vector<Case> cases{
      {"linearize --layers 4 --out " + q(out), 2, "layer 4 does not exist"},
      {"linearize --layers 1,1 --out " + q(out), 2, "listed twice"},
      {"linearize --layers x --out " + q(out), 2, "is not a layer index"},
      {"linearize --layers 2-1 --out " + q(out), 2, "runs backwards"},
      {"linearize --layers 1", 2, "--out"},
      {"linearize --out " + q(out), 2, "--layers"},
      {"linearize --layers 1 --gates " + q(scratch().path / "missing.safetensors") + " --out " +
           q(out),
       1, "missing.safetensors"},
      {"linearize --layers 1 --gates " + q(plain) + " --out " + q(out), 1, "not-gates.safetensors"},
      {"linearize --layers 1 --gates " + q(plain) + " --lambda 1 --out " + q(out), 2, "--lambda"},
      {"linearize --layers 1 --fit-positions 100000 --out " + q(out), 1, "100096 tokens"},
      // Renamed (CHANGELOG.md): "tokens" names a token-id file, counts are positions.
      {"linearize --layers 1 --fit-tokens 1000 --out " + q(out), 2, "use --fit-positions N"},
      {"linearize --layers 1 --fit-text " + q(eval_text) + " --fit-tokens-file " + q(eval_text) +
           " --out " + q(out),
       2, "at most one of --fit-text FILE and --fit-tokens-file FILE"},
      {"linearize --layers 1 --token-dtype u32 --out " + q(out), 2, "--fit-tokens-file FILE"},
      {"linearize --layers 1 --gates " + q(plain) + " --fit-positions 100 --out " + q(out), 2,
       "--fit-positions"},
      {"linearize --layers 1 --model " + q(scratch().path / "no-model") + " --out " + q(out), 1,
       "no-model"},
  };
  for (const auto& c : cases) {
    const RunResult r = run_nlb(c.args);
    BOOST_TEST(r.exit_code == c.exit_code, c.args << "\n" << r.err);
    BOOST_TEST(contains(r.err, c.message), c.args << "\n" << r.err);
    BOOST_TEST(!fs::exists(out), c.args);
  }
  BOOST_TEST(entries_containing(".tmp-linearize") == 0);
}

// A fit token-id file gives the model of the same tokens read as text; --fit-positions,
// --context and --lambda reach the fit (recorded in linearize.json).
BOOST_AUTO_TEST_CASE(fit_token_file_gives_the_text_fit) {
  const fs::path fit_text = source_dir / "data/kjv-fit.txt";
  const fs::path ids = scratch().path / "fit.u32.bin";
  nlb::io::write_token_file(ids, nlb::io::read_text_tokens(fit_text), nlb::io::TokenDType::U32);
  const std::string settings = " --fit-positions 300 --context 64 --lambda 0.5";
  const fs::path from_text = scratch().path / "fit-from-text",
                 from_ids = scratch().path / "fit-ids";
  const RunResult a = run_nlb("linearize --layers 2 --fit-text " + q(fit_text) + settings +
                              " --out " + q(from_text));
  BOOST_TEST_REQUIRE(a.exit_code == 0, a.err);
  const RunResult b = run_nlb("linearize --layers 2 --fit-tokens-file " + q(ids) +
                              " --token-dtype u32" + settings + " --out " + q(from_ids));
  BOOST_TEST_REQUIRE(b.exit_code == 0, b.err);
  BOOST_TEST(slurp(from_text / "model.safetensors") == slurp(from_ids / "model.safetensors"));
  const auto fit = read_json(from_ids / "linearize.json").at("fit");
  BOOST_TEST(fit.at("tokens") == ids.string());
  BOOST_TEST(fit.at("positions") == 300);
  BOOST_TEST(fit.at("context") == 64);
  BOOST_TEST(fit.at("lambda") == 0.5);
  BOOST_TEST(read_json(from_text / "linearize.json").at("fit").at("tokens") == fit_text.string());
}

// `nlb help linearize` prints nlb budget's fit defaults (BudgetProtocol{}); the default run of
// the first test records that it used them.
BOOST_AUTO_TEST_CASE(help_page_prints_the_budget_protocol_defaults) {
  const nlb::BudgetProtocol p;
  const RunResult page = run_nlb("help linearize");
  BOOST_TEST_REQUIRE(page.exit_code == 0, page.err);
  std::ostringstream lambda;
  lambda << p.lambda;
  BOOST_TEST(contains(page.out, "--fit-positions N     fitting positions (default " +
                                    std::to_string(p.fit_tokens) + ")"));
  BOOST_TEST(contains(page.out, "(default min(" + std::to_string(p.context) + ", n_positions))"));
  BOOST_TEST(contains(page.out, "ridge penalty, absolute (default " + lambda.str() + ")"));
}

BOOST_AUTO_TEST_CASE(existing_output_is_kept_unless_forced) {
  const fs::path out = scratch().path / "existing";
  fs::create_directories(out);
  std::ofstream(out / "keep.txt") << "mine";
  const RunResult r = run_nlb("linearize --layers 3 --out " + q(out));
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "--force"));
  BOOST_TEST(slurp(out / "keep.txt") == "mine");
  BOOST_TEST(!fs::exists(out / "config.json"));

  // The model directory itself is never an output.
  const RunResult self = run_nlb("linearize --layers 3 --out " + q(tiny_gpt2) + " --force");
  BOOST_TEST(self.exit_code == 2);
  BOOST_TEST(contains(self.err, "is the model directory itself"));

  const RunResult forced = run_nlb("linearize --layers 3 --out " + q(out) + " --force");
  BOOST_TEST_REQUIRE(forced.exit_code == 0, forced.err);
  BOOST_TEST(!fs::exists(out / "keep.txt"));
  BOOST_TEST(fs::exists(out / "config.json"));
  BOOST_TEST(entries_containing(".old-linearize") == 0);

  // A linear layer cannot be linearized again; another layer of the linearized model can.
  const RunResult again =
      run_nlb("linearize --model " + q(out) + " --layers 3 --out " + q(scratch().path / "again"));
  BOOST_TEST(again.exit_code == 1);
  BOOST_TEST(contains(again.err, "layer 3 MLP kind"));
  const fs::path both = scratch().path / "both";
  const RunResult more = run_nlb("linearize --model " + q(out) + " --layers 0 --out " + q(both));
  BOOST_TEST_REQUIRE(more.exit_code == 0, more.err);
  BOOST_TEST(read_json(both / "config.json").at("nlb_mlp_kinds") ==
             nlohmann::json({"linear", "full", "full", "linear"}));
  BOOST_TEST(run_nlb("eval --model " + q(both) + " --text " + q(eval_text) + " --max-windows 1")
                 .exit_code == 0);
}
