// Skew-symmetric low-rank routing S = U Vᵀ − V Uᵀ (PAPERS.md §B2; docs/attention.md): the
// routing part of an S–D attention head. Its scores x_i S x_jᵀ are antisymmetric
// (s_ij = −s_ji, s_ii = 0): information routed from j to i is routed with the opposite sign
// from i to j.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Eigenvalues>

#include "nlb/attention/detail/causal_product.hpp"
#include "nlb/core.hpp"
#include "nlb/ops/gemm.hpp"

namespace nlb {

/// Routing S = U Vᵀ − V Uᵀ with U, V [d, r], r = Rank / 2, so rank(S) <= Rank.
///
/// Rank is the routing rank 2r: even, or Dynamic (then checked at run time: an odd rank is an
/// ArgumentError). Scores are computed in low-rank form, never through the d x d matrix:
///   x_i S x_jᵀ = (x_i U)·(x_j V) − (x_i V)·(x_j U) = q_i · k_j,
///   q = [X U | X V], k = [X V | −X U]  (query_features / key_features, [T, Rank] each),
/// O(T·d·Rank) for the features plus O(T²·Rank) for the scores. Backend is carried for
/// symmetry with the other components (the work is Eigen GEMMs).
template <class T, int Rank = Dynamic, class Backend = backend::cpu>
class SkewSymmetricRouting {
  static_assert(Rank == Dynamic || (Rank > 0 && Rank % 2 == 0),
                "SkewSymmetricRouting: Rank must be a positive even number (2r) or Dynamic");
  static_assert(backend::is_host<Backend>,
                "SkewSymmetricRouting: a host component: Backend must be backend::scalar or "
                "backend::simd<Arch> (backend::cuda runs its own components)");

 public:
  using Scalar = T;
  using backend_type = Backend;
  static constexpr int rank_value = Rank;
  static constexpr int half_rank = Rank == Dynamic ? Dynamic : Rank / 2;
  // [d, r]; Dynamic storage even for a fixed Rank (r = 1 would make a fixed one a column vector,
  // which Eigen stores column-major); the rank is checked at construction.
  using Factor = RowMatrix<T>;

  SkewSymmetricRouting() = default;

  /// S = 0 of the given width and rank (U = V = 0). ArgumentError unless rank is positive, even
  /// and <= d (and equal to Rank when Rank is fixed).
  SkewSymmetricRouting(Index d, Index rank) {
    check_rank("SkewSymmetricRouting", rank, d);
    u_ = Factor::Zero(d, rank / 2);
    v_ = Factor::Zero(d, rank / 2);
    uv_ = RowMatrix<T>::Zero(d, rank);
  }

  /// From the factors U, V [d, r]. ShapeError when their shapes differ, or r != Rank / 2 for a
  /// fixed Rank; ArgumentError when r = 0.
  SkewSymmetricRouting(const Eigen::Ref<const RowMatrix<T>>& u,
                       const Eigen::Ref<const RowMatrix<T>>& v) {
    check_dim("SkewSymmetricRouting: V rows (d)", u.rows(), v.rows());
    check_dim("SkewSymmetricRouting: V cols (r)", u.cols(), v.cols());
    if constexpr (Rank != Dynamic)
      check_dim("SkewSymmetricRouting: U cols (compile-time Rank / 2)", Rank / 2, u.cols());
    check_rank("SkewSymmetricRouting", 2 * u.cols(), u.rows());
    u_ = u;
    v_ = v;
    uv_.resize(u.rows(), 2 * u.cols());
    uv_ << u_, v_;
  }

  /// The best approximation of rank <= `rank` of the skew part A = (M − Mᵀ)/2 of M [d, d] in
  /// Frobenius norm (Eckart–Young for skew matrices, docs/attention.md). A's singular values
  /// come in equal pairs σ_1 = σ_1 >= σ_2 = σ_2 >= …, one per invariant plane; the result keeps
  /// the r = rank/2 planes of largest σ, so ‖A − S‖_F = sqrt(2 Σ_{k>r} σ_k²).
  /// Method (deterministic, in double): eigenvectors of the symmetric G = AᵀA = −A², taken
  /// in descending order; each one not already inside a chosen plane (after Gram–Schmidt
  /// against the chosen vectors, norm >= 1/2) gives w1, its plane partner is
  /// w2 = A w1 / ‖A w1‖ and σ = w2ᵀ A w1; then U_k = √σ w2, V_k = √σ w1, so the plane's
  /// term U_k V_kᵀ − V_k U_kᵀ = σ (w2 w1ᵀ − w1 w2ᵀ) maps w1 ↦ σ w2 and w2 ↦ −σ w1 as A does.
  /// Planes with σ <= 0 (A of lower rank) get zero columns. O(d³).
  /// ShapeError unless M is square; ArgumentError for a rank that is odd, <= 0, > d or (fixed
  /// Rank) != Rank.
  static SkewSymmetricRouting from_matrix(const Eigen::Ref<const RowMatrix<T>>& M, Index rank) {
    check_dim("SkewSymmetricRouting::from_matrix: M cols (square)", M.rows(), M.cols());
    const Index d = M.rows();
    check_rank("SkewSymmetricRouting::from_matrix", rank, d);
    const Index r = rank / 2;
    const Eigen::MatrixXd m = M.template cast<double>();
    // fl(a − b) = −fl(b − a) and halving is exact: A is exactly skew-symmetric.
    const Eigen::MatrixXd a = (m - m.transpose()) * 0.5;
    Eigen::MatrixXd g = a.transpose() * a;
    g = ((g + g.transpose()) * 0.5).eval();
    const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(g);
    if (eig.info() != Eigen::Success) {
      throw NumericError("SkewSymmetricRouting::from_matrix: eigendecomposition of AᵀA failed");
    }
    Eigen::MatrixXd chosen(d, 2 * r);  // w1, w2 of every plane so far
    Index n_chosen = 0;
    Eigen::MatrixXd uu = Eigen::MatrixXd::Zero(d, r), vv = Eigen::MatrixXd::Zero(d, r);
    Index planes = 0;
    for (Index idx = d - 1; idx >= 0 && planes < r; --idx) {
      Eigen::VectorXd w1 = eig.eigenvectors().col(idx);
      orthogonalize(w1, chosen.leftCols(n_chosen));
      const double norm = w1.norm();
      if (norm < 0.5)
        continue;  // inside a plane already taken (a pair's second eigenvector)
      w1 /= norm;
      Eigen::VectorXd w2 = a * w1;
      orthogonalize(w2, chosen.leftCols(n_chosen));
      w2 -= w1 * w1.dot(w2);
      const double w2_norm = w2.norm();
      if (!(w2_norm > 0))
        break;  // A vanishes on the rest: the remaining planes stay zero
      w2 /= w2_norm;
      const double sigma = w2.dot(a * w1);
      if (!(sigma > 0))
        break;
      chosen.col(n_chosen++) = w1;
      chosen.col(n_chosen++) = w2;
      uu.col(planes) = std::sqrt(sigma) * w2;
      vv.col(planes) = std::sqrt(sigma) * w1;
      ++planes;
    }
    const RowMatrix<T> u = uu.cast<T>(), v = vv.cast<T>();
    return SkewSymmetricRouting(u, v);
  }

  /// from_matrix(M, Rank) for a fixed Rank.
  static SkewSymmetricRouting from_matrix(const Eigen::Ref<const RowMatrix<T>>& M) requires(
      Rank != Dynamic) {
    return from_matrix(M, Rank);
  }

  /// Input width d.
  Index features() const { return u_.rows(); }
  /// Routing rank 2r (the bound on rank(S)).
  Index rank() const { return 2 * u_.cols(); }
  /// Free parameters: 2·d·r = d·Rank.
  Index parameter_count() const { return 2 * u_.size(); }
  const Factor& u() const { return u_; }  // [d, r]
  const Factor& v() const { return v_; }  // [d, r]

  /// S = U Vᵀ − V Uᵀ [d, d], formed as P − Pᵀ with P = U Vᵀ, so it is exactly skew-symmetric
  /// (zero diagonal, S_ji = −S_ij bit for bit). O(d²·r).
  RowMatrix<T> dense() const {
    const RowMatrix<T> p = u_ * v_.transpose();
    return p - p.transpose();
  }

  /// q = [X U | X V] [T, Rank] for X [T, d]: the query side of the low-rank scores. O(T·d·Rank).
  void query_features(const Eigen::Ref<const Activations<T>>& X,
                      Eigen::Ref<RowMatrix<T>> out) const {
    check_features("query_features", X, out);
    out.noalias() = X * uv_;  // one GEMM of width Rank
  }

  /// Scratch memory of key_features: X U before its negation (column-major, as the temporary
  /// Eigen itself evaluates −(X U) through) and the products' packing buffers.
  struct FeatureWorkspace {
    AlignedBuffer<T> product;  // [T, Rank / 2] column-major
    GemmScratch<T> gemm;
    // (rows, Rank / 2) pairs reserve() has sized the buffers for (heads may differ in rank).
    std::vector<std::pair<Index, Index>> reserved;
  };

  /// Sizes `ws` for key_features of up to `rows` rows (a KV cache's capacity), so that later
  /// calls never allocate, however the row count grows between them.
  void reserve(FeatureWorkspace& ws, Index rows) const {
    const Index r = u_.cols();
    for (const auto& [n, width] : ws.reserved) {
      if (n == rows && width == r)
        return;
    }
    if (ws.product.size() < static_cast<std::size_t>(rows * r))
      ws.product.resize(static_cast<std::size_t>(rows * r));
    reserve_gemm(ws.gemm, rows, r, features());
    ws.reserved.emplace_back(rows, r);
  }

  /// k = [X V | −X U] [T, Rank] for X [T, d]: the key side, so x_i S x_jᵀ = q_i · k_j.
  /// O(T·d·Rank). With a reused `ws`, a call with no more rows than an earlier one allocates
  /// nothing; the arithmetic is that of key_features(X, out).
  void key_features(const Eigen::Ref<const Activations<T>>& X, Eigen::Ref<RowMatrix<T>> out,
                    FeatureWorkspace& ws) const {
    check_features("key_features", X, out);
    const Index r = u_.cols();
    ops::gemm(Backend{}, out.leftCols(r), X, v_, ws.gemm);
    // −(X U) exactly as Eigen evaluates it: the product into a column-major temporary (here
    // grow-only storage), then negated.
    if (ws.product.size() < static_cast<std::size_t>(X.rows() * r))
      ws.product.resize(static_cast<std::size_t>(X.rows() * r));
    Eigen::Map<Eigen::Matrix<T, Dynamic, Dynamic>, Eigen::Aligned64> xu(ws.product.data(), X.rows(),
                                                                        r);
    ops::gemm(Backend{}, xu, X, u_, ws.gemm);
    out.rightCols(r) = -xu;
  }

  /// key_features with a temporary workspace.
  void key_features(const Eigen::Ref<const Activations<T>>& X, Eigen::Ref<RowMatrix<T>> out) const {
    FeatureWorkspace ws;
    key_features(X, out, ws);
  }

  /// Routing scores out(i, j) = x_i S x_jᵀ for X [T, d], out [T, T], in low-rank form:
  /// O(T·d·Rank + T²·Rank). The diagonal is set to exactly 0 (x S xᵀ = 0 for skew S).
  /// causal = true: only j <= i is computed and written; entries j > i are left untouched.
  /// causal = false: the strict lower triangle is computed and the upper one written as its
  /// negation, so out(j, i) == −out(i, j) exactly (negation is exact in floating point).
  /// ShapeError on a width or output-size mismatch.
  void scores(const Eigen::Ref<const Activations<T>>& X, Eigen::Ref<RowMatrix<T>> out,
              bool causal) const {
    const Index rows = X.rows();
    check_dim("SkewSymmetricRouting::scores: input width (d)", features(), X.cols());
    check_dim("SkewSymmetricRouting::scores: output rows (T)", rows, out.rows());
    check_dim("SkewSymmetricRouting::scores: output cols (T)", rows, out.cols());
    const Index r = u_.cols();
    RowMatrix<T> q(rows, 2 * r), k(rows, 2 * r);
    query_features(X, q);  // [X U | X V]
    k.leftCols(r) = q.rightCols(r);
    k.rightCols(r) = -q.leftCols(r);
    detail::causal_product<T>(q, k, out, 0);
    for (Index i = 0; i < rows; ++i)
      out(i, i) = T(0);
    if (!causal)
      detail::mirror_negated<T>(out);
  }

 private:
  static void check_rank(const std::string& what, Index rank, Index d) {
    if (rank <= 0 || rank % 2 != 0 || rank > d) {
      throw ArgumentError(detail::expected_found(
          what + ": rank", "a positive even number <= d = " + std::to_string(d), rank));
    }
    if (Rank != Dynamic && rank != Rank) {
      throw ArgumentError(detail::expected_found(
          what + ": rank", "the compile-time Rank " + std::to_string(Rank), rank));
    }
  }

  void check_features(const char* what, const Eigen::Ref<const Activations<T>>& X,
                      const Eigen::Ref<RowMatrix<T>>& out) const {
    // The names are built only on a mismatch: forward passes call this per head.
    if (X.cols() == features() && out.rows() == X.rows() && out.cols() == rank())
      return;
    const std::string name = std::string("SkewSymmetricRouting::") + what;
    check_dim(name + ": input width (d)", features(), X.cols());
    check_dim(name + ": output rows (T)", X.rows(), out.rows());
    check_dim(name + ": output cols (Rank)", rank(), out.cols());
  }

  // v −= B (Bᵀ v), twice (classical Gram–Schmidt with one reorthogonalization).
  static void orthogonalize(Eigen::VectorXd& vec, const Eigen::Ref<const Eigen::MatrixXd>& basis) {
    if (basis.cols() == 0)
      return;
    for (int pass = 0; pass < 2; ++pass)
      vec -= basis * (basis.transpose() * vec);
  }

  Factor u_;
  Factor v_;
  RowMatrix<T> uv_;  // [U | V] [d, Rank], for the one-GEMM query features
};

}  // namespace nlb
