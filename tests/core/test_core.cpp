// core/: dims.hpp, matrix.hpp storage rules, backend.hpp tags and fallback, errors.hpp and
// checks.hpp messages, aligned_buffer.hpp alignment, math_policy.hpp tags.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

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

BOOST_AUTO_TEST_CASE(gemm_with_scratch_equals_eigens_product_bit_for_bit) {
  // gemm() hands Eigen's own kernel caller-owned packing buffers; the reference is Eigen's
  // `noalias() = lhs * rhs`. Shapes: blocked GEMMs whose packing exceeds Eigen's stack limit
  // (the d = 128 QKV and MLP products), GEMV (one row), tiny (coefficient-based), a transposed
  // operand, blocks as operand and result, and a scratch reused from a larger product.
  const int shapes[][3] = {{128, 128, 384}, {128, 128, 512}, {128, 512, 128}, {1, 128, 384},
                           {3, 4, 5},       {64, 33, 1001},  {300, 200, 100}, {7, 128, 256}};
  nlb::GemmScratch<float> scratch;
  for (const auto& s : shapes) {
    const nlb::Index m = s[0], k = s[1], n = s[2];
    const nlb::RowMatrix<float> a = nlb::RowMatrix<float>::Random(m, k);
    const nlb::RowMatrix<float> b = nlb::RowMatrix<float>::Random(k, n);
    const nlb::RowMatrix<float> bt = b.transpose();
    nlb::RowMatrix<float> want(m, n), want_t(m, n), got(m, n), got_t(m, n);
    want.noalias() = a * b;
    want_t.noalias() = a * bt.transpose();
    nlb::gemm(got, a, b, scratch);
    nlb::gemm(got_t, a, bt.transpose(), scratch);
    BOOST_TEST((got.array() == want.array()).all(), m << " x " << k << " x " << n);
    BOOST_TEST((got_t.array() == want_t.array()).all(), m << " x " << k << " x " << n << "ᵀ");
    nlb::RowMatrix<float> wide = nlb::RowMatrix<float>::Zero(m, n + 3), want_block = wide;
    want_block.middleCols(1, n).noalias() = a.leftCols(k) * b;
    nlb::gemm(wide.middleCols(1, n), a.leftCols(k), b, scratch);
    BOOST_TEST((wide.array() == want_block.array()).all(), "block result " << m << " x " << n);
    Eigen::MatrixXf want_col(m, n), got_col(m, n);  // a column-major result
    want_col.noalias() = a * b;
    nlb::gemm(got_col, a, b, scratch);
    BOOST_TEST((got_col.array() == want_col.array()).all(), "column-major " << m << " x " << n);
  }
  const nlb::RowMatrix<double> a = nlb::RowMatrix<double>::Random(200, 150);
  const nlb::RowMatrix<double> b = nlb::RowMatrix<double>::Random(150, 300);
  nlb::RowMatrix<double> want(200, 300), got(200, 300);
  nlb::GemmScratch<double> scratch_d;
  want.noalias() = a * b;
  nlb::gemm(got, a, b, scratch_d);
  BOOST_TEST((got.array() == want.array()).all());
}

BOOST_AUTO_TEST_CASE(scratch_matrix_views_are_contiguous_and_grow_only) {
  nlb::ScratchMatrix<float> s;
  auto v = s.view(3, 5);
  BOOST_TEST(v.rows() == 3);
  BOOST_TEST(v.cols() == 5);
  BOOST_TEST(v.outerStride() == 5);
  BOOST_TEST(reinterpret_cast<std::uintptr_t>(v.data()) % nlb::buffer_alignment == 0u);
  const float* first = v.data();
  s.view(5, 3);  // the same size: no reallocation
  s.view(1, 7);  // smaller
  BOOST_TEST(s.view(2, 6).data() == first);
  BOOST_TEST(s.capacity() == 15u);
  s.reserve(100);
  BOOST_TEST(s.capacity() == 100u);
  BOOST_TEST(s.view(10, 10).size() == 100);
}

BOOST_AUTO_TEST_CASE(reserve_gemm_covers_every_smaller_row_count) {
  // After reserve_gemm for up to 200 rows, no product of up to 200 rows grows the scratch
  // (row- and column-major results): what lets a decoding step allocate nothing.
  nlb::GemmScratch<float> scratch;
  nlb::reserve_gemm(scratch, 200, 8, 144);
  const std::size_t a = scratch.lhs_block.size(), b = scratch.rhs_block.size();
  const nlb::RowMatrix<float> w = nlb::RowMatrix<float>::Random(144, 8);
  for (nlb::Index m = 1; m <= 200; m += 7) {
    const nlb::RowMatrix<float> x = nlb::RowMatrix<float>::Random(m, 144);
    nlb::RowMatrix<float> row(m, 8);
    Eigen::MatrixXf col(m, 8);
    nlb::gemm(row, x, w, scratch);
    nlb::gemm(col, x, w, scratch);
  }
  BOOST_TEST(scratch.lhs_block.size() == a);
  BOOST_TEST(scratch.rhs_block.size() == b);
}

namespace {
// A function marked for host and device: under a plain C++ compiler the marker expands to nothing
// (nlb/core/host_device.hpp), so this is an ordinary host function.
NLB_HOST_DEVICE constexpr int twice(int x) {
  return 2 * x;
}
}  // namespace

BOOST_AUTO_TEST_CASE(backend_context_storage_and_host_device_marker) {
  static_assert(twice(21) == 42);
  BOOST_TEST(twice(-4) == -8);
  // A CPU context holds at least one thread.
  BOOST_TEST(nlb::Context<nlb::backend::cpu>(4).threads() == 4);
  BOOST_TEST(nlb::Context<nlb::backend::scalar>(0).threads() == 1);
  BOOST_TEST(nlb::Context<nlb::backend::cpu>(-3).threads() == 1);
  // Host backends store row-major Eigen matrices in host memory; CUDA names device memory.
  static_assert(
      std::is_same_v<nlb::backend_matrix<nlb::backend::cpu, float>, nlb::RowMatrix<float>>);
  static_assert(std::is_same_v<nlb::storage_traits<nlb::backend::scalar, double>::memory_space,
                               nlb::backend::host_memory>);
  static_assert(std::is_same_v<nlb::backend::cuda::memory_space, nlb::backend::device_memory>);
  // A view binds a block of a wider matrix without copying.
  nlb::RowMatrix<float> wide = nlb::RowMatrix<float>::Zero(3, 5);
  nlb::storage_traits<nlb::backend::cpu, float>::view block = wide.leftCols(2);
  block(1, 1) = 7.0f;
  BOOST_TEST(wide(1, 1) == 7.0f);
}

// A component of one's own takes its member types from ComponentTypes, as the library's do.
template <class T, int D, class Backend>
struct WidthCheckedScale : nlb::ComponentTypes<T, Backend> {
  using Types = nlb::ComponentTypes<T, Backend>;
  using typename Types::ConstView;
  using typename Types::View;
  // Y = 2 X; X, Y [T, D]. The width is checked because the views bind any width.
  void forward(const ConstView& X, View Y) const {
    nlb::check_dim("WidthCheckedScale: X cols", D, X.cols());
    Y = 2 * X;
  }
};

BOOST_AUTO_TEST_CASE(component_types_name_scalar_backend_and_width_dynamic_views) {
  using Scale = WidthCheckedScale<double, 4, nlb::backend::scalar>;
  static_assert(std::is_same_v<Scale::Scalar, double>);
  static_assert(std::is_same_v<Scale::backend_type, nlb::backend::scalar>);
  static_assert(std::is_same_v<Scale::ConstView,
                               nlb::storage_traits<nlb::backend::scalar, double>::const_view>);
  // A fixed width of 4 still binds width-Dynamic views: a [2, 3] argument reaches the check
  // (a fixed-width Eigen::Ref would bind it without one in release builds).
  static_assert(Scale::ConstView::ColsAtCompileTime == nlb::Dynamic);
  static_assert(Scale::View::ColsAtCompileTime == nlb::Dynamic);
  nlb::RowMatrix<double> x = nlb::RowMatrix<double>::Constant(2, 4, 1.5), y(2, 4);
  Scale{}.forward(x, y);
  BOOST_TEST(y(1, 3) == 3.0);
  nlb::RowMatrix<double> narrow(2, 3), out(2, 3);
  BOOST_CHECK_THROW(Scale{}.forward(narrow, out), nlb::ShapeError);
}
