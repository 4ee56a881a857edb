// DenseAttention against a naive per-head, per-pair reference in long double (rotary by
// complex multiplication, an independent formulation of rotate_half); rotary properties.
#include <boost/test/unit_test.hpp>
#include <complex>
#include <vector>

#include "nlb/attention/dense_attention.hpp"
#include "nlb/kernels/rotary.hpp"
#include "random_mlp.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using LMatrix = Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic>;

// Rotates pairs (x_i, x_{i+half}) of the first `rot` dims as the complex number
// x_i + i·x_{i+half} times exp(i·pos·base^(−2i/rot)).
void rotate_complex(long double* head, Index rot, Index pos, double base) {
  const Index half = rot / 2;
  for (Index i = 0; i < half; ++i) {
    const long double theta =
        static_cast<long double>(pos) *
        std::pow(static_cast<long double>(base), -2.0L * static_cast<long double>(i) / rot);
    const std::complex<long double> z(head[i], head[i + half]);
    const auto r = z * std::polar(1.0L, theta);
    head[i] = r.real();
    head[i + half] = r.imag();
  }
}

template <class T>
LMatrix reference_attention(const nlb::AttentionWeights<T>& w, const nlb::RowMatrix<T>& X,
                            Index heads, Index rot, double base) {
  const Index rows = X.rows(), d = X.cols(), dh = d / heads;
  const LMatrix x = X.template cast<long double>();
  LMatrix qkv = x * w.w_qkv.template cast<long double>();
  for (Index t = 0; t < rows; ++t) {
    for (Index j = 0; j < 3 * d; ++j)
      qkv(t, j) += w.b_qkv(j);
  }
  for (Index t = 0; t < rows; ++t) {
    for (Index h = 0; h < heads; ++h) {
      std::vector<long double> q(dh), k(dh);
      for (Index j = 0; j < dh; ++j) {
        q[j] = qkv(t, h * dh + j);
        k[j] = qkv(t, d + h * dh + j);
      }
      rotate_complex(q.data(), rot, t, base);
      rotate_complex(k.data(), rot, t, base);
      for (Index j = 0; j < dh; ++j) {
        qkv(t, h * dh + j) = q[j];
        qkv(t, d + h * dh + j) = k[j];
      }
    }
  }
  LMatrix context = LMatrix::Zero(rows, d);
  for (Index h = 0; h < heads; ++h) {
    for (Index i = 0; i < rows; ++i) {
      std::vector<long double> p(i + 1);
      long double max = -1e300L, sum = 0;
      for (Index j = 0; j <= i; ++j) {
        long double s = 0;
        for (Index c = 0; c < dh; ++c)
          s += qkv(i, h * dh + c) * qkv(j, d + h * dh + c);
        p[j] = s / std::sqrt(static_cast<long double>(dh));
        max = std::max(max, p[j]);
      }
      for (auto& v : p)
        sum += (v = std::exp(v - max));
      for (Index j = 0; j <= i; ++j) {
        for (Index c = 0; c < dh; ++c)
          context(i, h * dh + c) += p[j] / sum * qkv(j, 2 * d + h * dh + c);
      }
    }
  }
  LMatrix y = context * w.w_out.template cast<long double>();
  for (Index t = 0; t < rows; ++t) {
    for (Index j = 0; j < d; ++j)
      y(t, j) += w.b_out(j);
  }
  return y;
}

template <class T>
nlb::AttentionWeights<T> random_weights(Index d, std::uint64_t seed) {
  using nlb::test::normal_matrix;
  return {normal_matrix<T>(d, 3 * d, 0.3, seed), normal_matrix<T>(1, 3 * d, 0.1, seed + 1),
          normal_matrix<T>(d, d, 0.3, seed + 2), normal_matrix<T>(1, d, 0.1, seed + 3)};
}

template <class A, class B>
double relative_to_max(const A& a, const B& b) {
  const Eigen::MatrixXd bd = b.template cast<double>();
  return (a.template cast<double>() - bd).cwiseAbs().maxCoeff() / bd.cwiseAbs().maxCoeff();
}

}  // namespace

BOOST_AUTO_TEST_CASE(dense_attention_matches_naive_reference) {
  struct Case {
    Index d, heads, rot, rows;
  };
  for (const Case c : {Case{8, 2, 0, 5}, Case{12, 3, 2, 9}, Case{16, 2, 8, 17}, Case{16, 4, 4, 1},
                       Case{16, 2, 8, 300}}) {  // 300 rows: several query and key tiles
    const auto w = random_weights<double>(c.d, 100 + static_cast<std::uint64_t>(c.d));
    const nlb::DenseAttention<double> attn(w, c.heads, c.rot, 10000.0);
    const auto X = nlb::test::normal_matrix<double>(c.rows, c.d, 1.0, 7);
    nlb::Activations<double> Y(c.rows, c.d);
    nlb::Context<nlb::backend::cpu> ctx;
    nlb::DenseAttention<double>::Workspace ws;
    attn.forward(ctx, X, Y, ws);
    const double err = relative_to_max(Y, reference_attention(w, X, c.heads, c.rot, 10000.0));
    BOOST_TEST_MESSAGE("attention d=" << c.d << " heads=" << c.heads << " rotary=" << c.rot << ": "
                                      << err);
    BOOST_TEST(err <= nlb::test::tol::model_f64_rel);
  }
}

BOOST_AUTO_TEST_CASE(rotary_preserves_norms_and_depends_on_relative_position) {
  const Index rot = 8;
  const auto q = nlb::test::normal_matrix<double>(1, rot, 1.0, 3);
  const auto k = nlb::test::normal_matrix<double>(1, rot, 1.0, 4);
  auto rotated = [&](const nlb::RowMatrix<double>& v, Index pos) {
    nlb::RowMatrix<double> r = v;
    const auto a = nlb::kernels::rotary_angles<double>(pos, 1, rot, 10000.0);
    nlb::kernels::rotate_half(nlb::backend::scalar{}, r.data(), rot, a.cos.data(), a.sin.data());
    return r;
  };
  for (Index m : {0, 3, 50}) {
    BOOST_TEST(std::abs(rotated(q, m).norm() - q.norm()) <= 1e-14);
    // q(m)·k(n) depends only on m − n: shift both by 17.
    const double a = rotated(q, m).row(0).dot(rotated(k, m + 5).row(0));
    const double b = rotated(q, m + 17).row(0).dot(rotated(k, m + 22).row(0));
    BOOST_TEST(std::abs(a - b) <= 1e-12);
  }
  // Position 0 is the identity.
  BOOST_TEST((rotated(q, 0) - q).cwiseAbs().maxCoeff() == 0.0);
  BOOST_CHECK_THROW(nlb::kernels::rotary_angles<double>(0, 1, 3, 10000.0), nlb::ArgumentError);
}

BOOST_AUTO_TEST_CASE(kv_cache_layer_appends_positions) {
  const auto w = random_weights<double>(8, 9);
  const nlb::DenseAttention<double> attn(w, 2, 2);
  const auto X = nlb::test::normal_matrix<double>(6, 8, 1.0, 1);
  nlb::Activations<double> full(6, 8), part(6, 8);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::DenseAttention<double>::Workspace ws;
  attn.forward(ctx, X, full, ws);
  nlb::KVCacheLayer<double> cache(6, 8);
  attn.forward(ctx, X.topRows(4), part.topRows(4), ws, &cache);
  attn.forward(ctx, X.bottomRows(2), part.bottomRows(2), ws, &cache);
  BOOST_TEST(cache.length == 6);
  BOOST_TEST(relative_to_max(part, full) <= nlb::test::tol::model_f64_rel);
  BOOST_CHECK_THROW(attn.forward(ctx, X.topRows(1), part.topRows(1), ws, &cache),
                    nlb::ArgumentError);
}

BOOST_AUTO_TEST_CASE(bad_attention_shapes_raise_typed_errors) {
  const auto w = random_weights<double>(8, 9);
  BOOST_CHECK_THROW(nlb::DenseAttention<double>(w, 3), nlb::ShapeError);        // 8 % 3 != 0
  BOOST_CHECK_THROW(nlb::DenseAttention<double>(w, 2, 3), nlb::ArgumentError);  // odd rotary
  BOOST_CHECK_THROW(nlb::DenseAttention<double>(w, 2, 6), nlb::ArgumentError);  // > head dim
  auto bad = w;
  bad.b_qkv = nlb::RowVector<double>::Zero(1, 23);
  BOOST_CHECK_THROW(nlb::DenseAttention<double>(bad, 2), nlb::ShapeError);
}
