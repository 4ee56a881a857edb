// FactoredAttention and the attention conversions (PAPERS §B1, §B3): factored heads equal the
// dense and S–D heads they came from, skew truncation is the Eckart–Young truncation of the
// dense skew part, the symmetric replacements are the stated matrices, and converted models at
// full rank reproduce the unconverted logits.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <vector>

#include "nlb/analysis/attention/conversions.hpp"
#include "nlb/attention/sd_attention.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"
#include "test_random.hpp"
#include "tolerances.hpp"

namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;
using nlb::Index;
namespace tol = nlb::test::tol;
namespace fs = std::filesystem;

MatrixXd gaussian(Index rows, Index cols, std::uint64_t seed, double scale = 1.0) {
  return scale * nlb::test::gaussian(rows, cols, seed);
}

nlb::AttentionWeights<double> random_attention(Index d, std::uint64_t seed) {
  const double s = 1.0 / std::sqrt(static_cast<double>(d));
  nlb::AttentionWeights<double> w;
  w.w_qkv = gaussian(d, 3 * d, seed, s);
  w.b_qkv = gaussian(1, 3 * d, seed + 1, 0.3);
  w.w_out = gaussian(d, d, seed + 2, s);
  w.b_out = gaussian(1, d, seed + 3, 0.1);
  return w;
}

template <class A, class B>
double max_rel_diff(const A& got, const B& want) {
  return (got - want).cwiseAbs().maxCoeff() / want.cwiseAbs().maxCoeff();
}

// The dense (n × n) matrix of a factored head in homogeneous coordinates: [A; a] [B; b]ᵀ.
MatrixXd factored_matrix(const nlb::FactoredHead<double>& h) {
  MatrixXd q(h.w_query.rows() + 1, h.w_query.cols()), k(h.w_key.rows() + 1, h.w_key.cols());
  q << h.w_query, h.b_query;
  k << h.w_key, h.b_key;
  return q * k.transpose();
}

const fs::path source_dir = NLB_SOURCE_DIR;

}  // namespace

BOOST_AUTO_TEST_CASE(factored_attention_equals_dense_attention) {
  const Index d = 16, heads = 4, t = 11;
  const auto w = random_attention(d, 10);
  const nlb::DenseAttention<double> dense(w, heads);
  const auto factored = nlb::FactoredAttention<double>::from_dense(dense);
  BOOST_TEST(factored.heads() == heads);
  BOOST_TEST(factored.feature_width(0) == d / heads);
  const nlb::Activations<double> x = gaussian(t, d, 20);
  nlb::Activations<double> want(t, d), got(t, d);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::DenseAttention<double>::Workspace dws;
  nlb::FactoredAttention<double>::Workspace fws;
  dense.forward(ctx, x, want, dws);
  factored.forward(ctx, x, got, fws);
  BOOST_TEST(max_rel_diff(got, want) <= tol::conversion_f64_rel);
  // incremental: 6 tokens, then 5 more through a KV cache, equal the one-shot rows
  nlb::KVCacheLayer<double> cache(t, d);
  nlb::Activations<double> part1(6, d), part2(t - 6, d);
  factored.forward(ctx, x.topRows(6), part1, fws, &cache);
  factored.forward(ctx, x.bottomRows(t - 6), part2, fws, &cache);
  BOOST_TEST(cache.length == t);
  BOOST_TEST(max_rel_diff(part1, want.topRows(6)) <= tol::conversion_f64_rel);
  BOOST_TEST(max_rel_diff(part2, want.bottomRows(t - 6)) <= tol::conversion_f64_rel);
  // rotary attention has no fixed bilinear form
  const nlb::DenseAttention<double> rotary(w, heads, 2);
  BOOST_CHECK_THROW(nlb::FactoredAttention<double>::from_dense(rotary), nlb::ArgumentError);
}

BOOST_AUTO_TEST_CASE(factored_attention_rejects_bad_shapes) {
  const Index d = 8;
  const auto w = random_attention(d, 30);
  const nlb::DenseAttention<double> dense(w, 2);
  auto f = nlb::FactoredAttention<double>::from_dense(dense);
  std::vector<nlb::FactoredHead<double>> heads{f.head(0), f.head(1)};
  const nlb::RowMatrix<double> wv = w.w_qkv.middleCols(2 * d, d);
  const nlb::RowVector<double> bv = w.b_qkv.middleCols(2 * d, d);
  auto bad = heads;
  bad[1].w_key = nlb::RowMatrix<double>::Zero(d, 3);  // width 3 against the query's 4
  BOOST_CHECK_THROW(nlb::FactoredAttention<double>(bad, wv, bv, w.w_out, w.b_out, 0.5),
                    nlb::ShapeError);
  bad = heads;
  bad[0].b_query = nlb::RowVector<double>::Zero(1, 5);
  BOOST_CHECK_THROW(nlb::FactoredAttention<double>(bad, wv, bv, w.w_out, w.b_out, 0.5),
                    nlb::ShapeError);
  std::vector<nlb::FactoredHead<double>> three{heads[0], heads[1], heads[0]};  // 3 ∤ 8
  BOOST_CHECK_THROW(nlb::FactoredAttention<double>(three, wv, bv, w.w_out, w.b_out, 0.5),
                    nlb::ShapeError);
  nlb::Activations<double> x = gaussian(3, d + 1, 31), y(3, d);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::FactoredAttention<double>::Workspace ws;
  BOOST_CHECK_THROW(f.forward(ctx, x, y, ws), nlb::ShapeError);
}

BOOST_AUTO_TEST_CASE(full_rank_conversion_reproduces_dense_and_sd_layers) {
  const Index d = 16, heads = 4, t = 9;
  const nlb::Activations<double> x = gaussian(t, d, 40);
  const auto w = random_attention(d, 41);
  const nlb::DenseAttention<double> dense(w, heads);
  const auto forms = nlb::layer_forms<double>(dense);
  const auto same = nlb::convert_layer<double>(forms, [](const nlb::HeadForm& f) { return f; });
  const auto full = nlb::convert_layer<double>(
      forms, [](const nlb::HeadForm& f) { return nlb::truncate_skew(f, f.max_skew_rank()); });
  nlb::Activations<double> want(t, d), got(t, d);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::DenseAttention<double>::Workspace dws;
  nlb::FactoredAttention<double>::Workspace fws;
  dense.forward(ctx, x, want, dws);
  same.forward(ctx, x, got, fws);
  BOOST_TEST(max_rel_diff(got, want) <= tol::conversion_f64_rel);
  full.forward(ctx, x, got, fws);
  BOOST_TEST(max_rel_diff(got, want) <= tol::conversion_f64_rel);

  // S–D layer: factored form of S − D equals SDAttention
  std::vector<nlb::SkewSymmetricRouting<double>> routing;
  std::vector<nlb::DiagonalFilter<double>> filters;
  for (Index h = 0; h < heads; ++h) {
    const auto seed = 50 + 5 * static_cast<std::uint64_t>(h);
    routing.emplace_back(gaussian(d, 3, seed, 0.5), gaussian(d, 3, seed + 1, 0.5));
    filters.emplace_back(nlb::RowVector<double>(gaussian(1, d, seed + 2)));
  }
  const nlb::SDAttention<nlb::SkewSymmetricRouting<double>, nlb::DiagonalFilter<double>> sd(
      routing, filters, gaussian(d, d, 70, 0.25), gaussian(1, d, 71), gaussian(d, d, 72, 0.25),
      gaussian(1, d, 73));
  const auto sd_forms = nlb::layer_forms<double>(sd);
  BOOST_TEST(sd_forms.heads[0].max_skew_rank() == 6);
  const auto sd_same =
      nlb::convert_layer<double>(sd_forms, [](const nlb::HeadForm& f) { return f; });
  decltype(sd)::Workspace sws;
  sd.forward(ctx, x, want, sws);
  sd_same.forward(ctx, x, got, fws);
  BOOST_TEST(max_rel_diff(got, want) <= tol::conversion_f64_rel);
}

BOOST_AUTO_TEST_CASE(skew_truncation_is_eckart_young_of_the_dense_skew_part) {
  const Index d = 12, heads = 2, dh = 6;
  const auto w = random_attention(d, 80);
  const auto [fq, fk] = nlb::head_score_factors(w, heads, 1, nlb::BiasTreatment::homogeneous);
  const MatrixXd m = fq * fk.transpose();  // [13, 13]
  const MatrixXd skew = 0.5 * (m - m.transpose()), sym = 0.5 * (m + m.transpose());
  const Eigen::JacobiSVD<MatrixXd> svd(skew, Eigen::ComputeFullU | Eigen::ComputeFullV);
  const auto form = nlb::standard_head_form(fq, fk, d);
  BOOST_TEST(form.max_skew_rank() == 2 * dh);
  for (Index r : {2, 4, 8}) {
    const MatrixXd best = svd.matrixU().leftCols(r) * svd.singularValues().head(r).asDiagonal() *
                          svd.matrixV().leftCols(r).transpose();
    const MatrixXd got = factored_matrix(nlb::factored_head<double>(nlb::truncate_skew(form, r)));
    const MatrixXd got_skew = 0.5 * (got - got.transpose()),
                   got_sym = 0.5 * (got + got.transpose());
    BOOST_TEST((got_skew - best).cwiseAbs().maxCoeff() <=
               tol::spectrum_double_rel * svd.singularValues()(0));
    BOOST_TEST((got_sym - sym).cwiseAbs().maxCoeff() <=
               tol::spectrum_double_rel * sym.cwiseAbs().maxCoeff());
    // the error is the energy of the dropped planes
    const double dropped = svd.singularValues().tail(13 - r).squaredNorm();
    BOOST_TEST(std::abs((got_skew - skew).squaredNorm() - dropped) <=
               tol::spectrum_measure_rel * skew.squaredNorm());
  }
  BOOST_CHECK_THROW(nlb::truncate_skew(form, 3), nlb::ArgumentError);
  BOOST_CHECK_THROW(nlb::truncate_skew(form, -2), nlb::ArgumentError);
  BOOST_TEST(nlb::skew_truncation_ranks(12) == (std::vector<Index>{2, 4, 8, 12}));
  BOOST_TEST(nlb::skew_truncation_ranks(8) == (std::vector<Index>{2, 4, 8}));
}

BOOST_AUTO_TEST_CASE(symmetric_replacements_are_the_stated_matrices) {
  const Index d = 10, heads = 2;
  const auto w = random_attention(d, 90);
  const auto [fq, fk] = nlb::head_score_factors(w, heads, 0, nlb::BiasTreatment::homogeneous);
  const MatrixXd m = fq * fk.transpose();  // [11, 11]
  const MatrixXd skew = 0.5 * (m - m.transpose());
  const auto form = nlb::standard_head_form(fq, fk, d);
  // diagonal: skew part kept, symmetric part = diag(M_ii) on the d input coordinates; the
  // constant coordinate's entry is dropped (softmax ignores a row constant)
  MatrixXd want = skew;
  for (Index i = 0; i < d; ++i)
    want(i, i) = m(i, i);
  const MatrixXd diag = factored_matrix(nlb::factored_head<double>(
      nlb::replace_symmetric(form, nlb::SymmetricReplacement::diagonal)));
  BOOST_TEST((diag - want).cwiseAbs().maxCoeff() <=
             tol::spectrum_double_rel * m.cwiseAbs().maxCoeff());
  // scalar: the mean of that diagonal times I
  const double mean = m.diagonal().head(d).mean();
  for (Index i = 0; i < d; ++i)
    want(i, i) = mean;
  const MatrixXd scalar = factored_matrix(
      nlb::factored_head<double>(nlb::replace_symmetric(form, nlb::SymmetricReplacement::scalar)));
  BOOST_TEST((scalar - want).cwiseAbs().maxCoeff() <=
             tol::spectrum_double_rel * m.cwiseAbs().maxCoeff());
  // S–D: −D becomes −mean(D) I
  const MatrixXd u = gaussian(d, 2, 95), v = gaussian(d, 2, 96);
  const VectorXd filter = gaussian(d, 1, 97).array().exp();
  const auto sd =
      nlb::replace_symmetric(nlb::sd_head_form(u, v, filter), nlb::SymmetricReplacement::scalar);
  MatrixXd sd_want = u * v.transpose() - v * u.transpose();
  sd_want.diagonal().array() -= filter.mean();
  const MatrixXd sd_got = factored_matrix(nlb::factored_head<double>(sd)).topLeftCorner(d, d);
  BOOST_TEST((sd_got - sd_want).cwiseAbs().maxCoeff() <=
             tol::spectrum_double_rel * sd_want.cwiseAbs().maxCoeff());
}

BOOST_AUTO_TEST_CASE(converted_tiny_gpt2_at_full_rank_reproduces_its_logits) {
  const auto dir = source_dir / "models/tiny-gpt2";
  const auto text = nlb::io::read_text_tokens(source_dir / "data/kjv-eval.txt");
  const std::span<const std::int32_t> tokens(text.data(), 64);
  auto check = [&](auto model, double bound) {
    using T = typename decltype(model)::Scalar;
    auto converted = model;
    for (Index l = 0; l < model.layer_count(); ++l) {
      const auto forms =
          nlb::layer_forms<T>(model.layers()[static_cast<std::size_t>(l)].attention());
      converted = nlb::with_layer_attention(
          converted, l, nlb::convert_layer<T>(forms, [](const nlb::HeadForm& f) {
            return nlb::truncate_skew(f, f.max_skew_rank());
          }));
    }
    nlb::Context<nlb::backend::cpu> ctx;
    typename decltype(model)::Workspace ws, converted_ws;
    nlb::RowMatrix<T> want, got;
    model.forward(ctx, tokens, want, ws);
    converted.forward(ctx, tokens, got, converted_ws);
    const double err = max_rel_diff(got.template cast<double>(), want.template cast<double>());
    BOOST_TEST_MESSAGE("full-rank conversion, max |Δ logits| / max |logits| = " << err);
    BOOST_TEST(err <= bound);
  };
  check(nlb::load_model<double>(dir), tol::conversion_f64_rel);
  check(nlb::load_model<float>(dir), tol::conversion_f32_rel);
}

BOOST_AUTO_TEST_CASE(measured_conversions_on_tiny_models) {
  const auto text = nlb::io::read_text_tokens(source_dir / "data/kjv-eval.txt");
  const auto gpt2 = nlb::load_model<float>(source_dir / "models/tiny-gpt2");
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ModelRunner<float> gpt2_runner(ctx, gpt2);
  const auto r = nlb::measure_attention_conversions(gpt2_runner, text, 64, 2);
  BOOST_TEST(r.baseline.windows == 2);
  // (a) 2, 4, 8, 16, 32, 64 (m = 2·d_h = 64), (b) k = 1..4, (c) diagonal and scalar
  BOOST_TEST_REQUIRE(r.rows.size() == 12u);
  BOOST_TEST(r.not_applicable.empty());
  BOOST_TEST(r.rows[5].conversion == "skew_rank");
  BOOST_TEST(r.rows[5].parameter == 64);
  BOOST_TEST(std::abs(r.rows[5].ppl / r.baseline.ppl - 1.0) <= tol::conversion_f32_rel);
  for (const auto& row : r.rows) {
    BOOST_TEST(std::abs(row.delta_percent - 100.0 * (row.ppl / r.baseline.ppl - 1.0)) <= 1e-12);
  }
  BOOST_TEST(r.rows[6].conversion == "linear_first_layers");
  BOOST_TEST(r.rows[9].parameter == 4);
  BOOST_TEST(r.rows[11].conversion == "symmetric_scalar");
  // rotary: only (b)
  const auto neox = nlb::load_model<float>(source_dir / "models/tiny-neox");
  nlb::ModelRunner<float> neox_runner(ctx, neox);
  const auto n = nlb::measure_attention_conversions(neox_runner, text, 64, 1);
  BOOST_TEST(n.rows.size() == 4u);
  BOOST_TEST(n.not_applicable.size() == 1u);
}
