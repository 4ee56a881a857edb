// A double-precision reference for matrix products and the summation bound the tests hold every
// product to (tolerances.hpp, gemm_bound_factor): shared by the GEMM suites.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "nlb/core/matrix.hpp"
#include "tolerances.hpp"

namespace nlb::test {

// c0 + a·b in double by the textbook loop, and |a|·|b| (the scale of each entry's error).
struct Reference {
  Eigen::MatrixXd value, scale;
};
Reference triple_loop(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b,
                      const Eigen::MatrixXd& c0) {
  Reference r{c0, Eigen::MatrixXd::Zero(a.rows(), b.cols())};
  for (nlb::Index i = 0; i < a.rows(); ++i) {
    for (nlb::Index j = 0; j < b.cols(); ++j) {
      for (nlb::Index p = 0; p < a.cols(); ++p) {
        r.value(i, j) += a(i, p) * b(p, j);
        r.scale(i, j) += std::abs(a(i, p) * b(p, j));
      }
      r.scale(i, j) += std::abs(c0(i, j));
    }
  }
  return r;
}

template <class T, class Got>
void check_within_bound(const Got& got, const Reference& ref, nlb::Index k,
                        const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST_REQUIRE(got.rows() == ref.value.rows());
    BOOST_TEST_REQUIRE(got.cols() == ref.value.cols());
    const double u = std::numeric_limits<T>::epsilon() / 2;
    const double kk = static_cast<double>(k + 2);  // + the rounding of operands and result
    const double gamma = kk * u / (1 - kk * u);
    double worst = 0;
    for (nlb::Index i = 0; i < got.rows(); ++i) {
      for (nlb::Index j = 0; j < got.cols(); ++j) {
        const double err = std::abs(static_cast<double>(got(i, j)) - ref.value(i, j));
        const double bound = nlb::test::tol::gemm_bound_factor * gamma * ref.scale(i, j) +
                             std::numeric_limits<T>::min();
        worst = std::max(worst, err / bound);
      }
    }
    BOOST_TEST_MESSAGE(what << ": largest error / bound = " << worst);
    BOOST_TEST(worst <= 1.0);
  }
}

}  // namespace nlb::test
