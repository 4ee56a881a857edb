// Elementwise kernels of the attention components: the ELU+1 feature map of linear attention
// (nlb/kernels/elu_feature.hpp) and softplus (nlb/kernels/softplus.hpp). The SIMD form against
// the scalar reference for every row length up to 4W + 3, and the scalar reference against
// long-double closed forms. Then the rotary frequencies with a checkpoint's rope_scaling
// (nlb/kernels/rotary.hpp) against PyTorch's.
#include <boost/test/unit_test.hpp>

#include "nlb/kernels/elu_feature.hpp"
#include "nlb/kernels/rotary.hpp"
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

// PyTorch's float64 inv_freq (tools/python/nlb_reference/llama.py rope_inv_freq, the formula of
// Hugging Face's _compute_llama3_parameters) for Llama 3.2's rope: head_dim 64, rope_theta
// 500000, {"rope_type": "llama3", "factor": 32, "low_freq_factor": 1, "high_freq_factor": 4,
// "original_max_position_embeddings": 8192} — kept, mixed and divided bands all present.
BOOST_AUTO_TEST_CASE(rope_frequencies_with_llama3_and_linear_scaling_match_pytorch) {
  const double llama3[] = {1,
                           0.66360123769608848,
                           0.44036660267178046,
                           0.29222782257301511,
                           0.19392274474868576,
                           0.12868737343265052,
                           0.085397100285765609,
                           0.056669621445291044,
                           0.037606030930863933,
                           0.024955408670558694,
                           0.016560440080994446,
                           0.010989528534539826,
                           0.0072926647372171085,
                           0.0048394213457198928,
                           0.0032114459947525913,
                           0.0012905479282092638,
                           0.00042955679655936815,
                           9.7082878026276702e-05,
                           1.9461638184831125e-05,
                           1.2914767187047391e-05,
                           8.5702554898814781e-06,
                           5.6872321504570457e-06,
                           3.7740542941082826e-06,
                           2.5044671007024935e-06,
                           1.6619674677953091e-06,
                           1.102883668639601e-06,
                           7.3187496754404192e-07,
                           4.8567313430101075e-07,
                           3.2229329303788936e-07,
                           2.1387422816109151e-07,
                           1.4192720251899592e-07,
                           9.4183067254349087e-08};
  kernels::RopeScaling scaling;
  scaling.kind = kernels::RopeScaling::Kind::llama3;
  scaling.factor = 32;
  scaling.low_freq_factor = 1;
  scaling.high_freq_factor = 4;
  scaling.original_max_positions = 8192;
  double worst = 0;
  for (Index i = 0; i < 32; ++i) {
    const double expected = llama3[i];
    worst = std::max(
        worst,
        std::abs(kernels::rope_inverse_frequency(i, 64, 500000.0, scaling) - expected) / expected);
  }
  BOOST_TEST_MESSAGE("llama3 rope frequencies vs PyTorch: max relative error " << worst);
  BOOST_TEST(worst <= nlb::test::tol::rope_frequency_rel);

  // {"type": "linear", "factor": 4}, head_dim 16, base 10000.
  const double linear[] = {0.25,
                           0.079056941504209485,
                           0.025000000000000001,
                           0.0079056941504209478,
                           0.0025000000000000001,
                           0.00079056941504209474,
                           0.00025000000000000001,
                           7.9056941504209485e-05};
  kernels::RopeScaling by_four;
  by_four.kind = kernels::RopeScaling::Kind::linear;
  by_four.factor = 4;
  for (Index i = 0; i < 8; ++i) {
    BOOST_TEST(kernels::rope_inverse_frequency(i, 16, 10000.0, by_four) == linear[i],
               boost::test_tools::tolerance(nlb::test::tol::rope_frequency_rel));
  }

  // The angle tables use the same frequencies: position 3's angles are 3 · inv_freq_i.
  const auto angles = kernels::rotary_angles<double>(3, 1, 64, 500000.0, scaling);
  for (Index i = 0; i < 32; ++i) {
    BOOST_TEST(angles.cos[static_cast<std::size_t>(i)] == std::cos(3 * llama3[i]),
               boost::test_tools::tolerance(1e-13));
    BOOST_TEST(angles.sin[static_cast<std::size_t>(i)] == std::sin(3 * llama3[i]),
               boost::test_tools::tolerance(1e-13));
  }
}

BOOST_AUTO_TEST_CASE(rope_scaling_that_cannot_be_used_is_an_argument_error) {
  kernels::RopeScaling s;
  s.kind = kernels::RopeScaling::Kind::linear;
  s.factor = 0;
  BOOST_CHECK_THROW(kernels::check_rope_scaling("test", s), nlb::ArgumentError);
  s.kind = kernels::RopeScaling::Kind::llama3;
  s.factor = 8;
  s.low_freq_factor = 4;
  s.high_freq_factor = 1;  // low >= high
  BOOST_CHECK_EXCEPTION(
      kernels::check_rope_scaling("test", s), nlb::ArgumentError, [](const nlb::ArgumentError& e) {
        return std::string(e.what()).find("llama3 rope scaling") != std::string::npos;
      });
  s.high_freq_factor = 8;
  BOOST_CHECK_NO_THROW(kernels::check_rope_scaling("test", s));
}
