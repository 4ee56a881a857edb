// SkewSymmetricRouting (PAPERS.md §B2): exact antisymmetry of the scores, the low-rank form
// against x_i S x_jᵀ in long double, from_matrix against the truncated SVD of the skew part
// (Eckart–Young), and typed errors for bad input.
#include <boost/test/unit_test.hpp>

#include <Eigen/SVD>
#include <cmath>
#include <limits>
#include <string>

#include "nlb/attention/skew_routing.hpp"
#include "test_random.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::RowMatrix;
using LMatrix = Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic>;
namespace tol = nlb::test::tol;

template <class T>
RowMatrix<T> random_matrix(Index rows, Index cols, std::uint64_t seed, double scale = 1.0) {
  return (nlb::test::gaussian(rows, cols, seed) * scale).cast<T>();
}

template <class T>
nlb::SkewSymmetricRouting<T> random_routing(Index d, Index rank, std::uint64_t seed) {
  return nlb::SkewSymmetricRouting<T>(random_matrix<T>(d, rank / 2, seed),
                                      random_matrix<T>(d, rank / 2, seed + 1));
}

struct Shape {
  Index rows, d, rank;
};
// Row counts around the 64-row panel of the causal product, odd widths, several ranks.
const Shape shapes[] = {{1, 3, 2},   {5, 8, 2},  {17, 8, 4},   {63, 17, 6},
                        {64, 12, 8}, {65, 9, 4}, {130, 16, 2}, {200, 24, 16}};

// Exactness: the upper triangle is written as the negation of the lower one, and negation is
// exact in floating point; the diagonal is set to 0, the exact value of x S xᵀ for skew S.
template <class T>
void check_exact_antisymmetry() {
  std::uint64_t seed = 100;
  for (const Shape& s : shapes) {
    const auto routing = random_routing<T>(s.d, s.rank, seed++);
    const RowMatrix<T> x = random_matrix<T>(s.rows, s.d, seed++);
    RowMatrix<T> out(s.rows, s.rows);
    routing.scores(x, out, false);
    Index bad = 0;
    for (Index i = 0; i < s.rows; ++i) {
      bad += out(i, i) != T(0);
      for (Index j = 0; j < i; ++j)
        bad += out(i, j) != -out(j, i);
    }
    BOOST_TEST(bad == 0, "T=" << s.rows << " d=" << s.d << " rank=" << s.rank);
    // The causal form computes the same lower triangle bit for bit and leaves j > i untouched.
    RowMatrix<T> causal = RowMatrix<T>::Constant(s.rows, s.rows, T(12345));
    routing.scores(x, causal, true);
    Index differs = 0, touched = 0;
    for (Index i = 0; i < s.rows; ++i) {
      for (Index j = 0; j <= i; ++j)
        differs += causal(i, j) != out(i, j);
      for (Index j = i + 1; j < s.rows; ++j)
        touched += causal(i, j) != T(12345);
    }
    BOOST_TEST(differs == 0);
    BOOST_TEST(touched == 0);
    // dense() is P − Pᵀ: exactly skew-symmetric.
    const RowMatrix<T> S = routing.dense();
    BOOST_TEST((S + S.transpose()).cwiseAbs().maxCoeff() == T(0));
  }
}

// Low-rank scores against x_i (U Vᵀ − V Uᵀ) x_jᵀ in long double, with the first-order forward
// error bound of tolerances.hpp (routing_rounding_factor).
template <class T>
void check_low_rank_equals_dense() {
  std::uint64_t seed = 200;
  double worst = 0;
  for (const Shape& s : shapes) {
    const auto routing = random_routing<T>(s.d, s.rank, seed++);
    const RowMatrix<T> x = random_matrix<T>(s.rows, s.d, seed++);
    RowMatrix<T> out(s.rows, s.rows);
    routing.scores(x, out, false);
    const LMatrix lx = x.template cast<long double>();
    const LMatrix lu = routing.u().template cast<long double>();
    const LMatrix lv = routing.v().template cast<long double>();
    const LMatrix ls = lu * lv.transpose() - lv * lu.transpose();
    const LMatrix expected = lx * ls * lx.transpose();
    // Scale of the terms: |x||U| etc. with absolute values.
    const LMatrix au = lx.cwiseAbs() * lu.cwiseAbs(), av = lx.cwiseAbs() * lv.cwiseAbs();
    const LMatrix scale = au * av.transpose() + av * au.transpose();
    const double eps = std::numeric_limits<T>::epsilon();
    const double factor = tol::routing_rounding_factor * static_cast<double>(s.d + s.rank) * eps;
    Index bad = 0;
    for (Index i = 0; i < s.rows; ++i) {
      for (Index j = 0; j < s.rows; ++j) {
        const double err = static_cast<double>(std::fabs(out(i, j) - expected(i, j)));
        const double allowed = factor * static_cast<double>(scale(i, j));
        bad += err > allowed;
        if (allowed > 0)
          worst = std::max(worst, err / allowed);
      }
    }
    BOOST_TEST(bad == 0, "T=" << s.rows << " d=" << s.d << " rank=" << s.rank);
  }
  BOOST_TEST_MESSAGE("low-rank vs dense scores (" << sizeof(T) * 8 << "-bit): worst error/bound "
                                                  << worst);
}

// The reference: A's SVD truncated to its `rank` largest singular triplets (Jacobi, an
// algorithm unrelated to from_matrix's eigendecomposition of AᵀA).
struct Truncated {
  Eigen::MatrixXd best;
  double dropped;  // sqrt(Σ dropped σ²)
  double gap;      // (σ_{rank−1} − σ_rank) / σ_0
  double norm2;    // σ_0
};

Truncated truncated_svd(const Eigen::MatrixXd& a, Index rank) {
  const Eigen::JacobiSVD<Eigen::MatrixXd> svd(a, Eigen::ComputeFullU | Eigen::ComputeFullV);
  const Eigen::VectorXd& s = svd.singularValues();
  Truncated t;
  t.best = svd.matrixU().leftCols(rank) * s.head(rank).asDiagonal() *
           svd.matrixV().leftCols(rank).transpose();
  t.dropped = std::sqrt(s.tail(s.size() - rank).squaredNorm());
  t.norm2 = s(0);
  t.gap = rank < s.size() ? (s(rank - 1) - s(rank)) / s(0) : 1.0;
  return t;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(skew_routing)

BOOST_AUTO_TEST_CASE(scores_are_exactly_antisymmetric) {
  check_exact_antisymmetry<float>();
  check_exact_antisymmetry<double>();
}

BOOST_AUTO_TEST_CASE(low_rank_scores_equal_dense_bilinear_form) {
  check_low_rank_equals_dense<float>();
  check_low_rank_equals_dense<double>();
}

BOOST_AUTO_TEST_CASE(features_give_the_scores) {
  // q_i · k_j is the score: the factored form SDAttention fuses.
  const auto routing = random_routing<double>(10, 6, 300);
  const RowMatrix<double> x = random_matrix<double>(7, 10, 301);
  RowMatrix<double> q(7, 6), k(7, 6), out(7, 7);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ops::Scratch<nlb::backend::cpu, double> scratch;
  routing.query_features(ctx, x, q, scratch);
  routing.key_features(ctx, x, k, scratch);
  routing.scores(x, out, false);
  const RowMatrix<double> dense = x * routing.dense() * x.transpose();
  const double scale = dense.cwiseAbs().maxCoeff();
  BOOST_TEST(((q * k.transpose()) - dense).cwiseAbs().maxCoeff() <=
             tol::attention_double_rel * scale);
  BOOST_TEST((out - dense).cwiseAbs().maxCoeff() <= tol::attention_double_rel * scale);
}

BOOST_AUTO_TEST_CASE(from_matrix_is_the_truncated_svd_of_the_skew_part) {
  std::uint64_t seed = 400;
  for (Index d : {6, 9, 16, 24}) {
    for (Index rank : {2, 4, 6}) {
      const Eigen::MatrixXd m = nlb::test::gaussian(d, d, seed++);
      const Eigen::MatrixXd a = (m - m.transpose()) / 2;
      const Truncated t = truncated_svd(a, rank);
      BOOST_REQUIRE_MESSAGE(t.gap >= 1e-2, "seed " << seed << ": singular gap too small");
      const auto routing = nlb::SkewSymmetricRouting<double>::from_matrix(m, rank);
      BOOST_TEST(routing.rank() == rank);
      const RowMatrix<double> s = routing.dense();
      BOOST_TEST((s - t.best).cwiseAbs().maxCoeff() <= tol::skew_truncation_rel * t.norm2,
                 "d=" << d << " rank=" << rank);
      // Eckart–Young: the error is the norm of the dropped singular values.
      const double err = (a - s).norm();
      BOOST_TEST(std::fabs(err - t.dropped) <= tol::skew_truncation_rel * t.norm2);
      BOOST_TEST((s + s.transpose()).cwiseAbs().maxCoeff() == 0.0);  // exactly skew
    }
  }
}

BOOST_AUTO_TEST_CASE(from_matrix_recovers_a_low_rank_skew_matrix_and_pads_with_zeros) {
  // M = a rank-4 skew matrix plus a symmetric matrix (dropped by the skew part).
  const Eigen::MatrixXd u = nlb::test::gaussian(12, 2, 500), v = nlb::test::gaussian(12, 2, 501);
  const Eigen::MatrixXd sym = nlb::test::gaussian(12, 12, 502);
  const Eigen::MatrixXd skew = u * v.transpose() - v * u.transpose();
  const Eigen::MatrixXd m = skew + sym + sym.transpose();
  const double norm = skew.norm();
  for (Index rank : {4, 8}) {  // 8: two planes beyond the matrix's rank stay zero
    const auto routing = nlb::SkewSymmetricRouting<double>::from_matrix(m, rank);
    BOOST_TEST((RowMatrix<double>(routing.dense()) - skew).cwiseAbs().maxCoeff() <=
               tol::skew_truncation_rel * norm);
  }
  // float: computed in double, rounded once; still exactly skew.
  const auto f = nlb::SkewSymmetricRouting<float, 4>::from_matrix(m.cast<float>());
  const RowMatrix<float> sf = f.dense();
  BOOST_TEST((sf + sf.transpose()).cwiseAbs().maxCoeff() == 0.0f);
}

BOOST_AUTO_TEST_CASE(bad_input_raises_typed_errors) {
  using Dyn = nlb::SkewSymmetricRouting<double>;
  BOOST_CHECK_THROW(Dyn(8, 3), nlb::ArgumentError);   // odd rank at run time
  BOOST_CHECK_THROW(Dyn(8, 0), nlb::ArgumentError);   // zero rank
  BOOST_CHECK_THROW(Dyn(8, 10), nlb::ArgumentError);  // rank > d
  BOOST_CHECK_THROW((nlb::SkewSymmetricRouting<double, 4>(8, 2)), nlb::ArgumentError);
  const Eigen::MatrixXd m = nlb::test::gaussian(8, 8, 600);
  BOOST_CHECK_THROW(Dyn::from_matrix(m, 5), nlb::ArgumentError);
  BOOST_CHECK_THROW(Dyn::from_matrix(nlb::test::gaussian(8, 7, 601), 2), nlb::ShapeError);
  const RowMatrix<double> u = random_matrix<double>(8, 2, 602);
  BOOST_CHECK_THROW(Dyn(u, random_matrix<double>(7, 2, 603)), nlb::ShapeError);
  BOOST_CHECK_THROW(Dyn(u, random_matrix<double>(8, 3, 603)), nlb::ShapeError);
  BOOST_CHECK_THROW((nlb::SkewSymmetricRouting<double, 2>(u, u)), nlb::ShapeError);
  const Dyn routing(u, u);
  RowMatrix<double> out(5, 5), wrong(5, 4), q(5, 3);
  BOOST_CHECK_THROW(routing.scores(random_matrix<double>(5, 7, 604), out, true), nlb::ShapeError);
  BOOST_CHECK_THROW(routing.scores(random_matrix<double>(5, 8, 604), wrong, true), nlb::ShapeError);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ops::Scratch<nlb::backend::cpu, double> scratch;
  BOOST_CHECK_THROW(routing.query_features(ctx, random_matrix<double>(5, 8, 604), q, scratch),
                    nlb::ShapeError);
  BOOST_CHECK_THROW(routing.key_features(ctx, random_matrix<double>(5, 8, 604), q, scratch),
                    nlb::ShapeError);
}

BOOST_AUTO_TEST_SUITE_END()
