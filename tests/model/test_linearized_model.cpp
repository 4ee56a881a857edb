// Linearized model directories (docs/linearize.md): layers whose MLP is stored as its ridge
// surrogate (PAPERS §A1) or as a gated MLP (PAPERS §A3) load into the right MlpSlot, strictly;
// and a linearized, PyTorch-fine-tuned tiny-gpt2 (PAPERS §A6) reproduces PyTorch's perplexity.
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "error_message.hpp"
#include "nlb/io/safetensors.hpp"
#include "nlb/io/safetensors_writer.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/loss.hpp"
#include "scratch_dir.hpp"
#include "test_random.hpp"
#include "tolerances.hpp"

namespace {

namespace fs = std::filesystem;
const fs::path source_dir = NLB_SOURCE_DIR;
const fs::path tiny_gpt2 = source_dir / "models/tiny-gpt2";
const fs::path tiny_neox = source_dir / "models/tiny-neox";
constexpr nlb::Index d = 128;  // width of both shipped models

// One scratch directory for the whole program, removed when it ends.
const fs::path& scratch() {
  static const nlb::test::ScratchDir dir("linearized-model");
  return dir.path;
}

struct Tensor {
  std::vector<std::int64_t> shape;
  std::vector<double> values;
};
using Tensors = std::map<std::string, Tensor>;

Tensors read_tensors(const fs::path& file) {
  const auto f = nlb::io::SafetensorsFile::open(file);
  Tensors out;
  for (const auto& t : f.tensors())
    out[t.name] = {t.shape, f.read<double>(t.name)};
  return out;
}

// Writes `dir` as a copy of `base` with `tensors` (stored F32) and the base config plus `extra`.
fs::path write_model(const std::string& name, const fs::path& base, const Tensors& tensors,
                     const nlohmann::json& extra) {
  const fs::path dir = scratch() / name;
  fs::create_directories(dir);
  nlb::io::SafetensorsWriter w;
  for (const auto& [n, t] : tensors)
    w.add(n, nlb::io::DType::F32, t.shape, t.values);
  w.write(dir / "model.safetensors");
  std::ifstream in(base / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config.update(extra);
  std::ofstream(dir / "config.json") << config.dump(2) << "\n";
  return dir;
}

// Seeded values rounded to float, so that what the file stores (F32) is exactly this.
Eigen::MatrixXd float_gaussian(nlb::Index rows, nlb::Index cols, std::uint64_t seed, double scale) {
  return (scale * nlb::test::gaussian(rows, cols, seed)).cast<float>().cast<double>();
}

Tensor as_tensor(const Eigen::MatrixXd& m, std::vector<std::int64_t> shape) {
  const nlb::RowMatrix<double> row_major = m;
  return {std::move(shape), std::vector<double>(row_major.data(), row_major.data() + m.size())};
}

std::vector<std::int32_t> eval_window() {
  const auto tokens = nlb::io::read_text_tokens(source_dir / "data/kjv-eval.txt");
  return {tokens.begin(), tokens.begin() + 128};
}

double max_abs_diff(const nlb::RowMatrix<double>& a, const nlb::RowMatrix<double>& b) {
  return (a - b).cwiseAbs().maxCoeff();
}

// The known surrogate and gate every test stores: W deliberately not symmetric, so a
// transposed read shows.
struct Known {
  Eigen::MatrixXd weight = float_gaussian(d, d, 11, 0.05);  // [d, d]
  Eigen::MatrixXd bias = float_gaussian(1, d, 12, 0.1);     // [1, d]
  Eigen::MatrixXd gate = float_gaussian(d, 1, 13, 1.0);     // [d, 1]
  double gate_bias = 0.25;
  double threshold = 0.5;
};

void add_surrogate(Tensors& t, const std::string& mlp, const Known& k) {
  t[mlp + "surrogate.weight"] = as_tensor(k.weight, {d, d});
  t[mlp + "surrogate.bias"] = as_tensor(k.bias, {d});
}
void add_gate(Tensors& t, const std::string& mlp, const Known& k) {
  t[mlp + "gate.weight"] = as_tensor(k.gate, {d});
  t[mlp + "gate.bias"] = {{1}, {k.gate_bias}};
  t[mlp + "gate.threshold"] = {{1}, {k.threshold}};
}
void erase_full(Tensors& t, const std::string& mlp, std::initializer_list<const char*> names) {
  for (const char* n : names)
    BOOST_REQUIRE(t.erase(mlp + n) == 1);
}

const std::initializer_list<const char*> gpt2_full = {"c_fc.weight", "c_fc.bias", "c_proj.weight",
                                                      "c_proj.bias"};
const std::initializer_list<const char*> neox_full = {"dense_h_to_4h.weight", "dense_h_to_4h.bias",
                                                      "dense_4h_to_h.weight", "dense_4h_to_h.bias"};
const std::string gpt2_mlp1 = "transformer.h.1.mlp.";
const std::string neox_mlp2 = "gpt_neox.layers.2.mlp.";

fs::path gpt2_linear_layer1(const std::string& name = "gpt2-linear-1") {
  Tensors t = read_tensors(tiny_gpt2 / "model.safetensors");
  erase_full(t, gpt2_mlp1, gpt2_full);
  add_surrogate(t, gpt2_mlp1, Known{});
  return write_model(name, tiny_gpt2, t, {{"nlb_mlp_kinds", {"full", "linear", "full", "full"}}});
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt2_linear_layer_equals_in_memory_surrogate) {
  const fs::path dir = gpt2_linear_layer1();
  const auto loaded = nlb::load_model<double>(dir);
  BOOST_TEST((loaded.config().mlp_kind(1) == nlb::MlpKind::linear));
  BOOST_TEST((loaded.config().mlp_kind(0) == nlb::MlpKind::full));

  // The reference: the shipped model with layer 1's slot replaced in memory.
  auto swapped = nlb::load_model<double>(tiny_gpt2);
  const Known k;
  using Slot = nlb::MlpSlot<double>;
  swapped.layers()[1].mlp() = Slot(Slot::Surrogate(k.weight, k.bias));
  const auto base = nlb::load_model<double>(tiny_gpt2);

  const auto tokens = eval_window();
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::Transformer<double>::Workspace loaded_ws, swapped_ws, base_ws;
  nlb::RowMatrix<double> got, want, unmodified;
  nlb::RouteCounts counts;
  loaded.forward(ctx, tokens, got, loaded_ws, nlb::NoTaps{}, nullptr, &counts);
  swapped.forward(ctx, tokens, want, swapped_ws);
  base.forward(ctx, tokens, unmodified, base_ws);
  BOOST_TEST(counts.linear == 128);    // layer 1, every row
  BOOST_TEST(counts.full == 3 * 128);  // layers 0, 2, 3
  // The same operations on the same values: equal.
  BOOST_TEST(max_abs_diff(got, want) == 0.0);
  // ... and the swap matters (a loader that ignored the surrogate would fail above).
  BOOST_TEST(max_abs_diff(got, unmodified) > 1.0);
}

BOOST_AUTO_TEST_CASE(neox_gated_layer_equals_in_memory_gated_mlp) {
  Tensors t = read_tensors(tiny_neox / "model.safetensors");
  const Known k;
  add_surrogate(t, neox_mlp2, k);
  add_gate(t, neox_mlp2, k);
  const fs::path dir = write_model("neox-gated-2", tiny_neox, t,
                                   {{"nlb_mlp_kinds", {"full", "full", "gated", "full"}}});
  const auto loaded = nlb::load_model<double>(dir);

  const auto base_weights = nlb::load_model_weights<double>(tiny_neox);
  const auto& m = base_weights.blocks[2].mlp;
  using Slot = nlb::MlpSlot<double>;
  auto swapped = nlb::make_transformer(base_weights);
  nlb::ColVector<double> gate = k.gate;
  swapped.layers()[2].mlp() = Slot(Slot::GatedErf(Slot::MlpErf(m.w_fc, m.b_fc, m.w_proj, m.b_proj),
                                                  Slot::Surrogate(k.weight, k.bias),
                                                  Slot::Gate(gate, k.gate_bias, k.threshold)));

  const auto tokens = eval_window();
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::Transformer<double>::Workspace loaded_ws, swapped_ws;
  nlb::RowMatrix<double> got, want;
  nlb::RouteCounts got_counts, want_counts;
  loaded.forward(ctx, tokens, got, loaded_ws, nlb::NoTaps{}, nullptr, &got_counts);
  swapped.forward(ctx, tokens, want, swapped_ws, nlb::NoTaps{}, nullptr, &want_counts);
  BOOST_TEST(max_abs_diff(got, want) == 0.0);
  BOOST_TEST(got_counts.linear == want_counts.linear);
  // The gate splits the rows, so both paths and the threshold are exercised.
  BOOST_TEST(got_counts.linear > 10);
  BOOST_TEST(got_counts.linear < 118);
}

BOOST_AUTO_TEST_CASE(neox_linear_layer_uses_in_out_layout) {
  // NeoX's own MLP tensors are nn.Linear [out, in]; the surrogate is [in, out] in both families.
  Tensors t = read_tensors(tiny_neox / "model.safetensors");
  erase_full(t, neox_mlp2, neox_full);
  const Known k;
  add_surrogate(t, neox_mlp2, k);
  const fs::path dir = write_model("neox-linear-2", tiny_neox, t,
                                   {{"nlb_mlp_kinds", {"full", "full", "linear", "full"}}});
  const auto loaded = nlb::load_model<double>(dir);
  auto swapped = nlb::load_model<double>(tiny_neox);
  using Slot = nlb::MlpSlot<double>;
  swapped.layers()[2].mlp() = Slot(Slot::Surrogate(k.weight, k.bias));
  auto transposed = nlb::load_model<double>(tiny_neox);
  transposed.layers()[2].mlp() = Slot(Slot::Surrogate(k.weight.transpose(), k.bias));
  const auto tokens = eval_window();
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::Transformer<double>::Workspace loaded_ws, swapped_ws, transposed_ws;
  nlb::RowMatrix<double> got, want, wrong;
  loaded.forward(ctx, tokens, got, loaded_ws);
  swapped.forward(ctx, tokens, want, swapped_ws);
  transposed.forward(ctx, tokens, wrong, transposed_ws);
  BOOST_TEST(max_abs_diff(got, want) == 0.0);
  BOOST_TEST(max_abs_diff(got, wrong) > 1e-3);
}

BOOST_AUTO_TEST_CASE(linear_layer_with_stray_full_tensor_is_format_error) {
  Tensors t = read_tensors(tiny_gpt2 / "model.safetensors");
  t.erase(gpt2_mlp1 + "c_proj.weight");  // c_fc stays: a stray next to the surrogate
  t.erase(gpt2_mlp1 + "c_proj.bias");
  add_surrogate(t, gpt2_mlp1, Known{});
  const fs::path dir = write_model("gpt2-stray", tiny_gpt2, t,
                                   {{"nlb_mlp_kinds", {"full", "linear", "full", "full"}}});
  const std::string msg =
      nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir); });
  BOOST_TEST_MESSAGE(msg);
  BOOST_TEST(contains(msg, (dir / "model.safetensors").string()));
  BOOST_TEST(contains(msg, "\"transformer.h.1.mlp.c_fc."));
  BOOST_TEST(contains(msg, "\"linear\""));
  BOOST_TEST(contains(msg, "expected no full-MLP tensors"));
  BOOST_TEST(contains(msg, "found"));
}

BOOST_AUTO_TEST_CASE(surrogate_in_a_full_layer_is_format_error) {
  // The file has a linear layer, but config.json does not say so.
  Tensors t = read_tensors(tiny_gpt2 / "model.safetensors");
  add_surrogate(t, gpt2_mlp1, Known{});
  const fs::path dir = write_model("gpt2-unannounced", tiny_gpt2, t, nlohmann::json::object());
  const std::string msg =
      nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir); });
  BOOST_TEST(contains(msg, "\"transformer.h.1.mlp.surrogate.weight\""));
  BOOST_TEST(contains(msg, "\"full\""));
  BOOST_TEST(contains(msg, "expected no surrogate tensors"));
}

BOOST_AUTO_TEST_CASE(gate_tensors_in_a_linear_layer_are_format_error) {
  Tensors t = read_tensors(tiny_gpt2 / "model.safetensors");
  erase_full(t, gpt2_mlp1, gpt2_full);
  add_surrogate(t, gpt2_mlp1, Known{});
  add_gate(t, gpt2_mlp1, Known{});
  const fs::path dir = write_model("gpt2-linear-gate", tiny_gpt2, t,
                                   {{"nlb_mlp_kinds", {"full", "linear", "full", "full"}}});
  const std::string msg =
      nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir); });
  BOOST_TEST(contains(msg, "\"transformer.h.1.mlp.gate."));
  BOOST_TEST(contains(msg, "expected no gate tensors"));
}

BOOST_AUTO_TEST_CASE(missing_or_misshapen_linearized_tensors_are_format_errors) {
  {  // gated layer without its threshold
    Tensors t = read_tensors(tiny_gpt2 / "model.safetensors");
    add_surrogate(t, gpt2_mlp1, Known{});
    add_gate(t, gpt2_mlp1, Known{});
    t.erase(gpt2_mlp1 + "gate.threshold");
    const fs::path dir = write_model("gpt2-no-threshold", tiny_gpt2, t,
                                     {{"nlb_mlp_kinds", {"full", "gated", "full", "full"}}});
    const std::string msg =
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir); });
    BOOST_TEST(contains(msg, "missing tensor \"transformer.h.1.mlp.gate.threshold\""));
  }
  {  // linear layer whose surrogate is [d, d + 1]
    Tensors t = read_tensors(tiny_gpt2 / "model.safetensors");
    erase_full(t, gpt2_mlp1, gpt2_full);
    add_surrogate(t, gpt2_mlp1, Known{});
    t[gpt2_mlp1 + "surrogate.weight"] = as_tensor(Eigen::MatrixXd::Zero(d, d + 1), {d, d + 1});
    const fs::path dir = write_model("gpt2-bad-shape", tiny_gpt2, t,
                                     {{"nlb_mlp_kinds", {"full", "linear", "full", "full"}}});
    const std::string msg =
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir); });
    BOOST_TEST_MESSAGE(msg);
    BOOST_TEST(contains(msg, "transformer.h.1.mlp.surrogate.weight"));
    BOOST_TEST(contains(msg, "[128, 128]"));
    BOOST_TEST(contains(msg, "[128, 129]"));
  }
  {  // a gate bias of shape [2]
    Tensors t = read_tensors(tiny_gpt2 / "model.safetensors");
    add_surrogate(t, gpt2_mlp1, Known{});
    add_gate(t, gpt2_mlp1, Known{});
    t[gpt2_mlp1 + "gate.bias"] = {{2}, {0.0, 0.0}};
    const fs::path dir = write_model("gpt2-bad-gate-bias", tiny_gpt2, t,
                                     {{"nlb_mlp_kinds", {"full", "gated", "full", "full"}}});
    const std::string msg =
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir); });
    BOOST_TEST(contains(msg, "transformer.h.1.mlp.gate.bias"));
  }
}

BOOST_AUTO_TEST_CASE(bad_mlp_kinds_in_config_are_format_errors) {
  const Tensors t = read_tensors(tiny_gpt2 / "model.safetensors");
  {
    const fs::path dir = write_model("gpt2-cubic", tiny_gpt2, t,
                                     {{"nlb_mlp_kinds", {"full", "cubic", "full", "full"}}});
    const std::string msg =
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir); });
    BOOST_TEST(contains(msg, "nlb_mlp_kinds\" entry 1"));
    BOOST_TEST(contains(msg, "\"cubic\""));
  }
  {
    const fs::path dir =
        write_model("gpt2-short-kinds", tiny_gpt2, t, {{"nlb_mlp_kinds", {"full", "full"}}});
    const std::string msg =
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir); });
    BOOST_TEST(contains(msg, "an array of n_layers = 4 MLP kinds"));
  }
  {  // every layer "full" explicitly: the shipped model unchanged
    const fs::path dir = write_model("gpt2-all-full", tiny_gpt2, t,
                                     {{"nlb_mlp_kinds", {"full", "full", "full", "full"}}});
    const auto a = nlb::load_model<double>(dir);
    const auto b = nlb::load_model<double>(tiny_gpt2);
    nlb::Context<nlb::backend::cpu> ctx;
    nlb::Transformer<double>::Workspace wa, wb;
    nlb::RowMatrix<double> la, lb;
    a.forward(ctx, eval_window(), la, wa);
    b.forward(ctx, eval_window(), lb, wb);
    BOOST_TEST(max_abs_diff(la, lb) == 0.0);
  }
}

BOOST_AUTO_TEST_CASE(fixed_block_refuses_a_linearized_layer) {
  const auto w = nlb::load_model_weights<double>(gpt2_linear_layer1("gpt2-linear-fixed"));
  BOOST_CHECK_THROW((nlb::make_fixed_block<double, 128, 512, nlb::GeluTanh>(w.config, w.blocks[1])),
                    nlb::ArgumentError);
  BOOST_CHECK_NO_THROW(
      (nlb::make_fixed_block<double, 128, 512, nlb::GeluTanh>(w.config, w.blocks[0])));
}

// tests/fixtures/tiny-gpt2-lin-ft: tiny-gpt2 with layer 1 linearized by `nlb linearize`, then
// fine-tuned by tools/python/finetune_linearized.py (PAPERS §A6); finetune.json holds PyTorch's
// float64 perplexities of the written model.
BOOST_AUTO_TEST_CASE(pytorch_finetuned_linearized_model_reproduces_pytorch_ppl) {
  const fs::path dir = source_dir / "tests/fixtures/tiny-gpt2-lin-ft";
  BOOST_REQUIRE_MESSAGE(fs::exists(dir / "finetune.json"), "missing fixture " << dir);
  std::ifstream in(dir / "finetune.json");
  const auto j = nlohmann::json::parse(in);
  const double want = j.at("after").at("ppl_8_windows").get<double>();
  const auto tokens = nlb::io::read_text_tokens(source_dir / "data/kjv-eval.txt");

  const auto model = nlb::load_model<float>(dir);
  BOOST_TEST((model.config().mlp_kind(1) == nlb::MlpKind::linear));
  nlb::Context<nlb::backend::cpu> ctx;
  const auto r = nlb::evaluate_perplexity(ctx, model, tokens, 128, 8);
  BOOST_TEST(r.windows == 8);
  BOOST_TEST(std::abs(r.ppl / want - 1.0) <= nlb::test::tol::model_ppl_rel,
             "float PPL " << r.ppl << " vs PyTorch " << want);

  const auto model64 = nlb::load_model<double>(dir);
  const auto r64 = nlb::evaluate_perplexity(ctx, model64, tokens, 128, 8);
  BOOST_TEST(std::abs(r64.ppl / want - 1.0) <= nlb::test::tol::model_f64_rel,
             "double PPL " << r64.ppl << " vs PyTorch " << want);
}
