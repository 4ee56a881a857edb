// DenseAttention against a naive per-head, per-pair reference in long double (rotary by
// complex multiplication, an independent formulation of rotate_half); rotary properties.
#include <boost/test/unit_test.hpp>
#include <complex>
#include <vector>

#include "nlb/attention/dense_attention.hpp"
#include "nlb/attention/linear_attention.hpp"
#include "nlb/kernels/rotary.hpp"
#include "random_mlp.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using LMatrix = Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic>;

// The rotary frequencies base^(−2i/rot), i < rot / 2, in long double; with a checkpoint's
// rope_scaling, kernels::rope_inverse_frequency (checked against PyTorch's in
// tests/kernels/test_attention_kernels.cpp).
std::vector<long double> frequencies(Index rot, double base, const nlb::kernels::RopeScaling& s) {
  std::vector<long double> f(rot / 2);
  for (Index i = 0; i < rot / 2; ++i)
    f[i] = s.kind == nlb::kernels::RopeScaling::Kind::none
               ? std::pow(static_cast<long double>(base), -2.0L * static_cast<long double>(i) / rot)
               : nlb::kernels::rope_inverse_frequency(i, rot, base, s);
  return f;
}

// Rotates pairs (x_i, x_{i+half}) of the first 2·|freq| dims as the complex number
// x_i + i·x_{i+half} times exp(i·pos·freq_i).
void rotate_complex(long double* head, const std::vector<long double>& freq, Index pos) {
  const Index half = static_cast<Index>(freq.size());
  for (Index i = 0; i < half; ++i) {
    const std::complex<long double> z(head[i], head[i + half]);
    const auto r = z * std::polar(1.0L, static_cast<long double>(pos) * freq[i]);
    head[i] = r.real();
    head[i + half] = r.imag();
  }
}

// The layer per head and per pair in long double: H query heads over kv_heads key/value heads
// (query head h reads key/value head h / (H / kv_heads)), w_qkv [d, d + 2·kv_heads·d_h].
template <class T>
LMatrix reference_attention(const nlb::AttentionWeights<T>& w, const nlb::RowMatrix<T>& X,
                            Index heads, Index rot, double base, Index kv_heads = 0,
                            const nlb::kernels::RopeScaling& scaling = {}) {
  kv_heads = kv_heads == 0 ? heads : kv_heads;
  const Index rows = X.rows(), d = X.cols(), dh = d / heads, kv = kv_heads * dh;
  const LMatrix x = X.template cast<long double>();
  LMatrix qkv = x * w.w_qkv.template cast<long double>();
  for (Index t = 0; t < rows; ++t) {
    for (Index j = 0; j < d + 2 * kv; ++j)
      qkv(t, j) += w.b_qkv(j);
  }
  const auto freq = frequencies(rot, base, scaling);
  for (Index t = 0; t < rows; ++t) {
    for (Index head = 0; head < heads + kv_heads; ++head) {  // the query heads, then the keys'
      std::vector<long double> v(dh);
      for (Index j = 0; j < dh; ++j)
        v[j] = qkv(t, head * dh + j);
      rotate_complex(v.data(), freq, t);
      for (Index j = 0; j < dh; ++j)
        qkv(t, head * dh + j) = v[j];
    }
  }
  LMatrix context = LMatrix::Zero(rows, d);
  for (Index h = 0; h < heads; ++h) {
    const Index g = h / (heads / kv_heads);
    for (Index i = 0; i < rows; ++i) {
      std::vector<long double> p(i + 1);
      long double max = -1e300L, sum = 0;
      for (Index j = 0; j <= i; ++j) {
        long double s = 0;
        for (Index c = 0; c < dh; ++c)
          s += qkv(i, h * dh + c) * qkv(j, d + g * dh + c);
        p[j] = s / std::sqrt(static_cast<long double>(dh));
        max = std::max(max, p[j]);
      }
      for (auto& v : p)
        sum += (v = std::exp(v - max));
      for (Index j = 0; j <= i; ++j) {
        for (Index c = 0; c < dh; ++c)
          context(i, h * dh + c) += p[j] / sum * qkv(j, d + kv + g * dh + c);
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

// Grouped-query attention as the Llama family runs it: H query heads over H_kv key/value heads,
// w_qkv [d, d + 2·H_kv·d_h], rotary over the whole head with llama3-scaled frequencies, against a
// per-head, per-pair long-double reference (complex rotation with the scaled frequencies; query
// head h reads key/value head h / (H / H_kv)). Then a cached decode in pieces equals the whole
// forward, with a cache of width H_kv·d_h.
BOOST_AUTO_TEST_CASE(grouped_query_attention_matches_naive_reference_and_decodes) {
  const Index d = 16, heads = 4, head_dim = 4, rows = 23;
  nlb::kernels::RopeScaling scaling;
  scaling.kind = nlb::kernels::RopeScaling::Kind::llama3;
  scaling.factor = 8;
  scaling.original_max_positions = 32;  // head dim 4, base 500: one frequency kept, one divided
  const double base = 500.0;
  for (const Index kv_heads : {Index{1}, Index{2}, Index{4}}) {
    const Index kv = kv_heads * head_dim, width = d + 2 * kv;
    using nlb::test::normal_matrix;
    const nlb::AttentionWeights<double> w{normal_matrix<double>(d, width, 0.3, 40 + kv_heads),
                                          normal_matrix<double>(1, width, 0.1, 50 + kv_heads),
                                          normal_matrix<double>(d, d, 0.3, 60 + kv_heads),
                                          normal_matrix<double>(1, d, 0.1, 70)};
    const nlb::DenseAttention<double> attn(w, heads, head_dim, base, kv_heads, scaling);
    BOOST_TEST(attn.kv_heads() == kv_heads);
    BOOST_TEST(attn.kv_width() == kv);
    const auto X = normal_matrix<double>(rows, d, 1.0, 80);

    const LMatrix expected = reference_attention(w, X, heads, head_dim, base, kv_heads, scaling);

    nlb::Activations<double> Y(rows, d), part(rows, d);
    nlb::Context<nlb::backend::cpu> ctx;
    nlb::DenseAttention<double>::Workspace ws;
    attn.forward(ctx, X, Y, ws);
    const double err = relative_to_max(Y, expected);
    BOOST_TEST_MESSAGE("grouped-query attention, " << kv_heads << " of " << heads
                                                   << " key/value heads: " << err);
    BOOST_TEST(err <= nlb::test::tol::model_f64_rel);

    nlb::KVCacheLayer<double> cache(rows, kv);
    attn.forward(ctx, X.topRows(10), part.topRows(10), ws, &cache);
    for (Index t = 10; t < rows; ++t)
      attn.forward(ctx, X.middleRows(t, 1), part.middleRows(t, 1), ws, &cache);
    BOOST_TEST(cache.length == rows);
    BOOST_TEST(relative_to_max(part, Y) <= nlb::test::tol::model_f64_rel);
    if (kv_heads != heads) {
      nlb::KVCacheLayer<double> wide(rows, d);  // a cache of width d is the wrong one
      BOOST_CHECK_THROW(attn.forward(ctx, X.topRows(1), part.topRows(1), ws, &wide),
                        nlb::ShapeError);
      // Linear attention keeps one key head per query head (PAPERS §B3's conversion).
      BOOST_CHECK_THROW(nlb::LinearAttention<double>(w, heads, head_dim, base, kv_heads),
                        nlb::ArgumentError);
    }
  }
  // Key/value heads that do not divide the query heads, and weights of the wrong width.
  const auto w = random_weights<double>(d, 90);  // [d, 3d]: four key/value heads
  BOOST_CHECK_THROW(nlb::DenseAttention<double>(w, heads, 0, 1e4, 3), nlb::ShapeError);
  BOOST_CHECK_THROW(nlb::DenseAttention<double>(w, heads, 0, 1e4, 2), nlb::ShapeError);
  BOOST_CHECK_NO_THROW(nlb::DenseAttention<double>(w, heads, 0, 1e4, 4));
  scaling.factor = -1;
  BOOST_CHECK_THROW(nlb::DenseAttention<double>(w, heads, 4, 1e4, 4, scaling), nlb::ArgumentError);
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
