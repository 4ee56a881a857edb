// Mlp: Y = Act(X W_fc + b_fc) W_proj + b_proj against an independent long-double loop.
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "component_call.hpp"
#include "nlb/mlp/mlp.hpp"
#include "random_mlp.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::test::forward_of;
using nlb::test::scaled_error;

// Independent reference: plain triple loops in long double with the closed-form GELUs.
template <class MlpT, class Derived>
Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic> reference_mlp(
    const MlpT& mlp, const Eigen::MatrixBase<Derived>& X, bool tanh_form) {
  const Index T = X.rows(), d = mlp.features(), h = mlp.hidden_features();
  const long double pi = 3.141592653589793238462643383279502884L;
  Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic> Y(T, d);
  std::vector<long double> hidden(static_cast<std::size_t>(h));
  for (Index t = 0; t < T; ++t) {
    for (Index j = 0; j < h; ++j) {
      long double a = mlp.b_fc()(j);
      for (Index i = 0; i < d; ++i)
        a += static_cast<long double>(X(t, i)) * mlp.w_fc()(i, j);
      hidden[static_cast<std::size_t>(j)] =
          tanh_form ? 0.5L * a * (1 + std::tanh(std::sqrt(2 / pi) * (a + 0.044715L * a * a * a)))
                    : 0.5L * a * (1 + std::erf(a / std::sqrt(2.0L)));
    }
    for (Index o = 0; o < d; ++o) {
      long double y = mlp.b_proj()(o);
      for (Index j = 0; j < h; ++j)
        y += hidden[static_cast<std::size_t>(j)] * mlp.w_proj()(j, o);
      Y(t, o) = y;
    }
  }
  return Y;
}

template <class T, int D, int H, class Act, class Backend>
nlb::Mlp<T, D, H, Act, Backend> random_mlp(Index d, Index h, std::uint64_t seed) {
  using nlb::test::normal_matrix;
  return {normal_matrix<T, D, H>(d, h, 0.3, seed), normal_matrix<T, 1, H>(1, h, 0.1, seed + 1),
          normal_matrix<T, H, D>(h, d, 0.3, seed + 2), normal_matrix<T, 1, D>(1, d, 0.1, seed + 3)};
}

template <class T, class Act, class Backend>
void check_against_reference(double bound, bool tanh_form) {
  const Index d = 13, h = 52;
  const auto mlp = random_mlp<T, nlb::Dynamic, nlb::Dynamic, Act, Backend>(d, h, 7);
  const auto X = nlb::test::normal_matrix<T>(9, d, 1.0, 11);
  const auto Y = forward_of(mlp, X);
  const auto ref = reference_mlp(mlp, X, tanh_form);
  const double err = scaled_error(Y, ref);
  BOOST_TEST_MESSAGE("Mlp vs long-double reference: max scaled error " << err);
  BOOST_TEST(err <= bound);
}

}  // namespace

BOOST_AUTO_TEST_CASE(mlp_matches_long_double_reference) {
  using nlb::backend::cpu;
  using nlb::backend::scalar;
  check_against_reference<double, nlb::GeluTanh, scalar>(nlb::test::tol::mlp_double_rel, true);
  check_against_reference<double, nlb::GeluErf, scalar>(nlb::test::tol::mlp_double_rel, false);
  check_against_reference<double, nlb::GeluTanh, cpu>(nlb::test::tol::mlp_double_rel, true);
  check_against_reference<double, nlb::GeluErf, cpu>(nlb::test::tol::mlp_double_rel, false);
  check_against_reference<float, nlb::GeluTanh, scalar>(nlb::test::tol::mlp_float_rel, true);
  check_against_reference<float, nlb::GeluTanh, cpu>(nlb::test::tol::mlp_float_rel, true);
  check_against_reference<float, nlb::GeluErf, cpu>(nlb::test::tol::mlp_float_rel, false);
}

BOOST_AUTO_TEST_CASE(fixed_and_dynamic_sizes_agree) {
  constexpr int d = 16, h = 64;
  const auto dyn =
      random_mlp<float, nlb::Dynamic, nlb::Dynamic, nlb::GeluTanh, nlb::backend::cpu>(d, h, 3);
  const nlb::Mlp<float, d, h> fixed(dyn.w_fc(), dyn.b_fc(), dyn.w_proj(), dyn.b_proj());
  const auto X = nlb::test::normal_matrix<float>(21, d, 1.0, 5);
  const nlb::Activations<float, d> Xf = X;
  const auto Yd = forward_of(dyn, X);
  const auto Yf = forward_of(fixed, Xf);
  const double err = scaled_error(Yf, Yd);
  BOOST_TEST_MESSAGE("fixed vs Dynamic Mlp: max scaled error " << err);
  BOOST_TEST(err <= nlb::test::tol::mlp_float_rel);
}

BOOST_AUTO_TEST_CASE(large_fixed_sizes_are_heap_stored) {
  // A GPT-2 small MLP as a type: the weights are megabytes and must not live inline.
  using Gpt2Mlp = nlb::Mlp<float, 768, 3072>;
  const Gpt2Mlp mlp;
  BOOST_TEST(mlp.w_fc().rows() == 768);
  BOOST_TEST(mlp.w_fc().cols() == 3072);
  const nlb::Activations<float, 768> X = nlb::Activations<float, 768>::Ones(2, 768);
  const auto Y = forward_of(mlp, X);  // zero weights: GELU(0) = 0, so Y = b_proj = 0
  BOOST_TEST(Y.cwiseAbs().maxCoeff() == 0.0f);
}

BOOST_AUTO_TEST_CASE(empty_and_single_row_batches) {
  const auto mlp =
      random_mlp<double, nlb::Dynamic, nlb::Dynamic, nlb::GeluTanh, nlb::backend::cpu>(6, 24, 9);
  const nlb::Activations<double> empty(0, 6);
  BOOST_TEST(forward_of(mlp, empty).rows() == 0);
  const auto X = nlb::test::normal_matrix<double>(1, 6, 1.0, 2);
  const double err = scaled_error(forward_of(mlp, X), reference_mlp(mlp, X, true));
  BOOST_TEST(err <= nlb::test::tol::mlp_double_rel);
}

BOOST_AUTO_TEST_CASE(shape_errors_name_expected_and_found) {
  const auto mlp =
      random_mlp<double, nlb::Dynamic, nlb::Dynamic, nlb::GeluTanh, nlb::backend::cpu>(6, 24, 9);
  const auto X = nlb::test::normal_matrix<double>(3, 5, 1.0, 2);
  BOOST_CHECK_EXCEPTION(forward_of(mlp, X), nlb::ShapeError, [](const nlb::ShapeError& e) {
    const std::string m = e.what();
    return m.find("expected 6") != std::string::npos && m.find("found 5") != std::string::npos;
  });
  // A fixed-width Mlp given data of another width: a ShapeError, not undefined behaviour.
  const nlb::Mlp<double, 6, 24> fixed;
  BOOST_CHECK_THROW(forward_of(fixed, nlb::test::normal_matrix<double>(2, 7, 1.0, 1)),
                    nlb::ShapeError);
  // Mismatched bias length.
  BOOST_CHECK_THROW(
      (nlb::Mlp<double>(nlb::RowMatrix<double>::Zero(6, 24), nlb::RowVector<double>::Zero(23),
                        nlb::RowMatrix<double>::Zero(24, 6), nlb::RowVector<double>::Zero(6))),
      nlb::ShapeError);
  // Heap-stored weights of a fixed-size type are checked against the compile-time sizes.
  using Gpt2Mlp = nlb::Mlp<float, 768, 3072>;
  BOOST_CHECK_EXCEPTION(
      Gpt2Mlp(nlb::RowMatrix<float>::Zero(768, 100), nlb::RowVector<float>::Zero(3072),
              nlb::RowMatrix<float>::Zero(100, 768), nlb::RowVector<float>::Zero(768)),
      nlb::ShapeError, [](const nlb::ShapeError& e) {
        const std::string m = e.what();
        return m.find("expected 3072") != std::string::npos &&
               m.find("found 100") != std::string::npos;
      });
}
