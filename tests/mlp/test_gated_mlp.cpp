// GatedMLP: hard routing against its two paths and a row-by-row reference; soft mode.
#include <boost/test/unit_test.hpp>
#include <limits>
#include <utility>

#include "component_call.hpp"
#include "nlb/mlp/gated_mlp.hpp"
#include "nlb/mlp/hyperplane_gate.hpp"
#include "nlb/mlp/mlp.hpp"
#include "nlb/mlp/ridge_surrogate.hpp"
#include "random_mlp.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::test::forward_into;
using nlb::test::forward_of;
using nlb::test::normal_matrix;
using nlb::test::scaled_error;

template <class T, int D, int H>
struct Layer {
  using MlpT = nlb::Mlp<T, D, H>;
  using SurrogateT = nlb::RidgeSurrogate<T, D, D>;
  using GateT = nlb::HyperplaneGate<T, D>;
  using Gated = nlb::GatedMLP<MlpT, SurrogateT, GateT>;

  static Gated make(Index d, std::uint64_t seed, T threshold) {
    MlpT mlp(normal_matrix<T, D, H>(d, 4 * d, 0.3, seed),
             normal_matrix<T, 1, H>(1, 4 * d, 0.1, seed + 1),
             normal_matrix<T, H, D>(4 * d, d, 0.3, seed + 2),
             normal_matrix<T, 1, D>(1, d, 0.1, seed + 3));
    SurrogateT surrogate(normal_matrix<T, D, D>(d, d, 0.3, seed + 4),
                         normal_matrix<T, 1, D>(1, d, 0.1, seed + 5));
    const nlb::RowMatrix<T> w = normal_matrix<T>(d, 1, 1.0, seed + 6);
    GateT gate(nlb::ColVector<T, D>(w.col(0)), T(0.1), threshold);
    return Gated(std::move(mlp), std::move(surrogate), std::move(gate));
  }
};

constexpr double inf = std::numeric_limits<double>::infinity();

}  // namespace

BOOST_AUTO_TEST_CASE(infinite_thresholds_equal_each_path_exactly) {
  using L = Layer<float, nlb::Dynamic, nlb::Dynamic>;
  const auto X = normal_matrix<float>(37, 12, 1.0, 42);
  nlb::Activations<float> Y(37, 12);

  auto all_full = L::make(12, 1, static_cast<float>(inf));
  const auto full_counts = forward_into(all_full, X, Y);
  BOOST_TEST(full_counts.full == 37);
  BOOST_TEST(full_counts.linear == 0);
  const auto Ymlp = forward_of(all_full.mlp(), X);
  BOOST_TEST((Y.array() == Ymlp.array()).all());

  auto all_linear = L::make(12, 1, static_cast<float>(-inf));
  const auto linear_counts = forward_into(all_linear, X, Y);
  BOOST_TEST(linear_counts.linear == 37);
  BOOST_TEST(linear_counts.linear_fraction() == 1.0);
  const auto Ylin = forward_of(all_linear.surrogate(), X);
  BOOST_TEST((Y.array() == Ylin.array()).all());
}

BOOST_AUTO_TEST_CASE(random_routing_equals_row_by_row_reference) {
  using L = Layer<double, nlb::Dynamic, nlb::Dynamic>;
  const auto gated = L::make(10, 5, 0.0);
  const auto X = normal_matrix<double>(200, 10, 1.0, 77);
  nlb::Activations<double> Y(200, 10);
  nlb::Context<nlb::backend::cpu> ctx;
  decltype(gated)::Workspace ws;
  const auto counts = gated.forward(ctx, X, Y, ws);

  // Reference: the gate's decision per row, then that row alone through the chosen path.
  const auto scores = gated.gate().score(X);
  Index linear = 0;
  double err = 0;
  for (Index t = 0; t < X.rows(); ++t) {
    const nlb::Activations<double> row = X.row(t);
    const bool is_linear = scores(t) > gated.gate().threshold();
    linear += is_linear;
    const auto expected =
        is_linear ? forward_of(gated.surrogate(), row) : forward_of(gated.mlp(), row);
    err = std::max(err, scaled_error(Y.row(t), expected));
  }
  BOOST_TEST_MESSAGE("hard routing vs row-by-row: max scaled error " << err << ", " << counts.linear
                                                                     << " linear");
  BOOST_TEST(counts.linear == linear);
  BOOST_TEST(counts.full == X.rows() - linear);
  BOOST_TEST(counts.linear > 50);  // the random gate really splits the batch
  BOOST_TEST(counts.full > 50);
  BOOST_TEST(err <= nlb::test::tol::mlp_double_rel);

  // The same workspace reused on another batch gives the same answer as a fresh one.
  const auto X2 = normal_matrix<double>(31, 10, 1.0, 78);
  nlb::Activations<double> Y2(31, 10), Y2_fresh(31, 10);
  gated.forward(ctx, X2, Y2, ws);
  forward_into(gated, X2, Y2_fresh);
  BOOST_TEST((Y2.array() == Y2_fresh.array()).all());
}

BOOST_AUTO_TEST_CASE(empty_and_single_row_batches) {
  using L = Layer<float, nlb::Dynamic, nlb::Dynamic>;
  const auto gated = L::make(8, 9, 0.0f);
  const nlb::Activations<float> empty(0, 8);
  nlb::Activations<float> Y0(0, 8);
  const auto c0 = forward_into(gated, empty, Y0);
  BOOST_TEST(c0.linear + c0.full == 0);
  BOOST_TEST(c0.linear_fraction() == 0.0);

  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    const auto x = normal_matrix<float>(1, 8, 1.0, 100 + seed);
    nlb::Activations<float> y(1, 8);
    const auto c = forward_into(gated, x, y);
    BOOST_TEST(c.linear + c.full == 1);
    const auto expected =
        c.linear == 1 ? forward_of(gated.surrogate(), x) : forward_of(gated.mlp(), x);
    BOOST_TEST((y.array() == expected.array()).all());
  }
}

BOOST_AUTO_TEST_CASE(fixed_and_dynamic_instantiations_agree) {
  constexpr int d = 16;
  using Dyn = Layer<float, nlb::Dynamic, nlb::Dynamic>;
  using Fix = Layer<float, d, 4 * d>;
  const auto dyn = Dyn::make(d, 21, 0.0f);
  const auto fix = Fix::make(d, 21, 0.0f);  // same seeds: same weights
  const auto X = normal_matrix<float>(64, d, 1.0, 3);
  const nlb::Activations<float, d> Xf = X;
  nlb::Activations<float> Yd(64, d);
  nlb::Activations<float, d> Yf(64, d);
  const auto cd = forward_into(dyn, X, Yd);
  const auto cf = forward_into(fix, Xf, Yf);
  BOOST_TEST(cd.linear == cf.linear);
  const double err = scaled_error(Yf, Yd);
  BOOST_TEST_MESSAGE("fixed vs Dynamic GatedMLP: max scaled error " << err);
  BOOST_TEST(err <= nlb::test::tol::mlp_float_rel);
}

BOOST_AUTO_TEST_CASE(soft_mode_blends_by_gate_probability) {
  using L = Layer<double, nlb::Dynamic, nlb::Dynamic>;
  const auto gated = L::make(6, 31, 0.25);
  const auto X = normal_matrix<double>(17, 6, 1.0, 8);
  nlb::Activations<double> Y(17, 6);
  nlb::Context<nlb::backend::cpu> ctx;
  decltype(gated)::Workspace ws;
  gated.forward_soft(ctx, X, Y, ws);
  const auto full = forward_of(gated.mlp(), X);
  const auto lin = forward_of(gated.surrogate(), X);
  const auto scores = gated.gate().score(X);
  double err = 0;
  for (Index t = 0; t < X.rows(); ++t) {
    const double p_linear = 1.0 / (1.0 + std::exp(-(scores(t) - 0.25)));
    const Eigen::RowVectorXd expected = (1 - p_linear) * full.row(t) + p_linear * lin.row(t);
    err = std::max(err, scaled_error(Y.row(t), expected));
  }
  BOOST_TEST(err <= nlb::test::tol::mlp_double_rel);
}

// route_counts.hpp: the share of rows routed linear.
BOOST_AUTO_TEST_CASE(route_counts_linear_fraction) {
  BOOST_TEST(nlb::RouteCounts{}.linear_fraction() == 0.0);
  BOOST_TEST((nlb::RouteCounts{3, 1}.linear_fraction()) == 0.75);
  BOOST_TEST((nlb::RouteCounts{0, 5}.linear_fraction()) == 0.0);
}

BOOST_AUTO_TEST_CASE(mismatched_parts_and_inputs_raise_shape_errors) {
  using L = Layer<double, nlb::Dynamic, nlb::Dynamic>;
  const auto ok = L::make(6, 1, 0.0);
  BOOST_CHECK_EXCEPTION(
      L::Gated(ok.mlp(),
               L::SurrogateT(nlb::RowMatrix<double>::Zero(5, 5), nlb::RowVector<double>::Zero(5)),
               ok.gate()),
      nlb::ShapeError, [](const nlb::ShapeError& e) {
        const std::string m = e.what();
        return m.find("expected 6") != std::string::npos && m.find("found 5") != std::string::npos;
      });
  const auto X = normal_matrix<double>(4, 7, 1.0, 2);
  nlb::Activations<double> Y(4, 6);
  BOOST_CHECK_THROW(forward_into(ok, X, Y), nlb::ShapeError);
}
