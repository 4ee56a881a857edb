// log-sum-exp of a row (nlb/kernels/log_sum_exp.hpp): both backends against a long-double
// evaluation of the definition (no maximum subtracted: a different algorithm) for every length
// up to 4W + 3 and at GPT-2's vocabulary size, two closed forms (n equal entries: c + log n;
// entries log k for k = 1..n: log(n (n + 1) / 2)), rows whose plain exponentials would
// overflow float, and the argument check.
#include <boost/test/unit_test.hpp>

#include "nlb/kernels/log_sum_exp.hpp"

#include <cmath>
#include <random>
#include <vector>

#include "kernel_check.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
namespace backend = nlb::backend;
namespace kernels = nlb::kernels;

template <class T>
long double reference_lse(const std::vector<T>& x) {
  long double sum = 0;
  for (T v : x)
    sum += std::exp(static_cast<long double>(v));
  return std::log(sum);
}

// The bound for a log-sum-exp of row type T: the SIMD form adds exponentials in T within
// blocks (relative error of the sum a few T ulp, i.e. an absolute error of that size in the
// log); the scalar one computes in double.
template <class T>
double lse_abs_bound() {
  return std::is_same_v<T, float> ? nlb::test::tol::kernel_float_rel
                                  : nlb::test::tol::kernel_double_rel;
}

template <class T>
void check_against_reference(const std::vector<T>& x, const char* what) {
  const auto n = static_cast<Index>(x.size());
  const long double want = reference_lse(x);
  const double simd = kernels::log_sum_exp(backend::cpu{}, x.data(), n);
  const double scalar = kernels::log_sum_exp(backend::scalar{}, x.data(), n);
  // Both relative to the magnitude of the result plus the bound on the sum's error.
  const double scale = 1.0 + std::fabs(static_cast<double>(want));
  BOOST_TEST_CONTEXT(what << ", n = " << n) {
    BOOST_TEST(std::fabs(simd - static_cast<double>(want)) <= lse_abs_bound<T>() * scale);
    BOOST_TEST(std::fabs(scalar - static_cast<double>(want)) <=
               nlb::test::tol::kernel_double_rel * scale);
  }
}

template <class T>
void every_length_and_a_vocabulary() {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal(0.0, 3.0);
  std::vector<Index> lengths;
  for (Index n = 1; n <= 4 * nlb::test::lanes<T>() + 3; ++n)
    lengths.push_back(n);
  lengths.push_back(50257);  // GPT-2's vocabulary: many blocks plus a tail
  for (const Index n : lengths) {
    std::vector<T> x(static_cast<std::size_t>(n));
    for (auto& v : x)
      v = static_cast<T>(normal(rng));
    check_against_reference(x, "N(0, 9)");
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(both_backends_match_the_definition_float) {
  every_length_and_a_vocabulary<float>();
}

BOOST_AUTO_TEST_CASE(both_backends_match_the_definition_double) {
  every_length_and_a_vocabulary<double>();
}

BOOST_AUTO_TEST_CASE(closed_forms) {
  for (const Index n : {Index{1}, Index{7}, Index{1000}, Index{50257}}) {
    // n equal entries c: c + log n.
    const std::vector<float> equal(static_cast<std::size_t>(n), 2.5f);
    const double want_equal = 2.5 + std::log(static_cast<double>(n));
    // Entries log k, k = 1..n: log(sum k) = log(n (n + 1) / 2).
    std::vector<float> logs(static_cast<std::size_t>(n));
    for (Index k = 1; k <= n; ++k)
      logs[static_cast<std::size_t>(k - 1)] = static_cast<float>(std::log(static_cast<double>(k)));
    const double want_logs = std::log(static_cast<double>(n) * static_cast<double>(n + 1) / 2.0);
    BOOST_TEST_CONTEXT("n = " << n) {
      const double bound = nlb::test::tol::kernel_float_rel * (1.0 + std::fabs(want_logs));
      BOOST_TEST(std::fabs(kernels::log_sum_exp(backend::cpu{}, equal.data(), n) - want_equal) <=
                 nlb::test::tol::kernel_float_rel * (1.0 + want_equal));
      BOOST_TEST(std::fabs(kernels::log_sum_exp(backend::scalar{}, equal.data(), n) - want_equal) <=
                 nlb::test::tol::kernel_double_rel * (1.0 + want_equal));
      // log k is rounded to float: compare with the definition on the rounded entries too.
      BOOST_TEST(std::fabs(kernels::log_sum_exp(backend::cpu{}, logs.data(), n) -
                           static_cast<double>(reference_lse(logs))) <= bound);
      BOOST_TEST(std::fabs(static_cast<double>(reference_lse(logs)) - want_logs) <=
                 1e-6 * (1.0 + want_logs));
    }
  }
}

BOOST_AUTO_TEST_CASE(large_logits_do_not_overflow) {
  // exp(200) overflows float: only the shifted form stays finite.
  std::vector<float> x(333);
  for (std::size_t j = 0; j < x.size(); ++j)
    x[j] = 200.0f + static_cast<float>(j % 5);
  const double simd = kernels::log_sum_exp(backend::cpu{}, x.data(), static_cast<Index>(x.size()));
  BOOST_TEST(std::isfinite(simd));
  check_against_reference(x, "offset 200");
}

BOOST_AUTO_TEST_CASE(empty_row_is_an_argument_error) {
  const float x[1] = {0.0f};
  BOOST_CHECK_THROW(kernels::log_sum_exp(backend::cpu{}, x, 0), nlb::ArgumentError);
  BOOST_CHECK_THROW(kernels::log_sum_exp(backend::scalar{}, x, 0), nlb::ArgumentError);
}
