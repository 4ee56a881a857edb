// models/tiny-sd (GPT-2's layout with S–D attention, no pre-attention LayerNorm; PAPERS §B2)
// against its PyTorch fixture (tools/python/make_fixtures.py, nlb_reference/sd_model.py):
// logits, taps and losses in float and double, eval-protocol perplexity, KV-cache decoding;
// the loader's structure and its errors on malformed S–D model directories.
#include <boost/test/unit_test.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "error_message.hpp"
#include "model_copy.hpp"
#include "model_fixture.hpp"
#include "nlb/io/safetensors.hpp"
#include "nlb/io/safetensors_writer.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/loss.hpp"
#include "nlb/model/sd_loader.hpp"
#include "scratch_dir.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
namespace fs = std::filesystem;
const fs::path source_dir = NLB_SOURCE_DIR;
const fs::path sd_dir = source_dir / "models" / "tiny-sd";

fs::path fixture(const std::string& name) {
  return source_dir / "tests/fixtures" / name;
}

using nlb::test::relative_to_max;
using nlb::test::window_of;
using nlb::test::window_tokens;

// tiny-sd against its fixture: logits, every tap, per-position losses.
template <class T>
void check_against_fixture(double logits_bound, double tap_bound, double loss_bound) {
  nlb::test::check_model_against_fixture<T>(sd_dir, fixture("tiny-sd-reference.safetensors"),
                                            logits_bound, tap_bound, loss_bound);
}

// ---- malformed copies of models/tiny-sd -----------------------------------------------------

using nlb::test::TensorMap;
const auto read_all = nlb::test::read_all_tensors;

nlohmann::json read_config() {
  std::ifstream in(sd_dir / "config.json");
  return nlohmann::json::parse(in);
}

const auto write_model = nlb::test::write_model_dir;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(tiny_sd_loads_as_sd_attention_without_ln1) {
  const auto model = nlb::load_model<float>(sd_dir);
  const auto& c = model.config();
  BOOST_TEST((c.architecture == nlb::Architecture::nlb_sd));
  BOOST_TEST(!c.attn_layer_norm);
  BOOST_TEST((c.sd_filter == nlb::SDFilterKind::diagonal));
  BOOST_REQUIRE(c.sd_ranks.size() == static_cast<std::size_t>(c.n_layers));
  using Slot = nlb::AttentionSlot<float>;
  for (Index i = 0; i < model.layer_count(); ++i) {
    const auto& block = model.layers()[static_cast<std::size_t>(i)];
    BOOST_TEST(!block.attn_layer_norm());
    BOOST_TEST(block.attention().kind_name() == std::string("sd-diagonal"));
    const auto& attn = block.attention().get<Slot::SDDiagonal>();
    BOOST_TEST(attn.heads() == c.n_heads);
    for (Index h = 0; h < attn.heads(); ++h)
      BOOST_TEST(attn.routing(h).rank() == c.sd_ranks[static_cast<std::size_t>(i)]);
    // Asking for another kind names the one held.
    BOOST_TEST(contains(nlb::test::error_message<nlb::ArgumentError>(
                            [&] { (void)block.attention().get<Slot::Dense>(); }),
                        "sd-diagonal"));
  }
}

BOOST_AUTO_TEST_CASE(tiny_sd_matches_pytorch_float64) {
  check_against_fixture<double>(nlb::test::tol::model_f64_rel,
                                nlb::test::tol::fixture_f32_storage_rel,
                                nlb::test::tol::model_loss_f64_abs);
}

BOOST_AUTO_TEST_CASE(tiny_sd_matches_pytorch_float32) {
  check_against_fixture<float>(nlb::test::tol::model_f32_rel, nlb::test::tol::model_f32_rel,
                               nlb::test::tol::model_loss_f32_abs);
}

BOOST_AUTO_TEST_CASE(tiny_sd_perplexity_matches_pytorch) {
  std::ifstream in(fixture("tiny-sd-ppl.json"));
  BOOST_REQUIRE_MESSAGE(in.good(), "missing fixture " << fixture("tiny-sd-ppl.json"));
  const auto j = nlohmann::json::parse(in);
  const auto model = nlb::load_model<float>(sd_dir);
  nlb::Context<nlb::backend::cpu> ctx;
  int checked = 0;
  for (const auto& entry : j.at("runs")) {
    if (entry.at("max_windows").is_null())
      continue;  // whole files: the heavy full-text test's job
    ++checked;
    const auto tokens = nlb::io::read_text_tokens(source_dir / entry.at("text").get<std::string>());
    const Index windows = entry.at("windows").get<Index>();
    const auto r =
        nlb::evaluate_perplexity(ctx, model, tokens, entry.at("context").get<Index>(), windows);
    const double ref = entry.at("ppl").get<double>();
    BOOST_TEST_MESSAGE("tiny-sd PPL over " << r.windows << " windows: " << r.ppl << " (PyTorch "
                                           << ref << ")");
    BOOST_TEST(r.windows == windows);
    BOOST_TEST(std::abs(r.ppl - ref) / ref <= nlb::test::tol::model_ppl_rel);
  }
  BOOST_TEST(checked == 1);
}

BOOST_AUTO_TEST_CASE(tiny_sd_kv_cache_decoding_equals_full_recompute) {
  const auto model = nlb::load_model<double>(sd_dir);
  const auto ref = nlb::io::SafetensorsFile::open(fixture("tiny-sd-reference.safetensors"));
  auto tokens = window_tokens(ref, 1);
  tokens.resize(40);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::Transformer<double>::Workspace ws;
  nlb::RowMatrix<double> full;
  model.forward(ctx, tokens, full, ws);
  // A prompt of 7 tokens, then chunks of 1, 2, 3, ... tokens through the cache.
  auto cache = model.make_cache();
  nlb::RowMatrix<double> part;
  std::size_t start = 0, chunk = 7;
  double err = 0;
  while (start < tokens.size()) {
    const std::size_t n = std::min(chunk, tokens.size() - start);
    model.forward(ctx, std::span(tokens).subspan(start, n), part, ws, nlb::NoTaps{}, &cache);
    err = std::max(err, relative_to_max(part, full.middleRows(static_cast<Index>(start),
                                                              static_cast<Index>(n))));
    start += n;
    chunk = chunk == 7 ? 1 : chunk + 1;
  }
  BOOST_TEST(cache.length() == 40);
  BOOST_TEST_MESSAGE("tiny-sd: KV-cache decoding vs full recompute " << err);
  BOOST_TEST(err <= nlb::test::tol::model_f64_rel);
}

// The derived 2-layer fixture model: per-layer ranks 16 and 8, the scalar filter and a
// pre-attention LayerNorm (tools/python/make_fixtures.py, write_sd_variant).
template <class T>
void check_variant(double bound) {
  const auto model = nlb::load_model<T>(fixture("tiny-sd-variant"));
  const auto ref = nlb::io::SafetensorsFile::open(fixture("tiny-sd-variant-logits.safetensors"));
  BOOST_TEST(model.config().attn_layer_norm);
  BOOST_REQUIRE(model.layer_count() == 2);
  using Slot = nlb::AttentionSlot<T>;
  const Index expected_rank[] = {16, 8};
  for (Index i = 0; i < 2; ++i) {
    const auto& block = model.layers()[static_cast<std::size_t>(i)];
    BOOST_TEST(block.attn_layer_norm());
    const auto& attn = block.attention().template get<typename Slot::SDScalar>();
    for (Index h = 0; h < attn.heads(); ++h)
      BOOST_TEST(attn.routing(h).rank() == expected_rank[i]);
  }
  nlb::Context<nlb::backend::cpu> ctx;
  typename nlb::Transformer<T>::Workspace ws;
  double worst = 0;
  for (Index w = 0; w < ref.info("tokens").shape[0]; ++w) {
    nlb::RowMatrix<T> logits;
    model.forward(ctx, window_tokens(ref, w), logits, ws);
    worst = std::max(worst, relative_to_max(logits, window_of(ref, "logits_f64", w)));
  }
  BOOST_TEST_MESSAGE("tiny-sd-variant <" << (sizeof(T) == 4 ? "float" : "double")
                                         << ">: logits max error / max |logit| " << worst);
  BOOST_TEST(worst <= bound);
}

BOOST_AUTO_TEST_CASE(sd_variant_scalar_filter_with_ln1_matches_pytorch) {
  check_variant<double>(nlb::test::tol::model_f64_rel);
  check_variant<float>(nlb::test::tol::model_f32_rel);
}

BOOST_AUTO_TEST_CASE(malformed_sd_models_raise_format_errors) {
  const TensorMap good = read_all(sd_dir / "model.safetensors");
  const nlohmann::json config = read_config();
  const Index rank = config.at("sd_ranks").at(1).get<Index>();
  const std::string u1 = "transformer.h.1.attn.routing.u";
  BOOST_REQUIRE(good.count(u1) == 1u);

  {  // the unchanged copy loads (the writer round trip is not what fails below)
    nlb::test::ScratchDir dir("sd-ok");
    write_model(dir.path, good, config);
    BOOST_CHECK_NO_THROW(nlb::load_model<float>(dir.path));
  }
  {  // a routing tensor missing
    nlb::test::ScratchDir dir("sd-missing");
    TensorMap t = good;
    t.erase("transformer.h.2.attn.routing.v");
    write_model(dir.path, t, config);
    const auto msg =
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir.path); });
    BOOST_TEST(contains(msg, "transformer.h.2.attn.routing.v"));
  }
  {  // layer 1's U with r = rank / 2 − 1 columns: a wrong rank shape
    nlb::test::ScratchDir dir("sd-rank");
    TensorMap t = good;
    auto& u = t.at(u1);
    const std::int64_t H = u.shape[0], d = u.shape[1], r = u.shape[2];
    BOOST_REQUIRE(r == rank / 2);
    std::vector<float> narrower;
    for (std::int64_t i = 0; i < H * d; ++i) {
      for (std::int64_t j = 0; j + 1 < r; ++j)
        narrower.push_back(u.values[static_cast<std::size_t>(i * r + j)]);
    }
    u = {{H, d, r - 1}, narrower};
    write_model(dir.path, t, config);
    const auto msg =
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir.path); });
    BOOST_TEST(contains(msg, u1));
    BOOST_TEST(contains(msg, "[" + std::to_string(H) + ", " + std::to_string(d) + ", " +
                                 std::to_string(r) + "]"));  // expected
    BOOST_TEST(contains(msg, "[" + std::to_string(H) + ", " + std::to_string(d) + ", " +
                                 std::to_string(r - 1) + "]"));  // found
  }
  {  // config ranks disagree with the tensors
    nlb::test::ScratchDir dir("sd-config-rank");
    nlohmann::json c = config;
    c["sd_ranks"][1] = rank + 2;
    write_model(dir.path, good, c);
    const auto msg =
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir.path); });
    BOOST_TEST(contains(msg, u1));
  }
  {  // an odd rank in the config
    nlb::test::ScratchDir dir("sd-odd");
    nlohmann::json c = config;
    c["sd_ranks"][0] = 3;
    write_model(dir.path, good, c);
    const auto msg =
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir.path); });
    BOOST_TEST(contains(msg, "sd_ranks"));
    BOOST_TEST(contains(msg, "found 3"));
  }
  {  // one rank per layer
    nlb::test::ScratchDir dir("sd-count");
    nlohmann::json c = config;
    c["sd_ranks"].erase(0);
    write_model(dir.path, good, c);
    BOOST_TEST(contains(
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir.path); }),
        "sd_ranks"));
  }
  {  // an unknown filter kind
    nlb::test::ScratchDir dir("sd-filter");
    nlohmann::json c = config;
    c["sd_filter"] = "triangular";
    write_model(dir.path, good, c);
    BOOST_TEST(contains(
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir.path); }),
        "triangular"));
  }
  {  // the scalar filter expects theta [H], the file has [H, d]
    nlb::test::ScratchDir dir("sd-theta");
    nlohmann::json c = config;
    c["sd_filter"] = "scalar";
    write_model(dir.path, good, c);
    BOOST_TEST(contains(
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir.path); }),
        "transformer.h.0.attn.filter.theta"));
  }
  {  // an ln_1 that the config says the model does not have is an unexpected tensor
    nlb::test::ScratchDir dir("sd-ln1");
    TensorMap t = good;
    const auto d = t.at("transformer.ln_f.weight").shape;
    t["transformer.h.0.ln_1.weight"] = {d, std::vector<float>(static_cast<std::size_t>(d[0]), 1)};
    write_model(dir.path, t, config);
    const auto msg =
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir.path); });
    BOOST_TEST(contains(msg, "unexpected tensor"));
    BOOST_TEST(contains(msg, "transformer.h.0.ln_1.weight"));
  }
  {  // ... and with sd_attn_layer_norm true the missing ln_1 is named
    nlb::test::ScratchDir dir("sd-no-ln1");
    nlohmann::json c = config;
    c["sd_attn_layer_norm"] = true;
    write_model(dir.path, good, c);
    BOOST_TEST(contains(
        nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::load_model<float>(dir.path); }),
        "transformer.h.0.ln_1.weight"));
  }
  // S–D attention has no dense weights: the raw-weights loader refuses the model by name.
  BOOST_TEST(contains(nlb::test::error_message<nlb::ArgumentError>(
                          [&] { (void)nlb::load_model_weights<float>(sd_dir); }),
                      "nlb-sd"));
}
