// RidgeStats (PAPERS.md §A1, [ours]): streamed, mergeable centered co-moments, checked against
// a two-pass reference in long double, and merge orders against one pass.
#include <boost/test/unit_test.hpp>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "error_message.hpp"
#include "nlb/mlp/ridge_stats.hpp"
#include "test_random.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::RidgeStats;
namespace tol = nlb::test::tol;

// Independent reference: the textbook two-pass formulas (mean first, then sums of products
// of centered values), in long double (64-bit mantissa on x86), from the whole data at once.
struct Reference {
  Index count = 0;
  Eigen::RowVectorXd mean_x, mean_y, syy;
  Eigen::MatrixXd cxx, cxy;
};

Reference two_pass_reference(const Eigen::MatrixXd& X, const Eigen::MatrixXd& Y) {
  using LongMatrix = Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic>;
  const LongMatrix x = X.cast<long double>();
  const LongMatrix y = Y.cast<long double>();
  const Eigen::Matrix<long double, 1, Eigen::Dynamic> mx = x.colwise().mean();
  const Eigen::Matrix<long double, 1, Eigen::Dynamic> my = y.colwise().mean();
  const LongMatrix xc = x.rowwise() - mx;
  const LongMatrix yc = y.rowwise() - my;
  Reference ref;
  ref.count = X.rows();
  ref.mean_x = mx.cast<double>();
  ref.mean_y = my.cast<double>();
  ref.cxx = (xc.transpose() * xc).cast<double>();
  ref.cxy = (xc.transpose() * yc).cast<double>();
  ref.syy = yc.colwise().squaredNorm().cast<double>();
  return ref;
}

// ‖a − b‖_F / ‖b‖_F.
template <class A, class B>
double rel_error(const A& a, const B& b) {
  return (a - b).norm() / b.norm();
}

// Largest relative error over the five statistics; the count must match exactly.
template <class Stats>
double max_rel_error(const Stats& s, const Reference& ref) {
  BOOST_TEST(s.count() == ref.count);
  const double errors[] = {rel_error(s.mean_x(), ref.mean_x), rel_error(s.mean_y(), ref.mean_y),
                           rel_error(s.cxx(), ref.cxx), rel_error(s.cxy(), ref.cxy),
                           rel_error(s.syy(), ref.syy)};
  return *std::max_element(std::begin(errors), std::end(errors));
}

template <class StatsA, class StatsB>
double max_rel_error(const StatsA& a, const StatsB& b) {
  BOOST_TEST(a.count() == b.count());
  const double errors[] = {rel_error(a.mean_x(), b.mean_x()), rel_error(a.mean_y(), b.mean_y()),
                           rel_error(a.cxx(), b.cxx()), rel_error(a.cxy(), b.cxy()),
                           rel_error(a.syy(), b.syy())};
  return *std::max_element(std::begin(errors), std::end(errors));
}

template <class StatsA, class StatsB>
bool bitwise_equal(const StatsA& a, const StatsB& b) {
  return a.count() == b.count() && a.mean_x() == b.mean_x() && a.mean_y() == b.mean_y() &&
         a.cxx() == b.cxx() && a.cxy() == b.cxy() && a.syy() == b.syy();
}

// Correlated data with a nonzero mean: X [n, d_in] = offset + scale * N(0,1),
// Y = X A + noise, so Cxy carries signal.
struct Data {
  Eigen::MatrixXd X, Y;
};

Data make_data(Index n, Index d_in, Index d_out, double offset, double scale, std::uint64_t seed) {
  Data data;
  data.X = (scale * nlb::test::gaussian(n, d_in, seed)).array() + offset;
  const Eigen::MatrixXd a = nlb::test::gaussian(d_in, d_out, seed + 10);
  data.Y = data.X * a + 0.5 * nlb::test::gaussian(n, d_out, seed + 20);
  data.Y.array() += 1.5;
  return data;
}

// Adds rows [begin, end) in batches of `batch` rows.
template <class Stats>
void add_in_batches(Stats& stats, const Data& data, Index begin, Index end, Index batch) {
  for (Index r = begin; r < end; r += batch) {
    const Index b = std::min(batch, end - r);
    stats.add(data.X.middleRows(r, b), data.Y.middleRows(r, b));
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ridge_stats)

// Streamed accumulation (whole-call chunks of 1024 rows, and small batches) equals the two-pass
// reference; Cxx comes out exactly symmetric.
BOOST_AUTO_TEST_CASE(streamed_equals_two_pass_reference) {
  const Data data = make_data(2500, 20, 6, 3.0, 2.0, 11);
  const Reference ref = two_pass_reference(data.X, data.Y);

  RidgeStats<> whole(20, 6);
  whole.add(data.X, data.Y);  // 3 internal chunks: 1024 + 1024 + 452
  const double whole_error = max_rel_error(whole, ref);
  BOOST_TEST_MESSAGE("one add() call: max relative error " << whole_error);
  BOOST_TEST(whole_error <= tol::ridge_merge_rel);

  RidgeStats<> batched(20, 6);
  add_in_batches(batched, data, 0, data.X.rows(), 37);
  const double batched_error = max_rel_error(batched, ref);
  BOOST_TEST_MESSAGE("batches of 37 rows: max relative error " << batched_error);
  BOOST_TEST(batched_error <= tol::ridge_merge_rel);

  BOOST_TEST((whole.cxx() - whole.cxx().transpose()).cwiseAbs().maxCoeff() == 0.0);
  BOOST_TEST((batched.cxx() - batched.cxx().transpose()).cwiseAbs().maxCoeff() == 0.0);
}

// Data whose mean is 1e4 (and 1e6) times its spread: the running co-moments stay centered.
// The uncentered form Σxᵀx − n x̄ᵀx̄ loses ~eps·(mean/spread)² (≈ 2e-8 at 1e4) relative; the
// test checks that the data really defeats it, so the bound has teeth. At 1e6, a plain
// pairwise update without RidgeStats' shift also fails the bound: the rounding of the mean,
// ulp(1e6) ≈ 1e-10, enters δ to first order (see docs/ridge_surrogate.md §3).
BOOST_AUTO_TEST_CASE(large_mean_stays_centered) {
  const double spread = 1.0;
  for (const double mean : {1e4, 1e6}) {
    Data data;
    data.X = (spread * nlb::test::gaussian(3000, 8, 21)).array() + mean;
    data.Y = (spread * nlb::test::gaussian(3000, 3, 22)).array() - mean;
    data.Y += 0.25 * (data.X.array() - mean).matrix().leftCols(3);
    const Reference ref = two_pass_reference(data.X, data.Y);

    RidgeStats<> stats(8, 3);
    add_in_batches(stats, data, 0, 3000, 100);
    const double error = max_rel_error(stats, ref);
    BOOST_TEST_MESSAGE("mean/spread = " << mean << ": max relative error " << error);
    BOOST_TEST(error <= tol::ridge_merge_rel);

    // Shards whose shifts differ (each starts from its own first chunk), merged pairwise.
    std::vector<RidgeStats<>> shards;
    const Index bounds[] = {0, 1, 501, 1525, 3000};
    for (int i = 0; i < 4; ++i) {
      shards.emplace_back(8, 3);
      add_in_batches(shards.back(), data, bounds[i], bounds[i + 1], 1000);
    }
    shards[3].merge(shards[0]);
    shards[1].merge(shards[2]);
    shards[1].merge(shards[3]);
    const double merged_error = max_rel_error(shards[1], ref);
    BOOST_TEST_MESSAGE("mean/spread = " << mean << ", merged shards: max relative error "
                                        << merged_error);
    BOOST_TEST(merged_error <= tol::ridge_merge_rel);

    const Eigen::RowVectorXd naive_mean = data.X.colwise().mean();
    const Eigen::MatrixXd naive_cxx =
        data.X.transpose() * data.X - 3000.0 * naive_mean.transpose() * naive_mean;
    const double naive_error = rel_error(naive_cxx, ref.cxx);
    BOOST_TEST_MESSAGE("uncentered formula: relative error " << naive_error);
    BOOST_TEST(naive_error > tol::ridge_merge_rel);
  }
}

// k shards of uneven sizes (including 1-row shards) merged in random tree orders equal one pass.
BOOST_AUTO_TEST_CASE(random_tree_merge_equals_one_pass) {
  const Index d_in = 12;
  const Index d_out = 5;
  const std::vector<Index> shard_rows = {1, 7, 300, 2, 1100, 45, 1, 1544, 13, 256};
  const Index total = std::accumulate(shard_rows.begin(), shard_rows.end(), Index{0});
  const Data data = make_data(total, d_in, d_out, -4.0, 3.0, 31);

  RidgeStats<> one_pass(d_in, d_out);
  one_pass.add(data.X, data.Y);
  const Reference ref = two_pass_reference(data.X, data.Y);
  BOOST_TEST(max_rel_error(one_pass, ref) <= tol::ridge_merge_rel);

  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    std::vector<RidgeStats<>> parts;
    Index begin = 0;
    for (const Index rows : shard_rows) {
      parts.emplace_back(d_in, d_out);
      add_in_batches(parts.back(), data, begin, begin + rows, 64);
      begin += rows;
    }
    std::mt19937_64 rng(seed);
    while (parts.size() > 1) {
      std::uniform_int_distribution<std::size_t> pick(0, parts.size() - 1);
      const std::size_t into = pick(rng);
      std::size_t from = pick(rng);
      while (from == into)
        from = pick(rng);
      parts[into].merge(parts[from]);
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(from));
    }
    const double error = max_rel_error(parts.front(), one_pass);
    BOOST_TEST_MESSAGE("merge order " << seed << ": max relative error vs one pass " << error);
    BOOST_TEST(error <= tol::ridge_merge_rel);
    BOOST_TEST(parts.front().count() == total);
  }
}

// Merging with empty statistics, either way round, is the identity (bit for bit); merging
// statistics with themselves equals adding the rows twice.
BOOST_AUTO_TEST_CASE(merge_with_empty_and_self) {
  const Data data = make_data(300, 6, 4, 1.0, 1.0, 41);
  RidgeStats<> stats(6, 4);
  stats.add(data.X, data.Y);

  RidgeStats<> with_empty = stats;
  with_empty.merge(RidgeStats<>(6, 4));
  BOOST_TEST(bitwise_equal(with_empty, stats));

  RidgeStats<> into_empty(6, 4);
  into_empty.merge(stats);
  BOOST_TEST(bitwise_equal(into_empty, stats));

  RidgeStats<> twice(6, 4);
  twice.add(data.X, data.Y);
  twice.add(data.X, data.Y);
  RidgeStats<> self = stats;
  self.merge(self);
  BOOST_TEST(self.count() == 600);
  BOOST_TEST(max_rel_error(self, twice) <= tol::ridge_merge_rel);

  RidgeStats<> zero_rows(6, 4);
  zero_rows.add(Eigen::MatrixXd(0, 6), Eigen::MatrixXd(0, 4));
  BOOST_TEST(zero_rows.count() == 0);
  BOOST_TEST(zero_rows.cxx().norm() == 0.0);
}

// float input is converted to double exactly (no float arithmetic), and the storage order
// of the input does not matter.
BOOST_AUTO_TEST_CASE(float_and_storage_order_inputs) {
  const Data data = make_data(700, 9, 3, 2.0, 1.0, 51);
  const Eigen::MatrixXf xf = data.X.cast<float>();
  const Eigen::MatrixXf yf = data.Y.cast<float>();
  RidgeStats<> from_float(9, 3);
  from_float.add(xf, yf);
  RidgeStats<> from_double(9, 3);
  from_double.add(xf.cast<double>(), yf.cast<double>());
  BOOST_TEST(bitwise_equal(from_float, from_double));

  const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> xr = xf;
  const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> yr = yf;
  RidgeStats<> from_row_major(9, 3);
  from_row_major.add(xr, yr);
  BOOST_TEST(bitwise_equal(from_row_major, from_float));
}

// Fixed compile-time sizes and Dynamic give the same statistics.
BOOST_AUTO_TEST_CASE(fixed_and_dynamic_sizes_agree) {
  const Data data = make_data(500, 5, 3, -1.0, 2.0, 61);
  RidgeStats<5, 3> fixed;
  RidgeStats<> dynamic(5, 3);
  add_in_batches(fixed, data, 0, 500, 128);
  add_in_batches(dynamic, data, 0, 500, 128);
  BOOST_TEST(fixed.features() == 5);
  BOOST_TEST(fixed.out_features() == 3);
  BOOST_TEST(max_rel_error(fixed, dynamic) <= tol::ridge_double_rel);
  BOOST_TEST(max_rel_error(fixed, two_pass_reference(data.X, data.Y)) <= tol::ridge_merge_rel);
}

// Bad input: typed exceptions whose messages name what was expected and what was found, and
// statistics left unchanged by a rejected batch.
BOOST_AUTO_TEST_CASE(bad_input) {
  RidgeStats<> stats(4, 2);
  const Eigen::MatrixXd x = nlb::test::gaussian(10, 4, 71);
  const Eigen::MatrixXd y = nlb::test::gaussian(10, 2, 72);
  stats.add(x, y);

  BOOST_CHECK_THROW(stats.add(nlb::test::gaussian(10, 5, 1), y), nlb::ShapeError);
  std::string msg =
      nlb::test::error_message<nlb::Error>([&] { stats.add(nlb::test::gaussian(10, 5, 1), y); });
  BOOST_TEST(msg.find("expected 4, found 5") != std::string::npos, msg);
  BOOST_CHECK_THROW(stats.add(x, nlb::test::gaussian(10, 3, 1)), nlb::ShapeError);
  msg = nlb::test::error_message<nlb::Error>([&] { stats.add(x, nlb::test::gaussian(9, 2, 1)); });
  BOOST_TEST(msg.find("expected 10, found 9") != std::string::npos, msg);

  Eigen::MatrixXd bad_x = x;
  bad_x(3, 2) = std::numeric_limits<double>::quiet_NaN();
  BOOST_CHECK_THROW(stats.add(bad_x, y), nlb::NumericError);
  msg = nlb::test::error_message<nlb::Error>([&] { stats.add(bad_x, y); });
  BOOST_TEST(msg.find("(3, 2)") != std::string::npos, msg);
  BOOST_TEST(msg.find("expected a finite value") != std::string::npos, msg);
  Eigen::MatrixXf bad_y = y.cast<float>();
  bad_y(7, 1) = std::numeric_limits<float>::infinity();
  msg = nlb::test::error_message<nlb::Error>([&] { stats.add(x.cast<float>(), bad_y); });
  BOOST_TEST(msg.find("Y entry (7, 1)") != std::string::npos, msg);
  BOOST_CHECK_THROW(stats.add(x.cast<float>(), bad_y), nlb::NumericError);

  BOOST_TEST(stats.count() == 10);  // the rejected batches left no trace
  RidgeStats<> clean(4, 2);
  clean.add(x, y);
  BOOST_TEST(bitwise_equal(stats, clean));

  BOOST_CHECK_THROW(stats.merge(RidgeStats<>(3, 2)), nlb::ShapeError);
  msg = nlb::test::error_message<nlb::Error>([&] { stats.merge(RidgeStats<>(4, 7)); });
  BOOST_TEST(msg.find("expected 2, found 7") != std::string::npos, msg);

  BOOST_CHECK_THROW(RidgeStats<>(), nlb::ArgumentError);  // Dynamic sizes must be given
  msg = nlb::test::error_message<nlb::Error>([] { RidgeStats<> s(0, 3); });
  BOOST_TEST(msg.find("expected a size >= 1") != std::string::npos, msg);
  BOOST_CHECK_THROW((RidgeStats<5, 3>(6, 3)), nlb::ShapeError);
  msg = nlb::test::error_message<nlb::Error>([] { RidgeStats<5, 3> s(5, 2); });
  BOOST_TEST(msg.find("expected 3, found 2") != std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()
