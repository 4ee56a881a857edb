// Deterministic random data for tests. Seeds are explicit so every failure reproduces.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <random>

namespace nlb::test {

/// [rows, cols] with i.i.d. N(0, 1) entries.
inline Eigen::MatrixXd gaussian(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Eigen::MatrixXd m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = normal(rng);
  return m;
}

/// [rows, cols] (rows >= cols) whose singular values are spaced geometrically from 1 to
/// 1/condition, so cond(result) == condition up to rounding: U diag(s) V^T with random
/// orthogonal U, V from Householder QR of Gaussian matrices.
inline Eigen::MatrixXd with_condition_number(Eigen::Index rows, Eigen::Index cols, double condition,
                                             std::uint64_t seed) {
  const Eigen::MatrixXd u =
      Eigen::HouseholderQR<Eigen::MatrixXd>(gaussian(rows, cols, seed)).householderQ() *
      Eigen::MatrixXd::Identity(rows, cols);
  const Eigen::MatrixXd v =
      Eigen::HouseholderQR<Eigen::MatrixXd>(gaussian(cols, cols, seed + 1)).householderQ();
  Eigen::VectorXd s(cols);
  for (Eigen::Index j = 0; j < cols; ++j) {
    const double t = cols > 1 ? static_cast<double>(j) / static_cast<double>(cols - 1) : 0.0;
    s(j) = std::pow(condition, -t);
  }
  return u * s.asDiagonal() * v.transpose();
}

}  // namespace nlb::test
