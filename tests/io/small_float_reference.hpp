// Independent references for F16/BF16, written differently from include/nlb/io/dtype.hpp:
// decoding by the IEEE value formula with std::ldexp, encoding by searching the sorted table
// of every representable value for the nearest one (ties to the even bit pattern).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace nlb::test {

/// A 16-bit format with `exponent_bits` and `mantissa_bits`, decoded by formula.
struct SmallFloatReference {
  int exponent_bits;
  int mantissa_bits;

  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  std::uint32_t max_exponent_field() const { return (1u << exponent_bits) - 1; }

  /// (-1)^s * m * 2^(1 - bias - M) for subnormals, (-1)^s * (2^M + m) * 2^(e - bias - M)
  /// for normals; infinity and NaN for the all-ones exponent.
  double decode(std::uint16_t bits) const {
    const bool negative = (bits & 0x8000u) != 0;
    const std::uint32_t e = (bits >> mantissa_bits) & max_exponent_field();
    const std::uint32_t m = bits & ((1u << mantissa_bits) - 1);
    double magnitude = 0;
    if (e == max_exponent_field()) {
      magnitude = m == 0 ? std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
    } else if (e == 0) {
      magnitude = std::ldexp(static_cast<double>(m), 1 - bias() - mantissa_bits);
    } else {
      magnitude = std::ldexp(static_cast<double>((1u << mantissa_bits) + m),
                             static_cast<int>(e) - bias() - mantissa_bits);
    }
    return negative ? -magnitude : magnitude;
  }

  /// Every positive finite value in pattern order (patterns 0 .. largest finite), then the
  /// value the next pattern (infinity) would have if the exponent range continued: the IEEE
  /// overflow rule rounds to infinity exactly when that "value" is nearest.
  std::vector<double> positive_table() const {
    const std::uint16_t infinity_pattern =
        static_cast<std::uint16_t>(max_exponent_field() << mantissa_bits);
    std::vector<double> table;
    for (std::uint32_t p = 0; p < infinity_pattern; ++p) {
      table.push_back(decode(static_cast<std::uint16_t>(p)));
    }
    table.push_back(std::ldexp(1.0, bias() + 1));
    return table;
  }

  /// The pattern nearest to finite `x` (ties to the even pattern), by binary search in `table`
  /// (from positive_table()).
  std::uint16_t encode_nearest(double x, const std::vector<double>& table) const {
    const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(x);
    const auto last = static_cast<std::uint32_t>(table.size() - 1);  // the infinity pattern
    if (a >= table.back())
      return static_cast<std::uint16_t>(sign | last);
    // p: the largest pattern whose value is <= a.
    const auto upper = std::upper_bound(table.begin(), table.end(), a);
    const auto p = static_cast<std::uint32_t>(upper - table.begin() - 1);
    const double midpoint = (table[p] + table[p + 1]) / 2;  // exact: <= 18 significant bits
    std::uint32_t chosen = p;
    if (a > midpoint || (a == midpoint && (p & 1u) != 0))
      chosen = p + 1;
    return static_cast<std::uint16_t>(sign | chosen);
  }
};

inline constexpr SmallFloatReference binary16_reference{5, 10};
inline constexpr SmallFloatReference bfloat16_reference{8, 7};

}  // namespace nlb::test
