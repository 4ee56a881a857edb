// ops/gemm.hpp: every GEMM provider of this build against a double-precision triple loop (a
// different algorithm), for each storage order the components use, transposes, blocks with
// outer strides, scalar factors, accumulation, the fused bias, and the shapes that go to Eigen
// (vectors, tiny and empty products). The error is held to the summation bound of the
// tolerance table, which any correct order meets and a wrong operand, stride or transpose
// misses by orders of magnitude. Vector results split over OpenMP threads (a context with more
// than one thread, decoding's GEMVs) against the same loop.
#include <dlfcn.h>

#include <array>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "gemm_reference.hpp"
#include "nlb/core/cpu_kind.hpp"
#include "nlb/ops/gemm.hpp"
#if defined(NLB_HAVE_LIBXSMM)
// After nlb/ops/gemm.hpp, which declares LIBXSMM's two GEMMs itself: a declaration here that
// differs from those fails to compile.
#include <libxsmm.h>
static_assert(std::is_same_v<libxsmm_blasint, int>,
              "nlb/ops/detail/gemm_libxsmm.hpp declares LIBXSMM's GEMMs with int indices");
#endif
#include "test_random.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::test::check_within_bound;
using nlb::test::Reference;
using nlb::test::triple_loop;

template <class T>
using RowM = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ColM = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

template <class T>
Eigen::MatrixXd rounded(const Eigen::MatrixXd& m) {
  return m.cast<T>().template cast<double>();
}

// One provider, one scalar type: every operand layout at every shape.
template <class Provider, class T>
void check_provider(const std::string& name, int threads = 1) {
  using Backend = nlb::backend::simd<xsimd::default_arch, Provider>;
  const nlb::Context<Backend> ctx(threads);
  nlb::GemmScratch<T> scratch;
  struct Shape {
    Index m, k, n;
  };
  // Vectors (m = 1, n = 1), tiny (coefficient-based in Eigen), empty, k = 0, odd and blocked.
  const Shape shapes[] = {{1, 5, 7},    {6, 9, 1},      {3, 4, 5},     {0, 5, 4},    {5, 0, 4},
                          {37, 19, 53}, {128, 96, 200}, {65, 300, 17}, {200, 64, 96}};
  std::uint64_t seed = 100;
  for (const auto [m, k, n] : shapes) {
    const std::string shape = name + " " + std::to_string(m) + "x" + std::to_string(k) + "x" +
                              std::to_string(n) +
                              (std::is_same_v<T, float> ? " float" : " double") + ", " +
                              std::to_string(threads) + " thread(s)";
    const Eigen::MatrixXd a = rounded<T>(nlb::test::gaussian(m, k, ++seed));
    const Eigen::MatrixXd b = rounded<T>(nlb::test::gaussian(k, n, ++seed));
    const Eigen::MatrixXd c0 = rounded<T>(nlb::test::gaussian(m, n, ++seed));
    const Eigen::MatrixXd bias = rounded<T>(nlb::test::gaussian(1, n, ++seed));
    const Eigen::MatrixXd zero = Eigen::MatrixXd::Zero(m, n);
    const Reference plain = triple_loop(a, b, zero);

    const RowM<T> a_row = a.cast<T>();
    const ColM<T> a_col = a.cast<T>();
    const RowM<T> b_row = b.cast<T>();
    const ColM<T> b_col = b.cast<T>();
    const RowM<T> bt_row = b.transpose().cast<T>();  // stored [n, k], used transposed

    RowM<T> c_row(m, n);
    nlb::ops::gemm(ctx, a_row, b_row, c_row, scratch);
    check_within_bound<T>(c_row, plain, k, shape + " row = row · row");
    nlb::ops::gemm(ctx, a_row, bt_row.transpose(), c_row, scratch);
    check_within_bound<T>(c_row, plain, k, shape + " row = row · rowᵀ");
    nlb::ops::gemm(ctx, a_col, b_col, c_row, scratch);
    check_within_bound<T>(c_row, plain, k, shape + " row = col · col");
    ColM<T> c_col(m, n);
    nlb::ops::gemm(ctx, a_row, b_col, c_col, scratch);
    check_within_bound<T>(c_col, plain, k, shape + " col = row · col");
    nlb::ops::gemm(ctx, a_col, bt_row.transpose(), c_col, scratch);
    check_within_bound<T>(c_col, plain, k, shape + " col = col · rowᵀ");

    // Blocks with outer strides: the operands inside wider matrices, the result in the middle
    // columns of a wider one (as the attention heads write their context).
    RowM<T> a_wide = RowM<T>::Constant(m, k + 3, T(7));
    a_wide.middleCols(2, k) = a_row;
    RowM<T> b_wide = RowM<T>::Constant(k, n + 5, T(-3));
    b_wide.middleCols(1, n) = b_row;
    RowM<T> c_wide = RowM<T>::Constant(m, n + 4, T(9));
    nlb::ops::gemm(ctx, a_wide.middleCols(2, k), b_wide.middleCols(1, n), c_wide.middleCols(3, n),
                   scratch);
    check_within_bound<T>(c_wide.middleCols(3, n), plain, k, shape + " blocks");
    BOOST_TEST(
        ((c_wide.leftCols(3).array() == T(9)).all() && (c_wide.col(n + 3).array() == T(9)).all()),
        shape + ": columns outside the block are left alone");

    // A scalar factor folded into an operand (Eigen passes it to the kernel as alpha).
    nlb::ops::gemm(ctx, a_row * T(2), b_row, c_row, scratch);
    Reference twice = plain;
    twice.value *= 2;
    twice.scale *= 2;
    check_within_bound<T>(c_row, twice, k, shape + " scalar factor");

    // Accumulation and the fused bias.
    c_row = c0.cast<T>();
    nlb::ops::gemm(ctx, a_row, b_row, c_row, scratch, /*accumulate=*/true);
    check_within_bound<T>(c_row, triple_loop(a, b, c0), k, shape + " accumulate");
    const Eigen::Matrix<T, 1, Eigen::Dynamic> bias_row = bias.cast<T>();
    nlb::ops::gemm_bias(ctx, a_row, b_row, bias_row, c_row, scratch);
    check_within_bound<T>(c_row, triple_loop(a, b, bias.replicate(m, 1)), k, shape + " bias");
  }
}

template <class Provider>
void check_provider_both_types(const std::string& name, int threads = 1) {
  check_provider<Provider, float>(name, threads);
  check_provider<Provider, double>(name, threads);
}

}  // namespace

BOOST_AUTO_TEST_CASE(eigen_provider_meets_the_summation_bound) {
  check_provider_both_types<nlb::gemm_provider::eigen>("eigen");
  BOOST_TEST(nlb::ops::gemm_provider_in_use(nlb::backend::scalar{}));
}

BOOST_AUTO_TEST_CASE(openblas_provider_meets_the_summation_bound) {
#if defined(NLB_HAVE_OPENBLAS)
  using Backend = nlb::backend::simd<xsimd::default_arch, nlb::gemm_provider::openblas>;
  check_provider_both_types<nlb::gemm_provider::openblas>("openblas");
  // CTest names OpenBLAS's kernels where the CPU allows (tests/CMakeLists.txt), so that these
  // products really ran in OpenBLAS and not in the Eigen fallback.
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr)
    BOOST_TEST(nlb::ops::gemm_provider_in_use(Backend{}));
  BOOST_TEST_MESSAGE("openblas in use: " << nlb::ops::gemm_provider_in_use(Backend{}));
#else
  BOOST_TEST_MESSAGE("OpenBLAS is not part of this build (libopenblas-dev not found)");
#endif
}

BOOST_AUTO_TEST_CASE(blis_provider_meets_the_summation_bound) {
#if defined(NLB_HAVE_BLIS)
  using Backend = nlb::backend::simd<xsimd::default_arch, nlb::gemm_provider::blis>;
  check_provider_both_types<nlb::gemm_provider::blis>("blis");
  BOOST_TEST_MESSAGE("blis in use: " << nlb::ops::gemm_provider_in_use(Backend{}));
#else
  BOOST_TEST_MESSAGE("BLIS is not part of this build (libblis-dev not found)");
#endif
}

// oneDNN multiplies floats (its double products go to Eigen, checked here too); LIBXSMM runs its
// own kernels on the small shapes and hands the larger ones and transposes to OpenBLAS. Both on
// one and two threads.
BOOST_AUTO_TEST_CASE(onednn_provider_meets_the_summation_bound) {
#if defined(NLB_HAVE_ONEDNN)
  check_provider_both_types<nlb::gemm_provider::onednn>("onednn");
  check_provider_both_types<nlb::gemm_provider::onednn>("onednn", 2);
  static_assert(!nlb::ops::detail::provider_takes<nlb::gemm_provider::onednn, double>);
#else
  BOOST_TEST_MESSAGE("oneDNN is not part of this build (libdnnl-dev not found)");
#endif
}

BOOST_AUTO_TEST_CASE(libxsmm_provider_meets_the_summation_bound) {
#if defined(NLB_HAVE_LIBXSMM)
  check_provider_both_types<nlb::gemm_provider::libxsmm>("libxsmm");
  check_provider_both_types<nlb::gemm_provider::libxsmm>("libxsmm", 2);
#else
  BOOST_TEST_MESSAGE(
      "LIBXSMM is not part of this build (libxsmm-dev or libopenblas-dev not found)");
#endif
}

BOOST_AUTO_TEST_CASE(measured_provider_meets_the_summation_bound) {
#if defined(NLB_HAVE_MEASURED)
  BOOST_TEST_MESSAGE("CPU kind: " << nlb::describe(nlb::this_cpu_kind()) << ", "
                                  << nlb::ops::detail::this_cpu_measurements().size()
                                  << " recorded measurements");
  check_provider_both_types<nlb::gemm_provider::measured>("measured");
  check_provider_both_types<nlb::gemm_provider::measured>("measured", 2);
#else
  BOOST_TEST_MESSAGE("no BLAS provider in this build, so no measured provider");
#endif
}

// With OpenBLAS and BLIS in one program both export cblas_sgemm and sgemm_; the OpenBLAS provider
// (and LIBXSMM's fallback) must get OpenBLAS's (the link order in CMakeLists.txt).
BOOST_AUTO_TEST_CASE(cblas_names_bind_to_openblas) {
#if defined(NLB_HAVE_OPENBLAS)
  Dl_info info{};
  BOOST_REQUIRE(dladdr(reinterpret_cast<void*>(&cblas_sgemm), &info) != 0);
  BOOST_REQUIRE(info.dli_fname != nullptr);
  BOOST_TEST_MESSAGE("cblas_sgemm comes from " << info.dli_fname);
  BOOST_TEST(std::string(info.dli_fname).find("openblas") != std::string::npos);
#else
  BOOST_TEST_MESSAGE("OpenBLAS is not part of this build");
#endif
}

#if defined(NLB_HAVE_MEASURED)
// The choice among recorded rows, on rows made up so that every grid point has its own winner.
BOOST_AUTO_TEST_CASE(measured_choice_takes_the_nearest_recorded_shape) {
  using nlb::CpuVectorIsa;
  using nlb::CpuVendor;
  using nlb::ops::detail::choose_measured_provider;
  using nlb::ops::detail::GemmMeasurement;
  using P = nlb::ops::detail::MeasuredProvider;
  // Rows m 4 / 64 at width 768 / 2048, NN, one thread; and one two-thread NT row.
  const GemmMeasurement rows[] = {
      {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 768, 4, {10, 20, 0, 30, 40}},
      {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 768, 64, {90, 20, 0, 30, 40}},
      {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 2048, 4, {10, 50, 0, 30, 40}},
      {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 2048, 64, {10, 20, 0, 60, 40}},
      {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 768, 4, {10, 20, 70, 30, 40}},
  };
  const std::array<bool, 5> all = {true, true, true, true, true};
  const auto choose = [&](int threads, bool nt, Index m, Index k, Index n,
                          const std::array<bool, 5>& eligible) {
    return choose_measured_provider(rows, threads, nt, m, k, n, eligible);
  };
  // m: 4 · 64 = 256, so up to 16 rows snap to 4 and from 17 to 64; width: sqrt(k · n / 4)
  // against sqrt(768 · 2048) ≈ 1254.
  BOOST_TEST((choose(1, false, 16, 768, 3072, all) == P::libxsmm));
  BOOST_TEST((choose(1, false, 17, 768, 3072, all) == P::eigen));
  BOOST_TEST((choose(1, false, 1024, 768, 3072, all) == P::eigen));
  BOOST_TEST((choose(1, false, 4, 1254, 4 * 1254, all) == P::libxsmm));
  BOOST_TEST((choose(1, false, 4, 1255, 4 * 1255, all) == P::openblas));
  BOOST_TEST((choose(1, false, 64, 4096, 4096, all) == P::onednn));  // width 2048
  // A provider not eligible here gives way to the next fastest; a 0 is never chosen.
  auto without_libxsmm = all;
  without_libxsmm[4] = false;
  BOOST_TEST((choose(1, false, 4, 768, 3072, without_libxsmm) == P::onednn));
  BOOST_TEST((choose(1, false, 4, 768, 3072, {true, false, true, false, false}) == P::eigen));
  // Threads: the largest recorded count not above the context's (4 → 2), else the fewest.
  BOOST_TEST((choose(4, true, 4, 768, 3072, all) == P::blis));
  BOOST_TEST((choose(1, true, 4, 768, 3072, all) == P::openblas));  // no 1-thread NT rows
  // No rows: OpenBLAS where eligible, else Eigen.
  BOOST_TEST((choose_measured_provider({}, 1, false, 64, 768, 3072, all) == P::openblas));
  BOOST_TEST((choose_measured_provider({}, 1, false, 64, 768, 3072,
                                       {true, false, true, true, true}) == P::eigen));
}

BOOST_AUTO_TEST_CASE(measurements_are_found_by_cpu_kind) {
  using nlb::CpuKind;
  using nlb::CpuVectorIsa;
  using nlb::CpuVendor;
  using nlb::ops::detail::measurements_for;
  // Every recorded block is found by its own key, whole.
  const auto& all = nlb::ops::detail::gemm_measurements;
  for (const auto& row : all) {
    const auto rows = measurements_for(CpuKind{row.vendor, row.family, row.isa});
    BOOST_TEST_REQUIRE(!rows.empty());
    BOOST_TEST((rows.front().vendor == row.vendor && rows.front().family == row.family &&
                rows.front().isa == row.isa));
    BOOST_TEST((&row >= rows.data() && &row < rows.data() + rows.size()));
    for (const auto& r : rows)
      for (const float g : r.gflops)
        BOOST_TEST((g >= 0 && std::isfinite(g)));
  }
  // Another family of a recorded vendor and ISA takes that vendor's first recorded family.
  const auto& first = all[0];
  const auto other_family = measurements_for(CpuKind{first.vendor, 99, first.isa});
  BOOST_TEST_REQUIRE(!other_family.empty());
  BOOST_TEST(other_family.front().family == first.family);
  // An unrecorded vendor has none.
  BOOST_TEST(measurements_for(CpuKind{CpuVendor::other, 0, CpuVectorIsa::other}).empty());
}
#endif

BOOST_AUTO_TEST_CASE(default_backend_uses_the_configured_provider) {
  static_assert(std::is_same_v<nlb::backend::cpu::gemm, nlb::gemm_provider::default_provider>);
  static_assert(std::is_same_v<nlb::backend::scalar::gemm, nlb::gemm_provider::eigen>);
  BOOST_TEST_MESSAGE("backend::cpu multiplies with "
                     << nlb::gemm_provider::name<nlb::gemm_provider::default_provider>());
#if defined(NLB_DEFAULT_GEMM_OPENBLAS)
  BOOST_TEST(std::string(nlb::gemm_provider::name<nlb::backend::cpu::gemm>()) == "openblas");
#elif defined(NLB_DEFAULT_GEMM_BLIS)
  BOOST_TEST(std::string(nlb::gemm_provider::name<nlb::backend::cpu::gemm>()) == "blis");
#elif defined(NLB_DEFAULT_GEMM_MEASURED)
  BOOST_TEST(std::string(nlb::gemm_provider::name<nlb::backend::cpu::gemm>()) == "measured");
#else
  BOOST_TEST(std::string(nlb::gemm_provider::name<nlb::backend::cpu::gemm>()) == "eigen");
#endif
}

#if defined(_OPENMP)
constexpr bool kBuiltWithOpenMP = true;
#else
constexpr bool kBuiltWithOpenMP = false;
#endif

// Skipped in a build without OpenMP (the split does not exist there).
BOOST_AUTO_TEST_CASE(vector_products_split_over_threads,
                     *boost::unit_test::enable_if<kBuiltWithOpenMP>()) {
  using Backend = nlb::backend::cpu;
  const nlb::Context<Backend> ctx(2);
  nlb::GemmScratch<float> scratch;
  struct Shape {
    Index m, k, n;
  };
  // Decoding's row products (QKV, MLP down), ragged splits, a column result, one under the
  // threshold of work.
  const Shape shapes[] = {
      {1, 768, 2304}, {1, 3072, 768}, {1, 700, 1001}, {999, 300, 1}, {1, 20, 700}};
  std::uint64_t seed = 900;
  for (const auto [m, k, n] : shapes) {
    const std::string shape = std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
    const Eigen::MatrixXd a = rounded<float>(nlb::test::gaussian(m, k, ++seed));
    const Eigen::MatrixXd b = rounded<float>(nlb::test::gaussian(k, n, ++seed));
    const Eigen::MatrixXd c0 = rounded<float>(nlb::test::gaussian(m, n, ++seed));
    const Reference plain = triple_loop(a, b, Eigen::MatrixXd::Zero(m, n));
    const RowM<float> a_row = a.cast<float>(), b_row = b.cast<float>();
    const RowM<float> bt_row = b.transpose().cast<float>();  // the unembedding's layout
    RowM<float> c_row(m, n);
    nlb::ops::gemm(ctx, a_row, b_row, c_row, scratch);
    check_within_bound<float>(c_row, plain, k, shape + " threads row · row");
    nlb::ops::gemm(ctx, a_row, bt_row.transpose(), c_row, scratch);
    check_within_bound<float>(c_row, plain, k, shape + " threads row · rowᵀ");
    c_row = c0.cast<float>();
    nlb::ops::gemm(ctx, a_row, b_row, c_row, scratch, /*accumulate=*/true);
    check_within_bound<float>(c_row, triple_loop(a, b, c0), k, shape + " threads accumulate");
  }
}

// Products of 2 … 64 rows with row-major operands go to kernels::small_gemm where the build's
// SIMD width has it (AVX-512; ops::detail::small_gemm_max_rows), with the columns split over
// the threads when the context has more than one (OpenMP builds). Each row count with the
// context's small_gemm on and off and on one and two threads, against the triple loop: the
// kernel's path and the provider's path meet the same bound.
BOOST_AUTO_TEST_CASE(small_row_products_with_and_without_the_row_kernel) {
  using Backend = nlb::backend::cpu;
  nlb::GemmScratch<float> scratch;
  BOOST_TEST_MESSAGE(
      "small_gemm rows on this build: " << nlb::ops::detail::small_gemm_max_rows<Backend::arch>);
  std::uint64_t seed = 1300;
  for (const int threads : {1, 2})
    for (const bool kernel : {true, false})
      for (const Index m : {2, 9, 16, 48, 64, 65})
        for (const auto& [k, n] : {std::pair<Index, Index>{300, 700}, {257, 96}}) {
          nlb::Context<Backend> ctx(threads);
          ctx.set_small_gemm(kernel);
          const std::string shape = std::to_string(m) + "x" + std::to_string(k) + "x" +
                                    std::to_string(n) + " threads " + std::to_string(threads) +
                                    " small_gemm " + std::to_string(kernel);
          const Eigen::MatrixXd a = rounded<float>(nlb::test::gaussian(m, k, ++seed));
          const Eigen::MatrixXd b = rounded<float>(nlb::test::gaussian(k, n, ++seed));
          const Eigen::MatrixXd c0 = rounded<float>(nlb::test::gaussian(m, n, ++seed));
          const RowM<float> a_row = a.cast<float>(), b_row = b.cast<float>();
          RowM<float> c_row(m, n);
          nlb::ops::gemm(ctx, a_row, b_row, c_row, scratch);
          check_within_bound<float>(c_row, triple_loop(a, b, Eigen::MatrixXd::Zero(m, n)), k,
                                    shape);
          c_row = c0.cast<float>();
          nlb::ops::gemm(ctx, a_row, b_row, c_row, scratch, /*accumulate=*/true);
          check_within_bound<float>(c_row, triple_loop(a, b, c0), k, shape + " accumulate");
        }
}
