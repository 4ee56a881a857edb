// RidgeSurrogate (PAPERS.md §A1): the fit from streamed statistics against the paper's SVD
// form, the normal equations and exact maps; R²; float/double and fixed/Dynamic forms; errors.
#include <boost/test/unit_test.hpp>

#include <Eigen/Dense>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "error_message.hpp"
#include "nlb/mlp/ridge_surrogate.hpp"
#include "test_random.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::RidgeStats;
using nlb::RidgeSurrogate;
namespace tol = nlb::test::tol;

// ‖a − b‖_F / ‖b‖_F.
template <class A, class B>
double rel_error(const A& a, const B& b) {
  return (a.template cast<double>() - b.template cast<double>()).norm() /
         b.template cast<double>().norm();
}

// Y = X W + b through the one call contract into Y, with a fresh context and scratch.
template <class S, class XT, class YT>
void forward_into(const S& surrogate, const XT& X, YT&& Y) {
  nlb::Context<typename S::backend_type> ctx;
  typename S::Workspace scratch;
  surrogate.forward(ctx, X, std::forward<YT>(Y), scratch);
}

// The same into a new [T, d_out] matrix.
template <class S, class XT>
typename S::Output forward_of(const S& surrogate, const XT& X) {
  typename S::Output Y(X.rows(), surrogate.out_features());
  forward_into(surrogate, X, Y);
  return Y;
}

// The bias is ȳ − x̄W, so its natural scale is ‖ȳ‖ + ‖x̄‖‖W‖ (not ‖b‖, which can be ~0).
template <class Bias>
double bias_error(const Bias& b, const nlb::RidgeSolution& ref, const Eigen::RowVectorXd& mean_x,
                  const Eigen::RowVectorXd& mean_y) {
  const double scale = mean_y.norm() + mean_x.norm() * ref.weight.norm();
  return (b.template cast<double>() - ref.bias).norm() / scale;
}

template <class Stats, class XD, class YD>
void add_in_batches(Stats& stats, const XD& X, const YD& Y, Index batch) {
  for (Index r = 0; r < X.rows(); r += batch) {
    const Index b = std::min(batch, X.rows() - r);
    stats.add(X.middleRows(r, b), Y.middleRows(r, b));
  }
}

// Centered data and the normal-equations solution (X_cᵀX_c + λI)⁻¹ X_cᵀY_c via LDLT: a third,
// independent route to the same W.
nlb::RidgeSolution normal_equations(const Eigen::MatrixXd& X, const Eigen::MatrixXd& Y,
                                    double lambda) {
  const Eigen::RowVectorXd mx = X.colwise().mean();
  const Eigen::RowVectorXd my = Y.colwise().mean();
  const Eigen::MatrixXd xc = X.rowwise() - mx;
  const Eigen::MatrixXd yc = Y.rowwise() - my;
  Eigen::MatrixXd gram = xc.transpose() * xc;
  gram.diagonal().array() += lambda;
  nlb::RidgeSolution out;
  out.weight = gram.ldlt().solve(xc.transpose() * yc);
  out.bias = my - mx * out.weight;
  return out;
}

// LayerNorm rows (zero mean, unit variance over features), then an affine γ, β as in GPT-2's
// ln_2: X_c (1/γ) = 0, so Cxx has rank d − 1 exactly (PAPERS.md §A1).
Eigen::MatrixXd layer_norm_rows(const Eigen::MatrixXd& Z, const Eigen::RowVectorXd& gamma,
                                const Eigen::RowVectorXd& beta) {
  Eigen::MatrixXd X(Z.rows(), Z.cols());
  for (Index t = 0; t < Z.rows(); ++t) {
    const double mean = Z.row(t).mean();
    const Eigen::RowVectorXd centered = Z.row(t).array() - mean;
    const double var = centered.squaredNorm() / static_cast<double>(Z.cols());
    X.row(t) = (centered / std::sqrt(var + 1e-5)).cwiseProduct(gamma) + beta;
  }
  return X;
}

// X W + b by plain loops in double: the reference for apply().
template <class XD, class W, class B>
Eigen::MatrixXd affine_by_loops(const XD& X, const W& w, const B& b) {
  Eigen::MatrixXd Y(X.rows(), w.cols());
  for (Index t = 0; t < X.rows(); ++t) {
    for (Index k = 0; k < w.cols(); ++k) {
      double sum = static_cast<double>(b(k));
      for (Index j = 0; j < w.rows(); ++j) {
        sum += static_cast<double>(X(t, j)) * static_cast<double>(w(j, k));
      }
      Y(t, k) = sum;
    }
  }
  return Y;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ridge_surrogate)

// cond(X) = 1e6 (singular values 10 .. 1e-5) with a nonzero mean and several outputs: the
// streamed eigendecomposition fit equals the paper's SVD form for λ around the spectrum.
BOOST_AUTO_TEST_CASE(fit_equals_svd_form_ill_conditioned) {
  const Index n = 600;
  const Index d_in = 24;
  const Index d_out = 5;
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    Eigen::MatrixXd X = 10.0 * nlb::test::with_condition_number(n, d_in, 1e6, seed);
    X.rowwise() += Eigen::RowVectorXd::LinSpaced(d_in, 3.0, -2.0);
    const Eigen::MatrixXd A = nlb::test::gaussian(d_in, d_out, seed + 100);
    Eigen::MatrixXd Y = X * A + 0.1 * nlb::test::gaussian(n, d_out, seed + 200);
    Y.rowwise() += Eigen::RowVectorXd::LinSpaced(d_out, -1.0, 4.0);
    RidgeStats<> stats(d_in, d_out);
    add_in_batches(stats, X, Y, 64);
    for (const double lambda : {1e-4, 0.01, 1.0}) {
      RidgeSurrogate<double> surrogate;
      const nlb::RidgeFitReport report = surrogate.fit(stats, lambda);
      const nlb::RidgeSolution ref = nlb::fit_svd(X, Y, lambda);
      const double w_error = rel_error(surrogate.weight(), ref.weight);
      const double b_error = bias_error(surrogate.bias(), ref, stats.mean_x(), stats.mean_y());
      BOOST_TEST_MESSAGE("seed " << seed << " lambda " << lambda << ": W rel error " << w_error
                                 << ", b error " << b_error << ", eigenvalues ["
                                 << report.min_eigenvalue << ", " << report.max_eigenvalue << "]");
      BOOST_TEST(w_error <= tol::ridge_fit_vs_svd_rel);
      BOOST_TEST(b_error <= tol::ridge_fit_vs_svd_rel);
      // The data is as ill-conditioned as claimed: cond(Cxx) = cond(X_c)² ≈ 1e12.
      BOOST_TEST(report.max_eigenvalue / std::abs(report.min_eigenvalue) > 1e10);
    }
  }
}

// Noise-free Y = X A + c is recovered. λ = 1e-12: the ridge bias of W is
// λ (Cxx + λI)⁻¹ A, at most λ ‖A‖ / e_min with e_min ≈ n (1 − √(d/n))² ≈ 370 here, i.e.
// ~1e-14 ‖A‖, far below the 1e-10 bound; λ = 0.01 would give ~1e-4.
BOOST_AUTO_TEST_CASE(recovers_exact_affine_map) {
  const Index n = 500;
  const Index d_in = 12;
  const Index d_out = 7;
  Eigen::MatrixXd X = nlb::test::gaussian(n, d_in, 11);
  X.array() += 2.0;
  const Eigen::MatrixXd A = nlb::test::gaussian(d_in, d_out, 12);
  const Eigen::RowVectorXd c = nlb::test::gaussian(1, d_out, 13);
  const Eigen::MatrixXd Y = (X * A).rowwise() + c;
  RidgeStats<> stats(d_in, d_out);
  add_in_batches(stats, X, Y, 100);
  RidgeSurrogate<double> surrogate;
  const nlb::RidgeFitReport report = surrogate.fit(stats, 1e-12);
  const double w_error = (surrogate.weight() - A).cwiseAbs().maxCoeff();
  const double b_error = (surrogate.bias() - c).cwiseAbs().maxCoeff();
  BOOST_TEST_MESSAGE("exact map: max |W - A| " << w_error << ", max |b - c| " << b_error
                                               << ", 1 - R² " << 1.0 - report.r2);
  BOOST_TEST(w_error <= tol::ridge_exact_map_abs);
  BOOST_TEST(b_error <= tol::ridge_exact_map_abs);
  BOOST_TEST(std::abs(report.r2 - 1.0) <= tol::ridge_r2_abs);
  BOOST_TEST(surrogate.r2() == report.r2);
  BOOST_TEST(report.effective_parameters == static_cast<double>(d_in),
             boost::test_tools::tolerance(1e-12));
}

// Very large λ: W → Cxy / λ → 0 and b → ȳ. Closed-form bounds, from
// ‖(Cxx + λI)⁻¹‖₂ ≤ 1/λ and λ(Cxx + λI)⁻¹ − I = −Cxx (Cxx + λI)⁻¹:
//   ‖W‖_F ≤ ‖Cxy‖_F / λ,  ‖λW − Cxy‖_F ≤ (‖Cxx‖₂ / λ) ‖Cxy‖_F,  ‖b − ȳ‖ ≤ ‖x̄‖ ‖W‖_F.
BOOST_AUTO_TEST_CASE(large_lambda_shrinks_to_mean) {
  Eigen::MatrixXd X = nlb::test::gaussian(400, 10, 21);
  X.array() += 5.0;
  Eigen::MatrixXd Y = X * nlb::test::gaussian(10, 4, 22) + nlb::test::gaussian(400, 4, 23);
  Y.array() -= 3.0;
  RidgeStats<> stats(10, 4);
  stats.add(X, Y);
  const double cxy_norm = stats.cxy().norm();
  const double cxx_norm2 = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(stats.cxx())
                               .eigenvalues()
                               .cwiseAbs()
                               .maxCoeff();
  for (const double lambda : {1e6, 1e9, 1e12}) {
    RidgeSurrogate<double> surrogate;
    surrogate.fit(stats, lambda);
    const double w_norm = surrogate.weight().norm();
    const double shrink_gap = (lambda * surrogate.weight() - stats.cxy()).norm();
    const double bias_gap = (surrogate.bias() - stats.mean_y()).norm();
    BOOST_TEST_MESSAGE("lambda " << lambda << ": ‖W‖ " << w_norm << " <= " << cxy_norm / lambda
                                 << ", ‖λW − Cxy‖ " << shrink_gap
                                 << " <= " << cxx_norm2 / lambda * cxy_norm);
    BOOST_TEST(w_norm <= cxy_norm / lambda);
    BOOST_TEST(shrink_gap <= cxx_norm2 / lambda * cxy_norm);
    BOOST_TEST(bias_gap <= stats.mean_x().norm() * w_norm);
  }
}

// Rows of a LayerNorm output: Cxx has rank d − 1 (singular), the normal case of PAPERS.md §A1.
// With λ = 0.01 the fit equals the SVD form and the LDLT normal-equations solve, and W has no
// component along the null direction 1/γ (λ > 0 picks the minimum-norm-like solution).
BOOST_AUTO_TEST_CASE(rank_deficient_layer_norm_inputs) {
  for (const Index d : {16, 64}) {
    const Index n = 20 * d;
    const Index d_out = 6;
    const Eigen::RowVectorXd gamma =
        (nlb::test::gaussian(1, d, 31).array().abs() + 0.5).matrix();  // γ > 0
    const Eigen::RowVectorXd beta = 0.1 * nlb::test::gaussian(1, d, 32);
    const Eigen::MatrixXd X = layer_norm_rows(3.0 * nlb::test::gaussian(n, d, 33), gamma, beta);
    const Eigen::MatrixXd hidden = (X * nlb::test::gaussian(d, 2 * d, 34)).array().tanh();
    const Eigen::MatrixXd Y = hidden * nlb::test::gaussian(2 * d, d_out, 35) / std::sqrt(d);

    RidgeStats<> stats(d, d_out);
    add_in_batches(stats, X, Y, 512);
    RidgeSurrogate<double> surrogate;
    const nlb::RidgeFitReport report = surrogate.fit(stats, 0.01);
    // The test data is as singular as claimed: one eigenvalue at rounding level.
    BOOST_TEST_MESSAGE("d " << d << ": eigenvalues [" << report.min_eigenvalue << ", "
                            << report.max_eigenvalue << "], clamped "
                            << report.clamped_eigenvalues);
    BOOST_TEST(std::abs(report.min_eigenvalue) <= 1e-12 * report.max_eigenvalue);

    const nlb::RidgeSolution svd = nlb::fit_svd(X, Y, 0.01);
    const nlb::RidgeSolution ne = normal_equations(X, Y, 0.01);
    const double vs_svd = rel_error(surrogate.weight(), svd.weight);
    const double vs_ne = rel_error(surrogate.weight(), ne.weight);
    const double svd_vs_ne = rel_error(svd.weight, ne.weight);
    BOOST_TEST_MESSAGE("d " << d << ": W rel error vs SVD " << vs_svd << ", vs LDLT " << vs_ne
                            << ", SVD vs LDLT " << svd_vs_ne);
    BOOST_TEST(vs_svd <= tol::ridge_fit_vs_svd_rel);
    BOOST_TEST(vs_ne <= tol::ridge_fit_vs_svd_rel);
    BOOST_TEST(svd_vs_ne <= tol::ridge_fit_vs_svd_rel);
    BOOST_TEST(bias_error(surrogate.bias(), svd, stats.mean_x(), stats.mean_y()) <=
               tol::ridge_fit_vs_svd_rel);

    const Eigen::RowVectorXd null_dir = gamma.cwiseInverse().normalized();
    const double null_part = (null_dir * surrogate.weight()).norm() / surrogate.weight().norm();
    BOOST_TEST_MESSAGE("d " << d << ": ‖nᵀW‖ / ‖W‖ " << null_part);
    BOOST_TEST(null_part <= tol::ridge_fit_vs_svd_rel);
  }
}

// Fewer rows than features (n = 12, d_in = 40): Cxx has rank 11 and 29 zero eigenvalues,
// which rounding scatters around 0 (some negative: the clamp at 0 is exercised). The fit still
// equals the SVD form, whose thin SVD only has the 12 singular values.
BOOST_AUTO_TEST_CASE(more_features_than_rows) {
  Eigen::MatrixXd X = 4.0 * nlb::test::gaussian(12, 40, 91);
  X.array() += 1.0;
  const Eigen::MatrixXd Y = nlb::test::gaussian(12, 3, 92);
  RidgeStats<> stats(40, 3);
  stats.add(X, Y);
  RidgeSurrogate<double> surrogate;
  const nlb::RidgeFitReport report = surrogate.fit(stats, 0.01);
  const nlb::RidgeSolution svd = nlb::fit_svd(X, Y, 0.01);
  const double w_error = rel_error(surrogate.weight(), svd.weight);
  BOOST_TEST_MESSAGE("n < d: eigenvalues ["
                     << report.min_eigenvalue << ", " << report.max_eigenvalue << "], clamped "
                     << report.clamped_eigenvalues << ", W rel error " << w_error);
  BOOST_TEST(report.clamped_eigenvalues > 0);
  BOOST_TEST(w_error <= tol::ridge_fit_vs_svd_rel);
  BOOST_TEST(bias_error(surrogate.bias(), svd, stats.mean_x(), stats.mean_y()) <=
             tol::ridge_fit_vs_svd_rel);
  // Effective parameters: 11 nonzero eigenvalues e_j, each contributing e_j / (e_j + λ) ≤ 1.
  BOOST_TEST(report.effective_parameters <= 11.0);
  BOOST_TEST(report.effective_parameters > 10.0);
}

// R² from the statistics equals 1 − SSE/SST computed from the residuals on the data, pooled
// over outputs of different scales.
BOOST_AUTO_TEST_CASE(r2_equals_residual_computation) {
  const Index n = 1500;
  Eigen::MatrixXd X = nlb::test::gaussian(n, 9, 41);
  X.array() += 1.0;
  Eigen::MatrixXd Y = X * nlb::test::gaussian(9, 3, 42) + nlb::test::gaussian(n, 3, 43);
  Y.col(1) *= 10.0;  // pooled R² weights outputs by their variance
  Y.col(2) = Y.col(2).array().cube();
  RidgeStats<> stats(9, 3);
  add_in_batches(stats, X, Y, 256);
  for (const double lambda : {0.01, 100.0}) {
    RidgeSurrogate<double> surrogate;
    const nlb::RidgeFitReport report = surrogate.fit(stats, lambda);
    const Eigen::MatrixXd residual = Y - affine_by_loops(X, surrogate.weight(), surrogate.bias());
    const Eigen::MatrixXd centered = Y.rowwise() - Y.colwise().mean();
    const double sse = residual.squaredNorm();
    const double sst = centered.squaredNorm();
    const double direct = 1.0 - sse / sst;
    BOOST_TEST_MESSAGE("lambda " << lambda << ": R² " << report.r2 << ", direct " << direct);
    BOOST_TEST(std::abs(report.r2 - direct) <= tol::ridge_r2_abs);
    BOOST_TEST(std::abs(report.sst - sst) <= tol::ridge_r2_abs * sst);
    BOOST_TEST(std::abs(report.sse - sse) <= tol::ridge_r2_abs * sst);
    BOOST_TEST(report.r2 > 0.0);
    BOOST_TEST(report.r2 < 1.0);
  }
}

// Constant (zero) targets: W = 0, b = 0 exactly and R² undefined (NaN); one row: W = 0, b = y.
BOOST_AUTO_TEST_CASE(degenerate_targets_and_single_row) {
  const Eigen::MatrixXd X = nlb::test::gaussian(50, 4, 51);
  RidgeStats<> zeros(4, 2);
  zeros.add(X, Eigen::MatrixXd::Zero(50, 2));
  RidgeSurrogate<double> surrogate;
  const nlb::RidgeFitReport report = surrogate.fit(zeros);
  BOOST_TEST(std::isnan(report.r2));
  BOOST_TEST(surrogate.weight().cwiseAbs().maxCoeff() == 0.0);
  BOOST_TEST(surrogate.bias().cwiseAbs().maxCoeff() == 0.0);

  RidgeStats<> one(4, 2);
  const Eigen::RowVectorXd y{{2.5, -1.0}};
  one.add(X.topRows(1), y);
  surrogate.fit(one);
  BOOST_TEST(surrogate.weight().cwiseAbs().maxCoeff() == 0.0);
  BOOST_TEST((surrogate.bias() - y).cwiseAbs().maxCoeff() == 0.0);
}

// The same statistics fitted by <double>, <float>, <double, 8, 6>, <float, 8, 6>: the weights
// agree (float = double rounded to nearest), and apply() equals X W + b by plain loops.
BOOST_AUTO_TEST_CASE(float_double_fixed_dynamic_agree) {
  const Index n = 300;
  Eigen::MatrixXd X = nlb::test::gaussian(n, 8, 61);
  X.array() += 0.5;
  const Eigen::MatrixXd Y = X * nlb::test::gaussian(8, 6, 62) + 0.3 * nlb::test::gaussian(n, 6, 63);
  RidgeStats<> dynamic_stats(8, 6);
  RidgeStats<8, 6> fixed_stats;
  add_in_batches(dynamic_stats, X, Y, 100);
  add_in_batches(fixed_stats, X, Y, 100);

  RidgeSurrogate<double> d_dyn;
  RidgeSurrogate<float> f_dyn;
  RidgeSurrogate<double, 8, 6> d_fix;
  RidgeSurrogate<float, 8, 6> f_fix;
  d_dyn.fit(dynamic_stats);
  f_dyn.fit(dynamic_stats);
  d_fix.fit(fixed_stats);
  f_fix.fit(fixed_stats);
  BOOST_TEST(d_fix.features() == 8);
  BOOST_TEST(d_fix.out_features() == 6);

  BOOST_TEST(rel_error(d_fix.weight(), d_dyn.weight()) <= tol::ridge_double_rel);
  BOOST_TEST(rel_error(d_fix.bias(), d_dyn.bias()) <= tol::ridge_double_rel);
  BOOST_TEST(std::abs(d_fix.r2() - d_dyn.r2()) <= tol::ridge_r2_abs);
  BOOST_TEST(f_dyn.r2() == d_dyn.r2());  // the fit itself is in double for every T
  // Rounding to nearest float: |w_f − w| ≤ 2^-24 |w| for normal w (the definition of the cast).
  const double half_ulp = std::ldexp(1.0, -24);
  for (Index j = 0; j < 8; ++j) {
    for (Index k = 0; k < 6; ++k) {
      const double w = d_dyn.weight()(j, k);
      BOOST_TEST(std::abs(static_cast<double>(f_dyn.weight()(j, k)) - w) <= half_ulp * std::abs(w));
    }
  }
  BOOST_TEST(rel_error(f_fix.weight(), f_dyn.weight()) <= tol::ridge_double_rel);

  const nlb::Activations<double> xd = nlb::test::gaussian(37, 8, 64);
  const nlb::Activations<float> xf = xd.cast<float>();
  const Eigen::MatrixXd ref = affine_by_loops(xd, d_dyn.weight(), d_dyn.bias());
  BOOST_TEST(rel_error(forward_of(d_dyn, xd), ref) <= tol::ridge_double_rel);
  BOOST_TEST(rel_error(forward_of(d_fix, xd), ref) <= tol::ridge_double_rel);
  BOOST_TEST(rel_error(forward_of(f_dyn, xf), ref) <= tol::ridge_float_rel);
  BOOST_TEST(rel_error(forward_of(f_fix, xf), ref) <= tol::ridge_float_rel);
  // float apply against its own float weights, by loops in double.
  BOOST_TEST(rel_error(forward_of(f_fix, xf), affine_by_loops(xf, f_fix.weight(), f_fix.bias())) <=
             tol::ridge_float_rel);

  // apply into blocks and through Eigen::Ref, fixed-width activations in and out.
  nlb::Activations<float, 6> out = nlb::Activations<float, 6>::Zero(40, 6);
  const nlb::Activations<float, 8> xf8 = xf;
  forward_into(f_fix, xf8, out.middleRows(2, 37));
  BOOST_TEST(rel_error(out.middleRows(2, 37), forward_of(f_fix, xf)) == 0.0);
  BOOST_TEST(out.topRows(2).cwiseAbs().maxCoeff() == 0.0f);  // rows outside the block untouched
  Eigen::Ref<nlb::Activations<float>> out_ref = out;
  const Eigen::Ref<const nlb::Activations<float>> in_ref = xf.topRows(20);
  forward_into(f_dyn, in_ref, out_ref.topRows(20));
  BOOST_TEST(rel_error(out.topRows(20), forward_of(f_dyn, xf.topRows(20))) == 0.0);
}

// One output (d_out = 1: column-vector activations, 1 x 1 bias), fixed and Dynamic.
BOOST_AUTO_TEST_CASE(single_output) {
  Eigen::MatrixXd X = nlb::test::gaussian(200, 4, 101);
  X.array() += 1.0;
  const Eigen::MatrixXd Y = X * nlb::test::gaussian(4, 1, 102) + nlb::test::gaussian(200, 1, 103);
  RidgeStats<4, 1> fixed_stats;
  RidgeStats<> dynamic_stats(4, 1);
  fixed_stats.add(X, Y);
  dynamic_stats.add(X, Y);
  RidgeSurrogate<double, 4, 1> fixed;
  RidgeSurrogate<double> dynamic;
  fixed.fit(fixed_stats);
  dynamic.fit(dynamic_stats);
  const nlb::RidgeSolution svd = nlb::fit_svd(X, Y);
  BOOST_TEST(rel_error(fixed.weight(), svd.weight) <= tol::ridge_fit_vs_svd_rel);
  BOOST_TEST(rel_error(dynamic.weight(), svd.weight) <= tol::ridge_fit_vs_svd_rel);
  const nlb::Activations<double, 4> x = X.topRows(9);
  const nlb::Activations<double, 1> y = forward_of(fixed, x);
  BOOST_TEST(rel_error(y, affine_by_loops(x, svd.weight, svd.bias)) <= tol::ridge_fit_vs_svd_rel);
}

// A surrogate built from given weights applies exactly them; default ones are zero-sized
// (Dynamic) or zero (fixed), with r2() NaN.
BOOST_AUTO_TEST_CASE(constructed_and_default) {
  const nlb::RowMatrix<double> w = nlb::test::gaussian(5, 3, 71);
  const nlb::RowVector<double> b = nlb::test::gaussian(1, 3, 72);
  const RidgeSurrogate<double> surrogate(w, b);
  const nlb::Activations<double> x = nlb::test::gaussian(11, 5, 73);
  BOOST_TEST(rel_error(forward_of(surrogate, x), affine_by_loops(x, w, b)) <=
             tol::ridge_double_rel);
  BOOST_TEST(std::isnan(surrogate.r2()));

  const RidgeSurrogate<float> empty;
  BOOST_TEST(empty.features() == 0);
  BOOST_TEST(empty.out_features() == 0);
  const RidgeSurrogate<float, 8, 6> zero;
  BOOST_TEST(zero.features() == 8);
  BOOST_TEST(zero.weight().cwiseAbs().maxCoeff() == 0.0f);
  BOOST_TEST(std::isnan(zero.r2()));

  // GPT-2 Medium's width as compile-time sizes: the weight keeps heap storage (RowMatrix).
  const RidgeSurrogate<float, 1024, 1024> large;
  BOOST_TEST(large.features() == 1024);
  BOOST_TEST(large.out_features() == 1024);
  const RidgeStats<1024, 1024> large_stats;
  BOOST_TEST(large_stats.cxx().rows() == 1024);
}

// Bad input: typed exceptions whose messages name what was expected and what was found.
BOOST_AUTO_TEST_CASE(bad_input) {
  const Eigen::MatrixXd X = nlb::test::gaussian(40, 8, 81);
  const Eigen::MatrixXd Y = nlb::test::gaussian(40, 6, 82);
  RidgeStats<> stats(8, 6);
  stats.add(X, Y);
  RidgeSurrogate<float> surrogate;
  surrogate.fit(stats);

  // apply: width and row mismatches, Dynamic and fixed, nothing written on a throw.
  const nlb::Activations<float> x7 = nlb::Activations<float>::Ones(4, 7);
  nlb::Activations<float> y = nlb::Activations<float>::Constant(4, 6, 9.0f);
  BOOST_CHECK_THROW(forward_into(surrogate, x7, y), nlb::ShapeError);
  std::string msg = nlb::test::error_message<nlb::Error>([&] { forward_into(surrogate, x7, y); });
  BOOST_TEST(contains(msg, "expected 8, found 7"), msg);
  BOOST_TEST(y.minCoeff() == 9.0f);
  BOOST_CHECK_THROW(forward_of(surrogate, x7), nlb::ShapeError);
  nlb::Activations<float> y_rows(3, 6);
  msg = nlb::test::error_message<nlb::Error>(
      [&] { forward_into(surrogate, nlb::Activations<float>::Ones(4, 8), y_rows); });
  BOOST_TEST(contains(msg, "expected 4, found 3"), msg);
  nlb::Activations<float> y_cols(4, 5);
  msg = nlb::test::error_message<nlb::Error>(
      [&] { forward_into(surrogate, nlb::Activations<float>::Ones(4, 8), y_cols); });
  BOOST_TEST(contains(msg, "expected 6, found 5"), msg);
  RidgeSurrogate<float, 8, 6> fixed;
  msg = nlb::test::error_message<nlb::Error>(
      [&] { forward_of(fixed, x7); });  // Dynamic-width data into a fixed surrogate
  BOOST_TEST(contains(msg, "expected 8, found 7"), msg);

  // Constructor: shapes against each other and against compile-time sizes.
  msg = nlb::test::error_message<nlb::Error>([] {
    RidgeSurrogate<double> s(nlb::RowMatrix<double>::Zero(4, 3), nlb::RowVector<double>::Zero(2));
  });
  BOOST_TEST(contains(msg, "expected 3, found 2"), msg);
  BOOST_CHECK_THROW(
      (RidgeSurrogate<double, 8, 6>(nlb::RowMatrix<double, 8, 6>::Zero(8, 6),
                                    nlb::RowVector<double, 6>::Constant(6, std::nan("")))),
      nlb::NumericError);
  BOOST_CHECK_THROW(
      (RidgeSurrogate<double>(nlb::RowMatrix<double>::Zero(4, 3), nlb::RowVector<double>::Zero(2))),
      nlb::ShapeError);

  // fit: λ ≤ 0 or non-finite, empty statistics, mismatched compile-time sizes.
  for (const double lambda : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(),
                              std::numeric_limits<double>::infinity()}) {
    BOOST_CHECK_THROW(surrogate.fit(stats, lambda), nlb::ArgumentError);
  }
  msg = nlb::test::error_message<nlb::Error>([&] { surrogate.fit(stats, -1.0); });
  BOOST_TEST(contains(msg, "expected a finite value > 0, found -1"), msg);
  BOOST_CHECK_THROW(nlb::fit_svd(X, Y, 0.0), nlb::ArgumentError);
  BOOST_CHECK_THROW(nlb::fit_svd(X, Y.topRows(39)), nlb::ShapeError);

  const RidgeSurrogate<float> before = surrogate;
  BOOST_CHECK_THROW(surrogate.fit(RidgeStats<>(8, 6)), nlb::NumericError);
  msg = nlb::test::error_message<nlb::Error>([&] { surrogate.fit(RidgeStats<>(8, 6)); });
  BOOST_TEST(contains(msg, "expected at least 1 row"), msg);
  BOOST_TEST(contains(msg, "found 0"), msg);
  BOOST_TEST((surrogate.weight() == before.weight()));  // a failed fit changes nothing

  msg = nlb::test::error_message<nlb::Error>([&] { fixed.fit(RidgeStats<>(8, 5)); });
  BOOST_TEST(contains(msg, "expected 6, found 5"), msg);

  // NaN/Inf in training data is refused when it is accumulated.
  Eigen::MatrixXd bad = X;
  bad(5, 3) = std::numeric_limits<double>::infinity();
  BOOST_CHECK_THROW(stats.add(bad, Y), nlb::NumericError);
  msg = nlb::test::error_message<nlb::Error>([&] { stats.add(bad, Y); });
  BOOST_TEST(contains(msg, "(5, 3)"), msg);
  BOOST_TEST(contains(msg, "expected a finite value"), msg);
  BOOST_CHECK_THROW(nlb::fit_svd(bad, Y), nlb::NumericError);
}

BOOST_AUTO_TEST_SUITE_END()
