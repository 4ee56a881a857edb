// Gate labels from δ (PAPERS.md §A3) and the ROC AUC: hand-worked cases and brute-force references.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "nlb/mlp/gate_labels.hpp"

namespace {

using Labels = std::vector<std::uint8_t>;

template <class Error, class F>
void check_throws_expected(F&& f) {
  bool thrown = false;
  try {
    f();
  } catch (const Error& e) {
    thrown = true;
    BOOST_TEST_MESSAGE("message: " << e.what());
    BOOST_TEST(std::string(e.what()).find("expected") != std::string::npos);
  }
  BOOST_TEST(thrown);
}

// numpy's default percentile, written from its definition on a fully sorted copy (the library
// selects with nth_element instead): s[floor h] .. s[floor h + 1] at h = q (n - 1).
double sorted_percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double h = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const double t = h - static_cast<double>(lo);
  if (t == 0.0)
    return v[lo];
  const double a = v[lo];
  const double b = v[lo + 1];
  return t >= 0.5 ? b - (b - a) * (1.0 - t) : a + (b - a) * t;
}

double sorted_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gate_labels)

// 1 of 5 negative (20% >= 5%): median branch, odd count. Sorted −0.1, 0, 0.2, 0.3, 0.5 → 0.2.
BOOST_AUTO_TEST_CASE(median_branch_odd_count) {
  const std::vector<double> delta{0.3, -0.1, 0.2, 0.0, 0.5};
  const nlb::GateLabels out = nlb::make_gate_labels(delta);
  BOOST_TEST(out.rule == nlb::GateLabelRule::median);
  BOOST_TEST(out.threshold == 0.2);
  BOOST_TEST(out.labels == (Labels{0, 1, 1, 1, 0}), boost::test_tools::per_element());
}

// 1 of 4 negative: median of an even count = mean of the two middle values: (2 + 3) / 2 = 2.5.
BOOST_AUTO_TEST_CASE(median_branch_even_count) {
  const std::vector<double> delta{4.0, -1.0, 3.0, 2.0};
  const nlb::GateLabels out = nlb::make_gate_labels(delta);
  BOOST_TEST(out.rule == nlb::GateLabelRule::median);
  BOOST_TEST(out.threshold == 2.5);
  BOOST_TEST(out.labels == (Labels{0, 1, 0, 1}), boost::test_tools::per_element());
}

// No negatives: 25th percentile. n = 5: h = 0.25·4 = 1 → s[1] = 0.2 exactly (no interpolation).
BOOST_AUTO_TEST_CASE(percentile_branch_odd_count) {
  const std::vector<double> delta{0.5, 0.1, 0.4, 0.2, 0.3};
  const nlb::GateLabels out = nlb::make_gate_labels(delta);
  BOOST_TEST(out.rule == nlb::GateLabelRule::percentile25);
  BOOST_TEST(out.threshold == 0.2);
  BOOST_TEST(out.labels == (Labels{0, 1, 0, 1, 0}), boost::test_tools::per_element());
}

// No negatives, n = 4: h = 0.25·3 = 0.75 between s[0] = 2 and s[1] = 4 → 2 + 0.75·2 = 3.5.
BOOST_AUTO_TEST_CASE(percentile_branch_even_count_interpolates) {
  const std::vector<double> delta{8.0, 2.0, 6.0, 4.0};
  const nlb::GateLabels out = nlb::make_gate_labels(delta);
  BOOST_TEST(out.rule == nlb::GateLabelRule::percentile25);
  BOOST_TEST(out.threshold == 3.5);
  BOOST_TEST(out.labels == (Labels{0, 1, 0, 0}), boost::test_tools::per_element());
}

// Exactly 5% negative (1 of 20) is not "fewer than 5%": median. Values −1, 1..19 shuffled.
// Sorted: −1, 1, 2, …, 19; middle pair s[9] = 9, s[10] = 10 → 9.5 (the 25th percentile would be
// h = 4.75 → 4.75). Labels: −1 and 1..9 → 10 ones.
BOOST_AUTO_TEST_CASE(exactly_five_percent_negative_uses_median) {
  std::vector<double> delta{-1.0};
  for (int v = 1; v <= 19; ++v)
    delta.push_back(v);
  std::mt19937 rng(7);
  std::shuffle(delta.begin(), delta.end(), rng);
  const nlb::GateLabels out = nlb::make_gate_labels(delta);
  BOOST_TEST(out.rule == nlb::GateLabelRule::median);
  BOOST_TEST(out.threshold == 9.5);
  for (std::size_t i = 0; i < delta.size(); ++i) {
    BOOST_TEST(out.labels[i] == (delta[i] <= 9.5 ? 1 : 0));
  }
  BOOST_TEST(std::count(out.labels.begin(), out.labels.end(), 1) == 10);
}

// 1 of 21 negative (4.76% < 5%): 25th percentile. Sorted −1, 1..20; h = 0.25·20 = 5 → s[5] = 5
// (the median would be s[10] = 10). Labels: −1 and 1..5 → 6 ones.
BOOST_AUTO_TEST_CASE(just_under_five_percent_negative_uses_percentile25) {
  std::vector<double> delta{-1.0};
  for (int v = 1; v <= 20; ++v)
    delta.push_back(v);
  std::mt19937 rng(11);
  std::shuffle(delta.begin(), delta.end(), rng);
  const nlb::GateLabels out = nlb::make_gate_labels(delta);
  BOOST_TEST(out.rule == nlb::GateLabelRule::percentile25);
  BOOST_TEST(out.threshold == 5.0);
  BOOST_TEST(std::count(out.labels.begin(), out.labels.end(), 1) == 6);
}

// Zeros and −0.0 are not negative; ties at the threshold are labelled 1 (δ <= threshold).
// δ = {0, −0, 0, 0, 1, 2, 3, 0}: no negatives → 25th percentile; sorted 0,0,0,0,0,1,2,3,
// h = 1.75 between 0 and 0 → 0. Labels: every zero → 1, the rest 0.
BOOST_AUTO_TEST_CASE(zero_is_not_negative_and_ties_are_linear) {
  const std::vector<double> delta{0.0, -0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.0};
  const nlb::GateLabels out = nlb::make_gate_labels(delta);
  BOOST_TEST(out.rule == nlb::GateLabelRule::percentile25);
  BOOST_TEST(out.threshold == 0.0);
  BOOST_TEST(out.labels == (Labels{1, 1, 1, 1, 0, 0, 0, 1}), boost::test_tools::per_element());
}

// One value: the median of one value is itself; 1 negative of 1 is 100% → median branch.
BOOST_AUTO_TEST_CASE(single_value) {
  const std::vector<double> delta{-0.25};
  const nlb::GateLabels out = nlb::make_gate_labels(delta);
  BOOST_TEST(out.rule == nlb::GateLabelRule::median);
  BOOST_TEST(out.threshold == -0.25);
  BOOST_TEST(out.labels == (Labels{1}), boost::test_tools::per_element());
}

// Random skewed δ of many lengths, with and without negatives and with ties: the selection-based
// threshold equals the sort-based definition exactly (same order statistics, same formula).
BOOST_AUTO_TEST_CASE(random_against_sorted_reference) {
  std::mt19937_64 rng(2024);
  std::exponential_distribution<double> skewed(30.0);
  std::uniform_int_distribution<int> coin(0, 99);
  int checked_median = 0;
  int checked_percentile = 0;
  for (std::size_t n = 1; n <= 257; n += 3) {  // every n mod 4: all interpolation cases
    for (int negative_percent : {0, 3, 20}) {
      std::vector<double> delta(n);
      std::size_t negatives = 0;
      for (auto& v : delta) {
        v = std::round(skewed(rng) * 1e3) / 1e3;  // rounding creates ties
        if (coin(rng) < negative_percent)
          v = -v / 4.0;
        if (v < 0.0)
          ++negatives;
      }
      const bool use_percentile = negatives * 20 < n;
      const double expected =
          use_percentile ? sorted_percentile(delta, 0.25) : sorted_median(delta);
      const nlb::GateLabels out = nlb::make_gate_labels(delta);
      BOOST_TEST((out.rule == nlb::GateLabelRule::percentile25) == use_percentile);
      BOOST_TEST(out.threshold == expected);
      for (std::size_t i = 0; i < n; ++i) {
        BOOST_TEST(out.labels[i] == (delta[i] <= expected ? 1 : 0));
      }
      (use_percentile ? checked_percentile : checked_median)++;
    }
  }
  // Both branches must have been exercised, or this test checks less than it says.
  BOOST_TEST(checked_median > 10);
  BOOST_TEST(checked_percentile > 10);
}

BOOST_AUTO_TEST_CASE(bad_input) {
  check_throws_expected<nlb::NumericError>([] { nlb::make_gate_labels(std::vector<double>{}); });
  check_throws_expected<nlb::NumericError>([] {
    nlb::make_gate_labels(std::vector<double>{0.1, std::nan(""), 0.3});
  });
  check_throws_expected<nlb::NumericError>([] {
    nlb::make_gate_labels(std::vector<double>{0.1, std::numeric_limits<double>::infinity()});
  });
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(roc_auc)

BOOST_AUTO_TEST_CASE(hand_computed_cases) {
  // Perfect separation, reversed, all tied.
  BOOST_TEST(nlb::roc_auc(std::vector<double>{1, 2, 3, 4}, Labels{0, 0, 1, 1}) == 1.0);
  BOOST_TEST(nlb::roc_auc(std::vector<double>{1, 2, 3, 4}, Labels{1, 1, 0, 0}) == 0.0);
  BOOST_TEST(nlb::roc_auc(std::vector<double>{5, 5, 5, 5}, Labels{0, 1, 0, 1}) == 0.5);
  // Pairs (pos, neg): 0.35>0.1 win, 0.35<0.4 loss, 0.8>0.1 win, 0.8>0.4 win → 3/4.
  BOOST_TEST(nlb::roc_auc(std::vector<double>{0.1, 0.4, 0.35, 0.8}, Labels{0, 0, 1, 1}) == 0.75);
  // Positives 2, 3; negatives 1, 2: 2 vs 1 win, 2 vs 2 tie (½), 3 vs 1 win, 3 vs 2 win → 3.5/4.
  BOOST_TEST(nlb::roc_auc(std::vector<double>{1, 2, 2, 3}, Labels{0, 1, 0, 1}) == 0.875);
  // One positive among three negatives, above one of them: 1/3.
  BOOST_TEST(nlb::roc_auc(std::vector<double>{0, 2, 3, 1}, Labels{0, 0, 0, 1}) == 1.0 / 3.0);
}

// Random scores with many ties against the O(n²) pair count.
BOOST_AUTO_TEST_CASE(random_against_pair_count) {
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<int> level(0, 12);
  std::bernoulli_distribution positive(0.4);
  for (std::size_t n : {2u, 7u, 50u, 301u}) {
    std::vector<double> scores(n);
    Labels labels(n);
    for (std::size_t i = 0; i < n; ++i) {
      scores[i] = level(rng) * 0.5;
      labels[i] = positive(rng) ? 1 : 0;
    }
    labels[0] = 1;  // both classes present
    labels[1] = 0;
    double wins = 0.0;
    double pairs = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        if (labels[i] != 1 || labels[j] != 0)
          continue;
        pairs += 1.0;
        wins += scores[i] > scores[j] ? 1.0 : (scores[i] == scores[j] ? 0.5 : 0.0);
      }
    }
    BOOST_TEST(nlb::roc_auc(scores, labels) == wins / pairs);
  }
}

BOOST_AUTO_TEST_CASE(bad_input) {
  check_throws_expected<nlb::ShapeError>([] {
    nlb::roc_auc(std::vector<double>{1, 2, 3}, Labels{0, 1});
  });
  check_throws_expected<nlb::ArgumentError>([] {
    nlb::roc_auc(std::vector<double>{1, 2, 3}, Labels{1, 1, 1});
  });
  check_throws_expected<nlb::ArgumentError>([] {
    nlb::roc_auc(std::vector<double>{1, 2}, Labels{0, 2});
  });
  check_throws_expected<nlb::NumericError>([] {
    nlb::roc_auc(std::vector<double>{1, std::nan("")}, Labels{0, 1});
  });
}

BOOST_AUTO_TEST_SUITE_END()
