// SwiGluMlp: Y = (silu(X W_gate) ⊙ (X W_up)) W_down against an independent long-double loop, on
// the scalar and the SIMD backend; its composition with the paper's token router (GatedMLP) and
// the ridge fit on its outputs.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "component_call.hpp"
#include "nlb/mlp/gated_mlp.hpp"
#include "nlb/mlp/hyperplane_gate.hpp"
#include "nlb/mlp/ridge_stats.hpp"
#include "nlb/mlp/ridge_surrogate.hpp"
#include "nlb/mlp/swiglu_mlp.hpp"
#include "random_mlp.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::test::forward_into;
using nlb::test::forward_of;
using nlb::test::normal_matrix;
using nlb::test::scaled_error;

// The three matrices of a random SwiGLU MLP, as a checkpoint holds them ([in, out]).
template <class T>
struct Weights {
  nlb::RowMatrix<T> gate, up, down;
  Weights(Index d, Index h, std::uint64_t seed)
      : gate(normal_matrix<T>(d, h, 0.3, seed)),
        up(normal_matrix<T>(d, h, 0.3, seed + 1)),
        down(normal_matrix<T>(h, d, 0.3, seed + 2)) {}
};

// Independent reference: plain loops in long double over the three separate matrices, with
// silu(a) = a · sigmoid(a) written as the logistic function.
template <class T, class XT>
Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic> reference_swiglu(const Weights<T>& w,
                                                                            const XT& X) {
  const Index rows = X.rows(), d = w.gate.rows(), h = w.gate.cols();
  Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic> Y(rows, d);
  std::vector<long double> hidden(static_cast<std::size_t>(h));
  for (Index t = 0; t < rows; ++t) {
    for (Index j = 0; j < h; ++j) {
      long double g = 0, u = 0;
      for (Index i = 0; i < d; ++i) {
        g += static_cast<long double>(X(t, i)) * w.gate(i, j);
        u += static_cast<long double>(X(t, i)) * w.up(i, j);
      }
      const long double sigmoid = 1.0L / (1.0L + std::exp(-g));
      hidden[static_cast<std::size_t>(j)] = g * sigmoid * u;
    }
    for (Index o = 0; o < d; ++o) {
      long double y = 0;
      for (Index j = 0; j < h; ++j)
        y += hidden[static_cast<std::size_t>(j)] * w.down(j, o);
      Y(t, o) = y;
    }
  }
  return Y;
}

template <class T, class Backend>
void check_against_reference(double tolerance) {
  for (const auto& [d, h, rows] : {std::tuple<Index, Index, Index>{16, 40, 33}, {7, 11, 1}}) {
    const Weights<T> w(d, h, 100 + d);
    const nlb::SwiGluMlp<T, nlb::Dynamic, nlb::Dynamic, Backend> mlp(w.gate, w.up, w.down);
    BOOST_TEST(mlp.features() == d);
    BOOST_TEST(mlp.hidden_features() == h);
    const auto X = normal_matrix<T>(rows, d, 1.0, 7 + d);
    const double err = scaled_error(forward_of(mlp, X), reference_swiglu(w, X));
    BOOST_TEST_MESSAGE("SwiGluMlp d " << d << " h " << h << ": scaled error " << err);
    BOOST_TEST(err <= tolerance);
  }
}

constexpr double inf = std::numeric_limits<double>::infinity();

}  // namespace

BOOST_AUTO_TEST_CASE(swiglu_matches_long_double_reference) {
  using nlb::test::tol::mlp_double_rel;
  using nlb::test::tol::mlp_float_rel;
  check_against_reference<double, nlb::backend::scalar>(mlp_double_rel);
  check_against_reference<double, nlb::backend::cpu>(mlp_double_rel);
  check_against_reference<float, nlb::backend::scalar>(mlp_float_rel);
  check_against_reference<float, nlb::backend::cpu>(mlp_float_rel);
}

BOOST_AUTO_TEST_CASE(fixed_and_dynamic_sizes_agree) {
  const Weights<float> w(8, 24, 3);
  const nlb::SwiGluMlp<float> dynamic_mlp(w.gate, w.up, w.down);
  const nlb::SwiGluMlp<float, 8, 24> fixed_mlp(w.gate, w.up, w.down);
  const auto X = normal_matrix<float>(9, 8, 1.0, 4);
  const auto a = forward_of(dynamic_mlp, X);
  const auto b = forward_of(fixed_mlp, X);
  BOOST_TEST(scaled_error(a, b) <= nlb::test::tol::mlp_float_rel);
  // The concatenated matrix holds W_gate then W_up, as the accessor's comment says.
  BOOST_TEST((dynamic_mlp.w_gate_up().leftCols(24).array() == w.gate.array()).all());
  BOOST_TEST((dynamic_mlp.w_gate_up().rightCols(24).array() == w.up.array()).all());
}

BOOST_AUTO_TEST_CASE(empty_batches_and_reused_workspaces) {
  const Weights<double> w(6, 10, 11);
  const nlb::SwiGluMlp<double> mlp(w.gate, w.up, w.down);
  nlb::Activations<double> empty(0, 6), out(0, 6);
  const auto counts = forward_into(mlp, empty, out);
  BOOST_TEST(counts.full == 0);
  BOOST_TEST(counts.linear == 0);

  // A workspace grown by a large batch gives a smaller batch the answer a fresh one gives.
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::SwiGluMlp<double>::Workspace ws;
  const auto big = normal_matrix<double>(50, 6, 1.0, 12),
             small = normal_matrix<double>(5, 6, 1.0, 13);
  nlb::Activations<double> Ybig(50, 6), Ysmall(5, 6);
  mlp.forward(ctx, big, Ybig, ws);
  const auto all_full = mlp.forward(ctx, small, Ysmall, ws);
  BOOST_TEST(all_full.full == 5);
  BOOST_TEST((Ysmall.array() == forward_of(mlp, small).array()).all());
}

BOOST_AUTO_TEST_CASE(shape_errors_name_expected_and_found) {
  const Weights<float> w(6, 10, 21);
  const nlb::RowMatrix<float> narrow_up = normal_matrix<float>(6, 9, 0.3, 22);
  BOOST_CHECK_EXCEPTION(nlb::SwiGluMlp<float>(w.gate, narrow_up, w.down), nlb::ShapeError,
                        [](const nlb::ShapeError& e) {
                          return std::string(e.what()).find("W_up cols (h)") != std::string::npos;
                        });
  const nlb::RowMatrix<float> tall_down = normal_matrix<float>(11, 6, 0.3, 23);
  BOOST_CHECK_THROW(nlb::SwiGluMlp<float>(w.gate, w.up, tall_down), nlb::ShapeError);
  BOOST_CHECK_THROW((nlb::SwiGluMlp<float, 8, nlb::Dynamic>(w.gate, w.up, w.down)),
                    nlb::ShapeError);
  const nlb::SwiGluMlp<float> mlp(w.gate, w.up, w.down);
  const auto X = normal_matrix<float>(4, 5, 1.0, 24);
  nlb::Activations<float> Y(4, 6);
  BOOST_CHECK_EXCEPTION(forward_into(mlp, X, Y), nlb::ShapeError, [](const nlb::ShapeError& e) {
    return std::string(e.what()).find("SwiGluMlp::forward: input width") != std::string::npos;
  });
}

// The paper's router needs only the MLP's input and output: GatedMLP routes a SwiGLU layer's
// tokens to the MLP or to a ridge surrogate fitted on its outputs.
BOOST_AUTO_TEST_CASE(gated_router_over_a_swiglu_mlp) {
  using MlpT = nlb::SwiGluMlp<double>;
  using SurrogateT = nlb::RidgeSurrogate<double>;
  using GateT = nlb::HyperplaneGate<double>;
  const Index d = 8, h = 20;
  const Weights<double> w(d, h, 31);
  const MlpT mlp(w.gate, w.up, w.down);
  const auto X = normal_matrix<double>(400, d, 1.0, 32);
  const auto Y = forward_of(mlp, X);

  // The streamed ridge fit on (X, SwiGLU(X)) against the paper's SVD closed form.
  nlb::RidgeStats<> stats(d, d);
  stats.add(X, Y);
  SurrogateT surrogate;
  surrogate.fit(stats, 0.01);
  const nlb::RidgeSolution svd = nlb::fit_svd(X, Y, 0.01);
  const double scale = std::max(1.0, svd.weight.cwiseAbs().maxCoeff());
  const double fit_err = std::max((surrogate.weight() - svd.weight).cwiseAbs().maxCoeff(),
                                  (surrogate.bias() - svd.bias).cwiseAbs().maxCoeff()) /
                         scale;
  BOOST_TEST_MESSAGE("ridge fit on SwiGLU outputs vs the SVD form: " << fit_err);
  BOOST_TEST(fit_err <= nlb::test::tol::ridge_fit_vs_svd_rel);
  BOOST_TEST(surrogate.r2() > 0.0);  // the SwiGLU map is partly linear on these inputs
  BOOST_TEST(surrogate.r2() < 1.0);  // and partly not

  const nlb::RowMatrix<double> gw = normal_matrix<double>(d, 1, 1.0, 33);
  for (const double threshold : {inf, -inf, 0.0}) {
    nlb::GatedMLP<MlpT, SurrogateT, GateT> gated(
        mlp, surrogate, GateT(nlb::ColVector<double>(gw.col(0)), 0.0, threshold));
    nlb::Activations<double> out(X.rows(), d);
    const auto counts = forward_into(gated, X, out);
    BOOST_TEST(counts.full + counts.linear == X.rows());
    const auto scores = gated.gate().score(X);
    const auto lin = forward_of(surrogate, X);
    Index linear = 0;
    for (Index t = 0; t < X.rows(); ++t) {
      const bool is_linear = scores(t) > threshold;
      linear += is_linear;
      const double err = scaled_error(out.row(t), is_linear ? lin.row(t) : Y.row(t));
      BOOST_TEST(err <= nlb::test::tol::mlp_double_rel);
    }
    BOOST_TEST(counts.linear == linear);
    if (threshold == 0.0) {
      BOOST_TEST(counts.linear > 50);
      BOOST_TEST(counts.full > 50);
    }
  }
}
