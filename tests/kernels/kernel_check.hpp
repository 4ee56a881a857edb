// Helpers shared by the kernel suites: random rows, and element-wise comparison under the
// mixed bound |a - b| <= abs + rel |b| that keeps the worst case for the log.
#pragma once

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "nlb/core.hpp"
#include "tolerances.hpp"

namespace nlb::test {

/// A mixed absolute + relative bound.
struct MixedBound {
  double abs;
  double rel;
};

/// The kernel table entry for T: SIMD vs scalar, and scalar vs a long-double reference.
template <class T>
MixedBound kernel_bound() {
  if constexpr (std::is_same_v<T, float>) {
    return {tol::kernel_float_abs, tol::kernel_float_rel};
  } else {
    return {tol::kernel_double_abs, tol::kernel_double_rel};
  }
}

/// Lanes of xsimd::batch<T, default_arch>, the W of the test plan.
template <class T, class Arch = xsimd::default_arch>
constexpr Index lanes() {
  return static_cast<Index>(xsimd::batch<T, Arch>::size);
}

/// Largest errors seen by a series of comparisons; `ratio` is error / bound (<= 1 passes).
struct ErrorLog {
  double max_abs = 0;
  double max_rel = 0;  // |a - b| / |b| over entries with b != 0
  double max_ratio = 0;
  std::string worst = "(none)";

  /// Compares a to the expected b under `bound`; records it and returns whether it passes.
  /// `where` (and `index` when >= 0) name the entry in the message of the worst case.
  template <class A, class B>
  bool compare(A a, B b, MixedBound bound, const std::string& where, Index index = -1) {
    const long double la = static_cast<long double>(a);
    const long double lb = static_cast<long double>(b);
    const double err = static_cast<double>(std::fabs(la - lb));
    const double allowed = bound.abs + bound.rel * static_cast<double>(std::fabs(lb));
    const double ratio = std::isnan(err) ? INFINITY : err / allowed;
    if (!std::isnan(err))
      max_abs = std::max(max_abs, err);
    // Relative error only where b is a normal double (a denormal b makes it meaningless).
    if (std::fabs(lb) >= std::numeric_limits<double>::min() && !std::isnan(err)) {
      max_rel = std::max(max_rel, err / static_cast<double>(std::fabs(lb)));
    }
    if (ratio > max_ratio) {
      max_ratio = ratio;
      std::ostringstream out;
      out.precision(10);
      out << where;
      if (index >= 0)
        out << " [" << index << "]";
      out << ": got " << static_cast<double>(la) << ", expected " << static_cast<double>(lb)
          << ", error " << err << " (allowed " << allowed << ")";
      worst = out.str();
    }
    return ratio <= 1.0;
  }

  /// Folds another log into this one.
  void merge(const ErrorLog& other) {
    max_abs = std::max(max_abs, other.max_abs);
    max_rel = std::max(max_rel, other.max_rel);
    if (other.max_ratio > max_ratio) {
      max_ratio = other.max_ratio;
      worst = other.worst;
    }
  }

  /// Compares a[0, n) to the expected b[0, n) element-wise; one BOOST_TEST (on the worst
  /// element of the row), and the row's errors folded into this log.
  template <class A, class B>
  void compare_rows(const A* a, const B* b, Index n, MixedBound bound, const std::string& where) {
    ErrorLog row;
    for (Index i = 0; i < n; ++i)
      row.compare(a[i], b[i], bound, where, i);
    BOOST_TEST(row.max_ratio <= 1.0, row.worst);
    merge(row);
  }

  /// Writes the maxima to the test log.
  void report(const std::string& what) const {
    BOOST_TEST_MESSAGE(what << ": max abs error " << max_abs << ", max rel error " << max_rel
                            << ", worst error/bound " << max_ratio << " at " << worst);
  }
};

/// n values drawn i.i.d. uniform on [lo, hi], as T.
template <class T>
std::vector<T> uniform_row(Index n, double lo, double hi, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> row(static_cast<std::size_t>(n));
  for (auto& v : row)
    v = static_cast<T>(dist(rng));
  return row;
}

/// n values drawn i.i.d. N(mean, sd²), as T.
template <class T>
std::vector<T> normal_row(Index n, double mean, double sd, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(mean, sd);
  std::vector<T> row(static_cast<std::size_t>(n));
  for (auto& v : row)
    v = static_cast<T>(dist(rng));
  return row;
}

/// Rows a normalizing kernel (LayerNorm, RMSNorm) is checked on: N(mean, sd²) entries and eps.
struct NormCase {
  double mean, sd, eps;
  const char* label;
};
/// Centered data; an offset of 3 standard deviations (LayerNorm must remove it, RMSNorm keep it);
/// a wide range; a row whose spread is below eps (eps dominates the scale); a large scale.
inline constexpr NormCase norm_cases[] = {{0, 1, 1e-5, "N(0,1)"},
                                          {3, 1, 1e-5, "N(3,1)"},
                                          {0, 12, 1e-5, "N(0,144)"},
                                          {0, 1e-3, 1e-5, "N(0,1e-6) below eps"},
                                          {-50, 100, 1e-5, "N(-50,1e4)"}};

}  // namespace nlb::test
