// Skew-symmetric low-rank routing S = U Vᵀ − V Uᵀ (PAPERS.md §B2; docs/attention.md): the
// routing part of an S–D attention head. Its scores x_i S x_jᵀ are antisymmetric
// (s_ij = −s_ji, s_ii = 0): information routed from j to i is routed with the opposite sign
// from i to j. Its features are the ops layer's products, so it runs on every backend; fitting
// (from_matrix) and the analysis forms (dense, scores) are host members.
#pragma once

// Calls the ops by qualified name: nlb/cuda.cuh must come first (nlb/cuda/ops.cuh checks).
#define NLB_OPS_CALLERS_INCLUDED

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Eigenvalues>

#include "nlb/attention/detail/causal_product.hpp"
#include "nlb/core.hpp"
#include "nlb/core/context.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/ops/gemm.hpp"
#include "nlb/ops/narrow_gemm.hpp"
#include "nlb/ops/scratch.hpp"

namespace nlb {

namespace detail {
/// Sizes `scratch` for the products of up to `max_rows` rows, `cols` columns and inner size
/// `depth`, so that a product whose row count grows call by call (the features of every cached
/// key while decoding) allocates nothing: the CPU backends' packing buffers (reserve_gemm).
/// O(max_rows) blocking-size computations.
template <class Backend, class Scratch>
requires backend::is_host<Backend>
void reserve_products(const Context<Backend>&, Scratch& scratch, Index max_rows, Index cols,
                      Index depth) {
  reserve_gemm(scratch, max_rows, cols, depth);
}
/// A device's products keep no packing buffers: nothing to size.
template <class Backend, class Scratch>
requires(!backend::is_host<Backend>) void reserve_products(const Context<Backend>&, Scratch&, Index,
                                                           Index, Index) {}
}  // namespace detail

/// Routing S = U Vᵀ − V Uᵀ with U, V [d, r], r = Rank / 2, so rank(S) <= Rank.
///
/// Rank is the routing rank 2r: even, or Dynamic (then checked at run time: an odd rank is an
/// ArgumentError). Scores are computed in low-rank form, never through the d x d matrix:
///   x_i S x_jᵀ = (x_i U)·(x_j V) − (x_i V)·(x_j U) = q_i · k_j,
///   q = X [U V], k = X [V −U]  (query_features / key_features, [T, Rank] each),
/// O(T·d·Rank) for the features plus O(T²·Rank) for the scores. The two factors [U V] and
/// [V −U] [d, Rank] are kept in the backend's weight storage (storage_traits<Backend, T>), so
/// each side is one product.
template <class T, int Rank = Dynamic, class Backend = backend::cpu>
class SkewSymmetricRouting {
  static_assert(Rank == Dynamic || (Rank > 0 && Rank % 2 == 0),
                "SkewSymmetricRouting: Rank must be a positive even number (2r) or Dynamic");
  using Storage = storage_traits<Backend, T>;

 public:
  using Scalar = T;
  using backend_type = Backend;
  static constexpr int rank_value = Rank;
  static constexpr int half_rank = Rank == Dynamic ? Dynamic : Rank / 2;
  // [d, Rank]; Dynamic storage even for a fixed Rank (the rank is checked at construction).
  using Factor = typename Storage::template weights<>;
  using ConstView = typename Storage::const_view;
  using View = typename Storage::view;
  template <class B>
  using on_backend = SkewSymmetricRouting<T, Rank, B>;

  SkewSymmetricRouting() = default;

  /// S = 0 of the given width and rank (U = V = 0). ArgumentError unless rank is positive, even
  /// and <= d (and equal to Rank when Rank is fixed).
  SkewSymmetricRouting(Index d, Index rank) requires backend::is_host<Backend> {
    check_rank("SkewSymmetricRouting", rank, d);
    set_factors(RowMatrix<T>::Zero(d, rank / 2), RowMatrix<T>::Zero(d, rank / 2));
  }

  /// From the factors U, V [d, r]. ShapeError when their shapes differ, or r != Rank / 2 for a
  /// fixed Rank; ArgumentError when r = 0.
  SkewSymmetricRouting(const Eigen::Ref<const RowMatrix<T>>& u,
                       const Eigen::Ref<const RowMatrix<T>>& v) requires backend::is_host<Backend> {
    check_dim("SkewSymmetricRouting: V rows (d)", u.rows(), v.rows());
    check_dim("SkewSymmetricRouting: V cols (r)", u.cols(), v.cols());
    if constexpr (Rank != Dynamic)
      check_dim("SkewSymmetricRouting: U cols (compile-time Rank / 2)", Rank / 2, u.cols());
    check_rank("SkewSymmetricRouting", 2 * u.cols(), u.rows());
    set_factors(u, v);
  }

  /// The same routing on another backend: both factors copied into this backend's storage
  /// (uploaded once for backend::cuda). O(d·Rank).
  template <class From>
  requires(!std::is_same_v<From, Backend>) explicit SkewSymmetricRouting(
      const SkewSymmetricRouting<T, Rank, From>& from)
      : query_(Storage::template from_host<>(from.query_factor())),
        key_(Storage::template from_host<>(from.key_factor())) {}

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
  static SkewSymmetricRouting from_matrix(const Eigen::Ref<const RowMatrix<T>>& M,
                                          Index rank) requires backend::is_host<Backend> {
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
      Rank != Dynamic && backend::is_host<Backend>) {
    return from_matrix(M, Rank);
  }

  /// Input width d.
  Index features() const { return query_.rows(); }
  /// Routing rank 2r (the bound on rank(S)).
  Index rank() const { return query_.cols(); }
  /// Free parameters: 2·d·r = d·Rank.
  Index parameter_count() const { return query_.size(); }
  /// The query-side factor [U V] and the key-side factor [V −U], [d, Rank] each, in this
  /// backend's weight storage.
  const Factor& query_factor() const { return query_; }
  const Factor& key_factor() const { return key_; }
  /// U and V [d, r] (views of the query factor).
  auto u() const requires backend::is_host<Backend> { return query_.leftCols(rank() / 2); }
  auto v() const requires backend::is_host<Backend> { return query_.rightCols(rank() / 2); }

  /// S = U Vᵀ − V Uᵀ [d, d], formed as P − Pᵀ with P = U Vᵀ, so it is exactly skew-symmetric
  /// (zero diagonal, S_ji = −S_ij bit for bit). O(d²·r).
  RowMatrix<T> dense() const requires backend::is_host<Backend> {
    const RowMatrix<T> p = u() * v().transpose();
    return p - p.transpose();
  }

  /// q = X [U V] [T, Rank] for X [T, d]: the query side of the low-rank scores, one product of
  /// width Rank (ops::gemm). ShapeError on a width or output-size mismatch. O(T·d·Rank).
  void query_features(Context<Backend>& ctx, const ConstView& X, View out,
                      ops::Scratch<Backend, T>& scratch) const {
    check_features("query_features", X, out);
    ops::gemm(ctx, X, query_, out, scratch);
  }

  /// k = X [V −U] = [X V | −X U] [T, Rank] for X [T, d]: the key side, so x_i S x_jᵀ = q_i · k_j
  /// (X (−U) is −(X U) exactly: negation commutes with rounding). One product of width Rank.
  /// ShapeError on a width or output-size mismatch. O(T·d·Rank).
  void key_features(Context<Backend>& ctx, const ConstView& X, View out,
                    ops::Scratch<Backend, T>& scratch) const {
    check_features("key_features", X, out);
    ops::gemm(ctx, X, key_, out, scratch);
  }

  /// Sizes `scratch` for query_features and key_features of up to `rows` rows (a KV cache's
  /// capacity), so that later calls allocate nothing, however the row count grows between them
  /// (on the CPU: the products' packing buffers; a device needs none). O(rows).
  void reserve(Context<Backend>& ctx, ops::Scratch<Backend, T>& scratch, Index rows) const {
    detail::reserve_products(ctx, scratch, rows, rank(), features());
  }

  /// Routing scores out(i, j) = x_i S x_jᵀ for X [T, d], out [T, T], in low-rank form:
  /// O(T·d·Rank + T²·Rank). The diagonal is set to exactly 0 (x S xᵀ = 0 for skew S).
  /// causal = true: only j <= i is computed and written; entries j > i are left untouched.
  /// causal = false: the strict lower triangle is computed and the upper one written as its
  /// negation, so out(j, i) == −out(i, j) exactly (negation is exact in floating point).
  /// ShapeError on a width or output-size mismatch.
  void scores(const Eigen::Ref<const Activations<T>>& X, Eigen::Ref<RowMatrix<T>> out,
              bool causal) const requires backend::is_host<Backend> {
    const Index rows = X.rows();
    check_dim("SkewSymmetricRouting::scores: input width (d)", features(), X.cols());
    check_dim("SkewSymmetricRouting::scores: output rows (T)", rows, out.rows());
    check_dim("SkewSymmetricRouting::scores: output cols (T)", rows, out.cols());
    const Index r = rank() / 2;
    RowMatrix<T> q(rows, 2 * r), k(rows, 2 * r);
    q.noalias() = X * query_;  // [X U | X V]
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

  // query_ = [U V], key_ = [V −U], in the backend's weight storage.
  template <class U, class V>
  void set_factors(const U& u, const V& v) {
    const Index d = u.rows(), r = u.cols();
    RowMatrix<T> query(d, 2 * r), key(d, 2 * r);
    query << u, v;
    key << v, -u;
    query_ = to_weight_storage<typename Backend::weights>(std::move(query));
    key_ = to_weight_storage<typename Backend::weights>(std::move(key));
  }

  template <class X, class Out>
  void check_features(const char* what, const X& x, const Out& out) const {
    // The names are built only on a mismatch: forward passes call this per head.
    if (x.cols() == features() && out.rows() == x.rows() && out.cols() == rank())
      return;
    const std::string name = std::string("SkewSymmetricRouting::") + what;
    check_dim(name + ": input width (d)", features(), x.cols());
    check_dim(name + ": output rows (T)", x.rows(), out.rows());
    check_dim(name + ": output cols (Rank)", rank(), out.cols());
  }

  // v −= B (Bᵀ v), twice (classical Gram–Schmidt with one reorthogonalization).
  static void orthogonalize(Eigen::VectorXd& vec, const Eigen::Ref<const Eigen::MatrixXd>& basis) {
    if (basis.cols() == 0)
      return;
    for (int pass = 0; pass < 2; ++pass)
      vec -= basis * (basis.transpose() * vec);
  }

  Factor query_;  // [U V] [d, Rank]
  Factor key_;    // [V −U] [d, Rank]
};

}  // namespace nlb
