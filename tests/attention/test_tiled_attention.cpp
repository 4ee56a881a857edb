// Causal attention in tiles with a streamed softmax (nlb/ops/detail/tiled_attention.hpp)
// against the definition evaluated directly in long double: every score of a row, its maximum,
// the normalised weights, then P·V. Tile sizes from one row up to larger than the problem,
// queries after a cached prefix (past > 0), feature and value widths that differ, logits that
// grow along the keys (so a row's maximum moves in every tile and the rescaling is exercised),
// both backends, float and double. Then DenseAttention with more positions than one tile holds,
// against a whole-sequence forward split into decoding steps through the KV cache.
#include <boost/test/unit_test.hpp>

#include <string>

#include "nlb/attention/dense_attention.hpp"
#include "nlb/ops/attention.hpp"
#include "nlb/ops/detail/tiled_attention.hpp"
#include "random_mlp.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::RowMatrix;
using LMatrix = Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic>;
namespace tol = nlb::test::tol;

/// softmax_j≤past+i(scale · q_i · k_j) v, row by row, in long double.
template <class T>
LMatrix reference(const RowMatrix<T>& q, const RowMatrix<T>& k, const RowMatrix<T>& v, T scale,
                  Index past) {
  const LMatrix lq = q.template cast<long double>(), lk = k.template cast<long double>(),
                lv = v.template cast<long double>();
  LMatrix out = LMatrix::Zero(q.rows(), v.cols());
  for (Index i = 0; i < q.rows(); ++i) {
    const Index seen = past + i + 1;
    Eigen::Matrix<long double, Eigen::Dynamic, 1> s =
        static_cast<long double>(scale) * (lk.topRows(seen) * lq.row(i).transpose());
    s = (s.array() - s.maxCoeff()).exp();
    out.row(i) = (s.transpose() * lv.topRows(seen)) / s.sum();
  }
  return out;
}

template <class A>
double relative_to_max(const A& a, const LMatrix& b) {
  return static_cast<double>((a.template cast<long double>() - b).cwiseAbs().maxCoeff() /
                             b.cwiseAbs().maxCoeff());
}

struct Case {
  Index rows, past, width, value_width;
  nlb::ops::detail::AttentionTiles tiles;
  bool growing;  // logits that grow along the keys
};

template <class T, class Backend>
void check_cases(double bound, const std::string& label) {
  const Case cases[] = {
      {1, 0, 4, 3, {64, 256}, false},     // one query, one key
      {1, 40, 8, 5, {64, 16}, true},      // a decoding step over three key tiles
      {7, 0, 6, 6, {2, 3}, false},        // tiles smaller than the problem in both directions
      {33, 5, 9, 4, {4, 8}, true},        // past > 0, ragged last tiles
      {50, 0, 16, 16, {1, 1}, true},      // one score per tile: a rescale at every key
      {64, 0, 64, 64, {64, 256}, false},  // exactly one tile
      {200, 57, 12, 7, {64, 256}, true},  // the default tiles, several query tiles
      {30, 0, 5, 5, {100, 100}, false},   // tiles larger than the problem
  };
  double worst = 0;
  std::string where = "(none)";
  nlb::ops::detail::TiledAttentionScratch<T> scratch;  // reused across shapes and tile sizes
  nlb::GemmScratch<T> gemm;
  const nlb::Context<Backend> ctx;
  std::uint64_t seed = 500;
  for (const Case& c : cases) {
    const Index span = c.past + c.rows;
    RowMatrix<T> q = nlb::test::normal_matrix<T>(c.rows, c.width, 1.0, ++seed);
    RowMatrix<T> k = nlb::test::normal_matrix<T>(span, c.width, 1.0, ++seed);
    const RowMatrix<T> v = nlb::test::normal_matrix<T>(span, c.value_width, 1.0, ++seed);
    if (c.growing) {  // key j's logits with a positive query grow like j / 4
      q = q.cwiseAbs();
      for (Index j = 0; j < span; ++j)
        k.row(j) = k.row(j).cwiseAbs() * static_cast<T>(1.0 + static_cast<double>(j) / 4.0);
    }
    const T scale = T(1) / std::sqrt(static_cast<T>(c.width));
    RowMatrix<T> out(c.rows, c.value_width);
    nlb::ops::detail::tiled_causal_attention<Backend, T>(ctx, q, k, v, scale, c.past, out, scratch,
                                                         gemm, c.tiles);
    const double err = relative_to_max(out, reference(q, k, v, scale, c.past));
    const std::string name =
        label + " T=" + std::to_string(c.rows) + " past=" + std::to_string(c.past) +
        " tiles=" + std::to_string(c.tiles.queries) + "x" + std::to_string(c.tiles.keys);
    BOOST_TEST(err <= bound,
               name << ": error " << err << " relative to max (allowed " << bound << ")");
    if (err > worst) {
      worst = err;
      where = name;
    }
  }
  BOOST_TEST_MESSAGE(label << ": worst error relative to max " << worst << " at " << where);
}

}  // namespace

BOOST_AUTO_TEST_CASE(tiles_match_the_direct_definition) {
  check_cases<double, nlb::backend::scalar>(tol::attention_double_rel, "scalar double");
  check_cases<double, nlb::backend::cpu>(tol::attention_double_rel, "cpu double");
  check_cases<float, nlb::backend::scalar>(tol::attention_float_rel, "scalar float");
  check_cases<float, nlb::backend::cpu>(tol::attention_float_rel, "cpu float");
}

// Grouped-query attention through ops::causal_attention: H query heads over H_kv key/value heads
// (read from k's width), query head h reading key/value head h / (H / H_kv) as Hugging Face's
// repeat_kv expands them, against the long-double definition per head. Multi-query (H_kv = 1),
// grouped (H_kv = 2 of 6) and multi-head (H_kv = H); then the shapes that fit no layout.
BOOST_AUTO_TEST_CASE(grouped_query_heads_read_their_shared_key_value_head) {
  const Index heads = 6, wq = 8, wv = 5, rows = 70, past = 9;
  const nlb::Context<nlb::backend::cpu> ctx;
  nlb::ops::HostScratch<double> scratch;
  std::uint64_t seed = 900;
  for (const Index kv_heads : {Index{1}, Index{2}, Index{6}}) {
    const RowMatrix<double> q = nlb::test::normal_matrix<double>(rows, heads * wq, 1.0, ++seed);
    const RowMatrix<double> k =
        nlb::test::normal_matrix<double>(past + rows, kv_heads * wq, 1.0, ++seed);
    const RowMatrix<double> v =
        nlb::test::normal_matrix<double>(past + rows, kv_heads * wv, 1.0, ++seed);
    RowMatrix<double> out(rows, heads * wv);
    const double scale = 1.0 / std::sqrt(double(wq));
    nlb::ops::causal_attention(ctx, q, k, v, out, heads, scale, past, scratch);
    double worst = 0;
    for (Index h = 0; h < heads; ++h) {
      const Index g = h / (heads / kv_heads);  // the key/value head of query head h
      const RowMatrix<double> qh = q.middleCols(h * wq, wq), kh = k.middleCols(g * wq, wq),
                              vh = v.middleCols(g * wv, wv);
      const RowMatrix<double> oh = out.middleCols(h * wv, wv);
      worst = std::max(worst, relative_to_max(oh, reference(qh, kh, vh, scale, past)));
    }
    BOOST_TEST_MESSAGE("grouped-query attention, " << kv_heads << " of " << heads
                                                   << " heads: error " << worst);
    BOOST_TEST(worst <= tol::attention_double_rel);
  }
  const RowMatrix<double> q = RowMatrix<double>::Ones(3, heads * wq);
  RowMatrix<double> out(3, heads * wv);
  const auto fails = [&](Index k_cols, Index v_cols, const char* needle) {
    const RowMatrix<double> k = RowMatrix<double>::Ones(3, k_cols);
    const RowMatrix<double> v = RowMatrix<double>::Ones(3, v_cols);
    try {
      nlb::ops::causal_attention(ctx, q, k, v, out, heads, 1.0, 0, scratch);
    } catch (const nlb::ShapeError& e) {
      return std::string(e.what()).find(needle) != std::string::npos;
    }
    return false;
  };
  BOOST_TEST(fails(4 * wq, 4 * wv, "key width"));        // 4 key/value heads do not divide 6
  BOOST_TEST(fails(3, 2 * wv, "key width"));             // not a whole number of query-width heads
  BOOST_TEST(fails(2 * wq, 2 * wv + 1, "value width"));  // not 2 heads' values
  BOOST_TEST(fails(2 * wq, 2 * (wv + 1), "output width"));  // 2 heads of 6, out has 5 per head
}

#if defined(_OPENMP)
constexpr bool kBuiltWithOpenMP = true;
#else
constexpr bool kBuiltWithOpenMP = false;
#endif

// Heads split over a context's threads: every head's arithmetic is that of a one-thread context,
// so the outputs are equal bit for bit — a prompt after a cached prefix and single decoding steps
// over a long cache, grouped-query and multi-head, with more threads than a split of 1 head
// each. Skipped in a build without OpenMP (the split does not exist there).
BOOST_AUTO_TEST_CASE(heads_split_over_threads_compute_each_head_as_one_thread_does,
                     *boost::unit_test::enable_if<kBuiltWithOpenMP>()) {
  const Index heads = 6, wq = 16, wv = 16;
  const nlb::Context<nlb::backend::cpu> one(1);
  nlb::ops::HostScratch<float> scratch_one, scratch_many;
  std::uint64_t seed = 1300;
  struct Shape {
    Index rows, past, kv_heads;
  };
  for (const Shape c : {Shape{96, 40, 2}, Shape{1, 3000, 6}, Shape{1, 3000, 3}, Shape{200, 0, 6}}) {
    const RowMatrix<float> q = nlb::test::normal_matrix<float>(c.rows, heads * wq, 1.0, ++seed);
    const RowMatrix<float> k =
        nlb::test::normal_matrix<float>(c.past + c.rows, c.kv_heads * wq, 1.0, ++seed);
    const RowMatrix<float> v =
        nlb::test::normal_matrix<float>(c.past + c.rows, c.kv_heads * wv, 1.0, ++seed);
    const float scale = 0.25f;
    RowMatrix<float> by_one(c.rows, heads * wv);
    nlb::ops::causal_attention(one, q, k, v, by_one, heads, scale, c.past, scratch_one);
    for (const int threads : {2, 4, 8}) {
      const nlb::Context<nlb::backend::cpu> many(threads);
      RowMatrix<float> by_many(c.rows, heads * wv);
      nlb::ops::causal_attention(many, q, k, v, by_many, heads, scale, c.past, scratch_many);
      BOOST_TEST((by_many.array() == by_one.array()).all(),
                 c.rows << " rows after " << c.past << ", " << c.kv_heads << " key/value heads, "
                        << threads << " threads: largest difference "
                        << (by_many - by_one).cwiseAbs().maxCoeff());
    }
    BOOST_TEST(scratch_many.attention_threads.size() == std::size_t{5});  // 6 heads, 8 threads
  }
}

BOOST_AUTO_TEST_CASE(dense_attention_beyond_one_tile_decodes_as_it_runs_whole) {
  // 300 positions: five query tiles and two key tiles of the defaults. The sequence runs once
  // whole, then as a 170-token prompt followed by 130 single-token steps through the cache.
  const Index d = 32, heads = 4, rows = 300;
  using nlb::test::normal_matrix;
  const nlb::DenseAttention<double> attn(
      {normal_matrix<double>(d, 3 * d, 0.3, 71), normal_matrix<double>(1, 3 * d, 0.1, 72),
       normal_matrix<double>(d, d, 0.3, 73), normal_matrix<double>(1, d, 0.1, 74)},
      heads, 8);
  const auto x = normal_matrix<double>(rows, d, 1.0, 75);
  nlb::Activations<double> full(rows, d), stepped(rows, d);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::DenseAttention<double>::Workspace ws;
  attn.forward(ctx, x, full, ws);
  nlb::KVCacheLayer<double> cache(rows, d);
  nlb::Activations<double> part;
  for (Index t0 = 0; t0 < rows;) {
    const Index n = t0 == 0 ? 170 : 1;
    part.resize(n, d);
    attn.forward(ctx, x.middleRows(t0, n), part, ws, &cache);
    stepped.middleRows(t0, n) = part;
    t0 += n;
  }
  const double err = (stepped - full).cwiseAbs().maxCoeff() / full.cwiseAbs().maxCoeff();
  BOOST_TEST_MESSAGE("decoded vs whole, 300 positions: " << err);
  BOOST_TEST(err <= tol::attention_cache_double_rel);
}
