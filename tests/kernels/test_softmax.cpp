// Softmax with a causal limit (nlb/kernels/softmax.hpp): the SIMD form against the scalar
// reference for every row length up to 4W + 3 and every limit, both against a long-double
// evaluation of the definition, and the properties: sums to 1, masked entries exactly 0,
// invariance to a constant shift, argument checks. softmax_tile: a row streamed in tiles of
// every size, its running maximum and sum combined as tiled attention does, against the
// long-double definition.
#include <boost/test/unit_test.hpp>

#include "nlb/kernels/softmax.hpp"

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

/// The definition exp(x_j) / sum_k exp(x_k) over [0, limit), in long double and without
/// subtracting the maximum (a different algorithm; fine for |x| up to thousands).
template <class T>
std::vector<long double> reference_softmax(const std::vector<T>& x, Index limit) {
  std::vector<long double> e(static_cast<std::size_t>(limit));
  long double sum = 0;
  for (std::size_t j = 0; j < e.size(); ++j) {
    e[j] = std::exp(static_cast<long double>(x[j]));
    sum += e[j];
  }
  for (auto& v : e)
    v /= sum;
  return e;
}

enum class Data { normal, wide, dominant, dominated, offset };
const Data datasets[] = {Data::normal, Data::wide, Data::dominant, Data::dominated, Data::offset};

const char* name(Data d) {
  switch (d) {
    case Data::normal:
      return "N(0,1)";
    case Data::wide:
      return "U[-20,20]";
    case Data::dominant:
      return "one entry +40";
    case Data::dominated:
      return "one entry -60";
    case Data::offset:
      return "N(500,4)";
  }
  return "?";
}

/// A row of n logits; entries at and after `limit` hold 1e30 (they must be ignored: used
/// in the maximum they would dominate it).
template <class T>
std::vector<T> logits(Data data, Index n, Index limit, std::uint64_t seed) {
  std::vector<T> x;
  switch (data) {
    case Data::normal:
      x = nlb::test::normal_row<T>(n, 0, 1, seed);
      break;
    case Data::wide:
      x = nlb::test::uniform_row<T>(n, -20, 20, seed);
      break;
    case Data::dominant:
    case Data::dominated:
      x = nlb::test::normal_row<T>(n, 0, 1, seed);
      x[static_cast<std::size_t>(seed % static_cast<std::uint64_t>(limit))] =
          data == Data::dominant ? T(40) : T(-60);
      break;
    case Data::offset:
      x = nlb::test::normal_row<T>(n, 500, 2, seed);
      break;
  }
  for (Index j = limit; j < n; ++j)
    x[static_cast<std::size_t>(j)] = static_cast<T>(1e30);
  return x;
}

template <class T, class Arch>
void check_simd_and_scalar(const std::string& label) {
  ErrorLog simd_vs_scalar;
  ErrorLog scalar_vs_reference;
  ErrorLog simd_vs_reference;
  ErrorLog sums;
  const auto bound = nlb::test::kernel_bound<T>();
  const Index width = nlb::test::lanes<T, Arch>();
  for (Index n = 1; n <= 4 * width + 3; ++n) {
    for (Index limit = 1; limit <= n; ++limit) {
      for (Data data : datasets) {
        const std::uint64_t seed = static_cast<std::uint64_t>(1000 * n + limit);
        const auto x = logits<T>(data, n, limit, seed);
        auto scalar = x;
        auto simd = x;
        kernels::softmax(backend::scalar{}, scalar.data(), n, limit);
        kernels::softmax(backend::simd<Arch>{}, simd.data(), n, limit);
        const auto reference = reference_softmax(x, limit);
        const std::string where = label + " n=" + std::to_string(n) +
                                  " limit=" + std::to_string(limit) + " " + name(data);
        simd_vs_scalar.compare_rows(simd.data(), scalar.data(), n, bound, where + " simd/scalar");
        scalar_vs_reference.compare_rows(scalar.data(), reference.data(), limit, bound,
                                         where + " scalar/reference");
        simd_vs_reference.compare_rows(simd.data(), reference.data(), limit, bound,
                                       where + " simd/reference");
        for (const auto* row : {&scalar, &simd}) {
          long double total = 0;
          for (Index j = 0; j < limit; ++j)
            total += (*row)[static_cast<std::size_t>(j)];
          BOOST_TEST(sums.compare(total, 1.0L, bound, where + " sum"));
          bool masked_zero = true;
          for (Index j = limit; j < n; ++j) {
            masked_zero = masked_zero && (*row)[static_cast<std::size_t>(j)] == T(0);
          }
          BOOST_TEST(masked_zero, where << ": entries past the limit must be exactly 0");
        }
      }
    }
  }
  const std::string w = " (W=" + std::to_string(width) + ")";
  simd_vs_scalar.report(label + " simd vs scalar" + w);
  scalar_vs_reference.report(label + " scalar vs long double" + w);
  simd_vs_reference.report(label + " simd vs long double" + w);
  sums.report(label + " row sums (expected 1)" + w);
}

// softmax(x + c) == softmax(x) bit for bit when x + c and the differences are exact: x on a
// grid of 2^-10 in [-8, 8] and c = 1024 (x + c needs 21 significant bits). Without the
// maximum subtracted, exp(1024) would overflow. The same compiled function runs on both
// rows (called through a pointer), so any difference comes from the inputs.
template <class T, class Backend>
void check_shift_invariance(Backend, const std::string& label) {
  using Kernel = void (*)(Backend, T*, Index, Index);
  const Kernel kernel = &kernels::softmax<T>;
  for (Index n : {1, 3, 8, 16, 19, 33, 64, 100}) {
    for (Index limit : {Index{1}, (n + 1) / 2, n}) {
      auto x = nlb::test::uniform_row<double>(n, -8, 8, static_cast<std::uint64_t>(n + limit));
      std::vector<T> base(x.size()), shifted(x.size());
      for (std::size_t j = 0; j < x.size(); ++j) {
        base[j] = static_cast<T>(std::round(x[j] * 1024.0) / 1024.0);
        shifted[j] = base[j] + T(1024);
      }
      kernel(Backend{}, base.data(), n, limit);
      kernel(Backend{}, shifted.data(), n, limit);
      BOOST_TEST(base == shifted,
                 label << " n=" << n << " limit=" << limit << boost::test_tools::per_element());
    }
  }
}

// Streams a row of n logits through softmax_tile in tiles of `tile` entries (the last row
// entries after `limit` masked in its tile), keeping every tile's exponentials and the state
// at the time; the weights are then exp(...)·exp(m_tile − m_final) / sum_final. Compared with
// the definition of softmax(scale·x) over [0, limit).
template <class T, class Backend>
void check_streamed_row(Backend backend, Data data, Index n, Index limit, Index tile, T scale,
                        ErrorLog& log, const std::string& label) {
  const auto x = logits<T>(data, n, limit, static_cast<std::uint64_t>(31 * n + tile));
  auto row = x;
  std::vector<T> tile_maximum;
  T maximum = std::numeric_limits<T>::lowest(), sum = T(0);
  for (Index j0 = 0; j0 < limit; j0 += tile) {
    const Index width = std::min(tile, n - j0), seen = std::min(width, limit - j0);
    const auto state = kernels::softmax_tile(backend, row.data() + j0, width, seen, scale, maximum);
    BOOST_TEST(state.maximum >= maximum);
    sum = (j0 == 0 ? T(0) : sum * std::exp(maximum - state.maximum)) + state.sum;
    maximum = state.maximum;
    tile_maximum.push_back(maximum);
  }
  std::vector<long double> weights(static_cast<std::size_t>(limit));
  for (Index j = 0; j < limit; ++j) {
    const auto m = tile_maximum[static_cast<std::size_t>(j / tile)];
    weights[static_cast<std::size_t>(j)] =
        static_cast<long double>(row[static_cast<std::size_t>(j)]) *
        std::exp(static_cast<long double>(m) - maximum) / sum;
  }
  std::vector<T> scaled(x.size());
  for (std::size_t j = 0; j < x.size(); ++j)
    scaled[j] = static_cast<T>(static_cast<long double>(scale) * x[j]);
  const auto reference = reference_softmax(scaled, limit);
  const std::string where = label + " n=" + std::to_string(n) + " limit=" + std::to_string(limit) +
                            " tile=" + std::to_string(tile) + " " + name(data);
  log.compare_rows(weights.data(), reference.data(), limit, nlb::test::kernel_bound<T>(), where);
  bool masked_zero = true;  // the tile holding `limit` has zeros after it
  for (Index j = limit; j < std::min(n, (limit + tile - 1) / tile * tile); ++j)
    masked_zero = masked_zero && row[static_cast<std::size_t>(j)] == T(0);
  BOOST_TEST(masked_zero, where << ": entries past the limit must be exactly 0");
}

template <class T>
void check_streamed_rows(const std::string& label) {
  ErrorLog scalar_log, simd_log;
  const Index width = nlb::test::lanes<T>();
  for (Index n : {Index{1}, Index{5}, width + 1, 3 * width + 2, Index{97}}) {
    for (Index limit : {Index{1}, (n + 1) / 2, n}) {
      for (Index tile : {Index{1}, Index{3}, width, 2 * width + 1, n}) {
        for (Data data : datasets) {
          // scale 0.125 (1/√64, a dense head's) and 1 (features already scaled)
          for (T scale : {T(0.125), T(1)}) {
            check_streamed_row<T>(backend::scalar{}, data, n, limit, tile, scale, scalar_log,
                                  label + " scalar");
            check_streamed_row<T>(backend::simd<>{}, data, n, limit, tile, scale, simd_log,
                                  label + " simd");
          }
        }
      }
    }
  }
  scalar_log.report(label + " streamed in tiles, scalar vs long double");
  simd_log.report(label + " streamed in tiles, simd vs long double");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(softmax)

BOOST_AUTO_TEST_CASE(streamed_tiles_match_the_definition) {
  check_streamed_rows<float>("softmax_tile float");
  check_streamed_rows<double>("softmax_tile double");
}

BOOST_AUTO_TEST_CASE(simd_matches_scalar_and_reference_float) {
  check_simd_and_scalar<float, xsimd::default_arch>("softmax float");
}

BOOST_AUTO_TEST_CASE(simd_matches_scalar_and_reference_double) {
  check_simd_and_scalar<double, xsimd::default_arch>("softmax double");
}

#if XSIMD_WITH_AVX2 || XSIMD_WITH_SSE2
BOOST_AUTO_TEST_CASE(simd_matches_scalar_narrower_arch) {
#if XSIMD_WITH_AVX2
  check_simd_and_scalar<float, xsimd::avx2>("softmax float avx2");
#endif
#if XSIMD_WITH_SSE2
  check_simd_and_scalar<double, xsimd::sse2>("softmax double sse2");
#endif
}
#endif

BOOST_AUTO_TEST_CASE(invariant_to_adding_a_constant) {
  check_shift_invariance<float>(backend::scalar{}, "scalar float");
  check_shift_invariance<float>(backend::simd<>{}, "simd float");
  check_shift_invariance<double>(backend::scalar{}, "scalar double");
  check_shift_invariance<double>(backend::simd<>{}, "simd double");
}

BOOST_AUTO_TEST_CASE(known_values) {
  // softmax(0, ln 2, ln 3) = (1, 2, 3) / 6; limit 2 of (0, ln 3, 99) = (1, 3) / 4 and 0.
  for (int form = 0; form < 2; ++form) {
    std::vector<double> a{0.0, std::log(2.0), std::log(3.0)};
    std::vector<double> b{0.0, std::log(3.0), 99.0};
    if (form == 0) {
      kernels::softmax(backend::scalar{}, a.data(), 3);
      kernels::softmax(backend::scalar{}, b.data(), 3, 2);
    } else {
      kernels::softmax(backend::simd<>{}, a.data(), 3);
      kernels::softmax(backend::simd<>{}, b.data(), 3, 2);
    }
    BOOST_TEST(a[0] == 1.0 / 6, boost::test_tools::tolerance(1e-15));
    BOOST_TEST(a[1] == 2.0 / 6, boost::test_tools::tolerance(1e-15));
    BOOST_TEST(a[2] == 3.0 / 6, boost::test_tools::tolerance(1e-15));
    BOOST_TEST(b[0] == 0.25, boost::test_tools::tolerance(1e-15));
    BOOST_TEST(b[1] == 0.75, boost::test_tools::tolerance(1e-15));
    BOOST_TEST(b[2] == 0.0);
  }
}

BOOST_AUTO_TEST_CASE(limit_one_is_one_hot) {
  for (Index n : {1, 2, 17, 40}) {
    auto s = nlb::test::normal_row<float>(n, 0, 3, 5);
    auto v = s;
    kernels::softmax(backend::scalar{}, s.data(), n, 1);
    kernels::softmax(backend::simd<>{}, v.data(), n, 1);
    std::vector<float> one_hot(static_cast<std::size_t>(n), 0.0f);
    one_hot[0] = 1.0f;
    BOOST_TEST(s == one_hot, boost::test_tools::per_element());
    BOOST_TEST(v == one_hot, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(full_row_overload_uses_limit_n) {
  using ScalarKernel = void (*)(backend::scalar, double*, Index, Index);
  using SimdKernel = void (*)(backend::simd<>, double*, Index, Index);
  const ScalarKernel scalar_kernel = &kernels::softmax<double>;
  const SimdKernel simd_kernel = &kernels::softmax<double>;
  using ScalarFull = void (*)(backend::scalar, double*, Index);
  using SimdFull = void (*)(backend::simd<>, double*, Index);
  const ScalarFull scalar_full = &kernels::softmax<double>;
  const SimdFull simd_full = &kernels::softmax<double>;
  // The full-row overload forwards to the limited one; compare within the kernel bound
  // (the forwarding call may be compiled with different contraction).
  ErrorLog log;
  for (Index n : {1, 9, 24}) {
    const auto x = nlb::test::normal_row<double>(n, 0, 2, 9);
    auto a = x, b = x, c = x, d = x;
    scalar_kernel(backend::scalar{}, a.data(), n, n);
    scalar_full(backend::scalar{}, b.data(), n);
    simd_kernel(backend::simd<>{}, c.data(), n, n);
    simd_full(backend::simd<>{}, d.data(), n);
    log.compare_rows(b.data(), a.data(), n, nlb::test::kernel_bound<double>(), "scalar full");
    log.compare_rows(d.data(), c.data(), n, nlb::test::kernel_bound<double>(), "simd full");
  }
  log.report("full-row overload vs limit = n");
}

BOOST_AUTO_TEST_CASE(limit_out_of_range_throws) {
  std::vector<float> x(5, 1.0f);
  for (Index limit : {Index{-1}, Index{0}, Index{6}, Index{100}}) {
    BOOST_CHECK_THROW(kernels::softmax(backend::scalar{}, x.data(), 5, limit), nlb::ArgumentError);
    BOOST_CHECK_THROW(kernels::softmax(backend::simd<>{}, x.data(), 5, limit), nlb::ArgumentError);
  }
  BOOST_CHECK_THROW(kernels::softmax(backend::scalar{}, x.data(), 0), nlb::ArgumentError);
  BOOST_CHECK_THROW(kernels::softmax(backend::simd<>{}, x.data(), 0), nlb::ArgumentError);
  // A rejected call leaves the row untouched.
  BOOST_TEST(x == std::vector<float>(5, 1.0f), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
