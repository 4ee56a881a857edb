// GELU kernels (nlb/kernels/gelu.hpp): the SIMD form against the scalar reference for every
// row length up to 4W + 3, the scalar reference against long-double closed forms, and
// math::fast against math::exact and long double.
#include <boost/test/unit_test.hpp>

#include "nlb/kernels/gelu.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernel_check.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::test::ErrorLog;
using nlb::test::MixedBound;
namespace backend = nlb::backend;
namespace kernels = nlb::kernels;
namespace math = nlb::math;

// ---- independent references: the defining formulas in long double --------------------
// Rewritten without the cancellation of 1 + tanh / 1 + erf for negative x, so they stay
// accurate in the left tail: 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)) and 1 + erf(z) = erfc(-z).
const long double pi_ld = 3.141592653589793238462643383279502884L;

long double gelu_tanh_reference(long double x) {
  const long double u = std::sqrt(2.0L / pi_ld) * (x + 0.044715L * x * x * x);
  return x / (1.0L + std::exp(-2.0L * u));
}

long double gelu_erf_reference(long double x) {
  return 0.5L * x * std::erfc(-x / std::sqrt(2.0L));
}

enum class Form { tanh, erf };

const char* name(Form form) {
  return form == Form::tanh ? "gelu_tanh" : "gelu_erf";
}

/// The kernel bound, with the wider absolute part for xsimd's double erf (tolerances.hpp).
template <class T>
MixedBound bound_for(Form form) {
  MixedBound bound = nlb::test::kernel_bound<T>();
  if (std::is_same_v<T, double> && form == Form::erf) {
    bound.abs = nlb::test::tol::kernel_erf_double_abs;
  }
  return bound;
}

template <class Math, class T, class Backend>
void apply(Form form, Backend backend, T* data, Index n) {
  if (form == Form::tanh) {
    kernels::gelu_tanh<Math>(backend, data, n);
  } else {
    kernels::gelu_erf<Math>(backend, data, n);
  }
}

struct Range {
  double lo, hi;
  const char* label;
};
// Moderate inputs, the saturated tails (large |x|, where tanh/erf round to +-1), tiny
// inputs (GELU ~ x/2) and the negative side where 1 + tanh cancels.
const Range ranges[] = {
    {-3, 3, "[-3, 3]"}, {-20, 20, "[-20, 20]"}, {-1e-3, 1e-3, "[-1e-3, 1e-3]"}, {-8, 0, "[-8, 0]"}};
const std::uint64_t seeds[] = {11, 12, 13};

// SIMD (Arch) against scalar, both with policy Math, for every n in [1, 4W + 3].
template <class T, class Arch, class Math>
void check_simd_matches_scalar(Form form, const std::string& label) {
  ErrorLog log;
  const Index width = nlb::test::lanes<T, Arch>();
  for (Index n = 1; n <= 4 * width + 3; ++n) {
    for (const Range& range : ranges) {
      for (std::uint64_t seed : seeds) {
        const auto x = nlb::test::uniform_row<T>(n, range.lo, range.hi, seed * 1000 + n);
        auto scalar = x;
        auto simd = x;
        apply<Math>(form, backend::scalar{}, scalar.data(), n);
        apply<Math>(form, backend::simd<Arch>{}, simd.data(), n);
        log.compare_rows(simd.data(), scalar.data(), n, bound_for<T>(form),
                         label + " n=" + std::to_string(n) + " " + range.label +
                             " seed=" + std::to_string(seed));
      }
    }
  }
  log.report(label + " (W=" + std::to_string(width) + ")");
}

// Points where the closed form is evaluated: both signs, the knee, the tails, and values
// small enough that x^3 underflows relative to x.
const double closed_form_points[] = {-12,   -6,   -3,  -2,           -1, -0.5, -1e-3, -1e-20, 0,
                                     1e-20, 1e-3, 0.5, 0.7978845608, 1,  2,    3,     6,      12};

template <class T, class Backend>
void check_closed_form(Backend backend, const std::string& label) {
  ErrorLog log;
  for (Form form : {Form::tanh, Form::erf}) {
    std::vector<T> x;
    for (double p : closed_form_points)
      x.push_back(static_cast<T>(p));
    auto y = x;
    apply<math::exact>(form, backend, y.data(), static_cast<Index>(y.size()));
    for (std::size_t i = 0; i < x.size(); ++i) {
      const long double xi = x[i];
      const long double expected =
          form == Form::tanh ? gelu_tanh_reference(xi) : gelu_erf_reference(xi);
      BOOST_TEST(log.compare(y[i], expected, bound_for<T>(form),
                             std::string(name(form)) + "(" + std::to_string(x[i]) + ")"));
    }
  }
  log.report(label);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gelu)

BOOST_AUTO_TEST_CASE(reference_formulas_match_known_values) {
  // Phi(1) = 0.841344746068542948585..., so the exact GELU at +-1 is Phi(1) and Phi(1) - 1;
  // guards the long-double references themselves.
  BOOST_TEST(static_cast<double>(gelu_erf_reference(1.0L)) == 0.8413447460685429,
             boost::test_tools::tolerance(1e-15));
  BOOST_TEST(static_cast<double>(gelu_erf_reference(-1.0L)) == -0.15865525393145705,
             boost::test_tools::tolerance(1e-14));
  const long double c = std::sqrt(2.0L / pi_ld);
  for (long double x = -4; x <= 4; x += 0.25L) {
    // The rewritten tanh reference is the textbook form where that one does not cancel.
    const long double textbook = 0.5L * x * (1 + std::tanh(c * (x + 0.044715L * x * x * x)));
    BOOST_TEST(std::fabs(static_cast<double>(gelu_tanh_reference(x) - textbook)) < 1e-17);
    // The tanh form approximates the erf form to ~1e-3 over the knee.
    BOOST_TEST(std::fabs(static_cast<double>(gelu_tanh_reference(x) - gelu_erf_reference(x))) <
               1e-3);
  }
}

BOOST_AUTO_TEST_CASE(tanh_simd_matches_scalar_float) {
  check_simd_matches_scalar<float, xsimd::default_arch, math::exact>(Form::tanh, "gelu_tanh float");
}
BOOST_AUTO_TEST_CASE(tanh_simd_matches_scalar_double) {
  check_simd_matches_scalar<double, xsimd::default_arch, math::exact>(Form::tanh,
                                                                      "gelu_tanh double");
}
BOOST_AUTO_TEST_CASE(erf_simd_matches_scalar_float) {
  check_simd_matches_scalar<float, xsimd::default_arch, math::exact>(Form::erf, "gelu_erf float");
}
BOOST_AUTO_TEST_CASE(erf_simd_matches_scalar_double) {
  check_simd_matches_scalar<double, xsimd::default_arch, math::exact>(Form::erf, "gelu_erf double");
}
BOOST_AUTO_TEST_CASE(tanh_fast_simd_matches_scalar_fast) {
  check_simd_matches_scalar<float, xsimd::default_arch, math::fast>(Form::tanh,
                                                                    "gelu_tanh<fast> float");
  check_simd_matches_scalar<double, xsimd::default_arch, math::fast>(Form::tanh,
                                                                     "gelu_tanh<fast> double");
}

#if XSIMD_WITH_AVX2 || XSIMD_WITH_SSE2
// Narrower instruction sets than the default one: other widths, other tail lengths.
BOOST_AUTO_TEST_CASE(simd_matches_scalar_narrower_arch) {
#if XSIMD_WITH_AVX2
  check_simd_matches_scalar<float, xsimd::avx2, math::exact>(Form::tanh, "gelu_tanh float avx2");
  check_simd_matches_scalar<double, xsimd::avx2, math::exact>(Form::erf, "gelu_erf double avx2");
#endif
#if XSIMD_WITH_SSE2
  check_simd_matches_scalar<float, xsimd::sse2, math::exact>(Form::erf, "gelu_erf float sse2");
  check_simd_matches_scalar<double, xsimd::sse2, math::fast>(Form::tanh,
                                                             "gelu_tanh<fast> double sse2");
#endif
}
#endif

BOOST_AUTO_TEST_CASE(scalar_matches_closed_form) {
  check_closed_form<float>(backend::scalar{}, "closed form, scalar float");
  check_closed_form<double>(backend::scalar{}, "closed form, scalar double");
}

BOOST_AUTO_TEST_CASE(simd_matches_closed_form) {
  check_closed_form<float>(backend::simd<>{}, "closed form, simd float");
  check_closed_form<double>(backend::simd<>{}, "closed form, simd double");
}

// math::fast on a dense grid of [-20, 20] plus extremes: against math::exact in the same
// type and backend (the bound tol::gelu_fast_* claims), and against long double.
template <class T, class Backend>
void check_fast_against_exact(Backend backend, const std::string& label) {
  std::vector<T> x;
  for (int i = -20000; i <= 20000; ++i)
    x.push_back(static_cast<T>(i * 1e-3));
  for (double v : {-1e4, -100.0, -30.0, -1e-30, 1e-30, 30.0, 100.0, 1e4}) {
    x.push_back(static_cast<T>(v));
  }
  const Index n = static_cast<Index>(x.size());
  auto fast = x;
  auto exact = x;
  kernels::gelu_tanh<math::fast>(backend, fast.data(), n);
  kernels::gelu_tanh<math::exact>(backend, exact.data(), n);
  const MixedBound bound{nlb::test::tol::gelu_fast_abs, nlb::test::tol::gelu_fast_rel};
  ErrorLog vs_exact;
  vs_exact.compare_rows(fast.data(), exact.data(), n, bound, label + " fast vs exact");
  vs_exact.report(label + " fast vs exact");
  std::vector<long double> reference(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    reference[i] = gelu_tanh_reference(x[i]);
  ErrorLog vs_reference;
  vs_reference.compare_rows(fast.data(), reference.data(), n, bound,
                            label + " fast vs long double");
  vs_reference.report(label + " fast vs long double");
  // The documented relative error (docs/kernels.md), where the result is a normal float
  // (below that the clamp of 2^t leaves an absolute error < 1e-36).
  double max_rel = 0;
  double worst_x = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::fabs(reference[i]) < 1e-30L)
      continue;
    const double rel = static_cast<double>(std::fabs((fast[i] - reference[i]) / reference[i]));
    if (rel > max_rel) {
      max_rel = rel;
      worst_x = static_cast<double>(x[i]);
    }
  }
  BOOST_TEST_MESSAGE(label << " fast: max relative error " << max_rel << " at x = " << worst_x
                           << " (|gelu| >= 1e-30)");
  BOOST_TEST(max_rel <= nlb::test::tol::gelu_fast_rel);
}

BOOST_AUTO_TEST_CASE(tanh_fast_within_documented_bound) {
  check_fast_against_exact<float>(backend::scalar{}, "scalar float");
  check_fast_against_exact<float>(backend::simd<>{}, "simd float");
  check_fast_against_exact<double>(backend::scalar{}, "scalar double");
  check_fast_against_exact<double>(backend::simd<>{}, "simd double");
}

BOOST_AUTO_TEST_CASE(tanh_fast_differs_from_exact) {
  // The fast path must really be another evaluation (not a silent alias of exact).
  auto fast = nlb::test::uniform_row<float>(257, -4, 4, 5);
  auto exact = fast;
  kernels::gelu_tanh<math::fast>(backend::simd<>{}, fast.data(), 257);
  kernels::gelu_tanh<math::exact>(backend::simd<>{}, exact.data(), 257);
  BOOST_TEST(fast != exact);
}

BOOST_AUTO_TEST_CASE(erf_fast_is_exact) {
  // Documented: math::fast reuses the exact erf form.
  for (Index n : {1, 17, 100}) {
    const auto x = nlb::test::uniform_row<float>(n, -6, 6, 21);
    auto fast = x;
    auto exact = x;
    kernels::gelu_erf<math::fast>(backend::simd<>{}, fast.data(), n);
    kernels::gelu_erf<math::exact>(backend::simd<>{}, exact.data(), n);
    BOOST_TEST(fast == exact, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(derived_tag_falls_back_to_scalar) {
  // A tag derived from backend::scalar that is not simd<Arch> converts to scalar and gets
  // the reference overload (the same function, so the same bits).
  struct derived_tag : backend::scalar {};
  const auto x = nlb::test::uniform_row<double>(37, -5, 5, 3);
  auto a = x;
  auto b = x;
  kernels::gelu_tanh(derived_tag{}, a.data(), 37);
  kernels::gelu_tanh(backend::scalar{}, b.data(), 37);
  BOOST_TEST(a == b, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(length_checks) {
  std::vector<float> x{1.5f, -2.0f};
  BOOST_CHECK_THROW(kernels::gelu_tanh(backend::scalar{}, x.data(), -1), nlb::ArgumentError);
  BOOST_CHECK_THROW(kernels::gelu_tanh(backend::simd<>{}, x.data(), -1), nlb::ArgumentError);
  BOOST_CHECK_THROW(kernels::gelu_erf(backend::scalar{}, x.data(), -1), nlb::ArgumentError);
  BOOST_CHECK_THROW(kernels::gelu_erf(backend::simd<>{}, x.data(), -1), nlb::ArgumentError);
  // n = 0 touches nothing.
  kernels::gelu_tanh(backend::simd<>{}, x.data(), 0);
  kernels::gelu_erf(backend::simd<>{}, x.data(), 0);
  BOOST_TEST(x[0] == 1.5f);
  BOOST_TEST(x[1] == -2.0f);
}

BOOST_AUTO_TEST_SUITE_END()
