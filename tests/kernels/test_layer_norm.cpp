// Layer norm (nlb/kernels/layer_norm.hpp): the SIMD form against the scalar reference for
// every row length up to 4W + 3, both against a two-pass long-double reference, the
// normalized moments, aliasing, and layer_norm_rows over Eigen matrices and expressions.
#include <boost/test/unit_test.hpp>

#include "nlb/kernels/layer_norm.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernel_check.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::test::ErrorLog;
namespace backend = nlb::backend;
namespace kernels = nlb::kernels;

/// Two-pass layer norm in long double: the definition, with PyTorch's conventions.
template <class T>
std::vector<long double> reference_layer_norm(const std::vector<T>& x, const T* gamma,
                                              const T* beta, T eps) {
  const std::size_t n = x.size();
  long double mean = 0;
  for (T v : x)
    mean += v;
  mean /= static_cast<long double>(n);
  long double var = 0;
  for (T v : x)
    var += (v - mean) * (v - mean);
  var /= static_cast<long double>(n);  // biased (population) variance
  const long double inv_std = 1.0L / std::sqrt(var + static_cast<long double>(eps));
  std::vector<long double> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = (x[i] - mean) * inv_std;
    if (gamma != nullptr)
      y[i] *= gamma[i];
    if (beta != nullptr)
      y[i] += beta[i];
  }
  return y;
}

/// Which affine parameters a seed uses: none, gamma only, both.
enum class Affine { none, gamma, both };
const Affine affines[] = {Affine::none, Affine::gamma, Affine::both};

const char* name(Affine a) {
  return a == Affine::none ? "no affine" : (a == Affine::gamma ? "gamma" : "gamma+beta");
}

template <class T, class Arch>
void check_simd_and_scalar(const std::string& label) {
  ErrorLog simd_vs_scalar;
  ErrorLog scalar_vs_reference;
  ErrorLog simd_vs_reference;
  const Index width = nlb::test::lanes<T, Arch>();
  const auto bound = nlb::test::kernel_bound<T>();
  for (Index n = 1; n <= 4 * width + 3; ++n) {
    for (const auto& c : nlb::test::norm_cases) {
      std::uint64_t seed = 100;
      for (Affine affine : affines) {
        ++seed;
        const auto x = nlb::test::normal_row<T>(n, c.mean, c.sd, seed * 1000 + n);
        const auto gamma = nlb::test::normal_row<T>(n, 1.0, 0.3, seed * 1000 + n + 500);
        const auto beta = nlb::test::normal_row<T>(n, 0.0, 0.3, seed * 1000 + n + 700);
        const T* g = affine == Affine::none ? nullptr : gamma.data();
        const T* b = affine == Affine::both ? beta.data() : nullptr;
        const T eps = static_cast<T>(c.eps);
        std::vector<T> scalar(x.size());
        std::vector<T> simd(x.size());
        kernels::layer_norm(backend::scalar{}, x.data(), scalar.data(), g, b, n, eps);
        kernels::layer_norm(backend::simd<Arch>{}, x.data(), simd.data(), g, b, n, eps);
        const auto reference = reference_layer_norm(x, g, b, eps);
        const std::string where =
            label + " n=" + std::to_string(n) + " " + c.label + " " + name(affine);
        simd_vs_scalar.compare_rows(simd.data(), scalar.data(), n, bound, where + " simd/scalar");
        scalar_vs_reference.compare_rows(scalar.data(), reference.data(), n, bound,
                                         where + " scalar/reference");
        simd_vs_reference.compare_rows(simd.data(), reference.data(), n, bound,
                                       where + " simd/reference");
      }
    }
  }
  const std::string w = " (W=" + std::to_string(width) + ")";
  simd_vs_scalar.report(label + " simd vs scalar" + w);
  scalar_vs_reference.report(label + " scalar vs long double" + w);
  simd_vs_reference.report(label + " simd vs long double" + w);
}

// Before the affine step the output has mean 0 and variance var / (var + eps) exactly;
// measured in long double on the kernel's output.
template <class T, class Backend>
void check_normalized_moments(Backend backend, const std::string& label) {
  ErrorLog mean_log;
  ErrorLog var_log;
  const auto bound = nlb::test::kernel_bound<T>();
  for (Index n : {2, 3, 7, 16, 31, 64, 67, 768}) {
    for (const auto& c : nlb::test::norm_cases) {
      const auto x = nlb::test::normal_row<T>(n, c.mean, c.sd, 7000 + n);
      const T eps = static_cast<T>(c.eps);
      std::vector<T> y(x.size());
      kernels::layer_norm(backend, x.data(), y.data(), static_cast<const T*>(nullptr),
                          static_cast<const T*>(nullptr), n, eps);
      long double x_mean = 0, y_mean = 0;
      for (Index i = 0; i < n; ++i) {
        x_mean += x[static_cast<std::size_t>(i)];
        y_mean += y[static_cast<std::size_t>(i)];
      }
      x_mean /= static_cast<long double>(n);
      y_mean /= static_cast<long double>(n);
      long double x_var = 0, y_var = 0;
      for (Index i = 0; i < n; ++i) {
        const auto k = static_cast<std::size_t>(i);
        x_var += (x[k] - x_mean) * (x[k] - x_mean);
        y_var += (y[k] - y_mean) * (y[k] - y_mean);
      }
      x_var /= static_cast<long double>(n);
      y_var /= static_cast<long double>(n);
      const long double expected_var = x_var / (x_var + static_cast<long double>(eps));
      const std::string where = label + " n=" + std::to_string(n) + " " + c.label;
      BOOST_TEST(mean_log.compare(y_mean, 0.0L, bound, where + " mean"));
      BOOST_TEST(var_log.compare(y_var, expected_var, bound, where + " variance"));
    }
  }
  mean_log.report(label + " mean of output (expected 0)");
  var_log.report(label + " variance of output (expected var/(var+eps))");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(layer_norm)

BOOST_AUTO_TEST_CASE(simd_matches_scalar_and_reference_float) {
  check_simd_and_scalar<float, xsimd::default_arch>("layer_norm float");
}

BOOST_AUTO_TEST_CASE(simd_matches_scalar_and_reference_double) {
  check_simd_and_scalar<double, xsimd::default_arch>("layer_norm double");
}

#if XSIMD_WITH_AVX2 || XSIMD_WITH_SSE2
BOOST_AUTO_TEST_CASE(simd_matches_scalar_narrower_arch) {
#if XSIMD_WITH_AVX2
  check_simd_and_scalar<float, xsimd::avx2>("layer_norm float avx2");
#endif
#if XSIMD_WITH_SSE2
  check_simd_and_scalar<double, xsimd::sse2>("layer_norm double sse2");
#endif
}
#endif

BOOST_AUTO_TEST_CASE(normalized_moments) {
  check_normalized_moments<float>(backend::scalar{}, "scalar float");
  check_normalized_moments<float>(backend::simd<>{}, "simd float");
  check_normalized_moments<double>(backend::scalar{}, "scalar double");
  check_normalized_moments<double>(backend::simd<>{}, "simd double");
}

BOOST_AUTO_TEST_CASE(biased_variance_and_eps_inside_sqrt) {
  // x = (-1, 1): mean 0, biased variance 1, so y = x / sqrt(1 + eps). (The unbiased
  // variance would be 2; eps outside the sqrt would give x / (1 + eps).)
  const double x[] = {-1.0, 1.0};
  const double eps = 0.25;
  double y[2];
  for (int form = 0; form < 2; ++form) {
    if (form == 0) {
      kernels::layer_norm(backend::scalar{}, x, y, nullptr, nullptr, 2, eps);
    } else {
      kernels::layer_norm(backend::simd<>{}, x, y, nullptr, nullptr, 2, eps);
    }
    BOOST_TEST(y[0] == -1.0 / std::sqrt(1.25), boost::test_tools::tolerance(1e-15));
    BOOST_TEST(y[1] == 1.0 / std::sqrt(1.25), boost::test_tools::tolerance(1e-15));
  }
}

BOOST_AUTO_TEST_CASE(constant_row_gives_beta) {
  // Zero variance: with a value whose multiples are exact in float, the mean is exact,
  // (x - mean) is exactly 0, and y = beta exactly whatever eps > 0 is.
  for (Index n : {1, 5, 16, 40}) {
    const std::vector<float> x(static_cast<std::size_t>(n), 3.25f);
    const auto gamma = nlb::test::normal_row<float>(n, 1, 0.5, 1);
    const auto beta = nlb::test::normal_row<float>(n, 0, 0.5, 2);
    std::vector<float> scalar(x.size()), simd(x.size());
    kernels::layer_norm(backend::scalar{}, x.data(), scalar.data(), gamma.data(), beta.data(), n,
                        1e-5f);
    kernels::layer_norm(backend::simd<>{}, x.data(), simd.data(), gamma.data(), beta.data(), n,
                        1e-5f);
    BOOST_TEST(scalar == beta, boost::test_tools::per_element());
    BOOST_TEST(simd == beta, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(null_affine_equals_ones_and_zeros) {
  const Index n = 45;
  const auto x = nlb::test::normal_row<float>(n, 1, 2, 3);
  const std::vector<float> ones(x.size(), 1.0f), zeros(x.size(), 0.0f);
  std::vector<float> a(x.size()), b(x.size());
  kernels::layer_norm(backend::simd<>{}, x.data(), a.data(), nullptr, nullptr, n, 1e-5f);
  kernels::layer_norm(backend::simd<>{}, x.data(), b.data(), ones.data(), zeros.data(), n, 1e-5f);
  BOOST_TEST(a == b, boost::test_tools::per_element());
}

// The same compiled function for both calls (through a pointer, so not inlined twice with
// different floating-point contraction), hence bitwise equality.
template <class Backend>
void check_in_place(Backend) {
  using Kernel =
      void (*)(Backend, const double*, double*, const double*, const double*, Index, double);
  const Kernel kernel = &kernels::layer_norm<double>;
  for (Index n : {1, 15, 16, 17, 100}) {
    const auto x = nlb::test::normal_row<double>(n, 0.5, 2, 40 + n);
    const auto gamma = nlb::test::normal_row<double>(n, 1, 0.3, 50 + n);
    const auto beta = nlb::test::normal_row<double>(n, 0, 0.3, 60 + n);
    std::vector<double> out(x.size());
    auto in_place = x;
    kernel(Backend{}, x.data(), out.data(), gamma.data(), beta.data(), n, 1e-5);
    kernel(Backend{}, in_place.data(), in_place.data(), gamma.data(), beta.data(), n, 1e-5);
    BOOST_TEST(in_place == out, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(in_place_equals_out_of_place) {
  check_in_place(backend::scalar{});
  check_in_place(backend::simd<>{});
}

BOOST_AUTO_TEST_CASE(argument_checks) {
  const float x[3] = {1, 2, 3};
  float y[3];
  BOOST_CHECK_THROW(kernels::layer_norm(backend::scalar{}, x, y, nullptr, nullptr, 0, 1e-5f),
                    nlb::ArgumentError);
  BOOST_CHECK_THROW(kernels::layer_norm(backend::simd<>{}, x, y, nullptr, nullptr, 0, 1e-5f),
                    nlb::ArgumentError);
  BOOST_CHECK_THROW(kernels::layer_norm(backend::scalar{}, x, y, nullptr, nullptr, 3, -1e-5f),
                    nlb::ArgumentError);
  BOOST_CHECK_THROW(kernels::layer_norm(backend::simd<>{}, x, y, nullptr, nullptr, 3,
                                        std::numeric_limits<float>::quiet_NaN()),
                    nlb::ArgumentError);
  // eps = 0 is allowed (a non-constant row stays finite).
  kernels::layer_norm(backend::simd<>{}, x, y, nullptr, nullptr, 3, 0.0f);
  BOOST_TEST(y[1] == 0.0f);
  BOOST_TEST(y[2] == std::sqrt(1.5f), boost::test_tools::tolerance(1e-6f));
}

// ---- layer_norm_rows -------------------------------------------------------------------

// layer_norm_rows against the row kernel called on each row. The two may be compiled with
// different floating-point contraction (a * b + c fused or not), so they are compared under
// the kernel bound; a wrong row, stride or affine vector would miss it by O(1).
template <class T, class A, class B>
void expect_same_rows(const A& got, const B& expected, const std::string& what) {
  BOOST_TEST_REQUIRE(got.rows() == expected.rows());
  BOOST_TEST_REQUIRE(got.cols() == expected.cols());
  ErrorLog log;
  for (Index t = 0; t < got.rows(); ++t) {
    log.compare_rows(&got(t, 0), &expected(t, 0), got.cols(), nlb::test::kernel_bound<T>(),
                     what + " row " + std::to_string(t));
  }
}

template <class Backend>
void check_rows_against_row_kernel(Backend backend) {
  const Index rows = 6, d = 37;
  const float eps = 1e-5f;
  nlb::Activations<float> X(rows, d);
  for (Index t = 0; t < rows; ++t) {
    const auto r = nlb::test::normal_row<float>(d, 0.1 * static_cast<double>(t), 1.5, 80 + t);
    for (Index i = 0; i < d; ++i)
      X(t, i) = r[static_cast<std::size_t>(i)];
  }
  nlb::RowVector<float> gamma(d), beta(d);
  const auto g = nlb::test::normal_row<float>(d, 1, 0.3, 90);
  const auto b = nlb::test::normal_row<float>(d, 0, 0.3, 91);
  for (Index i = 0; i < d; ++i) {
    gamma(i) = g[static_cast<std::size_t>(i)];
    beta(i) = b[static_cast<std::size_t>(i)];
  }
  // Expected: the row kernel on each row, with and without the affine step.
  nlb::Activations<float> expected(rows, d), expected_plain(rows, d);
  for (Index t = 0; t < rows; ++t) {
    kernels::layer_norm(backend, &X(t, 0), &expected(t, 0), gamma.data(), beta.data(), d, eps);
    kernels::layer_norm(backend, &X(t, 0), &expected_plain(t, 0), nullptr, nullptr, d, eps);
  }

  nlb::Activations<float> Y;  // resized by the call
  kernels::layer_norm_rows(backend, X, Y, gamma, beta, eps);
  expect_same_rows<float>(Y, expected, "matrix");

  // In place, and gamma/beta as column vectors.
  nlb::Activations<float> Z = X;
  const Eigen::VectorXf gamma_col = gamma.transpose(), beta_col = beta.transpose();
  kernels::layer_norm_rows(backend, Z, Z, gamma_col, beta_col, eps);
  expect_same_rows<float>(Z, expected, "in place");

  // A block of rows in, a block of rows out; the other rows stay untouched.
  nlb::Activations<float> W = nlb::Activations<float>::Constant(rows, d, 7.0f);
  kernels::layer_norm_rows(backend, X.middleRows(2, 3), W.middleRows(1, 3), gamma, beta, eps);
  const nlb::Activations<float> W_block = W.middleRows(1, 3);
  const nlb::Activations<float> expected_block = expected.middleRows(2, 3);
  expect_same_rows<float>(W_block, expected_block, "blocks");
  BOOST_TEST((W.row(0).array() == 7.0f).all());
  BOOST_TEST((W.middleRows(4, 2).array() == 7.0f).all());

  // A Map with padded rows (outer stride > d); the padding stays untouched.
  const Index stride = d + 5;
  std::vector<float> padded(static_cast<std::size_t>(rows * stride), -1.0f);
  Eigen::Map<nlb::Activations<float>, 0, Eigen::OuterStride<>> M(padded.data(), rows, d,
                                                                 Eigen::OuterStride<>(stride));
  M = X;
  kernels::layer_norm_rows(backend, M, M, gamma, beta, eps);
  const nlb::Activations<float> M_copy = M;
  expect_same_rows<float>(M_copy, expected, "padded map");
  for (Index t = 0; t < rows; ++t) {
    for (Index i = d; i < stride; ++i) {
      BOOST_TEST(padded[static_cast<std::size_t>(t * stride + i)] == -1.0f);
    }
  }

  // Without affine parameters.
  nlb::Activations<float> U;
  kernels::layer_norm_rows(backend, X, U, eps);
  expect_same_rows<float>(U, expected_plain, "no affine");
}

BOOST_AUTO_TEST_CASE(rows_match_row_kernel) {
  check_rows_against_row_kernel(backend::scalar{});
  check_rows_against_row_kernel(backend::simd<>{});
}

BOOST_AUTO_TEST_CASE(rows_fixed_width_matches_dynamic) {
  constexpr int d = 24;
  nlb::Activations<double, d> X(5, d);
  nlb::Activations<double> Xd(5, d);
  for (Index t = 0; t < 5; ++t) {
    const auto r = nlb::test::normal_row<double>(d, 0, 1, 120 + t);
    for (Index i = 0; i < d; ++i)
      X(t, i) = Xd(t, i) = r[static_cast<std::size_t>(i)];
  }
  const nlb::RowVector<double, d> gamma = nlb::RowVector<double, d>::Constant(d, 1.5);
  const nlb::RowVector<double> beta = nlb::RowVector<double>::Constant(d, -0.5);
  nlb::Activations<double, d> Y(5, d);
  nlb::Activations<double> Yd;
  kernels::layer_norm_rows(backend::simd<>{}, X, Y, gamma, beta, 1e-5);
  kernels::layer_norm_rows(backend::simd<>{}, Xd, Yd, gamma, beta, 1e-5);
  expect_same_rows<double>(Y, Yd, "fixed vs dynamic width");
}

BOOST_AUTO_TEST_CASE(rows_argument_checks) {
  nlb::Activations<float> X = nlb::Activations<float>::Ones(4, 8);
  nlb::Activations<float> Y(4, 8);
  const nlb::RowVector<float> gamma = nlb::RowVector<float>::Ones(8);
  const nlb::RowVector<float> short_beta = nlb::RowVector<float>::Zero(7);
  BOOST_CHECK_THROW(kernels::layer_norm_rows(backend::simd<>{}, X, Y, gamma, short_beta, 1e-5f),
                    nlb::ShapeError);
  BOOST_CHECK_THROW(kernels::layer_norm_rows(backend::simd<>{}, X, Y.topRows(3), 1e-5f),
                    nlb::ShapeError);
  BOOST_CHECK_THROW(kernels::layer_norm_rows(backend::simd<>{}, X, Y, -1.0f), nlb::ArgumentError);
  nlb::Activations<float> empty(3, 0), empty_out;
  BOOST_CHECK_THROW(kernels::layer_norm_rows(backend::scalar{}, empty, empty_out, 1e-5f),
                    nlb::ArgumentError);
  // Rows that are not contiguous (a column-strided Map) are rejected.
  std::vector<float> buffer(64, 1.0f);
  Eigen::Map<nlb::Activations<float>, 0, Eigen::Stride<16, 2>> strided(buffer.data(), 4, 8);
  BOOST_CHECK_THROW(kernels::layer_norm_rows(backend::simd<>{}, strided, Y, 1e-5f),
                    nlb::ArgumentError);
}

BOOST_AUTO_TEST_SUITE_END()
