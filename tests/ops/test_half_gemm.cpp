// 16-bit weights (nlb/core/weight_storage.hpp, nlb/core/half_matrix.hpp,
// nlb/kernels/half_weights.hpp, nlb/ops/narrow_gemm.hpp):
// - widening and rounding against the loader's own bit-level F16/BF16 codec (nlb/io/dtype.hpp,
//   an independent implementation), over every 16-bit pattern;
// - the row-vector kernels (scalar and SIMD) and ops::gemm with HalfMatrix operands (vector
//   products, threaded or not, and widened panels; plain and transposed; with a bias) against a
//   double triple loop over the widened weights, held to the summation bound (gemm_reference.hpp).
#include <Eigen/Core>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>

#include "gemm_reference.hpp"
#include "narrow_products.hpp"
#include "nlb/io/dtype.hpp"
#include "nlb/ops/narrow_gemm.hpp"
#include "test_random.hpp"

namespace {

using nlb::Index;
using nlb::RowMatrix;
using nlb::test::check_within_bound;
using nlb::test::triple_loop;

template <class H>
H from_bits(std::uint16_t bits) {
  return Eigen::numext::bit_cast<H>(bits);
}

template <class H>
std::uint16_t bits_of(H h) {
  return Eigen::numext::bit_cast<std::uint16_t>(h);
}

template <class H>
float reference_value(std::uint16_t bits) {
  if constexpr (std::is_same_v<H, Eigen::half>)
    return nlb::io::f16_bits_to_float(bits);
  else
    return nlb::io::bf16_bits_to_float(bits);
}

template <class H>
void check_widening_of_every_pattern(const std::string& name) {
  std::vector<H> all(65536);
  for (std::uint32_t b = 0; b < 65536; ++b)
    all[b] = from_bits<H>(static_cast<std::uint16_t>(b));
  std::vector<float> simd(all.size()), scalar(all.size());
  nlb::kernels::widen(nlb::backend::cpu{}, all.data(), simd.data(), 65536);
  nlb::kernels::widen(nlb::backend::scalar{}, all.data(), scalar.data(), 65536);
  Index mismatches = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float want = reference_value<H>(static_cast<std::uint16_t>(b));
    for (const float got : {simd[b], scalar[b]}) {
      const bool same =
          std::isnan(want) ? std::isnan(got) : std::memcmp(&got, &want, sizeof got) == 0;  // ±0 too
      mismatches += same ? 0 : 1;
    }
  }
  BOOST_TEST(mismatches == 0, name << ": " << mismatches << " patterns widened wrongly");
}

BOOST_AUTO_TEST_CASE(widening_equals_the_loaders_decoder_for_every_pattern) {
  check_widening_of_every_pattern<Eigen::half>("f16");
  check_widening_of_every_pattern<Eigen::bfloat16>("bf16");
}

BOOST_AUTO_TEST_CASE(half_matrix_rounds_like_the_loaders_encoder) {
  // Random magnitudes over the whole range (subnormal F16 to beyond F16's largest), both signs,
  // and values that lie exactly halfway between two F16 / BF16 neighbours (ties to even).
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-30, 20);
  RowMatrix<float> m(64, 64);
  for (Index i = 0; i < m.size(); ++i)
    m.data()[i] = static_cast<float>((i % 2 ? -1 : 1) * std::exp2(exponent(rng)));
  m(0, 0) = 1.0f + 1.0f / 2048;  // halfway between F16 1 and 1 + 2^-10: ties to 1
  m(0, 1) = 1.0f + 3.0f / 2048;  // ties to 1 + 2^-9 (even)
  m(0, 2) = 1.0f + 1.0f / 256;   // halfway between BF16 1 and 1 + 2^-7: ties to 1
  const nlb::HalfMatrix<Eigen::half> f16(m);
  const nlb::HalfMatrix<Eigen::bfloat16> bf16(m);
  Index mismatches = 0;
  for (Index i = 0; i < m.size(); ++i) {
    mismatches += bits_of(f16.data()[i]) != nlb::io::to_f16_bits(m.data()[i]);
    mismatches += bits_of(bf16.data()[i]) != nlb::io::to_bf16_bits(m.data()[i]);
  }
  BOOST_TEST(mismatches == 0);
  BOOST_TEST(f16.rows() == 64);
  BOOST_TEST(f16.cols() == 64);
  const RowMatrix<float> back = bf16.widened();
  BOOST_TEST(back(0, 2) == 1.0f);
  BOOST_TEST(static_cast<float>(f16.row_as(0)(1)) == 1.0f + 1.0f / 512);
}

// The storage policy (nlb/core/weight_storage.hpp): which matrix type each storage names, and
// to_weight_storage moving float matrices through untouched and rounding for 16 bits.
BOOST_AUTO_TEST_CASE(weight_storage_names_the_matrix_type_and_converts) {
  static_assert(
      std::is_same_v<nlb::weight_matrix<nlb::storage::f32, float, 4, 8>, RowMatrix<float, 4, 8>>);
  static_assert(std::is_same_v<nlb::weight_matrix<nlb::storage::f16, float, 4, 8>,
                               nlb::HalfMatrix<Eigen::half>>);
  static_assert(std::is_same_v<nlb::weight_matrix<nlb::storage::bf16, double>,
                               nlb::HalfMatrix<Eigen::bfloat16>>);
  static_assert(std::is_same_v<nlb::backend::cpu::weights, nlb::storage::f32>);
  static_assert(
      std::is_same_v<nlb::backend::with_weights<nlb::storage::bf16>::weights, nlb::storage::bf16>);
  static_assert(nlb::backend::is_simd<nlb::backend::with_weights<nlb::storage::f16>>);
  static_assert(nlb::backend::is_host<nlb::backend::with_weights<nlb::storage::f16>>);
  const RowMatrix<float> m = nlb::test::gaussian(3, 5, 9).cast<float>();
  const RowMatrix<float> kept = nlb::to_weight_storage<nlb::storage::f32>(m);
  BOOST_TEST((kept.array() == m.array()).all());
  const auto rounded = nlb::to_weight_storage<nlb::storage::bf16>(m);
  BOOST_TEST(rounded.rows() == 3);
  BOOST_TEST(rounded.cols() == 5);
  for (Index i = 0; i < m.size(); ++i)
    BOOST_TEST(static_cast<float>(rounded.data()[i]) ==
               nlb::io::bf16_bits_to_float(nlb::io::to_bf16_bits(m.data()[i])));
}

// x [1, k] · W and x · Wᵀ by the row kernels, against the double loop over widened weights.
template <class H, class Backend>
void check_row_kernels(const std::string& name) {
  for (const auto& [k, n] : {std::pair<Index, Index>{0, 5},
                             {1, 1},
                             {7, 15},
                             {64, 16},
                             {300, 129},
                             {129, 300},
                             {768, 517}}) {
    const Eigen::MatrixXd x = nlb::test::gaussian(1, k, 1);
    const Eigen::MatrixXd w_plain = nlb::test::gaussian(k, n + 3, 2);  // row stride n + 3
    const nlb::HalfMatrix<H> w(w_plain);
    const Eigen::MatrixXd w_wide = w.template widened<double>();
    const RowMatrix<float> xf = x.cast<float>();
    const Eigen::MatrixXd c0 = nlb::test::gaussian(1, n, 3);
    const std::string shape = name + " k " + std::to_string(k) + " n " + std::to_string(n);
    for (const bool accumulate : {false, true}) {
      const Eigen::MatrixXd start = accumulate ? c0 : Eigen::MatrixXd::Zero(1, n);
      RowMatrix<float> y = start.cast<float>();
      nlb::kernels::half_vecmat(Backend{}, xf.data(), w.data(), k, n + 3, y.data(), n, accumulate);
      check_within_bound<float>(y,
                                triple_loop(x.cast<float>().cast<double>(), w_wide.leftCols(n),
                                            start.cast<float>().cast<double>()),
                                k, shape + " x·W" + (accumulate ? " +=" : ""));
    }
    // Wᵀ: W [n, k + 3] with the dot products over its first k columns.
    const nlb::HalfMatrix<H> wt(nlb::test::gaussian(n, k + 3, 4));
    const Eigen::MatrixXd wt_wide = wt.template widened<double>();
    RowMatrix<float> y(1, n);
    nlb::kernels::half_vecmat_transposed(Backend{}, xf.data(), wt.data(), k, k + 3, y.data(), n,
                                         false);
    check_within_bound<float>(
        y,
        triple_loop(x.cast<float>().cast<double>(), wt_wide.leftCols(k).transpose(),
                    Eigen::MatrixXd::Zero(1, n)),
        k, shape + " x·Wᵀ");
  }
}

BOOST_AUTO_TEST_CASE(row_kernels_hold_the_summation_bound) {
  check_row_kernels<Eigen::half, nlb::backend::scalar>("scalar f16");
  check_row_kernels<Eigen::bfloat16, nlb::backend::scalar>("scalar bf16");
  check_row_kernels<Eigen::half, nlb::backend::cpu>("simd f16");
  check_row_kernels<Eigen::bfloat16, nlb::backend::cpu>("simd bf16");
}

// ops::gemm / gemm_nt / gemm_bias with a HalfMatrix (narrow_products.hpp).
template <class H, class Backend>
void check_products(const std::string& name, int threads = 1) {
  nlb::test::check_narrow_products<Backend>(name, threads, [](Index rows, Index cols, int seed) {
    return nlb::HalfMatrix<H>(nlb::test::gaussian(rows, cols, static_cast<unsigned>(seed)));
  });
}

BOOST_AUTO_TEST_CASE(products_hold_the_summation_bound) {
  using F16 = nlb::backend::with_weights<nlb::storage::f16>;
  using BF16 = nlb::backend::with_weights<nlb::storage::bf16>;
  check_products<Eigen::half, F16>("f16");
  check_products<Eigen::bfloat16, BF16>("bf16");
  check_products<Eigen::bfloat16, nlb::backend::scalar>("bf16 scalar backend");
#if defined(_OPENMP)
  // Vector products split by output columns.
  check_products<Eigen::half, F16>("f16, 2 threads", 2);
  check_products<Eigen::bfloat16, BF16>("bf16, 2 threads", 2);
#else
  BOOST_TEST_MESSAGE("built without OpenMP: the threaded vector products are not built");
#endif
}

}  // namespace
