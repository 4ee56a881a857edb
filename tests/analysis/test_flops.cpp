// FLOP accounting (PAPERS.md §A5) against the paper's closed forms.
#include <boost/test/unit_test.hpp>

#include "nlb/analysis/flops.hpp"
#include "tolerances.hpp"

BOOST_AUTO_TEST_CASE(per_token_counts_match_paper_closed_forms) {
  const double d = 1024, h = 4 * d;
  BOOST_TEST(nlb::flops::dense_mlp_per_token(d, h) == 16 * d * d);
  BOOST_TEST(nlb::flops::surrogate_per_token(d, d) == 2 * d * d);
  BOOST_TEST(nlb::flops::gate_per_token(d) == 2 * d);
  for (double f : {0.0, 0.25, 0.4, 1.0}) {
    // §A5: saving = f (16 − 2) d² − 2d.
    BOOST_TEST(nlb::flops::mlp_saving_per_token(d, h, f) == f * 14 * d * d - 2 * d,
               boost::test_tools::tolerance(nlb::test::tol::flops_rel));
  }
  // ≈ 7f/8 of the MLP: exactly 7f/8 − 2d / 16d² = 7f/8 − 1/(8d).
  const double share = nlb::flops::mlp_saving_per_token(d, h, 0.5) / (16 * d * d);
  BOOST_TEST(share == 7.0 * 0.5 / 8.0 - 1.0 / (8 * d),
             boost::test_tools::tolerance(nlb::test::tol::flops_rel));
}

BOOST_AUTO_TEST_CASE(predicted_speedup) {
  BOOST_TEST(nlb::flops::predicted_mlp_speedup(0.0) == 1.0);
  BOOST_TEST(nlb::flops::predicted_mlp_speedup(1.0) == 8.0);
  BOOST_TEST(nlb::flops::predicted_mlp_speedup(0.5) == 16.0 / 9.0);
}

BOOST_AUTO_TEST_CASE(whole_forward_accounting) {
  // GPT-2 Medium: d 1024, 24 layers, vocab 50257, mean context 256 of a 512 window.
  const nlb::flops::TransformerShape s{1024, 4096, 24, 256, 50257};
  const double layer = 8 * 1024.0 * 1024 + 4 * 256.0 * 1024 + 16 * 1024.0 * 1024;
  BOOST_TEST(nlb::flops::forward_per_token(s) == 24 * layer + 2 * 1024.0 * 50257);
  // With 40% of tokens linear in every layer (PAPERS.md §A6 average ≈ 40%), the saving is
  // about a fifth of the forward pass, the order of the paper's ≈ 21%.
  const double saved = nlb::flops::forward_saving_fraction(s, 0.4);
  BOOST_TEST_MESSAGE("GPT-2 Medium forward saving at f = 0.4: " << saved);
  BOOST_TEST(saved > 0.18);
  BOOST_TEST(saved < 0.24);
}
