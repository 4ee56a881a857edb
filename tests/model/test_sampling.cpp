// Token sampling (model/sampling.hpp): greedy, top-k support, frequencies against the softmax,
// determinism for a seed, argument checks.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <map>

#include "nlb/model/sampling.hpp"

namespace {
Eigen::RowVectorXf logits_of(std::initializer_list<float> values) {
  Eigen::RowVectorXf v(static_cast<Eigen::Index>(values.size()));
  Eigen::Index i = 0;
  for (float x : values)
    v(i++) = x;
  return v;
}
}  // namespace

BOOST_AUTO_TEST_CASE(greedy_takes_the_argmax_lowest_id_on_ties) {
  nlb::TokenSampler greedy({0, 0.0, 1});
  BOOST_TEST(greedy.next(logits_of({0.1f, 2.0f, -1.0f, 2.0f})) == 1);
  nlb::TokenSampler top1({1, 1.0, 1});
  BOOST_TEST(top1.next(logits_of({3.0f, 2.0f, 5.0f})) == 2);
}

BOOST_AUTO_TEST_CASE(top_k_never_leaves_the_k_largest) {
  nlb::TokenSampler sampler({2, 5.0, 7});  // high temperature: nearly uniform over the top 2
  const auto logits = logits_of({1.0f, 4.0f, 3.9f, 0.5f, 3.8f});
  std::map<int, int> seen;
  for (int i = 0; i < 2000; ++i)
    ++seen[sampler.next(logits)];
  BOOST_TEST(seen.size() == 2u);
  BOOST_TEST(seen.count(1) == 1u);
  BOOST_TEST(seen.count(2) == 1u);
}

BOOST_AUTO_TEST_CASE(frequencies_follow_the_tempered_softmax) {
  const auto logits = logits_of({0.0f, 1.0f, 2.0f});
  const double temperature = 0.7;
  nlb::TokenSampler sampler({0, temperature, 2026});
  const int draws = 40000;
  std::vector<int> counts(3, 0);
  for (int i = 0; i < draws; ++i)
    ++counts[static_cast<std::size_t>(sampler.next(logits))];
  double z = 0;
  for (int k = 0; k < 3; ++k)
    z += std::exp(k / temperature);
  for (int k = 0; k < 3; ++k) {
    const double p = std::exp(k / temperature) / z;
    const double sigma = std::sqrt(draws * p * (1 - p));
    // 5 sigma: a correct sampler fails this with probability < 1e-6 per entry.
    BOOST_TEST(std::abs(counts[static_cast<std::size_t>(k)] - draws * p) <= 5 * sigma);
  }
}

BOOST_AUTO_TEST_CASE(a_seed_fixes_the_sequence) {
  const auto logits = logits_of({0.3f, 0.1f, 0.2f, 0.25f});
  nlb::TokenSampler a({0, 1.0, 42}), b({0, 1.0, 42}), c({0, 1.0, 43});
  std::vector<int> sa, sb, sc;
  for (int i = 0; i < 64; ++i) {
    sa.push_back(a.next(logits));
    sb.push_back(b.next(logits));
    sc.push_back(c.next(logits));
  }
  BOOST_TEST(sa == sb);
  BOOST_TEST(sa != sc);
}

BOOST_AUTO_TEST_CASE(bad_sampling_options_raise_argument_errors) {
  BOOST_CHECK_THROW(nlb::TokenSampler({0, -1.0, 0}), nlb::ArgumentError);
  BOOST_CHECK_THROW(nlb::TokenSampler({0, std::nan(""), 0}), nlb::ArgumentError);
  BOOST_CHECK_THROW(nlb::TokenSampler({-3, 1.0, 0}), nlb::ArgumentError);
}
