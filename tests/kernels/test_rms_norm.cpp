// RMSNorm (nlb/kernels/rms_norm.hpp): the SIMD form against the scalar reference for every row
// length up to 4W + 3, both against the definition in long double, a closed form, aliasing,
// rms_norm_rows over matrices and blocks, ops::rms_norm_rows, and the argument errors.
#include <boost/test/unit_test.hpp>

#include "nlb/kernels/rms_norm.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "kernel_check.hpp"
#include "nlb/ops/rms_norm.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::test::ErrorLog;
namespace backend = nlb::backend;
namespace kernels = nlb::kernels;

/// The definition in long double: x / sqrt(mean(x²) + eps), then times the weight.
template <class T>
std::vector<long double> reference_rms_norm(const std::vector<T>& x, const T* weight, T eps) {
  long double squares = 0;
  for (T v : x)
    squares += static_cast<long double>(v) * v;
  const long double inv_rms = 1.0L / std::sqrt(squares / static_cast<long double>(x.size()) +
                                               static_cast<long double>(eps));
  std::vector<long double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    y[i] = x[i] * inv_rms * (weight != nullptr ? static_cast<long double>(weight[i]) : 1.0L);
  return y;
}

template <class T, class Arch>
void check_simd_and_scalar(const std::string& label) {
  ErrorLog simd_vs_scalar, scalar_vs_reference, simd_vs_reference;
  const Index width = nlb::test::lanes<T, Arch>();
  const auto bound = nlb::test::kernel_bound<T>();
  for (Index n = 1; n <= 4 * width + 3; ++n) {
    for (const auto& c : nlb::test::norm_cases) {
      for (const bool with_weight : {false, true}) {
        const auto x = nlb::test::normal_row<T>(n, c.mean, c.sd, 3000 + n);
        const auto weight = nlb::test::normal_row<T>(n, 1.0, 0.3, 4000 + n);
        const T* w = with_weight ? weight.data() : nullptr;
        const T eps = static_cast<T>(c.eps);
        std::vector<T> scalar(x.size()), simd(x.size());
        kernels::rms_norm(backend::scalar{}, x.data(), scalar.data(), w, n, eps);
        kernels::rms_norm(backend::simd<Arch>{}, x.data(), simd.data(), w, n, eps);
        const auto reference = reference_rms_norm(x, w, eps);
        const std::string where = label + " n=" + std::to_string(n) + " " + c.label +
                                  (with_weight ? " weight" : " no weight");
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

}  // namespace

BOOST_AUTO_TEST_SUITE(rms_norm)

BOOST_AUTO_TEST_CASE(simd_matches_scalar_and_reference_float) {
  check_simd_and_scalar<float, xsimd::default_arch>("rms_norm float");
}

BOOST_AUTO_TEST_CASE(simd_matches_scalar_and_reference_double) {
  check_simd_and_scalar<double, xsimd::default_arch>("rms_norm double");
}

BOOST_AUTO_TEST_CASE(mean_square_and_eps_inside_sqrt) {
  // x = (3, 4): mean square 12.5, so y = x / sqrt(12.5 + eps) (no centering: LayerNorm would
  // give ∓1 / sqrt(0.25 + eps)); eps outside the sqrt would give x / (sqrt(12.5) + eps).
  const double x[] = {3.0, 4.0}, weight[] = {2.0, -0.5};
  const double eps = 0.5;
  double y[2];
  for (int form = 0; form < 2; ++form) {
    if (form == 0)
      kernels::rms_norm(backend::scalar{}, x, y, weight, 2, eps);
    else
      kernels::rms_norm(backend::simd<>{}, x, y, weight, 2, eps);
    BOOST_TEST(y[0] == 3.0 / std::sqrt(13.0) * 2.0, boost::test_tools::tolerance(1e-15));
    BOOST_TEST(y[1] == 4.0 / std::sqrt(13.0) * -0.5, boost::test_tools::tolerance(1e-15));
  }
}

BOOST_AUTO_TEST_CASE(rows_of_matrices_blocks_and_in_place) {
  const Index rows = 7, d = 37;
  nlb::RowMatrix<float> X(rows, d);
  for (Index t = 0; t < rows; ++t) {
    const auto row = nlb::test::normal_row<float>(d, 0.5, 2.0, 50 + t);
    for (Index i = 0; i < d; ++i)
      X(t, i) = row[static_cast<std::size_t>(i)];
  }
  const auto w = nlb::test::normal_row<float>(d, 1.0, 0.2, 60);
  const Eigen::Map<const nlb::RowVector<float>> weight(w.data(), d);
  nlb::RowMatrix<float> Y;
  kernels::rms_norm_rows(backend::simd<>{}, X, Y, weight, 1e-5f);  // a plain Y is resized
  BOOST_TEST(Y.rows() == rows);
  ErrorLog log;
  for (Index t = 0; t < rows; ++t) {
    const std::vector<float> x(X.row(t).data(), X.row(t).data() + d);
    const auto reference = reference_rms_norm(x, w.data(), 1e-5f);
    log.compare_rows(&Y(t, 0), reference.data(), d, nlb::test::kernel_bound<float>(),
                     "row " + std::to_string(t));
  }
  log.report("rms_norm_rows float");
  // A block of rows, through the ops layer, and in place: the same values.
  nlb::RowMatrix<float> Z = X;
  nlb::Context<backend::cpu> ctx;
  nlb::ops::rms_norm_rows(ctx, Z.middleRows(2, 3), weight, Z.middleRows(2, 3), 1e-5f);
  BOOST_TEST((Z.middleRows(2, 3).array() == Y.middleRows(2, 3).array()).all());
  BOOST_TEST((Z.topRows(2).array() == X.topRows(2).array()).all());
}

BOOST_AUTO_TEST_CASE(argument_errors_name_the_entry) {
  const nlb::RowMatrix<double> X = nlb::RowMatrix<double>::Ones(2, 4);
  nlb::RowMatrix<double> Y(2, 4);
  const nlb::RowVector<double> short_weight = nlb::RowVector<double>::Ones(3);
  BOOST_CHECK_EXCEPTION(kernels::rms_norm_rows(backend::scalar{}, X, Y, short_weight, 1e-6),
                        nlb::ShapeError, [](const nlb::ShapeError& e) {
                          return std::string(e.what()).find("rms_norm_rows: weight size") !=
                                 std::string::npos;
                        });
  const nlb::RowVector<double> weight = nlb::RowVector<double>::Ones(4);
  BOOST_CHECK_EXCEPTION(kernels::rms_norm_rows(backend::scalar{}, X, Y, weight, -1.0),
                        nlb::ArgumentError, [](const nlb::ArgumentError& e) {
                          return std::string(e.what()).find("rms_norm: eps") != std::string::npos;
                        });
  BOOST_CHECK_THROW(kernels::rms_norm_rows(backend::scalar{}, X, Y.leftCols(3), weight, 1e-6),
                    nlb::ShapeError);
}

BOOST_AUTO_TEST_SUITE_END()
