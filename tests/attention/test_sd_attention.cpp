// SDAttention (PAPERS.md §B2) against the PyTorch float64 fixture
// (tools/python/make_sd_attention_fixture.py: both filter kinds, a sequence longer than the
// 64-row panel), the routing and logits of each head, fixed-size types, KV-cache decoding inside
// a Block against the full forward, and typed errors for bad input.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "nlb/attention/sd_attention.hpp"
#include "nlb/io/safetensors.hpp"
#include "nlb/mlp/mlp.hpp"
#include "nlb/model/block.hpp"
#include "random_mlp.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Dynamic;
using nlb::Index;
using nlb::RowMatrix;
using nlb::RowVector;
namespace tol = nlb::test::tol;

std::string fixture_path() {
  return std::string(NLB_SOURCE_DIR) + "/tests/fixtures/sd-attention-reference.safetensors";
}

const nlb::io::SafetensorsFile& fixture() {
  static const auto file = nlb::io::SafetensorsFile::open(fixture_path());
  return file;
}

template <class T>
RowMatrix<T> matrix(const std::string& name) {
  const auto& info = fixture().info(name);
  BOOST_REQUIRE(info.shape.size() == 2);
  return fixture().read_matrix<T>(name, info.shape[0], info.shape[1]);
}

template <class T>
RowVector<T> vector(const std::string& name) {
  return fixture().read_row_vector<T>(name, fixture().info(name).shape.at(0));
}

// One head's [rows, cols] slice of a 3-D fixture tensor [H, rows, cols].
template <class T>
RowMatrix<T> head_slice(const std::string& name, Index h) {
  const auto& info = fixture().info(name);
  BOOST_REQUIRE(info.shape.size() == 3);
  const Index rows = info.shape[1], cols = info.shape[2];
  const std::vector<T> all = fixture().read<T>(name);
  RowMatrix<T> out(rows, cols);
  for (Index i = 0; i < rows * cols; ++i)
    out.data()[i] = all[static_cast<std::size_t>(h * rows * cols + i)];
  return out;
}

template <class T>
Index heads_of(const std::string& c) {
  return fixture().info(c + ".u").shape[0];
}

template <class Routing>
std::vector<Routing> routing_of(const std::string& c) {
  using T = typename Routing::Scalar;
  std::vector<Routing> out;
  for (Index h = 0; h < heads_of<T>(c); ++h)
    out.emplace_back(head_slice<T>(c + ".u", h), head_slice<T>(c + ".v", h));
  return out;
}

template <class Filter>
std::vector<Filter> filters_of(const std::string& c) {
  using T = typename Filter::Scalar;
  std::vector<Filter> out;
  const auto& info = fixture().info(c + ".theta");
  const std::vector<T> theta = fixture().read<T>(c + ".theta");
  if (info.shape.size() == 2) {
    const Index d = info.shape[1];
    for (Index h = 0; h < info.shape[0]; ++h) {
      if constexpr (std::is_constructible_v<Filter, RowVector<T>>) {
        out.emplace_back(Eigen::Map<const RowVector<T>>(theta.data() + h * d, d));
      }
    }
  } else {
    for (T t : theta) {
      if constexpr (std::is_constructible_v<Filter, T>)
        out.emplace_back(t);
    }
  }
  return out;
}

template <class Routing, class Filter>
nlb::SDAttention<Routing, Filter> attention_of(const std::string& c) {
  using T = typename Routing::Scalar;
  return nlb::SDAttention<Routing, Filter>(
      routing_of<Routing>(c), filters_of<Filter>(c), matrix<T>(c + ".c_v.weight"),
      vector<T>(c + ".c_v.bias"), matrix<T>(c + ".c_proj.weight"), vector<T>(c + ".c_proj.bias"));
}

// max |a − b| / max |b|.
template <class A, class B>
double normwise(const A& a, const B& b) {
  const RowMatrix<double> da = a.template cast<double>(), db = b.template cast<double>();
  return (da - db).cwiseAbs().maxCoeff() / db.cwiseAbs().maxCoeff();
}

template <class Routing, class Filter>
double check_case(const std::string& c, double bound) {
  using T = typename Routing::Scalar;
  const auto attn = attention_of<Routing, Filter>(c);
  const RowMatrix<T> x = matrix<T>(c + ".x");
  RowMatrix<T> y(x.rows(), x.cols());
  nlb::Context<typename Routing::backend_type> ctx;
  typename nlb::SDAttention<Routing, Filter>::Workspace ws;
  attn.forward(ctx, x, y, ws);
  const double err = normwise(y, matrix<double>(c + ".y"));
  BOOST_TEST(err <= bound, c << ": output error " << err);
  return err;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sd_attention)

BOOST_AUTO_TEST_CASE(missing_fixture_fails) {
  BOOST_REQUIRE_NO_THROW(fixture());
  BOOST_TEST(fixture().contains("diagonal.y"));
}

BOOST_AUTO_TEST_CASE(matches_pytorch_fixture_in_double) {
  using R = nlb::SkewSymmetricRouting<double>;
  double worst = 0;
  worst = std::max(worst,
                   check_case<R, nlb::DiagonalFilter<double>>("diagonal", tol::sd_fixture_f64_rel));
  worst =
      std::max(worst, check_case<R, nlb::ScalarFilter<double>>("scalar", tol::sd_fixture_f64_rel));
  worst =
      std::max(worst, check_case<R, nlb::DiagonalFilter<double>>("long", tol::sd_fixture_f64_rel));
  // Fixed-size types: Rank and d in the type.
  worst = std::max(
      worst, check_case<nlb::SkewSymmetricRouting<double, 4>, nlb::DiagonalFilter<double, 16>>(
                 "diagonal", tol::sd_fixture_f64_rel));
  // The scalar backend throughout (a composite runs on the one backend of its parts).
  worst = std::max(worst, check_case<nlb::SkewSymmetricRouting<double, 2, nlb::backend::scalar>,
                                     nlb::ScalarFilter<double, nlb::backend::scalar>>(
                              "scalar", tol::sd_fixture_f64_rel));
  BOOST_TEST_MESSAGE("SDAttention vs PyTorch, float64: worst normwise error " << worst);
}

BOOST_AUTO_TEST_CASE(matches_pytorch_fixture_in_float) {
  using R = nlb::SkewSymmetricRouting<float>;
  double worst = 0;
  worst = std::max(worst,
                   check_case<R, nlb::DiagonalFilter<float>>("diagonal", tol::attention_float_rel));
  worst =
      std::max(worst, check_case<R, nlb::ScalarFilter<float>>("scalar", tol::attention_float_rel));
  worst =
      std::max(worst, check_case<R, nlb::DiagonalFilter<float>>("long", tol::attention_float_rel));
  BOOST_TEST_MESSAGE("SDAttention vs PyTorch, float32: worst normwise error " << worst);
}

BOOST_AUTO_TEST_CASE(routing_and_logits_match_the_fixture_per_head) {
  for (const std::string c : {"diagonal", "scalar", "long"}) {
    const bool diagonal = fixture().info(c + ".theta").shape.size() == 2;
    const auto routing = routing_of<nlb::SkewSymmetricRouting<double>>(c);
    const RowMatrix<double> x = matrix<double>(c + ".x");
    const Index rows = x.rows(), dh = x.cols() / static_cast<Index>(routing.size());
    for (Index h = 0; h < static_cast<Index>(routing.size()); ++h) {
      RowMatrix<double> s(rows, rows);
      routing[static_cast<std::size_t>(h)].scores(x, s, false);
      const RowMatrix<double> expected = head_slice<double>(c + ".routing", h);
      BOOST_TEST(normwise(s, expected) <= tol::sd_fixture_f64_rel, c << " head " << h);
      // logits = (routing − filter) / sqrt(d_h) on j <= i (the fixture writes 0 above).
      routing[static_cast<std::size_t>(h)].scores(x, s, true);
      if (diagonal) {
        filters_of<nlb::DiagonalFilter<double>>(c)[static_cast<std::size_t>(h)].subtract_scores(
            x, s, true);
      } else {
        filters_of<nlb::ScalarFilter<double>>(c)[static_cast<std::size_t>(h)].subtract_scores(x, s,
                                                                                              true);
      }
      RowMatrix<double> logits = s.triangularView<Eigen::Lower>();
      logits /= std::sqrt(static_cast<double>(dh));
      BOOST_TEST(normwise(logits, head_slice<double>(c + ".logits", h)) <= tol::sd_fixture_f64_rel,
                 c << " head " << h);
    }
  }
}

BOOST_AUTO_TEST_CASE(kv_cache_decoding_equals_full_forward) {
  using Attn = nlb::SDAttention<nlb::SkewSymmetricRouting<double>, nlb::DiagonalFilter<double>>;
  const std::string c = "long";
  const RowMatrix<double> x = matrix<double>(c + ".x");
  const Index rows = x.rows(), d = x.cols();
  const Attn attn = attention_of<nlb::SkewSymmetricRouting<double>, nlb::DiagonalFilter<double>>(c);
  // The attention alone, fed in uneven chunks (1, 2, 3, ... rows).
  RowMatrix<double> full(rows, d), chunked(rows, d);
  nlb::Context<nlb::backend::cpu> ctx;
  Attn::Workspace ws;
  attn.forward(ctx, x, full, ws);
  nlb::KVCacheLayer<double> cache(rows, d);
  for (Index t0 = 0, n = 1; t0 < rows; t0 += n, ++n) {
    n = std::min(n, rows - t0);
    RowMatrix<double> part(n, d);
    attn.forward(ctx, x.middleRows(t0, n), part, ws, &cache);
    chunked.middleRows(t0, n) = part;
  }
  BOOST_TEST(cache.length == rows);
  BOOST_TEST(normwise(chunked, full) <= tol::attention_cache_double_rel);
  BOOST_TEST((cache.keys - x).cwiseAbs().maxCoeff() == 0.0);  // keys hold the raw x rows

  // Inside a Block (LayerNorm, residual, MLP), token by token.
  using MlpT = nlb::Mlp<double>;
  using BlockT = nlb::Block<Attn, MlpT>;
  const Index hidden = 4 * d;
  const BlockT block(
      nlb::LayerNormWeights<double>{nlb::test::normal_matrix<double>(1, d, 0.2, 1).array() + 1.0,
                                    nlb::test::normal_matrix<double>(1, d, 0.2, 2)},
      attn, nlb::LayerNormWeights<double>{RowVector<double>::Ones(d), RowVector<double>::Zero(d)},
      MlpT(nlb::test::normal_matrix<double>(d, hidden, 0.3, 3),
           nlb::test::normal_matrix<double>(1, hidden, 0.1, 4),
           nlb::test::normal_matrix<double>(hidden, d, 0.3, 5),
           nlb::test::normal_matrix<double>(1, d, 0.1, 6)),
      false, 1e-5);
  BlockT::Workspace bws;
  nlb::Activations<double> stream = x;
  block.forward(ctx, stream, bws, 0);
  nlb::KVCacheLayer<double> bcache(rows, d);
  nlb::Activations<double> decoded(rows, d);
  for (Index t = 0; t < rows; ++t) {
    nlb::Activations<double> one = x.row(t);
    block.forward(ctx, one, bws, 0, &bcache);
    decoded.row(t) = one;
  }
  BOOST_TEST(normwise(decoded, stream) <= tol::attention_cache_double_rel);
  BOOST_TEST(normwise(stream, x) > 1e-3);  // the block changed the stream
  // A full cache is an ArgumentError.
  nlb::Activations<double> one = x.row(0);
  BOOST_CHECK_THROW(block.forward(ctx, one, bws, 0, &bcache), nlb::ArgumentError);
}

BOOST_AUTO_TEST_CASE(bad_input_raises_typed_errors) {
  using R = nlb::SkewSymmetricRouting<double>;
  using F = nlb::DiagonalFilter<double>;
  using Attn = nlb::SDAttention<R, F>;
  constexpr Index d = 8;  // the lambdas' default width
  auto routing = [&](Index n, Index width = 8) {
    return std::vector<R>(static_cast<std::size_t>(n), R(width, 2));
  };
  auto filters = [&](Index n, Index width = 8) {
    return std::vector<F>(static_cast<std::size_t>(n), F(RowVector<double>::Zero(width)));
  };
  const RowMatrix<double> w = RowMatrix<double>::Identity(d, d);
  const RowVector<double> b = RowVector<double>::Zero(d);
  BOOST_CHECK_THROW(Attn(routing(4), filters(3), w, b, w, b), nlb::ShapeError);  // head counts
  BOOST_CHECK_THROW(Attn(routing(3), filters(3), w, b, w, b), nlb::ShapeError);  // 3 ∤ 8
  BOOST_CHECK_THROW(Attn(routing(0), filters(0), w, b, w, b), nlb::ShapeError);
  BOOST_CHECK_THROW(Attn(routing(2, 6), filters(2), w, b, w, b), nlb::ShapeError);
  BOOST_CHECK_THROW(Attn(routing(2), filters(2, 6), w, b, w, b), nlb::ShapeError);
  BOOST_CHECK_THROW(Attn(routing(2), filters(2), RowMatrix<double>::Identity(d, 6), b, w, b),
                    nlb::ShapeError);
  BOOST_CHECK_THROW(Attn(routing(2), filters(2), w, RowVector<double>::Zero(6), w, b),
                    nlb::ShapeError);
  BOOST_CHECK_THROW(Attn(routing(2), filters(2), w, b, w, RowVector<double>::Zero(6)),
                    nlb::ShapeError);
  BOOST_CHECK_THROW((nlb::SDAttention<R, nlb::DiagonalFilter<double, 8>>(
                        routing(2, 6), {2, nlb::DiagonalFilter<double, 8>(b)}, w, b, w, b)),
                    nlb::ShapeError);
  BOOST_CHECK_THROW(R(d, 3), nlb::ArgumentError);  // odd rank at run time

  const Attn attn(routing(2), filters(2), w, b, w, b);
  nlb::Context<nlb::backend::cpu> ctx;
  Attn::Workspace ws;
  RowMatrix<double> x = RowMatrix<double>::Ones(5, d), y(5, d), y_rows(4, d), y_cols(5, 6);
  BOOST_CHECK_THROW(attn.forward(ctx, RowMatrix<double>::Ones(5, 6), y, ws), nlb::ShapeError);
  BOOST_CHECK_THROW(attn.forward(ctx, x, y_rows, ws), nlb::ShapeError);
  BOOST_CHECK_THROW(attn.forward(ctx, x, y_cols, ws), nlb::ShapeError);
  nlb::KVCacheLayer<double> narrow(10, 6), small(4, d);
  BOOST_CHECK_THROW(attn.forward(ctx, x, y, ws, &narrow), nlb::ShapeError);
  BOOST_CHECK_THROW(attn.forward(ctx, x, y, ws, &small), nlb::ArgumentError);
  BOOST_TEST(attn.heads() == 2);
  BOOST_TEST(attn.head_dim() == 4);
  BOOST_TEST(attn.parameter_count() == 2 * (d * 2 + d) + 2 * d * d + 2 * d);
}

BOOST_AUTO_TEST_SUITE_END()
