// DiagonalFilter and ScalarFilter (PAPERS.md §B2): D = diag(softplus θ) against the closed
// form, the filter scores against x_i D x_jᵀ, and the stability property of S − D: every
// eigenvalue has real part <= −min_k D_kk <= 0.
#include <boost/test/unit_test.hpp>

#include <Eigen/Eigenvalues>
#include <cmath>
#include <limits>

#include "nlb/attention/diagonal_filter.hpp"
#include "nlb/attention/skew_routing.hpp"
#include "test_random.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::RowMatrix;
using nlb::RowVector;
namespace tol = nlb::test::tol;

RowMatrix<double> random_matrix(Index rows, Index cols, std::uint64_t seed, double scale = 1.0) {
  return nlb::test::gaussian(rows, cols, seed) * scale;
}

long double softplus_reference(long double t) {
  return t < 0 ? std::log1p(std::exp(t)) : t + std::log1p(std::exp(-t));
}

// Largest real part of the eigenvalues of S − D, and the rigorous bound for it: −min D plus
// the backward error of the eigensolver (tolerances.hpp, eigen_real_part_factor).
void check_stability(const RowMatrix<double>& s, const RowVector<double>& diag,
                     const std::string& label) {
  const Index d = s.rows();
  const Eigen::MatrixXd a = s - Eigen::MatrixXd(diag.transpose().asDiagonal());
  const Eigen::EigenSolver<Eigen::MatrixXd> eig(a, false);
  BOOST_REQUIRE(eig.info() == Eigen::Success);
  const double max_real = eig.eigenvalues().real().maxCoeff();
  const double slack = tol::eigen_real_part_factor * static_cast<double>(d) *
                       std::numeric_limits<double>::epsilon() * a.norm();
  BOOST_TEST(max_real <= -diag.minCoeff() + slack, label << ": max Re λ " << max_real);
  BOOST_TEST(max_real <= slack, label);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(diagonal_filter)

BOOST_AUTO_TEST_CASE(diagonal_is_softplus_of_theta) {
  RowVector<double> theta(9);
  theta << -700, -30, -2, -1e-9, 0, 1e-9, 2, 30, 700;
  const nlb::DiagonalFilter<double> f(theta);
  const nlb::DiagonalFilter<float, 9, nlb::backend::scalar> g(theta.cast<float>());
  for (Index k = 0; k < theta.size(); ++k) {
    const long double expected = softplus_reference(theta(k));
    // The kernels' mixed bounds (float underflows to 0 at θ = −700: the absolute part).
    BOOST_TEST(std::fabs(f.diagonal()(k) - expected) <=
               tol::kernel_double_abs + tol::kernel_double_rel * expected);
    BOOST_TEST(f.diagonal()(k) >= 0.0);
    BOOST_TEST(std::fabs(g.diagonal()(k) - expected) <=
               tol::kernel_float_abs + tol::kernel_float_rel * expected);
  }
  BOOST_TEST(f.features() == 9);
  BOOST_TEST(f.parameter_count() == 9);
  const nlb::ScalarFilter<double> s(0.5);
  BOOST_TEST(std::fabs(s.value() - softplus_reference(0.5L)) <= tol::kernel_double_rel);
  BOOST_TEST(std::fabs(nlb::ScalarFilter<double>().value() - std::log(2.0)) <= 1e-16);
  // from_value keeps the value; its θ, through the softplus kernel, gives it back.
  for (double v : {1e-3, 0.7, 25.0}) {
    const auto from = nlb::ScalarFilter<double>::from_value(v);
    BOOST_TEST(from.value() == v);
    BOOST_TEST(std::fabs(nlb::ScalarFilter<double>(from.theta()).value() - v) <=
               tol::kernel_double_rel * v);
  }
  BOOST_CHECK_THROW(nlb::ScalarFilter<double>::from_value(0.0), nlb::ArgumentError);
  BOOST_CHECK_THROW(nlb::ScalarFilter<float>::from_value(std::nanf("")), nlb::ArgumentError);
}

BOOST_AUTO_TEST_CASE(subtracted_scores_equal_the_dense_form) {
  // d = 3: the row-wise kernel of the causal product (k <= 4); d = 11: its GEMM panels.
  for (Index d : {3, 11}) {
    const RowVector<double> theta = random_matrix(1, d, 10);
    const nlb::DiagonalFilter<double> f(theta);
    const nlb::ScalarFilter<double> sc(0.3);
    for (Index past : {0, 3, 70}) {
      for (Index rows : {1, 7, 66}) {
        const RowMatrix<double> xk = random_matrix(past + rows, d, 11 + past + rows);
        const RowMatrix<double> xq = xk.bottomRows(rows);
        const RowMatrix<double> base = random_matrix(rows, past + rows, 12);
        // Reference: x_i D x_jᵀ from the dense D, a different evaluation order.
        const RowMatrix<double> full_d = base - xq * f.dense() * xk.transpose();
        const RowMatrix<double> full_s = base - xq * sc.dense(d) * xk.transpose();
        RowMatrix<double> got_d = base, got_s = base;
        f.subtract_scores(xq, xk, got_d, past);
        sc.subtract_scores(xq, xk, got_s, past);
        const double scale = full_d.cwiseAbs().maxCoeff() + full_s.cwiseAbs().maxCoeff();
        double err = 0;
        Index touched = 0;
        for (Index i = 0; i < rows; ++i) {
          for (Index j = 0; j < past + rows; ++j) {
            if (j <= past + i) {
              err = std::max(err, std::fabs(got_d(i, j) - full_d(i, j)));
              err = std::max(err, std::fabs(got_s(i, j) - full_s(i, j)));
            } else {
              touched += got_d(i, j) != base(i, j);
              touched += got_s(i, j) != base(i, j);
            }
          }
        }
        BOOST_TEST(err <= tol::attention_double_rel * scale, "past=" << past << " T=" << rows);
        BOOST_TEST(touched == 0);
      }
    }
    // The self, non-causal form: every entry.
    const RowMatrix<double> x = random_matrix(9, d, 13);
    RowMatrix<double> got = RowMatrix<double>::Zero(9, 9);
    f.subtract_scores(x, got, false);
    const RowMatrix<double> expected = -x * f.dense() * x.transpose();
    BOOST_TEST((got - expected).cwiseAbs().maxCoeff() <=
               tol::attention_double_rel * expected.cwiseAbs().maxCoeff());
  }
}

BOOST_AUTO_TEST_CASE(every_eigenvalue_of_s_minus_d_has_non_positive_real_part) {
  std::uint64_t seed = 20;
  for (Index d : {2, 5, 8, 16, 24}) {
    for (Index rank = 2; rank <= d && rank <= 8; rank += 2) {
      for (double spread : {0.1, 3.0}) {
        const nlb::SkewSymmetricRouting<double> s(random_matrix(d, rank / 2, seed, 2.0),
                                                  random_matrix(d, rank / 2, seed + 1, 2.0));
        const RowVector<double> theta = random_matrix(1, d, seed + 2, spread);
        seed += 3;
        const nlb::DiagonalFilter<double> diag(theta);
        const nlb::ScalarFilter<double> scalar(theta(0));
        const std::string label = "d=" + std::to_string(d) + " rank=" + std::to_string(rank);
        check_stability(s.dense(), diag.diagonal(), label + " diagonal");
        check_stability(s.dense(), scalar.diagonal(d), label + " scalar");
      }
    }
  }
  // D ≈ 0 (θ = −40: softplus ≈ 4e-18): S − D is essentially skew, eigenvalues on the imaginary
  // axis; the bound is then the solver's backward error alone.
  const nlb::SkewSymmetricRouting<double> s(random_matrix(12, 3, 90), random_matrix(12, 3, 91));
  check_stability(s.dense(),
                  nlb::DiagonalFilter<double>(RowVector<double>::Constant(12, -40.0)).diagonal(),
                  "near-zero filter");
}

BOOST_AUTO_TEST_CASE(bad_input_raises_typed_errors) {
  BOOST_CHECK_THROW(nlb::DiagonalFilter<double>(RowVector<double>(0)), nlb::ShapeError);
  BOOST_CHECK_THROW((nlb::DiagonalFilter<double, 4>(RowVector<double>::Zero(5))), nlb::ShapeError);
  const nlb::DiagonalFilter<double> f(RowVector<double>::Zero(4));
  RowMatrix<double> scores(3, 3), out(3, 4);
  BOOST_CHECK_THROW(f.subtract_scores(random_matrix(3, 5, 1), scores, true), nlb::ShapeError);
  BOOST_CHECK_THROW(f.subtract_scores(random_matrix(3, 4, 1), random_matrix(4, 4, 2), scores, 0),
                    nlb::ShapeError);  // keys: past + T rows
  BOOST_CHECK_THROW(f.subtract_scores(random_matrix(3, 4, 1), random_matrix(2, 4, 2), scores, -1),
                    nlb::ArgumentError);
  nlb::Context<nlb::backend::cpu> ctx;
  BOOST_CHECK_THROW(f.query_features(ctx, random_matrix(3, 5, 1), out), nlb::ShapeError);
  BOOST_CHECK_THROW(f.check_width("test", 5), nlb::ShapeError);
  const nlb::ScalarFilter<double> s;
  BOOST_CHECK_THROW(s.subtract_scores(random_matrix(3, 4, 1), random_matrix(3, 5, 2), scores, 0),
                    nlb::ShapeError);
}

BOOST_AUTO_TEST_SUITE_END()
