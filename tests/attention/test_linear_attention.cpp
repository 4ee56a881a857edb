// Causal ELU+1 linear attention (PAPERS.md §B3): the chunked prefix-sum form against the
// quadratic form (the T x T matrix of φ(q_i)·φ(k_j), masked and row-normalised) in long double,
// per head and for the multi-head layer with rotary positions; typed errors.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "nlb/attention/linear_attention.hpp"
#include "random_mlp.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::RowMatrix;
using LMatrix = Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic>;
namespace tol = nlb::test::tol;

long double phi(long double u) {
  return u > 0 ? u + 1 : std::expm1(u) + 1;  // elu(u) + 1 by its definition
}

// out_i = Σ_{j<=i} A_ij v_j / Σ_{j<=i} A_ij with A_ij = φ(q_i)·φ(k_j).
LMatrix quadratic_reference(const LMatrix& q, const LMatrix& k, const LMatrix& v) {
  const LMatrix fq = q.unaryExpr([](long double u) { return phi(u); });
  const LMatrix fk = k.unaryExpr([](long double u) { return phi(u); });
  LMatrix out = LMatrix::Zero(q.rows(), v.cols());
  for (Index i = 0; i < q.rows(); ++i) {
    long double total = 0;
    for (Index j = 0; j <= i; ++j) {
      const long double a = fq.row(i).dot(fk.row(j));
      total += a;
      out.row(i) += a * v.row(j);
    }
    out.row(i) /= total;
  }
  return out;
}

template <class A, class B>
double normwise(const A& a, const B& b) {
  const LMatrix la = a.template cast<long double>(), lb = b.template cast<long double>();
  return static_cast<double>((la - lb).cwiseAbs().maxCoeff() / lb.cwiseAbs().maxCoeff());
}

template <class T>
void check_head(double bound) {
  std::uint64_t seed = 10;
  double worst = 0;
  for (Index rows : {1, 5, 63, 64, 65, 150}) {
    for (Index dk : {4, 16}) {
      for (Index dv : {3, 16}) {
        const RowMatrix<T> q = nlb::test::normal_matrix<T>(rows, dk, 1.0, seed++);
        const RowMatrix<T> k = nlb::test::normal_matrix<T>(rows, dk, 1.0, seed++);
        const RowMatrix<T> v = nlb::test::normal_matrix<T>(rows, dv, 1.0, seed++);
        RowMatrix<T> out(rows, dv), out_scalar(rows, dv);
        nlb::linear_attention_head<T>(nlb::Context<nlb::backend::cpu>{}, q, k, v, out);
        nlb::linear_attention_head<T>(nlb::Context<nlb::backend::scalar>{}, q, k, v, out_scalar);
        const LMatrix expected =
            quadratic_reference(q.template cast<long double>(), k.template cast<long double>(),
                                v.template cast<long double>());
        const double err = std::max(normwise(out, expected), normwise(out_scalar, expected));
        worst = std::max(worst, err);
        BOOST_TEST(err <= bound, "T=" << rows << " d_k=" << dk << " d_v=" << dv);
      }
    }
  }
  BOOST_TEST_MESSAGE("linear attention head (" << sizeof(T) * 8
                                               << "-bit) vs quadratic form: " << worst);
}

// Rotates pairs (x_i, x_{i+half}) as complex numbers by exp(i·pos·base^(−2i/rot)).
void rotate_complex(long double* head, Index rot, Index pos, double base) {
  const Index half = rot / 2;
  for (Index i = 0; i < half; ++i) {
    const long double theta =
        static_cast<long double>(pos) *
        std::pow(static_cast<long double>(base), -2.0L * static_cast<long double>(i) / rot);
    const auto r = std::complex<long double>(head[i], head[i + half]) * std::polar(1.0L, theta);
    head[i] = r.real();
    head[i + half] = r.imag();
  }
}

LMatrix layer_reference(const nlb::AttentionWeights<double>& w, const RowMatrix<double>& x,
                        Index heads, Index rot) {
  const Index rows = x.rows(), d = x.cols(), dh = d / heads;
  LMatrix qkv = x.cast<long double>() * w.w_qkv.cast<long double>();
  qkv.rowwise() += w.b_qkv.cast<long double>();
  for (Index t = 0; t < rows; ++t) {
    for (Index h = 0; h < heads; ++h) {
      for (Index part : {0, 1}) {
        std::vector<long double> head(static_cast<std::size_t>(dh));
        for (Index j = 0; j < dh; ++j)
          head[static_cast<std::size_t>(j)] = qkv(t, part * d + h * dh + j);
        rotate_complex(head.data(), rot, t, 10000.0);
        for (Index j = 0; j < dh; ++j)
          qkv(t, part * d + h * dh + j) = head[static_cast<std::size_t>(j)];
      }
    }
  }
  LMatrix context(rows, d);
  for (Index h = 0; h < heads; ++h) {
    context.middleCols(h * dh, dh) =
        quadratic_reference(qkv.middleCols(h * dh, dh), qkv.middleCols(d + h * dh, dh),
                            qkv.middleCols(2 * d + h * dh, dh));
  }
  LMatrix y = context * w.w_out.cast<long double>();
  y.rowwise() += w.b_out.cast<long double>();
  return y;
}

nlb::AttentionWeights<double> random_weights(Index d, std::uint64_t seed) {
  return {nlb::test::normal_matrix<double>(d, 3 * d, 0.3, seed),
          nlb::test::normal_matrix<double>(1, 3 * d, 0.1, seed + 1),
          nlb::test::normal_matrix<double>(d, d, 0.3, seed + 2),
          nlb::test::normal_matrix<double>(1, d, 0.1, seed + 3)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(linear_attention)

BOOST_AUTO_TEST_CASE(head_equals_quadratic_form) {
  check_head<double>(tol::attention_double_rel);
  check_head<float>(tol::attention_float_rel);
}

BOOST_AUTO_TEST_CASE(layer_equals_quadratic_form_with_and_without_rotary) {
  const Index d = 16, heads = 2;
  for (Index rot : {0, 4, 8}) {
    const auto w = random_weights(d, 100 + static_cast<std::uint64_t>(rot));
    const RowMatrix<double> x = nlb::test::normal_matrix<double>(70, d, 1.0, 200);
    const nlb::LinearAttention<double> attn(w, heads, rot);
    nlb::Context<nlb::backend::cpu> ctx;
    nlb::LinearAttention<double>::Workspace ws;
    RowMatrix<double> y(70, d);
    attn.forward(ctx, x, y, ws);
    const double err = normwise(y, layer_reference(w, x, heads, rot));
    BOOST_TEST(err <= tol::attention_double_rel, "rotary dims " << rot << ": " << err);
    // Fixed width, same result.
    const nlb::LinearAttention<double, 16> fixed(
        nlb::AttentionWeights<double, 16>{w.w_qkv, w.b_qkv, w.w_out, w.b_out}, heads, rot);
    nlb::LinearAttention<double, 16>::Workspace fws;
    RowMatrix<double> yf(70, d);
    fixed.forward(ctx, x, yf, fws);
    BOOST_TEST(normwise(yf, y) <= tol::attention_double_rel);
  }
}

BOOST_AUTO_TEST_CASE(bad_input_raises_typed_errors) {
  const Index d = 8;
  const auto w = random_weights(d, 300);
  BOOST_CHECK_THROW(nlb::LinearAttention<double>(w, 3), nlb::ShapeError);
  BOOST_CHECK_THROW(nlb::LinearAttention<double>(w, 0), nlb::ShapeError);
  BOOST_CHECK_THROW(nlb::LinearAttention<double>(w, 2, 3), nlb::ArgumentError);
  BOOST_CHECK_THROW(nlb::LinearAttention<double>(w, 2, 6), nlb::ArgumentError);
  auto bad = w;
  bad.b_qkv = nlb::RowVector<double>::Zero(3 * d - 1);
  BOOST_CHECK_THROW(nlb::LinearAttention<double>(bad, 2), nlb::ShapeError);
  // (A fixed-width LinearAttention<double, 16> cannot be given 8-wide weights at all: the
  // AttentionWeights<double, 16> aggregate's inline w_out would be copied from the wrong size.)
  const nlb::LinearAttention<double> attn(w, 2);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::LinearAttention<double>::Workspace ws;
  RowMatrix<double> x = RowMatrix<double>::Ones(4, d), y(4, d), y_bad(3, d);
  nlb::KVCacheLayer<double> cache(8, d);
  BOOST_CHECK_THROW(attn.forward(ctx, x, y, ws, &cache), nlb::ArgumentError);  // no cache support
  BOOST_CHECK_THROW(attn.forward(ctx, RowMatrix<double>::Ones(4, 6), y, ws), nlb::ShapeError);
  BOOST_CHECK_THROW(attn.forward(ctx, x, y_bad, ws), nlb::ShapeError);
  RowMatrix<double> q(4, 3), v(4, 2), out(4, 2), out_bad(4, 3);
  BOOST_CHECK_THROW(nlb::linear_attention_head<double>(ctx, q, RowMatrix<double>(4, 2), v, out),
                    nlb::ShapeError);
  BOOST_CHECK_THROW(nlb::linear_attention_head<double>(ctx, q, q, v, out_bad), nlb::ShapeError);
}

BOOST_AUTO_TEST_SUITE_END()
