// 8-bit weights in blocks (nlb/core/q8_matrix.hpp, nlb/kernels/q8_weights.hpp,
// nlb/ops/narrow_gemm.hpp, storage::q8 of nlb/core/weight_storage.hpp):
// - quantization against the closed form: per block, scale = max |value| / 127 computed here in
//   double, every value within half a step (scale / 2) of its original, exact where the values
//   are whole multiples of the step; non-finite values refused;
// - dequantization (scalar and SIMD) exactly scale · q;
// - the row-vector kernels and ops::gemm with Q8Matrix operands (vector products threaded or
//   not, widened panels; plain and transposed; with a bias) against a double triple loop over the
//   dequantized weights, held to the summation bound (gemm_reference.hpp), and against the
//   original float weights within Σ_i |x_i| · scale_i / 2 (the quantization step's bound) plus
//   that summation bound.
#include <Eigen/Core>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>

#include "gemm_reference.hpp"
#include "narrow_products.hpp"
#include "nlb/core/weight_storage.hpp"
#include "nlb/ops/narrow_gemm.hpp"
#include "test_random.hpp"

namespace {

using nlb::Index;
using nlb::q8_block;
using nlb::Q8Matrix;
using nlb::RowMatrix;
using nlb::test::check_within_bound;
using nlb::test::triple_loop;

// Gaussian values whose scale changes from block to block by up to 2^±8 (so a block's step is
// not the row's), with one all-zero block when there is room.
Eigen::MatrixXd blocky(Index rows, Index cols, unsigned seed) {
  Eigen::MatrixXd m = nlb::test::gaussian(rows, cols, seed);
  for (Index r = 0; r < rows; ++r)
    for (Index c = 0; c < cols; ++c)
      m(r, c) *= std::exp2(static_cast<double>((r * 7 + c / q8_block * 5) % 17 - 8));
  if (cols > q8_block)
    m.block(0, q8_block, 1, std::min<Index>(q8_block, cols - q8_block)).setZero();
  return m;
}

// The scale of block b of row r of `m`, by the closed form.
double closed_form_scale(const Eigen::MatrixXd& m, Index r, Index b) {
  const Index begin = b * q8_block, end = std::min(m.cols(), begin + q8_block);
  double largest = 0;
  for (Index c = begin; c < end; ++c)
    largest = std::max(largest, std::abs(static_cast<double>(static_cast<float>(m(r, c)))));
  return largest / 127;
}

BOOST_AUTO_TEST_CASE(quantization_is_within_half_a_step_of_every_value) {
  const Eigen::MatrixXd m = blocky(9, 77, 11);  // 77 columns: two full blocks and one of 13
  const Q8Matrix q(m.cast<float>());
  BOOST_TEST(q.rows() == 9);
  BOOST_TEST(q.cols() == 77);
  BOOST_TEST(q.blocks_per_row() == 3);
  BOOST_TEST(q.bytes() == 9 * 77 + 4 * 9 * 3);
  double worst = 0;
  for (Index r = 0; r < m.rows(); ++r) {
    for (Index c = 0; c < m.cols(); ++c) {
      const double step = closed_form_scale(m, r, c / q8_block);
      BOOST_TEST(static_cast<double>(q.row_scales(r)[c / q8_block]) ==
                 static_cast<double>(static_cast<float>(step)));
      BOOST_TEST(std::abs(static_cast<int>(q.row(r)[c])) <= 127);
      const double err = std::abs(static_cast<double>(q.value(r, c)) -
                                  static_cast<double>(static_cast<float>(m(r, c))));
      // Half a step, plus the scale's own rounding to float carried over 127 steps.
      const double bound = step / 2 + 127 * step * std::numeric_limits<float>::epsilon();
      worst = std::max(worst, step == 0 ? err : err / bound);
      BOOST_TEST(err <= bound, "row " << r << " column " << c);
    }
  }
  BOOST_TEST_MESSAGE("largest quantization error / half-step bound: " << worst);
  BOOST_TEST(q.value(0, q8_block) == 0.0f);  // the all-zero block: scale 0, values 0
  BOOST_TEST(q.row_scales(0)[1] == 0.0f);
  const RowMatrix<double> wide = q.widened<double>();
  BOOST_TEST(wide(3, 70) == static_cast<double>(q.value(3, 70)));
  BOOST_TEST(q.row_as<float>(4)(5) == q.value(4, 5));

  // Whole multiples of a step that is a power of two come back exactly.
  RowMatrix<float> exact(1, 2 * q8_block);
  for (Index c = 0; c < exact.cols(); ++c)
    exact(0, c) = 0.5f * static_cast<float>(c % 2 ? 127 - c : -(c * 3 % 128));
  exact(0, 0) = -63.5f;  // block 0: the largest magnitude is 127 steps of 0.5
  exact(0, q8_block) = 63.5f;
  const Q8Matrix exact_q(exact);
  BOOST_TEST(exact_q.row_scales(0)[0] == 0.5f);
  for (Index c = 0; c < exact.cols(); ++c)
    BOOST_TEST(exact_q.value(0, c) == exact(0, c), "column " << c);
}

BOOST_AUTO_TEST_CASE(non_finite_weights_are_refused_naming_the_entry) {
  RowMatrix<float> m = RowMatrix<float>::Ones(3, 40);
  m(2, 33) = std::numeric_limits<float>::infinity();
  try {
    (void)Q8Matrix(m);
    BOOST_FAIL("an infinite weight was quantized");
  } catch (const nlb::NumericError& e) {
    BOOST_TEST(std::string(e.what()).find("row 2, column 33") != std::string::npos, e.what());
  }
  m(2, 33) = std::numeric_limits<float>::quiet_NaN();
  BOOST_CHECK_THROW((void)nlb::to_weight_storage<nlb::storage::q8>(m), nlb::NumericError);
}

BOOST_AUTO_TEST_CASE(storage_q8_names_the_matrix_type_and_quantizes) {
  static_assert(std::is_same_v<nlb::weight_matrix<nlb::storage::q8, float, 4, 8>, Q8Matrix>);
  static_assert(nlb::storage::is_narrow<nlb::storage::q8> &&
                nlb::storage::is_narrow<nlb::storage::bf16>);
  static_assert(!nlb::storage::is_narrow<nlb::storage::f32>);
  static_assert(
      std::is_same_v<nlb::backend::with_weights<nlb::storage::q8>::weights, nlb::storage::q8>);
  static_assert(nlb::backend::is_simd<nlb::backend::with_weights<nlb::storage::q8>>);
  const RowMatrix<float> m = nlb::test::gaussian(3, 40, 9).template cast<float>();
  const Q8Matrix q = nlb::to_weight_storage<nlb::storage::q8>(m);
  const Q8Matrix direct(m);
  BOOST_TEST((q.widened().array() == direct.widened().array()).all());
  BOOST_TEST(nlb::to_weight_storage<nlb::storage::q8>(Q8Matrix(m)).rows() == 3);
}

template <class Backend>
void check_dequantize(const std::string& name) {
  const Q8Matrix q(blocky(2, 101, 3).template cast<float>());
  for (const Index start : {Index{0}, q8_block, 3 * q8_block}) {
    const Index n = q.cols() - start;
    std::vector<float> out(static_cast<std::size_t>(n));
    nlb::kernels::q8_dequantize(Backend{}, q.row(1) + start, q.row_scales(1) + start / q8_block,
                                out.data(), n);
    Index mismatches = 0;
    for (Index c = 0; c < n; ++c)
      mismatches += out[static_cast<std::size_t>(c)] != q.value(1, start + c);
    BOOST_TEST(mismatches == 0, name << " from column " << start);
  }
}

BOOST_AUTO_TEST_CASE(dequantization_is_exact) {
  check_dequantize<nlb::backend::scalar>("scalar");
  check_dequantize<nlb::backend::cpu>("simd");
}

// got ≈ x · W_original within the quantization step's bound: Σ_i |x_i| · step(i, j) / 2 for
// x · W (steps of W's rows), plus the float summation bound of the product itself.
void check_within_step(const RowMatrix<float>& got, const Eigen::MatrixXd& x,
                       const Eigen::MatrixXd& w_original, const Eigen::MatrixXd& steps,
                       const nlb::test::Reference& dequantized, const std::string& what) {
  const double u = std::numeric_limits<float>::epsilon() / 2;
  const double kk = static_cast<double>(x.cols() + 2);
  double worst = 0;
  for (Index i = 0; i < got.rows(); ++i) {
    for (Index j = 0; j < got.cols(); ++j) {
      double exact = 0, step_bound = 0;
      for (Index p = 0; p < x.cols(); ++p) {
        exact += x(i, p) * w_original(p, j);
        step_bound += std::abs(x(i, p)) * steps(p, j) / 2;
      }
      const double bound =
          step_bound +
          nlb::test::tol::gemm_bound_factor * kk * u * dequantized.scale(i, j) * 1.0001 +
          std::numeric_limits<float>::min();
      worst = std::max(worst, std::abs(static_cast<double>(got(i, j)) - exact) / bound);
    }
  }
  BOOST_TEST_MESSAGE(what << ": largest error against the float weights / step bound = " << worst);
  BOOST_TEST(worst <= 1.0, what);
}

// steps(p, j): the quantization step (scale) of W's value (p, j).
Eigen::MatrixXd steps_of(const Q8Matrix& q) {
  Eigen::MatrixXd s(q.rows(), q.cols());
  for (Index r = 0; r < q.rows(); ++r)
    for (Index c = 0; c < q.cols(); ++c)
      s(r, c) = q.row_scales(r)[c / q8_block];
  return s;
}

template <class Backend>
void check_row_kernels(const std::string& name) {
  for (const auto& [k, n] : {std::pair<Index, Index>{0, 5},
                             {1, 1},
                             {7, 15},
                             {64, 32},
                             {300, 129},
                             {129, 300},
                             {768, 517}}) {
    const Eigen::MatrixXd x =
        nlb::test::gaussian(1, k, 1).template cast<float>().template cast<double>();
    const RowMatrix<float> xf = x.cast<float>();
    // x · W: W [k, n + 3] (row stride n + 3, its blocks over the whole row).
    const Eigen::MatrixXd w_plain =
        blocky(k, n + 3, 2).template cast<float>().template cast<double>();
    const Q8Matrix w(w_plain.cast<float>());
    const Eigen::MatrixXd w_wide = w.widened<double>().leftCols(n);
    const Eigen::MatrixXd c0 =
        nlb::test::gaussian(1, n, 3).template cast<float>().template cast<double>();
    const std::string shape = name + " k " + std::to_string(k) + " n " + std::to_string(n);
    for (const bool accumulate : {false, true}) {
      const Eigen::MatrixXd start = accumulate ? c0 : Eigen::MatrixXd::Zero(1, n);
      RowMatrix<float> y = start.cast<float>();
      nlb::kernels::q8_vecmat(Backend{}, xf.data(), w.data(), w.scales(), k, w.cols(),
                              w.blocks_per_row(), y.data(), n, accumulate);
      const auto ref = triple_loop(x, w_wide, start);
      check_within_bound<float>(y, ref, k, shape + " x·W" + (accumulate ? " +=" : ""));
      if (!accumulate)
        check_within_step(y, x, w_plain.leftCols(n), steps_of(w).leftCols(n), ref, shape + " x·W");
    }
    // x · Wᵀ: W [n, k + 3] with the dot products over its first k columns.
    const Eigen::MatrixXd wt_plain =
        blocky(n, k + 3, 4).template cast<float>().template cast<double>();
    const Q8Matrix wt(wt_plain.cast<float>());
    RowMatrix<float> y(1, n);
    nlb::kernels::q8_vecmat_transposed(Backend{}, xf.data(), wt.data(), wt.scales(), k, wt.cols(),
                                       wt.blocks_per_row(), y.data(), n, false);
    const auto ref =
        triple_loop(x, wt.widened<double>().leftCols(k).transpose(), Eigen::MatrixXd::Zero(1, n));
    check_within_bound<float>(y, ref, k, shape + " x·Wᵀ");
    check_within_step(y, x, wt_plain.leftCols(k).transpose(), steps_of(wt).leftCols(k).transpose(),
                      ref, shape + " x·Wᵀ");
  }
}

BOOST_AUTO_TEST_CASE(row_kernels_hold_the_summation_and_step_bounds) {
  check_row_kernels<nlb::backend::scalar>("scalar");
  check_row_kernels<nlb::backend::cpu>("simd");
}

BOOST_AUTO_TEST_CASE(short_strides_are_refused) {
  const Q8Matrix w(RowMatrix<float>::Ones(4, 64));
  float x[4] = {}, y[64];
  BOOST_CHECK_THROW(
      nlb::kernels::q8_vecmat(nlb::backend::cpu{}, x, w.data(), w.scales(), 4, 63, 2, y, 64, false),
      nlb::ArgumentError);
  BOOST_CHECK_THROW(nlb::kernels::q8_vecmat(nlb::backend::scalar{}, x, w.data(), w.scales(), 4, 64,
                                            1, y, 64, false),
                    nlb::ArgumentError);
}

// ops::gemm / gemm_nt / gemm_bias with a Q8Matrix (narrow_products.hpp); the 2-thread vector
// products are split in whole blocks of columns.
template <class Backend>
void check_products(const std::string& name, int threads = 1) {
  nlb::test::check_narrow_products<Backend>(name, threads, [](Index rows, Index cols, int seed) {
    return Q8Matrix(blocky(rows, cols, static_cast<unsigned>(seed)).template cast<float>());
  });
}

BOOST_AUTO_TEST_CASE(products_hold_the_summation_bound) {
  using Q8 = nlb::backend::with_weights<nlb::storage::q8>;
  check_products<Q8>("q8");
  check_products<nlb::backend::scalar>("q8 scalar backend");
#if defined(_OPENMP)
  check_products<Q8>("q8, 2 threads", 2);  // vector products split by whole blocks of columns
#else
  BOOST_TEST_MESSAGE("built without OpenMP: the threaded vector products are not built");
#endif
}

}  // namespace
