// HyperplaneGate (PAPERS.md §A3): the Newton fit against independent references (gradient
// recomputed from the raw data, plain gradient descent, the closed-form intercept-only optimum),
// folding, float/double and fixed/Dynamic agreement, threshold calibration, bad input.
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "nlb/mlp/hyperplane_gate.hpp"
#include "test_random.hpp"
#include "tolerances.hpp"

namespace {

using Labels = std::vector<std::uint8_t>;
using nlb::test::tol::gate_fold_rounding_factor;
using nlb::test::tol::gate_gradient_abs;
using nlb::test::tol::gate_solution_abs;

template <class Error, class F>
std::string check_throws_expected(F&& f) {
  std::string message;
  try {
    f();
  } catch (const Error& e) {
    message = e.what();
  }
  BOOST_TEST_MESSAGE("message: " << message);
  BOOST_TEST(!message.empty());
  BOOST_TEST(message.find("expected") != std::string::npos);
  return message;
}

// [n, d] Gaussian features with per-feature offsets and spreads, so the z-score matters.
Eigen::MatrixXd shifted_features(Eigen::Index n, Eigen::Index d, double offset, double spread_max,
                                 std::uint64_t seed) {
  Eigen::MatrixXd x = nlb::test::gaussian(n, d, seed);
  for (Eigen::Index j = 0; j < d; ++j) {
    const double spread =
        spread_max * (0.05 + 0.95 * static_cast<double>(j + 1) / static_cast<double>(d));
    const double shift = offset * ((j % 2 == 0) ? 1.0 : -0.5);
    x.col(j) = (x.col(j).array() * spread + shift).matrix();
  }
  return x;
}

// The test's own z-score statistics: mean and population std, two passes over the raw data.
struct Standardization {
  Eigen::VectorXd mean, scale;
};
Standardization reference_standardization(const Eigen::MatrixXd& x) {
  Standardization s;
  const auto n = static_cast<double>(x.rows());
  s.mean = x.colwise().sum().transpose() / n;
  s.scale.resize(x.cols());
  for (Eigen::Index j = 0; j < x.cols(); ++j) {
    s.scale(j) = std::sqrt((x.col(j).array() - s.mean(j)).square().sum() / n);
  }
  return s;
}

Eigen::MatrixXd z_scored(const Eigen::MatrixXd& x, const Standardization& s) {
  return (x.rowwise() - s.mean.transpose()).array().rowwise() / s.scale.transpose().array();
}

// Labels drawn from a logistic model on a random direction of the z-scored data: overlapping
// classes. (A constant column gets scale 1 here so it contributes 0.)
Labels noisy_labels(const Eigen::MatrixXd& x, std::uint64_t seed) {
  Standardization s = reference_standardization(x);
  for (Eigen::Index j = 0; j < x.cols(); ++j) {
    if (s.scale(j) == 0.0)
      s.scale(j) = 1.0;
  }
  const Eigen::VectorXd direction = nlb::test::gaussian(x.cols(), 1, seed);
  const Eigen::VectorXd projection =
      z_scored(x, s) * direction / std::sqrt(static_cast<double>(x.cols()));
  std::mt19937_64 rng(seed + 1);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  Labels labels(static_cast<std::size_t>(x.rows()));
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const double p = 1.0 / (1.0 + std::exp(-2.0 * projection(i)));
    labels[static_cast<std::size_t>(i)] = uniform(rng) < p ? 1 : 0;
  }
  return labels;
}

// ∇f of f(w, b) = ½‖w‖² + C Σ log(1 + exp(−y (w·z + b))), from the raw data: [d + 1] = (∇_w, ∂_b).
Eigen::VectorXd reference_gradient(const Eigen::MatrixXd& z, const Labels& labels,
                                   const Eigen::VectorXd& w, double b, double C) {
  Eigen::VectorXd g(w.size() + 1);
  g.head(w.size()) = w;
  g(w.size()) = 0.0;
  for (Eigen::Index i = 0; i < z.rows(); ++i) {
    const double m = z.row(i).dot(w) + b;
    const double p = 1.0 / (1.0 + std::exp(-m));
    const double r = C * (p - labels[static_cast<std::size_t>(i)]);
    g.head(w.size()) += r * z.row(i).transpose();
    g(w.size()) += r;
  }
  return g;
}

// Per-row bound on |folded score in T − exact score|: the standard γ_n bound for a length-d dot
// product plus the bias and the rounding of w', b' to T, over the absolute terms of both forms.
template <class Gate, class Matrix>
Eigen::VectorXd fold_bound(const Gate& gate, const Matrix& x) {
  using T = typename Gate::Scalar;
  const Eigen::VectorXd w_folded = gate.folded_weight().template cast<double>();
  const Eigen::VectorXd mu = gate.feature_mean();
  const double bias_terms =
      mu.cwiseProduct(w_folded).cwiseAbs().sum() + std::abs(gate.unfolded_bias());
  const double d = static_cast<double>(x.cols());
  Eigen::VectorXd bound(x.rows());
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const double terms =
        x.row(i).template cast<double>().cwiseProduct(w_folded.transpose()).cwiseAbs().sum() +
        bias_terms;
    bound(i) = gate_fold_rounding_factor * (d + 3.0) * std::numeric_limits<T>::epsilon() * terms;
  }
  return bound;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hyperplane_gate_fit)

// Labels from a random hyperplane, points within a margin of it dropped: the fit separates all.
BOOST_AUTO_TEST_CASE(separable_data_fits_perfectly) {
  const Eigen::MatrixXd raw = shifted_features(800, 6, 3.0, 4.0, 17);
  const Eigen::VectorXd normal = nlb::test::gaussian(6, 1, 18);
  const Eigen::VectorXd projection =
      ((raw.rowwise() - raw.colwise().mean()).array().rowwise() / raw.colwise().norm().array())
          .matrix() *
      normal;
  const double margin = 0.1 * projection.cwiseAbs().maxCoeff();
  std::vector<Eigen::Index> kept;
  for (Eigen::Index i = 0; i < raw.rows(); ++i) {
    if (std::abs(projection(i)) > margin)
      kept.push_back(i);
  }
  nlb::Activations<double, 6> x(static_cast<Eigen::Index>(kept.size()), 6);
  Labels labels(kept.size());
  for (std::size_t k = 0; k < kept.size(); ++k) {
    x.row(static_cast<Eigen::Index>(k)) = raw.row(kept[k]);
    labels[k] = projection(kept[k]) > 0 ? 1 : 0;
  }
  BOOST_TEST_MESSAGE("separable: " << kept.size() << " rows kept of " << raw.rows());

  nlb::HyperplaneGate<double, 6> gate;
  const nlb::GateFitReport report = gate.fit(x, labels);
  BOOST_TEST_MESSAGE("iterations " << report.iterations << ", |grad| " << report.gradient_norm
                                   << ", objective " << report.objective);
  BOOST_TEST(report.gradient_norm <= nlb::GateFitOptions{}.gradient_tolerance);
  BOOST_TEST(report.training_accuracy == 1.0);
  // The folded path routes every training row as labelled, too.
  std::vector<std::uint8_t> routed;
  gate.route(x, routed);
  BOOST_TEST(routed == labels, boost::test_tools::per_element());
}

// Overlapping classes (incl. a constant feature and large offsets): the gradient of the regularised
// objective, recomputed here from the raw data and the returned unfolded (w, b), vanishes.
BOOST_AUTO_TEST_CASE(gradient_vanishes_at_solution) {
  for (const double C : {1.0, 0.01, 100.0}) {
    Eigen::MatrixXd x = shifted_features(3000, 12, 40.0, 5.0, 31);
    x.col(4).setConstant(0.1);  // constant feature: z = 0, w_4 = 0
    const Labels labels = noisy_labels(x, 32);

    nlb::HyperplaneGate<double> gate;
    const nlb::GateFitReport report = gate.fit(x, labels, nlb::GateFitOptions{C, 1e-8, 100});
    BOOST_TEST_MESSAGE("C = " << C << ": iterations " << report.iterations << ", |grad| "
                              << report.gradient_norm << ", accuracy " << report.training_accuracy);
    BOOST_TEST(report.gradient_norm <= 1e-8);
    BOOST_TEST(report.training_accuracy > 0.5);
    BOOST_TEST(report.training_accuracy < 1.0);  // overlapping classes, as intended
    BOOST_TEST(gate.constant_features() == (std::vector<Eigen::Index>{4}),
               boost::test_tools::per_element());
    BOOST_TEST(gate.unfolded_weight()(4) == 0.0);

    Standardization s = reference_standardization(x);
    s.scale(4) = 1.0;  // the documented treatment of a constant feature
    s.mean(4) = 0.1;
    const Eigen::VectorXd g =
        reference_gradient(z_scored(x, s), labels, gate.unfolded_weight(), gate.unfolded_bias(), C);
    BOOST_TEST_MESSAGE("  recomputed |grad|inf = " << g.lpNorm<Eigen::Infinity>());
    BOOST_TEST(g.lpNorm<Eigen::Infinity>() <= gate_gradient_abs);
  }
}

// LayerNorm-like inputs (each row has zero mean over features, PAPERS.md §A1): the features are
// exactly collinear with the intercept. The Hessian stays positive definite; the fit converges.
BOOST_AUTO_TEST_CASE(rank_deficient_layer_norm_inputs) {
  Eigen::MatrixXd x = shifted_features(2000, 16, 2.0, 3.0, 41);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    x.row(i).array() -= x.row(i).mean();
    x.row(i) /= x.row(i).norm() / 4.0;
  }
  const Labels labels = noisy_labels(x, 42);
  nlb::HyperplaneGate<double> gate;
  const nlb::GateFitReport report = gate.fit(x, labels);
  BOOST_TEST_MESSAGE("rank-deficient: iterations " << report.iterations << ", |grad| "
                                                   << report.gradient_norm);
  BOOST_TEST(report.gradient_norm <= 1e-8);
  const Standardization s = reference_standardization(x);
  const Eigen::VectorXd g =
      reference_gradient(z_scored(x, s), labels, gate.unfolded_weight(), gate.unfolded_bias(), 1.0);
  BOOST_TEST_MESSAGE("  recomputed |grad|inf = " << g.lpNorm<Eigen::Infinity>());
  BOOST_TEST(g.lpNorm<Eigen::Infinity>() <= gate_gradient_abs);
}

// A second, independent solver: plain gradient descent with step 1/L, L = 1 + C ‖Z̃‖_F² / 4 (an
// upper bound on the Hessian's largest eigenvalue, since σ(1−σ) <= 1/4), run to ‖∇‖∞ <= 1e-12.
BOOST_AUTO_TEST_CASE(agrees_with_gradient_descent) {
  const Eigen::MatrixXd x = shifted_features(40, 2, 1.5, 2.0, 51);
  const Labels labels = noisy_labels(x, 52);
  const double C = 1.0;
  nlb::HyperplaneGate<double, 2> gate;
  gate.fit(x, labels, nlb::GateFitOptions{C, 1e-12, 100});

  const Eigen::MatrixXd z = z_scored(x, reference_standardization(x));
  const double lipschitz = 1.0 + C * (z.squaredNorm() + static_cast<double>(z.rows())) / 4.0;
  Eigen::VectorXd w = Eigen::VectorXd::Zero(2);
  double b = 0.0;
  Eigen::VectorXd g = reference_gradient(z, labels, w, b, C);
  long steps = 0;
  for (; g.lpNorm<Eigen::Infinity>() > 1e-12 && steps < 5'000'000; ++steps) {
    w -= g.head(2) / lipschitz;
    b -= g(2) / lipschitz;
    g = reference_gradient(z, labels, w, b, C);
  }
  BOOST_TEST_MESSAGE("gradient descent: " << steps << " steps, |grad| "
                                          << g.lpNorm<Eigen::Infinity>());
  BOOST_TEST(g.lpNorm<Eigen::Infinity>() <= 1e-12);  // the reference itself converged
  // The premise of tol::gate_solution_abs: the Hessian's smallest eigenvalue is >= 0.01.
  Eigen::MatrixXd z1(z.rows(), 3);
  z1 << z, Eigen::VectorXd::Ones(z.rows());
  Eigen::VectorXd curvature(z.rows());
  for (Eigen::Index i = 0; i < z.rows(); ++i) {
    const double p = 1.0 / (1.0 + std::exp(-(z1.row(i).head(2).dot(w) + b)));
    curvature(i) = p * (1.0 - p);
  }
  Eigen::MatrixXd hessian = C * z1.transpose() * curvature.asDiagonal() * z1;
  hessian.diagonal().head(2).array() += 1.0;
  const double smallest = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(hessian).eigenvalues()(0);
  BOOST_TEST_MESSAGE("smallest Hessian eigenvalue " << smallest);
  BOOST_TEST(smallest >= 0.01);
  const double difference = std::max((gate.unfolded_weight() - w).lpNorm<Eigen::Infinity>(),
                                     std::abs(gate.unfolded_bias() - b));
  BOOST_TEST_MESSAGE("Newton vs gradient descent: max |Δθ| = " << difference);
  BOOST_TEST(difference <= gate_solution_abs);
}

// All features constant: z = 0, so w = 0 and σ(b) = n₁ / N, i.e. b = log(n₁ / n₀), for any C.
// Curvature in b at the optimum: C N σ(1 − σ) = 0.05 · 37 · (10/37)(27/37) ≈ 0.36 >= 0.01, the
// premise of tol::gate_solution_abs.
BOOST_AUTO_TEST_CASE(intercept_only_closed_form) {
  for (const double C : {1.0, 0.05}) {
    nlb::Activations<float> x(37, 3);
    x.col(0).setConstant(0.1f);
    x.col(1).setConstant(-7.0f);
    x.col(2).setConstant(0.0f);
    Labels labels(37, 0);
    for (std::size_t i = 0; i < 37; i += 4)
      labels[i] = 1;  // 10 positives, 27 negatives
    nlb::HyperplaneGate<float> gate;
    const nlb::GateFitReport report = gate.fit(x, labels, nlb::GateFitOptions{C, 1e-12, 100});
    const double expected_bias = std::log(10.0 / 27.0);
    BOOST_TEST_MESSAGE("intercept-only: b = " << gate.unfolded_bias() << ", expected "
                                              << expected_bias << ", iterations "
                                              << report.iterations);
    BOOST_TEST(gate.constant_features().size() == 3u);
    BOOST_TEST(gate.unfolded_weight().cwiseAbs().maxCoeff() == 0.0);
    BOOST_TEST(std::abs(gate.unfolded_bias() - expected_bias) <= gate_solution_abs);
    BOOST_TEST(gate.feature_mean()(0) ==
               static_cast<double>(0.1f));                // the value, not a rounded mean
    BOOST_TEST(report.training_accuracy == 27.0 / 37.0);  // all rows scored negative
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(hyperplane_gate_folding)

// Folded (x·w' + b' in T) vs unfolded (((x − μ) ⊘ σ)·w + b in double): scores within the rounding
// bound, identical decisions wherever the score is farther from 0 than that bound; float and
// double gates fitted on the same data share (w, b, μ, σ) exactly and agree on scores.
BOOST_AUTO_TEST_CASE(folded_matches_unfolded_float_and_double) {
  const Eigen::MatrixXd raw = shifted_features(2500, 24, 100.0, 0.5, 61);
  const nlb::Activations<float> x_float = raw.cast<float>();
  const nlb::Activations<double> x_double = x_float.cast<double>();  // identical values
  const Labels labels = noisy_labels(x_double, 62);

  nlb::HyperplaneGate<float> gate_float;
  nlb::HyperplaneGate<double> gate_double;
  gate_float.fit(x_float, labels);
  gate_double.fit(x_double, labels);
  // The solver runs in double on the same values: bit-identical unfolded parameters.
  BOOST_TEST((gate_float.unfolded_weight().array() == gate_double.unfolded_weight().array()).all());
  BOOST_TEST(gate_float.unfolded_bias() == gate_double.unfolded_bias());
  BOOST_TEST((gate_float.feature_mean().array() == gate_double.feature_mean().array()).all());
  BOOST_TEST((gate_float.feature_scale().array() == gate_double.feature_scale().array()).all());

  const Eigen::VectorXd exact = gate_double.score_unfolded(x_double);
  const Eigen::VectorXd exact_from_float = gate_float.score_unfolded(x_float);
  BOOST_TEST((exact.array() == exact_from_float.array()).all());
  const Eigen::VectorXd folded_float = gate_float.score(x_float).cast<double>();
  const Eigen::VectorXd folded_double = gate_double.score(x_double);
  const Eigen::VectorXd bound_float = fold_bound(gate_float, x_float);
  const Eigen::VectorXd bound_double = fold_bound(gate_double, x_double);

  double worst_float = 0.0, worst_double = 0.0;  // error / bound
  int decided = 0;
  for (Eigen::Index i = 0; i < raw.rows(); ++i) {
    worst_float = std::max(worst_float, std::abs(folded_float(i) - exact(i)) / bound_float(i));
    worst_double = std::max(worst_double, std::abs(folded_double(i) - exact(i)) / bound_double(i));
    BOOST_TEST(std::abs(folded_float(i) - exact(i)) <= bound_float(i));
    BOOST_TEST(std::abs(folded_double(i) - exact(i)) <= bound_double(i));
    BOOST_TEST(std::abs(folded_float(i) - folded_double(i)) <= bound_float(i) + bound_double(i));
    if (std::abs(exact(i)) > bound_float(i)) {
      ++decided;
      BOOST_TEST((folded_float(i) > 0) == (exact(i) > 0));
      BOOST_TEST((folded_double(i) > 0) == (exact(i) > 0));
    }
  }
  BOOST_TEST_MESSAGE("fold error / bound: float " << worst_float << ", double " << worst_double
                                                  << "; " << decided << " of " << raw.rows()
                                                  << " rows farther than the bound from 0");
  BOOST_TEST(decided > raw.rows() * 9 / 10);  // the decision check covered almost every row
}

// The same data through a compile-time-width gate and a Dynamic one.
BOOST_AUTO_TEST_CASE(fixed_and_dynamic_width_agree) {
  const Eigen::MatrixXd raw = shifted_features(600, 5, 3.0, 2.0, 71);
  const Labels labels = noisy_labels(raw, 72);
  const nlb::Activations<double, 5> x_fixed = raw;
  const nlb::Activations<double> x_dynamic = raw;
  nlb::HyperplaneGate<double, 5> fixed;
  nlb::HyperplaneGate<double> dynamic;
  fixed.fit(x_fixed, labels);
  dynamic.fit(x_dynamic, labels);
  BOOST_TEST(fixed.features() == 5);
  BOOST_TEST((fixed.unfolded_weight().array() == dynamic.unfolded_weight().array()).all());
  BOOST_TEST(fixed.unfolded_bias() == dynamic.unfolded_bias());
  const Eigen::VectorXd a = fixed.score(x_fixed);
  const Eigen::VectorXd b = dynamic.score(x_dynamic);
  const Eigen::VectorXd bound = fold_bound(dynamic, x_dynamic);
  for (Eigen::Index i = 0; i < a.size(); ++i)
    BOOST_TEST(std::abs(a(i) - b(i)) <= 2.0 * bound(i));
}

// A gate built from folded parameters scores x·w' + b' and routes on score > threshold.
BOOST_AUTO_TEST_CASE(direct_construction) {
  nlb::ColVector<double> w(3);
  w << 1.0, -2.0, 0.5;
  const nlb::HyperplaneGate<double> gate(w, 0.25, 1.0);
  nlb::Activations<double> x(3, 3);
  x << 1, 0, 0,   // 1 + 0.25 = 1.25 > 1
      0, 1, 0,    // -2 + 0.25 = -1.75
      0, 0, 1.5;  // 0.75 + 0.25 = 1.0, not > 1
  const nlb::ColVector<double> s = gate.score(x);
  BOOST_TEST(s(0) == 1.25);
  BOOST_TEST(s(1) == -1.75);
  BOOST_TEST(s(2) == 1.0);
  std::vector<std::uint8_t> routed;
  gate.route(x, routed);
  BOOST_TEST(routed == (Labels{1, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(gate.score_unfolded(x)(1) == -1.75);
  // The backend form (what GatedMLP calls): the scores into a column, the row order with the
  // linear rows first, each group ascending.
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ops::Scratch<nlb::backend::cpu, double> scratch;
  nlb::ColVector<double> scores(3);
  std::vector<nlb::Index> rows;
  const nlb::Activations<double> reversed = x.colwise().reverse();
  BOOST_TEST(gate.route(ctx, reversed, scores, rows, scratch) == 1);
  BOOST_TEST((scores.array() == s.reverse().array()).all());
  BOOST_TEST(rows == (std::vector<nlb::Index>{2, 0, 1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(hyperplane_gate_calibration)

namespace {
// A gate whose score is the first feature: score(x) = x₀.
nlb::HyperplaneGate<double> first_feature_gate() {
  nlb::ColVector<double> w(2);
  w << 1.0, 0.0;
  return nlb::HyperplaneGate<double>(w, 0.0);
}

nlb::Activations<double> rows_with_scores(const std::vector<double>& scores) {
  nlb::Activations<double> x(static_cast<Eigen::Index>(scores.size()), 2);
  for (std::size_t i = 0; i < scores.size(); ++i) {
    x(static_cast<Eigen::Index>(i), 0) = scores[i];
    x(static_cast<Eigen::Index>(i), 1) = 3.0;
  }
  return x;
}

template <class Gate, class Matrix>
long routed_count(const Gate& gate, const Matrix& x) {
  std::vector<std::uint8_t> routed;
  gate.route(x, routed);
  return std::count(routed.begin(), routed.end(), 1);
}
}  // namespace

// Distinct scores: exactly round(fraction · N) rows are routed linear.
BOOST_AUTO_TEST_CASE(distinct_scores_hit_the_fraction_exactly) {
  std::vector<double> scores(37);
  std::iota(scores.begin(), scores.end(), -10.0);
  std::mt19937 rng(3);
  std::shuffle(scores.begin(), scores.end(), rng);
  const auto x = rows_with_scores(scores);
  auto gate = first_feature_gate();
  for (const double fraction : {0.0, 0.1, 0.25, 0.5, 0.77, 0.9, 1.0}) {
    const double t = gate.calibrate_linear_fraction(x, fraction);
    BOOST_TEST(t == gate.threshold());
    BOOST_TEST(routed_count(gate, x) == std::lround(fraction * 37.0));
  }
}

// Ties. Scores (descending) 5 5 5 4 4 3 2 1 1 1, N = 10. Worked by hand with the documented rule
// (nearest achievable count; an exact draw goes to the smaller count):
//   0.2 → want 2, group {5,5,5} spans counts 0..3: 0 is 2 away, 3 is 1 away → 3.
//   0.4 → want 4, group {4,4} spans 3..5: both 1 away → 3.
//   0.5 → want 5: 4 > 3, no straddle → 5.    0.6 → want 6: 3 > 2 → 6.
//   0.9 → want 9, group {1,1,1} spans 7..10: 7 is 2 away, 10 is 1 away → 10.
//   0 → 0, 1 → 10. Every group has <= 3 rows, so every count is within one row of the target.
BOOST_AUTO_TEST_CASE(ties_follow_the_documented_rule) {
  std::vector<double> scores{1, 5, 4, 1, 3, 5, 2, 1, 4, 5};
  const auto x = rows_with_scores(scores);
  auto gate = first_feature_gate();
  const std::vector<std::pair<double, long>> cases{{0.2, 3},  {0.4, 3}, {0.5, 5}, {0.6, 6},
                                                   {0.9, 10}, {0.0, 0}, {1.0, 10}};
  for (const auto& [fraction, expected] : cases) {
    gate.calibrate_linear_fraction(x, fraction);
    const long count = routed_count(gate, x);
    BOOST_TEST_MESSAGE("fraction " << fraction << ": " << count << " rows routed linear");
    BOOST_TEST(count == expected);
    BOOST_TEST(std::abs(count - std::lround(fraction * 10.0)) <= 1);
    // The same cut from the scores alone, in another order (as gathered from several
    // processes): the hand-worked count again.
    std::vector<double> gathered(scores.rbegin(), scores.rend());
    gate.calibrate_linear_fraction_of_scores(gathered, fraction);
    BOOST_TEST(routed_count(gate, x) == expected);
  }
  // All scores equal: only 0 or 10 are achievable. 0.5 → want 5, a draw → 0; 0.7 → 10.
  const auto flat = rows_with_scores(std::vector<double>(10, 2.0));
  gate.calibrate_linear_fraction(flat, 0.5);
  BOOST_TEST(routed_count(gate, flat) == 0);
  gate.calibrate_linear_fraction(flat, 0.7);
  BOOST_TEST(routed_count(gate, flat) == 10);
}

// Neighbouring floats: no midpoint exists between them, the threshold must still split them.
BOOST_AUTO_TEST_CASE(adjacent_float_scores) {
  nlb::ColVector<float> w(1);
  w << 1.0f;
  nlb::HyperplaneGate<float> gate(w, 0.0f);
  nlb::Activations<float> x(2, 1);
  x << 1.0f, std::nextafter(1.0f, 2.0f);
  gate.calibrate_linear_fraction(x, 0.5);
  std::vector<std::uint8_t> routed;
  gate.route(x, routed);
  BOOST_TEST(routed == (Labels{0, 1}), boost::test_tools::per_element());
  gate.calibrate_linear_fraction(x, 1.0);
  gate.route(x, routed);
  BOOST_TEST(routed == (Labels{1, 1}), boost::test_tools::per_element());
}

// On a fitted float gate over continuous data (no ties): exact counts.
BOOST_AUTO_TEST_CASE(fitted_gate_calibration) {
  const nlb::Activations<float> x = shifted_features(1001, 8, 1.0, 2.0, 81).cast<float>();
  const Labels labels = noisy_labels(x.cast<double>(), 82);
  nlb::HyperplaneGate<float> gate;
  gate.fit(x, labels);
  for (const double fraction : {0.0, 0.3, 0.5, 0.999, 1.0}) {
    gate.calibrate_linear_fraction(x, fraction);
    BOOST_TEST(routed_count(gate, x) == std::lround(fraction * 1001.0));
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(hyperplane_gate_bad_input)

BOOST_AUTO_TEST_CASE(fit_rejects_bad_data_and_labels) {
  const Eigen::MatrixXd raw = shifted_features(20, 3, 0.0, 1.0, 91);
  Labels labels(20, 0);
  for (std::size_t i = 0; i < 20; i += 2)
    labels[i] = 1;
  nlb::HyperplaneGate<double> gate;
  gate.fit(raw, labels);
  const Eigen::VectorXd before = gate.folded_weight();

  Eigen::MatrixXd bad = raw;
  bad(3, 1) = std::nan("");
  check_throws_expected<nlb::NumericError>([&] { gate.fit(bad, labels); });
  bad(3, 1) = std::numeric_limits<double>::infinity();
  check_throws_expected<nlb::NumericError>([&] { gate.fit(bad, labels); });

  const std::string message =
      check_throws_expected<nlb::ArgumentError>([&] { gate.fit(raw, Labels(20, 1)); });
  BOOST_TEST(message.find("20 rows labelled 1") != std::string::npos);
  BOOST_TEST(message.find("0 rows labelled 0") != std::string::npos);
  const std::string message0 =
      check_throws_expected<nlb::ArgumentError>([&] { gate.fit(raw, Labels(20, 0)); });
  BOOST_TEST(message0.find("only class 0") != std::string::npos);

  check_throws_expected<nlb::ShapeError>([&] { gate.fit(raw, Labels(19, 1)); });
  Labels two = labels;
  two[5] = 2;
  check_throws_expected<nlb::ArgumentError>([&] { gate.fit(raw, two); });
  check_throws_expected<nlb::ArgumentError>([&] {
    gate.fit(raw, labels, nlb::GateFitOptions{0.0, 1e-8, 100});
  });
  check_throws_expected<nlb::ArgumentError>([&] {
    gate.fit(raw, labels, nlb::GateFitOptions{-1.0, 1e-8, 100});
  });
  check_throws_expected<nlb::ShapeError>([&] { gate.fit(Eigen::MatrixXd(0, 3), Labels{}); });

  // A failed fit leaves the gate as it was.
  BOOST_TEST((gate.folded_weight().array() == before.array()).all());
}

BOOST_AUTO_TEST_CASE(scoring_and_calibration_reject_bad_arguments) {
  nlb::ColVector<double> w(3);
  w << 1.0, 2.0, 3.0;
  nlb::HyperplaneGate<double> gate(w, 0.0);
  const Eigen::MatrixXd x = Eigen::MatrixXd::Ones(4, 3);
  check_throws_expected<nlb::ArgumentError>([&] { gate.calibrate_linear_fraction(x, -0.1); });
  check_throws_expected<nlb::ArgumentError>([&] { gate.calibrate_linear_fraction(x, 1.5); });
  check_throws_expected<nlb::ArgumentError>(
      [&] { gate.calibrate_linear_fraction(x, std::nan("")); });
  check_throws_expected<nlb::ArgumentError>([&] {
    gate.calibrate_linear_fraction_of_scores({1.0, 2.0}, 1.5);
  });
  check_throws_expected<nlb::ShapeError>(
      [&] { gate.calibrate_linear_fraction_of_scores({}, 0.5); });
  check_throws_expected<nlb::NumericError>([&] {
    gate.calibrate_linear_fraction_of_scores({1.0, std::nan("")}, 0.5);
  });
  check_throws_expected<nlb::ShapeError>([&] { gate.score(Eigen::MatrixXd::Ones(4, 2)); });
  nlb::ColVector<double> too_short(3);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ops::Scratch<nlb::backend::cpu, double> scratch;
  check_throws_expected<nlb::ShapeError>([&] { gate.score(ctx, x, too_short, scratch); });
  check_throws_expected<nlb::ArgumentError>([&] { gate.set_threshold(std::nan("")); });
  w(1) = std::numeric_limits<double>::infinity();
  check_throws_expected<nlb::NumericError>([&] { nlb::HyperplaneGate<double> g(w, 0.0); });
}

BOOST_AUTO_TEST_SUITE_END()
