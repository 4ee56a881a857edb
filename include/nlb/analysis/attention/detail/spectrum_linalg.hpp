// Internals of analysis/attention/spectrum.hpp: the span reduction of a low-rank bilinear form and
// the spectral measures of its parts (PAPERS §B1). Everything runs in double.
#pragma once

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>
#include <vector>

#include "nlb/core.hpp"

namespace nlb::detail {

// The functions that run one of Eigen's decompositions (QR, SVD, symmetric eigensolver), and every
// inline function of the attention analyses that calls one, are templates over `Matrix`, which
// is always Eigen::MatrixXd: it is never deduced (the arguments are DenseOf<Matrix>, a non-deduced
// context) and only defers the work. Why: a plain inline function makes every translation unit
// that includes it instantiate the decompositions it calls, whether the unit calls it or not —
// 4 to 5 s of GCC's front end each (measured: <Eigen/Dense> alone 2.0 s, with one JacobiSVD
// 5.8 s, with one SelfAdjointEigenSolver 6.2 s, -fsyntax-only) — and most of the tests and tools
// that include the analysis headers call none of them.
template <class Matrix>
using DenseOf = std::type_identity_t<Matrix>;

/// A bilinear form M = F_q F_kᵀ (n × n, F_q and F_k n × w) written as M = B C Bᵀ with B
/// (n × m) orthonormal columns spanning col([F_q F_k]) and C = (Bᵀ F_q)(Bᵀ F_k)ᵀ (m × m),
/// m = min(n, 2w). Exact: B Bᵀ is the orthogonal projector onto a space holding every column of
/// F_q and F_k, so B Bᵀ F_q = F_q and B Bᵀ F_k = F_k.
struct SpanForm {
  Eigen::MatrixXd basis;  // B [n, m]
  Eigen::MatrixXd core;   // C [m, m]
};

/// Thin orthonormal basis of a space containing col(A) (A n × c): the first min(n, c) columns
/// of Q from a Householder QR of A. When A is rank-deficient the basis is larger than col(A),
/// which keeps the reduction exact (it only needs col(A) ⊆ col(B)). O(n c²).
template <class Matrix = Eigen::MatrixXd>
Matrix orthonormal_span(const DenseOf<Matrix>& a) {
  const Index n = a.rows(), m = std::min(a.rows(), a.cols());
  if (m == 0)
    return Matrix(n, 0);
  const Eigen::HouseholderQR<Matrix> qr(a);
  return qr.householderQ() * Matrix::Identity(n, m);
}

/// The span form of F_q F_kᵀ. O(n w²).
template <class Matrix = Eigen::MatrixXd>
SpanForm span_form(const DenseOf<Matrix>& fq, const DenseOf<Matrix>& fk) {
  check_dim("span_form: key factor rows (n)", fq.rows(), fk.rows());
  check_dim("span_form: key factor cols (w)", fq.cols(), fk.cols());
  Eigen::MatrixXd both(fq.rows(), fq.cols() + fk.cols());
  both << fq, fk;
  SpanForm s;
  s.basis = orthonormal_span<Matrix>(both);
  s.core = (s.basis.transpose() * fq) * (s.basis.transpose() * fk).transpose();
  return s;
}

/// The coordinates (rows) i where F_q or F_k is non-zero, ascending; every row when all are zero.
/// A row zero in both factors adds only a zero row and column to M = F_q F_kᵀ, so it changes no
/// singular value or eigenvalue but zeros. Dropping such rows first makes the homogeneous form
/// of a head with b_Q = b_K = 0 the very computation of W_Q W_Kᵀ — the same arithmetic, the same
/// numbers (docs/attention_spectrum.md §1). O(n w).
inline std::vector<Index> used_coordinates(const Eigen::MatrixXd& fq, const Eigen::MatrixXd& fk) {
  check_dim("used_coordinates: key factor rows (n)", fq.rows(), fk.rows());
  std::vector<Index> used;
  for (Index i = 0; i < fq.rows(); ++i) {
    if ((fq.row(i).array() != 0.0).any() || (fk.row(i).array() != 0.0).any())
      used.push_back(i);
  }
  if (used.empty()) {  // M = 0: keep the whole (zero) form, so its size is still reported
    for (Index i = 0; i < fq.rows(); ++i)
      used.push_back(i);
  }
  return used;
}

inline Eigen::MatrixXd symmetric_part(const Eigen::MatrixXd& c) {
  return 0.5 * (c + c.transpose());
}
inline Eigen::MatrixXd skew_part(const Eigen::MatrixXd& c) {
  return 0.5 * (c - c.transpose());
}

/// Smallest count p with Σ_{k<p} w_k ≥ fraction · Σ w (w sorted descending, ≥ 0); 0 for an
/// all-zero w.
inline Index count_for_fraction(const std::vector<double>& weights, double fraction) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  if (!(total > 0))
    return 0;
  double sum = 0;
  for (std::size_t k = 0; k < weights.size(); ++k) {
    sum += weights[k];
    if (sum >= fraction * total)
      return static_cast<Index>(k + 1);
  }
  return static_cast<Index>(weights.size());
}

/// exp(H(p)) with p_k = w_k / Σ w (Shannon entropy, natural log; 0·log 0 = 0); 0 for an
/// all-zero w.
inline double entropy_effective_rank(const std::vector<double>& weights) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  if (!(total > 0))
    return 0.0;
  double h = 0;
  for (double w : weights) {
    if (w > 0) {
      const double p = w / total;
      h -= p * std::log(p);
    }
  }
  return std::exp(h);
}

/// Singular values of a real skew-symmetric matrix, one per rotation plane: its eigenvalues
/// are ±iσ_k, so its singular values come in equal pairs (σ_1, σ_1, σ_2, σ_2, …). Returns
/// (s_{2k} + s_{2k+1}) / 2 for k < ⌊m/2⌋, descending (an odd m leaves one zero singular value,
/// dropped). JacobiSVD: O(m³), m ≤ 2·d_h.
template <class Matrix = Eigen::MatrixXd>
std::vector<double> skew_plane_values(const DenseOf<Matrix>& skew) {
  const Eigen::JacobiSVD<Matrix> svd(skew);
  const Eigen::VectorXd s = svd.singularValues();
  std::vector<double> planes;
  for (Index k = 0; 2 * k + 1 < s.size(); ++k)
    planes.push_back(0.5 * (s(2 * k) + s(2 * k + 1)));
  return planes;
}

/// Eigenvalues of a real symmetric matrix, sorted by |λ| descending (ties: larger λ first).
template <class Matrix = Eigen::MatrixXd>
std::vector<double> symmetric_eigenvalues_by_magnitude(const DenseOf<Matrix>& sym) {
  std::vector<double> values;
  if (sym.rows() == 0)
    return values;
  const Eigen::SelfAdjointEigenSolver<Matrix> eig(sym, Eigen::EigenvaluesOnly);
  for (Index i = 0; i < eig.eigenvalues().size(); ++i)
    values.push_back(eig.eigenvalues()(i));
  std::stable_sort(values.begin(), values.end(), [](double a, double b) {
    return std::abs(a) > std::abs(b) || (std::abs(a) == std::abs(b) && a > b);
  });
  return values;
}

}  // namespace nlb::detail
