// core/: dims.hpp, matrix.hpp storage rules, backend.hpp tags and fallback, errors.hpp and
// checks.hpp messages, aligned_buffer.hpp alignment, math_policy.hpp tags.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <limits>
#include <string>

#include "nlb/core.hpp"

namespace {

// A kernel with only a scalar overload, and one with both: which one a backend reaches.
int only_scalar(nlb::backend::scalar) {
  return 1;
}
int both(nlb::backend::scalar) {
  return 1;
}
template <class Arch>
int both(nlb::backend::simd<Arch>) {
  return 2;
}

bool message_has(const std::exception& e, const std::string& a, const std::string& b) {
  const std::string m = e.what();
  return m.find(a) != std::string::npos && m.find(b) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(dims_follow_eigen_convention) {
  static_assert(nlb::Dynamic == Eigen::Dynamic);
  static_assert(nlb::is_fixed_size<768> && !nlb::is_fixed_size<nlb::Dynamic>);
  static_assert(nlb::size_product<4, 768> == 3072);
  static_assert(nlb::size_product<4, nlb::Dynamic> == nlb::Dynamic);
  BOOST_TEST(nlb::size_or<768>(5) == 768);
  BOOST_TEST(nlb::size_or<nlb::Dynamic>(5) == 5);
}

BOOST_AUTO_TEST_CASE(matrix_storage_is_inline_only_when_small) {
  // Activations are row-major [T, d]; a single column falls back to column-major (Eigen rule).
  static_assert(nlb::Activations<float, 768>::IsRowMajor);
  static_assert(nlb::Activations<float, 768>::ColsAtCompileTime == 768);
  static_assert(!nlb::Activations<float, 1>::IsRowMajor);
  // 8 x 6 floats (192 B) stay fixed-size; a 768 x 3072 weight matrix is heap-stored.
  static_assert(nlb::RowMatrix<float, 8, 6>::RowsAtCompileTime == 8);
  static_assert(nlb::RowMatrix<float, 768, 3072>::RowsAtCompileTime == nlb::Dynamic);
  static_assert(nlb::RowVector<float, 3072>::RowsAtCompileTime == 1);
  static_assert(nlb::ColVector<double, 1024>::RowsAtCompileTime == 1024);  // 8 KiB: inline
  static_assert(nlb::ColVector<double, 4096>::RowsAtCompileTime == nlb::Dynamic);
  const auto w = nlb::RowMatrix<float, 768, 3072>::Zero(768, 3072);
  BOOST_TEST(w.rows() == 768);
  BOOST_TEST(w.cols() == 3072);
}

BOOST_AUTO_TEST_CASE(simd_backend_falls_back_to_scalar_kernels) {
  static_assert(std::is_base_of_v<nlb::backend::scalar, nlb::backend::cpu>);
  static_assert(nlb::backend::is_simd<nlb::backend::cpu>);
  static_assert(!nlb::backend::is_simd<nlb::backend::scalar>);
  static_assert(nlb::backend::is_host<nlb::backend::cpu>);
  BOOST_TEST(only_scalar(nlb::backend::cpu{}) == 1);
  BOOST_TEST(both(nlb::backend::cpu{}) == 2);
  BOOST_TEST(both(nlb::backend::scalar{}) == 1);
  // math policies are distinct tag types.
  static_assert(!std::is_same_v<nlb::math::exact, nlb::math::fast>);
}

BOOST_AUTO_TEST_CASE(errors_are_typed_and_name_expected_and_found) {
  BOOST_CHECK_EXCEPTION(nlb::check_dim("Thing: width", 768, 767), nlb::ShapeError,
                        [](const nlb::ShapeError& e) {
                          return message_has(e, "Thing: width", "expected 768, found 767");
                        });
  BOOST_CHECK_NO_THROW(nlb::check_dim("Thing: width", 3, 3));
  static_assert(std::is_base_of_v<nlb::Error, nlb::FormatError>);
  static_assert(std::is_base_of_v<nlb::Error, nlb::NumericError>);
  static_assert(std::is_base_of_v<nlb::Error, nlb::ArgumentError>);
  static_assert(std::is_base_of_v<std::runtime_error, nlb::Error>);
}

BOOST_AUTO_TEST_CASE(check_finite_names_the_entry) {
  Eigen::MatrixXf m = Eigen::MatrixXf::Zero(3, 4);
  BOOST_CHECK_NO_THROW(nlb::check_finite("X", m));
  m(2, 1) = std::numeric_limits<float>::quiet_NaN();
  BOOST_CHECK_EXCEPTION(nlb::check_finite("X", m), nlb::NumericError,
                        [](const nlb::NumericError& e) {
                          return message_has(e, "X entry (2, 1)", "expected a finite value");
                        });
  m(2, 1) = -std::numeric_limits<float>::infinity();
  BOOST_CHECK_THROW(nlb::check_finite("X", m), nlb::NumericError);
}

BOOST_AUTO_TEST_CASE(aligned_buffer_is_cache_line_aligned) {
  for (std::size_t n : {1u, 3u, 17u, 1000u}) {
    nlb::AlignedBuffer<float> buffer(n, 1.0f);
    const auto address = reinterpret_cast<std::uintptr_t>(buffer.data());
    BOOST_TEST(address % nlb::buffer_alignment == 0u);
    BOOST_TEST(buffer.size() == n);
  }
}
