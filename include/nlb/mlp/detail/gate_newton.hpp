// Internals of HyperplaneGate::fit (PAPERS.md §A3): per-feature z-scoring and a deterministic
// Newton (IRLS) solver for L2-regularised logistic regression in sklearn's C convention.
// Everything here runs in double whatever the activation scalar is.
#pragma once

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "nlb/core/errors.hpp"
#include "nlb/mlp/row_parts.hpp"

namespace nlb::mlp::detail {

/// Per-feature statistics of the training rows: x ↦ (x − mean) ⊘ scale.
struct FeatureStandardization {
  Eigen::VectorXd mean;                         // [d]
  Eigen::VectorXd scale;                        // [d] population std, 1 for constant features
  std::vector<Eigen::Index> constant_features;  // features whose std is zero
};

/// Mean and population standard deviation of each column of X [N, d], two passes in double,
/// over the rows of every part of `parts` (X holds this part's rows, possibly none).
/// A feature whose values are all equal (or whose deviations underflow to a zero variance) gets
/// mean = its value, scale = 1, and is listed in `constant_features`: its z-score is then exactly
/// 0 on the training rows, so the regulariser drives its weight to 0. The exact-equality test
/// (largest value == smallest value) matters: a column of n copies of 0.1 has a computed mean
/// that differs from 0.1 in the last bit, and dividing that rounding residue by a rounding-sized
/// std would invent a feature. O(N d).
template <class Derived>
FeatureStandardization standardize_features(const Eigen::MatrixBase<Derived>& X,
                                            const RowParts& parts = {}) {
  const Eigen::Index d = X.cols();
  FeatureStandardization out;
  out.mean = Eigen::VectorXd::Zero(d);
  out.scale = Eigen::VectorXd::Zero(d);
  // [largest value | −smallest value] per feature: one maximum over the parts gives both.
  Eigen::VectorXd extremes =
      Eigen::VectorXd::Constant(2 * d, -std::numeric_limits<double>::infinity());
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    for (Eigen::Index j = 0; j < d; ++j) {
      const auto v = static_cast<double>(X(i, j));
      out.mean(j) += v;
      extremes(j) = std::max(extremes(j), v);
      extremes(d + j) = std::max(extremes(d + j), -v);
    }
  }
  double n = static_cast<double>(X.rows());
  parts.add_up(std::span(&n, 1));
  parts.add_up(std::span(out.mean.data(), static_cast<std::size_t>(d)));
  parts.take_max(std::span(extremes.data(), static_cast<std::size_t>(2 * d)));
  out.mean /= n;
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    for (Eigen::Index j = 0; j < d; ++j) {
      const double deviation = static_cast<double>(X(i, j)) - out.mean(j);
      out.scale(j) += deviation * deviation;
    }
  }
  parts.add_up(std::span(out.scale.data(), static_cast<std::size_t>(d)));
  for (Eigen::Index j = 0; j < d; ++j) {
    out.scale(j) = std::sqrt(out.scale(j) / n);
    const bool constant = extremes(j) == -extremes(d + j);
    if (constant || out.scale(j) == 0.0) {
      if (constant)
        out.mean(j) = extremes(j);
      out.scale(j) = 1.0;
      out.constant_features.push_back(j);
    }
  }
  return out;
}

/// σ(m) = 1 / (1 + e^{−m}) without overflow for either sign of m.
inline double logistic_sigmoid(double m) {
  if (m >= 0.0)
    return 1.0 / (1.0 + std::exp(-m));
  const double e = std::exp(m);
  return e / (1.0 + e);
}

/// log(1 + e^u) without overflow (large u) or loss of the small value (very negative u).
inline double softplus(double u) {
  return u > 0.0 ? u + std::log1p(std::exp(-u)) : std::log1p(std::exp(u));
}

/// softplus(u + du) − softplus(u), accurate to a few ulp of the difference itself. For small
/// |du| it uses log((1 + e^{u+du}) / (1 + e^u)) = log1p(σ(u) expm1(du)), which does not cancel;
/// σ(u) expm1(du) >= −(1 − e^{−1}) > −1 there, so log1p stays finite.
inline double softplus_change(double u, double du) {
  if (std::abs(du) <= 1.0)
    return std::log1p(logistic_sigmoid(u) * std::expm1(du));
  return softplus(u + du) - softplus(u);
}

/// Neumaier's compensated sum: error about 2 ε Σ|terms| whatever the count, so the line search
/// can tell a real decrease of the objective from rounding.
class CompensatedSum {
 public:
  void add(double x) {
    const double t = sum_ + x;
    compensation_ += std::abs(sum_) >= std::abs(x) ? (sum_ - t) + x : (x - t) + sum_;
    sum_ = t;
  }
  double value() const { return sum_ + compensation_; }

 private:
  double sum_ = 0.0;
  double compensation_ = 0.0;
};

/// What the Newton solver returns: θ = (w, b) in z-space and how the run went.
struct LogisticSolution {
  Eigen::VectorXd weight;  // [d]
  double bias = 0.0;
  int iterations = 0;          // Newton steps taken
  double gradient_norm = 0.0;  // ‖∇f‖∞ at the returned θ
  double objective = 0.0;      // f at the returned θ
  double training_accuracy = 0.0;
};

/// Minimises f(w, b) = ½‖w‖² + C Σ_i log(1 + exp(−y_i (w·z_i + b))), y_i = 2 t_i − 1, z_i =
/// (x_i − mean) ⊘ scale, with the intercept b not penalised (sklearn's convention, PAPERS.md §A3).
///
/// Newton's method on θ = (w, b) from θ = 0. With r_i = σ(m_i) − t_i and s_i = σ(m_i) σ(−m_i):
///   ∇f = (w, 0) + C Z̃ᵀ r,   ∇²f = diag(1, …, 1, 0) + C Z̃ᵀ diag(s) Z̃,   Z̃ = [Z, 1] [N, d+1].
/// The Hessian is positive definite whenever every s_i > 0 (the identity block covers w; the
/// data term covers b), so the step solves ∇²f Δ = −∇f with LDLT. A backtracking (Armijo) line
/// search halves the step until f decreases by at least 1e-4 t ∇fᵀΔ; the change in f is summed
/// per row from softplus_change with a compensated sum, and a change within 8 ε of the sum of
/// the absolute per-row changes counts as no change — below that, rounding decides the sign, so
/// the step cannot be judged worse. Stops when ‖∇f‖∞ <= tolerance, after max_iterations steps,
/// or when no step passes the line search (then gradient_norm > tolerance says so).
///
/// With `parts`, X and targets hold this part's rows (possibly none) and every sum over rows above
/// — gradient, Hessian, objective, line-search change, accuracy — is reduced over all parts
/// before it is used, so every part takes the same steps and returns the same θ.
///
/// Rows are z-scored on the fly in blocks of `block_rows`, so memory is O(d² + block_rows·d)
/// beside the input, never a second copy of X. Cost per Newton step: O(N d²) for the Hessian
/// (a symmetric rank-k update per block), O(d³/3) for LDLT, O(N d) for the rest.
template <class Derived>
LogisticSolution solve_logistic_newton(const Eigen::MatrixBase<Derived>& X,
                                       const FeatureStandardization& standardization,
                                       std::span<const std::uint8_t> targets, double C,
                                       double tolerance, int max_iterations,
                                       const RowParts& parts = {}) {
  using Eigen::Index;
  using BlockMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  constexpr Index block_rows = 256;
  constexpr double armijo = 1e-4;
  constexpr int max_halvings = 60;
  const double eps = std::numeric_limits<double>::epsilon();

  const Index n = X.rows();
  const Index d = X.cols();
  const Index p = d + 1;  // w and b
  const Eigen::VectorXd& mean = standardization.mean;
  const Eigen::VectorXd& scale = standardization.scale;

  BlockMatrix z_block(std::min(block_rows, n), p);  // [rows, d+1]: z-scored rows, then a 1
  // Calls visit(first_row, Z̃ block) for consecutive row blocks of the standardized data.
  auto for_each_block = [&](auto&& visit) {
    for (Index first = 0; first < n; first += block_rows) {
      const Index rows = std::min(block_rows, n - first);
      auto block = z_block.topRows(rows);
      for (Index i = 0; i < rows; ++i) {
        for (Index j = 0; j < d; ++j) {
          block(i, j) = (static_cast<double>(X(first + i, j)) - mean(j)) / scale(j);
        }
        block(i, d) = 1.0;
      }
      visit(first, block);
    }
  };
  auto sign = [&](Index i) { return targets[static_cast<std::size_t>(i)] ? 1.0 : -1.0; };

  Eigen::VectorXd theta = Eigen::VectorXd::Zero(p);  // (w, b)
  Eigen::VectorXd margin(n);                         // m = Z̃ θ  [N]
  Eigen::VectorXd residual(n);                       // r = σ(m) − t  [N]
  Eigen::VectorXd gradient(p);
  Eigen::VectorXd direction(p);
  Eigen::VectorXd margin_change(n);  // q = Z̃ Δ  [N]
  Eigen::MatrixXd hessian(p, p);
  BlockMatrix weighted_block(z_block.rows(), p);

  LogisticSolution out;
  int iteration = 0;
  for (;;) {
    // Margins, loss and gradient at θ, recomputed from the data (no drift across steps).
    gradient.setZero();
    for_each_block([&](Index first, const auto& block) {
      const Index rows = block.rows();
      margin.segment(first, rows).noalias() = block * theta;
      for (Index i = first; i < first + rows; ++i) {
        // r_i = σ(m_i) − t_i, written so neither case subtracts nearly equal numbers.
        residual(i) = targets[static_cast<std::size_t>(i)] ? -logistic_sigmoid(-margin(i))
                                                           : logistic_sigmoid(margin(i));
      }
      gradient.noalias() += block.transpose() * residual.segment(first, rows);
    });
    parts.add_up(std::span(gradient.data(), static_cast<std::size_t>(p)));
    gradient *= C;
    gradient.head(d) += theta.head(d);
    double loss = 0.0;
    for (Index i = 0; i < n; ++i)
      loss += softplus(-sign(i) * margin(i));
    parts.add_up(std::span(&loss, 1));
    out.objective = 0.5 * theta.head(d).squaredNorm() + C * loss;
    out.gradient_norm = gradient.template lpNorm<Eigen::Infinity>();
    if (!std::isfinite(out.gradient_norm) || !std::isfinite(out.objective)) {
      throw NumericError(nlb::detail::expected_found(
          "HyperplaneGate::fit Newton iteration " + std::to_string(iteration), "a finite gradient",
          out.gradient_norm));
    }
    if (out.gradient_norm <= tolerance || iteration >= max_iterations)
      break;

    // Hessian: H = C Σ_blocks (√s ⊙ Z̃_b)ᵀ (√s ⊙ Z̃_b) + diag(1,…,1,0), lower triangle only.
    hessian.setZero();
    for_each_block([&](Index first, const auto& block) {
      const Index rows = block.rows();
      auto weighted = weighted_block.topRows(rows);
      for (Index i = 0; i < rows; ++i) {
        const double m = margin(first + i);
        weighted.row(i) = std::sqrt(logistic_sigmoid(m) * logistic_sigmoid(-m)) * block.row(i);
      }
      hessian.selfadjointView<Eigen::Lower>().rankUpdate(weighted.transpose(), C);
    });
    parts.add_up(std::span(hessian.data(), static_cast<std::size_t>(p * p)));
    hessian.diagonal().head(d).array() += 1.0;
    const Eigen::LDLT<Eigen::MatrixXd, Eigen::Lower> factorization(hessian);
    direction = factorization.solve(-gradient);
    const double slope = gradient.dot(direction);  // ∇fᵀΔ, < 0 for a descent direction
    if (factorization.info() != Eigen::Success || !direction.allFinite() || !(slope < 0.0)) {
      break;  // no usable Newton direction: stop, the gradient norm reports it
    }

    // Line search on f(θ + tΔ) − f(θ), with the margins linear in t: m + t q.
    for_each_block([&](Index first, const auto& block) {
      margin_change.segment(first, block.rows()).noalias() = block * direction;
    });
    const double w_dot_dw = theta.head(d).dot(direction.head(d));
    const double dw_squared = direction.head(d).squaredNorm();
    double step = 1.0;
    bool accepted = false;
    for (int halving = 0; halving <= max_halvings && !accepted; ++halving, step *= 0.5) {
      CompensatedSum change;
      double absolute_change = 0.0;
      for (Index i = 0; i < n; ++i) {
        const double y = sign(i);
        const double row_change = softplus_change(-y * margin(i), -y * step * margin_change(i));
        change.add(row_change);
        absolute_change += std::abs(row_change);
      }
      double data_change[2] = {change.value(), absolute_change};
      parts.add_up(data_change);
      const double regulariser_change = step * w_dot_dw + 0.5 * step * step * dw_squared;
      const double objective_change = regulariser_change + C * data_change[0];
      const double rounding = 8.0 * eps * (std::abs(regulariser_change) + C * data_change[1]);
      if (objective_change <= armijo * step * slope + rounding) {
        theta += step * direction;
        accepted = true;
      }
    }
    if (!accepted)
      break;
    ++iteration;
  }

  out.iterations = iteration;
  out.weight = theta.head(d);
  out.bias = theta(d);
  double counted[2] = {0.0, static_cast<double>(n)};  // rows classified right, rows
  for (Index i = 0; i < n; ++i) {
    if ((margin(i) > 0.0) == (targets[static_cast<std::size_t>(i)] != 0))
      counted[0] += 1.0;
  }
  parts.add_up(counted);
  out.training_accuracy = counted[0] / counted[1];
  return out;
}

}  // namespace nlb::mlp::detail
