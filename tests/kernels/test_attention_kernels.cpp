// Elementwise kernels of the attention components: the ELU+1 feature map of linear attention
// (nlb/kernels/elu_feature.hpp) and softplus (nlb/kernels/softplus.hpp). The SIMD form against
// the scalar reference for every row length up to 4W + 3, and the scalar reference against
// long-double closed forms.
#include <boost/test/unit_test.hpp>

#include "nlb/kernels/elu_feature.hpp"
#include "nlb/kernels/softplus.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "kernel_check.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::test::ErrorLog;
namespace backend = nlb::backend;
namespace kernels = nlb::kernels;

enum class Kernel { elu_feature, softplus };

const char* name(Kernel k) {
  return k == Kernel::elu_feature ? "elu_feature" : "softplus";
}

template <class T, class Backend>
void apply(Kernel k, Backend b, T* data, Index n) {
  if (k == Kernel::elu_feature)
    kernels::elu_feature(b, data, n);
  else
    kernels::softplus(b, data, n);
}

// Independent closed forms in long double: φ(x) = elu(x) + 1 by its definition
// (alpha (e^x − 1) + 1 for x <= 0), softplus as log(1 + e^x) for x < 0 (no overflow there)
// and x + log(1 + e^−x) otherwise.
long double reference(Kernel k, long double x) {
  if (k == Kernel::elu_feature)
    return x > 0 ? x + 1 : std::expm1(x) + 1;
  return x < 0 ? std::log1p(std::exp(x)) : x + std::log1p(std::exp(-x));
}

struct Range {
  double lo, hi;
  const char* label;
};
// Around the knee, wide (exp underflows / softplus ≈ x), tiny values and the negative side.
const Range ranges[] = {{-3, 3, "[-3, 3]"},
                        {-60, 60, "[-60, 60]"},
                        {-1e-3, 1e-3, "[-1e-3, 1e-3]"},
                        {-30, 0, "[-30, 0]"}};

template <class T, class Arch>
void check_simd_matches_scalar(Kernel k) {
  ErrorLog log;
  const Index width = nlb::test::lanes<T, Arch>();
  for (Index n = 1; n <= 4 * width + 3; ++n) {
    for (const Range& range : ranges) {
      for (std::uint64_t seed : {21u, 22u, 23u}) {
        const auto x = nlb::test::uniform_row<T>(n, range.lo, range.hi, seed * 1000 + n);
        auto scalar = x;
        auto simd = x;
        apply(k, backend::scalar{}, scalar.data(), n);
        apply(k, backend::simd<Arch>{}, simd.data(), n);
        log.compare_rows(simd.data(), scalar.data(), n, nlb::test::kernel_bound<T>(),
                         std::string(name(k)) + " n=" + std::to_string(n) + " " + range.label);
      }
    }
  }
  log.report(std::string(name(k)) + " simd vs scalar (W=" + std::to_string(width) + ")");
}

const double points[] = {-700,  -80,  -30, -10, -3, -1, -0.5, -1e-3, -1e-20, 0,
                         1e-20, 1e-3, 0.5, 1,   3,  10, 30,   80,    700};

template <class T, class Backend>
void check_closed_form(Kernel k, Backend b, const std::string& label) {
  ErrorLog log;
  std::vector<T> x;
  for (double p : points) {
    if (std::fabs(p) < 80 || sizeof(T) == 8)  // float: e^±80 is out of range
      x.push_back(static_cast<T>(p));
  }
  auto y = x;
  apply(k, b, y.data(), static_cast<Index>(y.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    BOOST_TEST(log.compare(y[i], reference(k, static_cast<long double>(x[i])),
                           nlb::test::kernel_bound<T>(),
                           std::string(name(k)) + "(" + std::to_string(x[i]) + ")"));
  }
  log.report(label + " " + name(k));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(attention_kernels)

BOOST_AUTO_TEST_CASE(simd_matches_scalar) {
  for (Kernel k : {Kernel::elu_feature, Kernel::softplus}) {
    check_simd_matches_scalar<float, xsimd::default_arch>(k);
    check_simd_matches_scalar<double, xsimd::default_arch>(k);
  }
}

BOOST_AUTO_TEST_CASE(scalar_and_simd_match_closed_forms) {
  for (Kernel k : {Kernel::elu_feature, Kernel::softplus}) {
    check_closed_form<float>(k, backend::scalar{}, "scalar float");
    check_closed_form<double>(k, backend::scalar{}, "scalar double");
    check_closed_form<float>(k, backend::cpu{}, "simd float");
    check_closed_form<double>(k, backend::cpu{}, "simd double");
  }
}

BOOST_AUTO_TEST_CASE(values_are_positive_and_finite) {
  // φ > 0 (the linear-attention normaliser) and softplus >= 0 with no overflow at large x.
  std::vector<double> x = {-745.0, -100.0, -1.0, 0.0, 1.0, 100.0, 1e300};
  auto phi = x, sp = x;
  kernels::elu_feature(backend::cpu{}, phi.data(), static_cast<Index>(phi.size()));
  kernels::softplus(backend::cpu{}, sp.data(), static_cast<Index>(sp.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    BOOST_TEST(std::isfinite(sp[i]));
    BOOST_TEST(sp[i] >= 0.0);
    if (x[i] > -700)
      BOOST_TEST(phi[i] > 0.0);
  }
  BOOST_TEST(sp.back() == 1e300);  // softplus(x) = x once e^−x is below half an ulp of x
}

BOOST_AUTO_TEST_CASE(negative_length_is_an_argument_error) {
  double v = 0;
  BOOST_CHECK_THROW(kernels::elu_feature(backend::scalar{}, &v, -1), nlb::ArgumentError);
  BOOST_CHECK_THROW(kernels::softplus(backend::cpu{}, &v, -1), nlb::ArgumentError);
}

BOOST_AUTO_TEST_SUITE_END()
