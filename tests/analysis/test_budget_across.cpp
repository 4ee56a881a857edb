// The parts of one budget across MLP and attention (analysis/budget/across.hpp): the FLOPs of
// what runs against closed forms counted by hand, an S–D layer rebuilt at a lower routing rank
// against the factored form of the Eckart–Young truncation (a different algorithm: the SVD of the
// skew core in the span basis), the scalar filter against the symmetric replacement, and
// attention overrides in a variant against a converted copy of the model.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <vector>

#include "nlb/analysis/budget/across.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/loss.hpp"
#include "test_random.hpp"
#include "tolerances.hpp"

namespace {

namespace fs = std::filesystem;
namespace tol = nlb::test::tol;
using nlb::Index;
const fs::path source_dir = NLB_SOURCE_DIR;

template <class A, class B>
double max_rel_diff(const A& got, const B& want) {
  return (got - want).cwiseAbs().maxCoeff() / want.cwiseAbs().maxCoeff();
}

// Y = attn(X) for a slot.
template <class T>
nlb::RowMatrix<T> run(const nlb::AttentionSlot<T>& attn, const nlb::RowMatrix<T>& x) {
  nlb::Context<nlb::backend::cpu> ctx;
  typename nlb::AttentionSlot<T>::Workspace ws;
  nlb::RowMatrix<T> y(x.rows(), x.cols());
  attn.forward(ctx, x, y, ws);
  return y;
}

template <class T>
const nlb::AttentionOption<T>* find(const nlb::LayerAttentionOptions<T>& layer,
                                    const std::string& conversion, Index parameter = 0) {
  for (const auto& o : layer.options)
    if (o.conversion == conversion && o.parameter == parameter)
      return &o;
  return nullptr;
}

}  // namespace

BOOST_AUTO_TEST_CASE(attention_flops_follow_the_closed_forms) {
  // Counted by hand for d = 128, H = 4, d_h = 32, context 128 (s = 64.5 attended positions):
  //   dense:  8·128² + 4·4·64.5·32                                   = 164096
  //   linear: 8·128² + 4·(4·32² + 4·64·32)                           = 180224
  //   S–D, routing rank 16: 4·128² + 4·(4·128·16 + 2·64.5·144 + 2·64.5·32) = 189120
  //   S–D, rank 4:          4·128² + 4·(4·128·4 + 2·64.5·132 + 2·64.5·32)  = 158352
  const auto gpt2 = nlb::load_model<float>(source_dir / "models/tiny-gpt2");
  const auto sd = nlb::load_model<float>(source_dir / "models/tiny-sd");
  BOOST_TEST(nlb::attention_flops_per_token(gpt2.layers()[0].attention(), 128) == 164096.0);
  const nlb::flops::TransformerShape shape{128, 512, 4, 64.5, 256};
  BOOST_TEST(nlb::attention_flops_per_token(gpt2.layers()[0].attention(), 128) ==
             nlb::flops::attention_per_token(shape));
  const auto gpt2_options = nlb::attention_options(gpt2, 128);
  const auto* linear = find(gpt2_options[0], "linear");
  BOOST_REQUIRE(linear != nullptr);
  BOOST_TEST(linear->flops_per_token == 180224.0);
  BOOST_TEST(linear->saving_per_token == 164096.0 - 180224.0);  // chunks of 64 cost more here
  const auto sd_options = nlb::attention_options(sd, 128);
  BOOST_TEST(sd_options[0].flops_per_token == 189120.0);
  const auto* rank4 = find(sd_options[0], "skew_rank", 4);
  BOOST_REQUIRE(rank4 != nullptr);
  BOOST_TEST(rank4->flops_per_token == 158352.0);
  // Not applicable conversions are listed with their reason.
  BOOST_TEST(find(sd_options[0], "linear") == nullptr);
  BOOST_TEST(!sd_options[0].not_applicable.empty());
  const auto neox = nlb::load_model<float>(source_dir / "models/tiny-neox");
  const auto neox_options = nlb::attention_options(neox, 128);
  BOOST_TEST(find(neox_options[0], "linear") != nullptr);
  BOOST_TEST(find(neox_options[0], "skew_rank", 2) == nullptr);  // rotary
}

BOOST_AUTO_TEST_CASE(sd_layer_at_a_lower_rank_equals_the_factored_truncation) {
  const auto sd = nlb::load_model<double>(source_dir / "models/tiny-sd");
  const auto options = nlb::attention_options(sd, 128);
  const Index d = sd.config().d_model;
  const nlb::RowMatrix<double> x = 0.5 * nlb::test::gaussian(23, d, 42);
  for (Index l : {0, 3}) {
    const auto& attn = sd.layers()[static_cast<std::size_t>(l)].attention();
    const auto forms = nlb::layer_forms<double>(attn);
    for (Index r : {2, 8}) {
      BOOST_TEST_CONTEXT("layer " << l << ", rank " << r) {
        const auto* o = find(options[static_cast<std::size_t>(l)], "skew_rank", r);
        BOOST_REQUIRE(o != nullptr);
        BOOST_TEST(std::string(o->attention.kind_name()) == "sd-diagonal");
        const nlb::AttentionSlot<double> factored(nlb::convert_layer<double>(
            forms, [r](const nlb::HeadForm& f) { return nlb::truncate_skew(f, r); }));
        BOOST_TEST(max_rel_diff(run(o->attention, x), run(factored, x)) <= tol::conversion_f64_rel);
      }
    }
    const auto* scalar = find(options[static_cast<std::size_t>(l)], "symmetric_scalar");
    BOOST_REQUIRE(scalar != nullptr);
    const nlb::AttentionSlot<double> factored(
        nlb::convert_layer<double>(forms, [](const nlb::HeadForm& f) {
          return nlb::replace_symmetric(f, nlb::SymmetricReplacement::scalar);
        }));
    BOOST_TEST(max_rel_diff(run(scalar->attention, x), run(factored, x)) <=
               tol::conversion_f64_rel);
  }
}

BOOST_AUTO_TEST_CASE(attention_in_a_variant_equals_a_converted_copy) {
  // measure_variants with an attention override against a copy of the model with the converted
  // layer in its slot, through plain forward passes.
  const auto model = nlb::load_model<float>(source_dir / "models/tiny-sd");
  const auto tokens = nlb::io::read_text_tokens(source_dir / "data/kjv-eval.txt");
  const auto options = nlb::attention_options(model, 128);
  const auto* o = find(options[2], "skew_rank", 4);
  BOOST_REQUIRE(o != nullptr);
  nlb::ModelVariant<float> v;
  v.add_attention(2, o->attention);
  BOOST_TEST(v.first_layer(model.layer_count()) == 2);
  nlb::Context<nlb::backend::cpu> ctx;
  const auto r = nlb::measure_variants(ctx, model, tokens, 2, 128, {v}, true);
  const auto copy = nlb::with_layer_attention(model, 2, o->attention);
  nlb::Transformer<float>::Workspace ws;
  nlb::RowMatrix<float> logits;
  std::vector<double> want;
  for (Index w = 0; w < 2; ++w) {
    const std::span<const std::int32_t> win(tokens.data() + w * 128, 128);
    copy.forward(ctx, win, logits, ws);
    const auto loss = nlb::next_token_losses(logits, win);
    want.insert(want.end(), loss.begin(), loss.end());
  }
  BOOST_REQUIRE_EQUAL(r.variant[0].size(), want.size());
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(r.variant[0][i] - want[i]));
  BOOST_TEST(worst <= tol::model_loss_f32_abs);
  // An attention layer replaced twice, or out of range, is refused.
  v.add_attention(2, o->attention);
  BOOST_CHECK_THROW(v.overrides(model.layer_count()), nlb::ArgumentError);
  nlb::ModelVariant<float> out_of_range;
  out_of_range.add_attention(model.layer_count(), o->attention);
  BOOST_CHECK_THROW(out_of_range.overrides(model.layer_count()), nlb::ArgumentError);
}
