// kernels::small_gemm (B read in place, register tiles of rows × 2 batches) against the
// double-precision textbook product, within the GEMM summation bound of the tolerance table:
// row counts around the tile height, column counts around the tile width, k across the k
// blocks, padded strides (the padding must stay untouched), accumulate on and off, float and
// double, the build's SIMD width and SSE2's (the 6-row tile of the narrower widths).
#include <boost/test/unit_test.hpp>
#include <string>

#include "gemm_reference.hpp"
#include "nlb/kernels/small_gemm.hpp"
#include "test_random.hpp"

namespace {

using nlb::Index;

template <class T, class Arch>
void check_shapes() {
  std::uint64_t seed = 11;
  for (const Index m : {1, 2, 5, 6, 7, 8, 9, 16, 17, 23})
    for (const Index n : {1, 15, 32, 33, 64, 95, 300})
      for (const Index k : {0, 1, 7, 256, 257, 600})
        for (const bool accumulate : {false, true}) {
          const Index lda = k + 3, ldb = n + 5, ldc = n + 2;
          const Eigen::MatrixXd a = nlb::test::gaussian(m, lda, seed++);
          const Eigen::MatrixXd b = nlb::test::gaussian(std::max<Index>(k, 1), ldb, seed++);
          const Eigen::MatrixXd c0 = nlb::test::gaussian(m, ldc, seed++);
          // Stored as T, row-major with the padded strides.
          nlb::RowMatrix<T> as = a.cast<T>(), bs = b.cast<T>(), cs = c0.cast<T>();
          const nlb::RowMatrix<T> c_before = cs;
          nlb::kernels::small_gemm<Arch>(m, n, k, as.data(), lda, bs.data(), ldb, cs.data(), ldc,
                                         accumulate, {128, 64});
          const Eigen::MatrixXd start =
              accumulate ? Eigen::MatrixXd(c_before.leftCols(n).template cast<double>())
                         : Eigen::MatrixXd::Zero(m, n);
          const auto ref =
              nlb::test::triple_loop(as.leftCols(k).template cast<double>(),
                                     bs.topRows(k).leftCols(n).template cast<double>(), start);
          nlb::test::check_within_bound<T>(cs.leftCols(n), ref, k,
                                           "m " + std::to_string(m) + " n " + std::to_string(n) +
                                               " k " + std::to_string(k) + " accumulate " +
                                               std::to_string(accumulate));
          BOOST_TEST((cs.rightCols(ldc - n) == c_before.rightCols(ldc - n)));
        }
}

}  // namespace

BOOST_AUTO_TEST_CASE(float_default_width_within_summation_bound) {
  check_shapes<float, xsimd::default_arch>();
}
BOOST_AUTO_TEST_CASE(double_default_width_within_summation_bound) {
  check_shapes<double, xsimd::default_arch>();
}
#if XSIMD_WITH_SSE2
BOOST_AUTO_TEST_CASE(float_sse2_width_within_summation_bound) {
  check_shapes<float, xsimd::sse2>();
}
#endif
