// The reference transformer against the PyTorch fixtures (tools/python/make_fixtures.py):
// logits, every tap and the eval-protocol perplexity of the shipped models (GPT-2, GPT-NeoX and
// the Llama family's tiny-llama); F16/BF16 weight copies; fixed-size vs Dynamic models; KV-cache
// decoding vs full recompute.
#include <boost/test/unit_test.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "model_copy.hpp"
#include "model_fixture.hpp"
#include "nlb/io/safetensors.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/loss.hpp"
#include "nlb/text/load_tokenizer.hpp"
#include "scratch_dir.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
const std::filesystem::path source_dir = NLB_SOURCE_DIR;

std::filesystem::path model_dir(const std::string& name) {
  return source_dir / "models" / name;
}
std::filesystem::path fixture(const std::string& name) {
  return source_dir / "tests/fixtures" / name;
}

// tiny-gpt2 rounded once to F16 or BF16 ("f16", "bf16"): written on first use from
// models/tiny-gpt2 and checked against the checksum of PyTorch's rounding that the logits
// fixture records (model_copy.hpp), so the copy is PyTorch's weights to the bit.
std::filesystem::path rounded_model(const std::string& tag) {
  static const nlb::test::ScratchDir dir("rounded-weights");
  const auto out = dir.path / ("tiny-gpt2-" + tag);
  if (!std::filesystem::exists(out / "model.safetensors"))
    nlb::test::write_rounded_copy(model_dir("tiny-gpt2"),
                                  tag == "f16" ? nlb::io::DType::F16 : nlb::io::DType::BF16,
                                  fixture("tiny-gpt2-" + tag + "-logits.safetensors"), out);
  return out;
}

using nlb::test::relative_to_max;
using nlb::test::window_of;
using nlb::test::window_tokens;

// The model against its fixture: logits, every tap, per-position losses.
template <class T>
void check_against_fixture(const std::string& name, double logits_bound, double tap_bound,
                           double loss_bound) {
  nlb::test::check_model_against_fixture<T>(model_dir(name),
                                            fixture(name + "-reference.safetensors"), logits_bound,
                                            tap_bound, loss_bound);
}

// Runs the fixture's perplexity entries: the 8-window ones, or (full = true) the whole-file ones.
void check_perplexity(const std::string& name, bool full) {
  std::ifstream in(fixture(name + "-ppl.json"));
  BOOST_REQUIRE_MESSAGE(in.good(), "missing fixture " << fixture(name + "-ppl.json"));
  const auto j = nlohmann::json::parse(in);
  const auto model = nlb::load_model<float>(model_dir(name));
  nlb::Context<nlb::backend::cpu> ctx;
  BOOST_REQUIRE(j.at("runs").size() >= 2u);
  int checked = 0;
  for (const auto& entry : j.at("runs")) {
    if (entry.at("max_windows").is_null() != full)
      continue;
    ++checked;
    const auto tokens = nlb::io::read_text_tokens(source_dir / entry.at("text").get<std::string>());
    const Index windows = entry.at("windows").get<Index>();
    const Index context = entry.at("context").get<Index>();
    const auto r = nlb::evaluate_perplexity(ctx, model, tokens, context, windows);
    const double ref = entry.at("ppl").get<double>();
    BOOST_TEST_MESSAGE(name << " PPL over " << r.windows << " windows: " << r.ppl << " (PyTorch "
                            << ref << ")");
    BOOST_TEST(r.windows == windows);
    BOOST_TEST(r.predicted_tokens == entry.at("predicted_tokens").get<Index>());
    BOOST_TEST(std::abs(r.ppl / ref - 1) <= nlb::test::tol::model_ppl_rel);
  }
  BOOST_TEST(checked >= 1);
}

// The shipped model `name` in float and in double against its fixture, with the table's bounds.
void check_float_and_double(const std::string& name) {
  namespace tol = nlb::test::tol;
  check_against_fixture<float>(name, tol::model_f32_rel, tol::model_f32_rel,
                               tol::model_loss_f32_abs);
  check_against_fixture<double>(name, tol::model_f64_rel, tol::fixture_f32_storage_rel,
                                tol::model_loss_f64_abs);
}

}  // namespace

BOOST_AUTO_TEST_CASE(tiny_gpt2_matches_pytorch) {
  check_float_and_double("tiny-gpt2");
}

BOOST_AUTO_TEST_CASE(tiny_neox_matches_pytorch) {
  check_float_and_double("tiny-neox");
}

// tiny-llama: RMSNorm, SwiGLU, 4 query heads over 2 KV heads, llama3 rope scaling, untied head.
// Its weights are BF16 in the file (as the Hub ships Llama 3.2), so the fixture is also the BF16
// reference: kept in BF16 storage the weights are PyTorch's to the bit, and the float forward
// meets the same bound.
BOOST_AUTO_TEST_CASE(tiny_llama_matches_pytorch) {
  namespace tol = nlb::test::tol;
  check_float_and_double("tiny-llama");
  nlb::test::check_model_against_fixture<float, nlb::backend::with_weights<nlb::storage::bf16>>(
      model_dir("tiny-llama"), fixture("tiny-llama-reference.safetensors"), tol::model_f32_rel,
      tol::model_f32_rel, tol::model_loss_f32_abs);
}

// The fixture's 8-window perplexity of tiny-llama, over the text tokenized by the model
// directory's own tokenizer.json (the fixture's tokens came from Hugging Face tokenizers).
BOOST_AUTO_TEST_CASE(tiny_llama_perplexity_matches_pytorch) {
  std::ifstream in(fixture("tiny-llama-ppl.json"));
  BOOST_REQUIRE_MESSAGE(in.good(), "missing fixture " << fixture("tiny-llama-ppl.json"));
  const auto j = nlohmann::json::parse(in);
  const auto& run = j.at("runs").at(0);
  BOOST_REQUIRE(run.at("max_windows").get<Index>() == 8);
  const auto tokenizer = nlb::text::load_tokenizer(model_dir("tiny-llama"));
  BOOST_REQUIRE(tokenizer.has_value());
  std::ifstream text_in(source_dir / run.at("text").get<std::string>(), std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(text_in)), {});
  const auto tokens = tokenizer->encode(text);
  BOOST_TEST(static_cast<Index>(tokens.size()) == run.at("text_tokens").get<Index>());
  const auto model = nlb::load_model<float>(model_dir("tiny-llama"));
  nlb::Context<nlb::backend::cpu> ctx;
  const auto r = nlb::evaluate_perplexity(ctx, model, tokens, run.at("context").get<Index>(), 8);
  const double ref = run.at("ppl").get<double>();
  BOOST_TEST_MESSAGE("tiny-llama PPL over 8 windows: " << r.ppl << " (PyTorch " << ref << ")");
  BOOST_TEST(r.predicted_tokens == run.at("predicted_tokens").get<Index>());
  BOOST_TEST(std::abs(r.ppl / ref - 1) <= nlb::test::tol::model_ppl_rel);
}

BOOST_AUTO_TEST_CASE(eval_protocol_perplexity_matches_pytorch) {
  check_perplexity("tiny-gpt2", false);
  check_perplexity("tiny-neox", false);
}

// Every window of both eval texts (≈ 1,900 forward passes per model): label "heavy", run by
// `ctest -L heavy` (the test_transformer_full_text CTest entry), not by default.
BOOST_AUTO_TEST_CASE(eval_protocol_perplexity_full_texts, *boost::unit_test::disabled()) {
  check_perplexity("tiny-gpt2", true);
  check_perplexity("tiny-neox", true);
}

BOOST_AUTO_TEST_CASE(half_precision_weight_copies_load_and_match) {
  for (const std::string tag : {"f16", "bf16"}) {
    const auto model = nlb::load_model<float>(rounded_model(tag));
    const auto ref =
        nlb::io::SafetensorsFile::open(fixture("tiny-gpt2-" + tag + "-logits.safetensors"));
    const auto tokens = window_tokens(ref, 0);
    nlb::Context<nlb::backend::cpu> ctx;
    nlb::Transformer<float>::Workspace ws;
    nlb::RowMatrix<float> logits;
    model.forward(ctx, tokens, logits, ws);
    const double err = relative_to_max(logits, window_of(ref, "logits", 0));
    BOOST_TEST_MESSAGE("tiny-gpt2 " << tag << " weights: logits error " << err);
    // The fixture was computed from the same rounded weights, so only our float32 arithmetic
    // differs: the fp32 bound holds.
    BOOST_TEST(err <= nlb::test::tol::model_f32_rel);
  }
  // The checksum check can fail: the BF16 rounding is not the one the F16 fixture records.
  const nlb::test::ScratchDir wrong("rounded-weights-mismatch");
  BOOST_CHECK_THROW(nlb::test::write_rounded_copy(model_dir("tiny-gpt2"), nlb::io::DType::BF16,
                                                  fixture("tiny-gpt2-f16-logits.safetensors"),
                                                  wrong.path / "copy"),
                    std::runtime_error);
}

// Weights kept in 16 bits (backend::with_weights), every window run whole (prefill: widened
// panels) and decoded token by token through the KV cache (the row kernels):
// - loaded from the F16 / BF16 file, the stored values are kept as they are, so the logits meet
//   PyTorch's float64 logits of those rounded weights within the float32 bound;
// - loaded from the F32 file, the weight matrices are rounded at load, so the logits meet the
//   F32 model's PyTorch logits within the effect of that rounding (half_weights_*_rel).
template <class Storage>
void check_half_precision_storage(const std::string& tag, double rounding_bound) {
  using Backend = nlb::backend::with_weights<Storage>;
  const auto rounded_ref =
      nlb::io::SafetensorsFile::open(fixture("tiny-gpt2-" + tag + "-logits.safetensors"));
  const auto f32_ref = nlb::io::SafetensorsFile::open(fixture("tiny-gpt2-reference.safetensors"));
  for (const bool from_f32 : {false, true}) {
    const auto model =
        nlb::load_model<float, Backend>(from_f32 ? model_dir("tiny-gpt2") : rounded_model(tag));
    const auto& ref = from_f32 ? f32_ref : rounded_ref;
    nlb::Context<Backend> ctx;
    const double bound = from_f32 ? rounding_bound : nlb::test::tol::model_f32_rel;
    for (const Index w : {0, 1}) {
      const auto tokens = window_tokens(ref, w);
      // The rounded-weights fixtures store F32 logits; the reference file only F64 ones.
      const Eigen::MatrixXd want = window_of(ref, from_f32 ? "logits_f64" : "logits", w);
      typename std::decay_t<decltype(model)>::Workspace ws;
      nlb::RowMatrix<float> logits;
      model.forward(ctx, tokens, logits, ws);
      const double whole = relative_to_max(logits, want);
      auto cache = model.make_cache();
      nlb::RowMatrix<float> decoded(static_cast<Index>(tokens.size()), logits.cols()), step;
      for (std::size_t t = 0; t < tokens.size(); ++t) {
        model.forward(ctx, std::span<const std::int32_t>(&tokens[t], 1), step, ws, nlb::NoTaps{},
                      &cache);
        decoded.row(static_cast<Index>(t)) = step.row(0);
      }
      const double stepwise = relative_to_max(decoded, want);
      BOOST_TEST_MESSAGE(tag << " storage from the " << (from_f32 ? "F32" : tag) << " file, window "
                             << w << ": logits error whole " << whole << ", decoded " << stepwise
                             << " (bound " << bound << ")");
      BOOST_TEST(whole <= bound);
      BOOST_TEST(stepwise <= bound);
    }
  }
}

BOOST_AUTO_TEST_CASE(half_precision_storage_matches_pytorch_on_the_rounded_weights) {
  check_half_precision_storage<nlb::storage::f16>("f16", nlb::test::tol::half_weights_f16_rel);
  check_half_precision_storage<nlb::storage::bf16>("bf16", nlb::test::tol::half_weights_bf16_rel);
}

// Weights kept in 8-bit blocks (storage::q8) against the float model whose weight matrices are
// those blocks' values widened back (Q8Matrix::widened; the quantization itself is held to its
// closed form in test_q8_gemm): the same numbers through another path (float GEMMs and float row
// products against the 8-bit kernels and widened panels), so the logits agree to the float32
// model bound, whole windows and decoded token by token. On GPT-2 (GELU MLP, learned positions,
// tied unembedding) and Llama (SwiGLU, grouped-query heads, RMSNorm, untied unembedding).
BOOST_AUTO_TEST_CASE(q8_storage_equals_the_float_model_on_the_quantized_weights) {
  using Q8 = nlb::backend::with_weights<nlb::storage::q8>;
  const auto round_trip = [](nlb::RowMatrix<float>& m) {
    if (m.size() > 0)
      m = nlb::Q8Matrix(m).widened();
  };
  for (const std::string name : {"tiny-gpt2", "tiny-llama"}) {
    const auto q8 = nlb::load_model<float, Q8>(model_dir(name));
    auto weights = nlb::load_model_weights<float>(model_dir(name));
    round_trip(weights.embeddings.token);
    round_trip(weights.embeddings.position);
    round_trip(weights.embeddings.unembedding);
    for (auto& b : weights.blocks) {
      round_trip(b.attention.w_qkv);
      round_trip(b.attention.w_out);
      round_trip(b.mlp.w_fc);
      round_trip(b.mlp.w_proj);
    }
    const auto dequantized = nlb::make_transformer<float>(std::move(weights));
    const auto ref = nlb::io::SafetensorsFile::open(fixture(name + "-reference.safetensors"));
    const auto tokens = window_tokens(ref, 0);
    nlb::Context<nlb::backend::cpu> ctx;
    nlb::Context<Q8> q8_ctx;
    nlb::Transformer<float>::Workspace ws;
    nlb::Transformer<float, Q8>::Workspace q8_ws;
    nlb::RowMatrix<float> want, whole, step;
    dequantized.forward(ctx, tokens, want, ws);
    q8.forward(q8_ctx, tokens, whole, q8_ws);
    auto cache = q8.make_cache();
    nlb::RowMatrix<float> decoded(want.rows(), want.cols());
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      q8.forward(q8_ctx, std::span<const std::int32_t>(&tokens[t], 1), step, q8_ws, nlb::NoTaps{},
                 &cache);
      decoded.row(static_cast<Index>(t)) = step.row(0);
    }
    BOOST_TEST_MESSAGE(name << " q8 storage vs the float model on the widened blocks: whole "
                            << relative_to_max(whole, want) << ", decoded "
                            << relative_to_max(decoded, want));
    BOOST_TEST(relative_to_max(whole, want) <= nlb::test::tol::model_f32_rel);
    BOOST_TEST(relative_to_max(decoded, want) <= nlb::test::tol::model_f32_rel);
  }
}

// The shipped model `name` as a fixed-size type (width D, hidden H, MLP Act, N layers) against
// the same weights loaded as a Dynamic model, on the fixture's first window.
template <int D, int H, class Act, std::size_t N>
void check_fixed_equals_dynamic(const std::string& name) {
  const auto weights = nlb::load_model_weights<float>(model_dir(name));
  const auto dynamic = nlb::make_transformer<float>(weights);
  BOOST_REQUIRE(weights.config.d_model == D && weights.config.d_hidden == H &&
                weights.config.n_layers == static_cast<Index>(N));
  const auto fixed = nlb::make_fixed_transformer<float, D, H, Act, N>(weights);
  const auto ref = nlb::io::SafetensorsFile::open(fixture(name + "-reference.safetensors"));
  const auto tokens = window_tokens(ref, 0);
  nlb::Context<nlb::backend::cpu> ctx;
  typename decltype(dynamic)::Workspace dynamic_ws;
  typename decltype(fixed)::Workspace fixed_ws;
  nlb::RowMatrix<float> a, b;
  dynamic.forward(ctx, tokens, a, dynamic_ws);
  fixed.forward(ctx, tokens, b, fixed_ws);
  const double err = relative_to_max(b, a);
  BOOST_TEST_MESSAGE("fixed vs Dynamic " << name << " logits: " << err);
  BOOST_TEST(err <= nlb::test::tol::fixed_vs_dynamic_rel);
}

BOOST_AUTO_TEST_CASE(fixed_size_model_equals_dynamic_model) {
  check_fixed_equals_dynamic<128, 512, nlb::GeluTanh, 4>("tiny-gpt2");
  // A compile-time Llama block: RMSNorm, grouped-query attention, SwiGLU.
  check_fixed_equals_dynamic<96, 256, nlb::SwiGlu, 4>("tiny-llama");
  const auto llama = nlb::load_model_weights<float>(model_dir("tiny-llama"));
  BOOST_CHECK_THROW((nlb::make_fixed_transformer<float, 96, 256, nlb::GeluTanh, 4>(llama)),
                    nlb::ArgumentError);
}

// A fixed model whose layer 2 is linear is a type (a tuple of blocks of different kinds); it
// equals the loaded Dynamic model with the same surrogate swapped into layer 2's MlpSlot.
BOOST_AUTO_TEST_CASE(fixed_model_with_a_linear_layer_equals_dynamic_swap) {
  const auto w = nlb::load_model_weights<double>(model_dir("tiny-gpt2"));
  const auto& c = w.config;
  BOOST_REQUIRE(c.d_model == 128 && c.d_hidden == 512 && c.n_layers == 4);
  using Linear = nlb::RidgeSurrogate<double, 128, 128>;
  const nlb::RowMatrix<double> half = 0.5 * nlb::RowMatrix<double>::Identity(128, 128);
  const nlb::RowVector<double> shift = nlb::RowVector<double>::Constant(1, 128, 0.01);
  const Linear linear(half, shift);

  auto dynamic = nlb::make_transformer<double>(w);
  dynamic.layers()[2].mlp() = nlb::MlpSlot<double>::Surrogate(half, shift);

  auto full = [&](std::size_t i) {
    return nlb::make_fixed_block<double, 128, 512, nlb::GeluTanh>(c, w.blocks[i]);
  };
  const auto b2 = full(2);
  using LinearBlock = nlb::Block<nlb::DenseAttention<double, 128>, Linear>;
  const LinearBlock linear_block(b2.ln1(), b2.attention(), b2.ln2(), linear, b2.parallel_residual(),
                                 b2.layer_norm_eps());
  using Full = decltype(full(0));
  const nlb::BasicTransformer<std::tuple<Full, Full, LinearBlock, Full>> fixed(
      c, nlb::make_fixed_embeddings<128>(w.embeddings),
      std::make_tuple(full(0), full(1), linear_block, full(3)));

  const std::vector<std::int32_t> tokens{'L', 'e', 't', ' ', 't', 'h', 'e', 'r', 'e'};
  nlb::Context<nlb::backend::cpu> ctx;
  decltype(dynamic)::Workspace dynamic_ws;
  decltype(fixed)::Workspace fixed_ws;
  nlb::RowMatrix<double> a, b, original;
  nlb::RouteCounts counts;
  dynamic.forward(ctx, tokens, a, dynamic_ws, nlb::NoTaps{}, nullptr, &counts);
  fixed.forward(ctx, tokens, b, fixed_ws);
  nlb::make_transformer<double>(w).forward(ctx, tokens, original, dynamic_ws);
  BOOST_TEST(counts.linear == 9);    // layer 2's rows
  BOOST_TEST(counts.full == 3 * 9);  // the other three layers
  BOOST_TEST(relative_to_max(b, a) <= nlb::test::tol::model_f64_rel);
  BOOST_TEST(relative_to_max(a, original) > 1e-3);  // the swap really changed the model
}

BOOST_AUTO_TEST_CASE(kv_cache_decoding_equals_full_recompute) {
  for (const std::string name : {"tiny-gpt2", "tiny-neox", "tiny-llama"}) {
    const auto model = nlb::load_model<double>(model_dir(name));
    const auto ref = nlb::io::SafetensorsFile::open(fixture(name + "-reference.safetensors"));
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
    // A cache for the positions a run needs: at most n_positions.
    BOOST_TEST(model.make_cache(40).capacity() == 40);
    BOOST_TEST(model.make_cache(1 << 30).capacity() == model.config().n_positions);
    BOOST_TEST(model.make_cache().layers.front().keys.cols() == model.config().kv_width());
    BOOST_TEST_MESSAGE(name << ": KV-cache decoding vs full recompute " << err);
    BOOST_TEST(err <= nlb::test::tol::model_f64_rel);
  }
}

BOOST_AUTO_TEST_CASE(bad_model_inputs_raise_typed_errors) {
  const auto model = nlb::load_model<float>(model_dir("tiny-gpt2"));
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::Transformer<float>::Workspace ws;
  nlb::RowMatrix<float> logits;
  const std::vector<std::int32_t> bad{1, 2, 300};
  BOOST_CHECK_EXCEPTION(model.forward(ctx, bad, logits, ws), nlb::ArgumentError,
                        [](const nlb::ArgumentError& e) {
                          return std::string(e.what()).find("found 300") != std::string::npos;
                        });
  const std::vector<std::int32_t> too_long(static_cast<std::size_t>(model.config().n_positions + 1),
                                           65);
  BOOST_CHECK_THROW(model.forward(ctx, too_long, logits, ws), nlb::ArgumentError);
  BOOST_CHECK_THROW(model.forward(ctx, std::vector<std::int32_t>{}, logits, ws),
                    nlb::ArgumentError);
}
