// Bit-exact conversions between double and the 16-bit floating formats, written out by
// hand so that they do not depend on compiler support for _Float16 or on the host's
// floating-point environment.
//
// A small IEEE-style format has 1 sign bit, E exponent bits (bias 2^(E-1) - 1) and M stored
// mantissa bits:
//   binary16 ("F16"):  E = 5, M = 10: normals 2^-14 .. 65504, subnormals down to 2^-24;
//   bfloat16 ("BF16"): E = 8, M = 7:  the exponent range of float32 with 8 significant bits.
// Every such value is exactly representable in float (and double), so decoding is exact.
// Encoding rounds to nearest, ties to even (IEEE 754 roundTiesToEven), including into the
// subnormal range; a magnitude at or above max + ulp/2 becomes infinity, as IEEE specifies.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace nlb::io::detail {

/// Layout constants of a 16-bit format with `ExponentBits` exponent and `MantissaBits`
/// stored mantissa bits.
template <int ExponentBits, int MantissaBits>
struct SmallFloatFormat {
  static_assert(1 + ExponentBits + MantissaBits == 16);
  static constexpr int mantissa_bits = MantissaBits;
  static constexpr int bias = (1 << (ExponentBits - 1)) - 1;
  static constexpr int min_normal_exponent = 1 - bias;  // unbiased exponent of the smallest normal
  static constexpr int max_exponent = bias;             // unbiased exponent of the largest finite
  static constexpr std::uint32_t sign_bit = 1u << 15;
  static constexpr std::uint32_t exponent_field = ((1u << ExponentBits) - 1) << MantissaBits;
  static constexpr std::uint32_t quiet_bit = 1u << (MantissaBits - 1);
};

using Binary16Format = SmallFloatFormat<5, 10>;
using BFloat16Format = SmallFloatFormat<8, 7>;

/// `x` rounded to nearest-even in `Format`, as its 16 bit pattern.
///   finite: value = significand * 2^(exponent - 52) with a 53-bit significand; the target's
///     quantum (ulp) at that magnitude is 2^(max(exponent, min_normal) - M), so the rounded
///     significand is q = significand / 2^shift rounded to nearest-even (shift >= 52 - M > 0).
///     In the normal range the stored bits are ((exponent + bias) << M) + q - 2^M: when rounding
///     carries q up to 2^(M+1), the addition carries into the exponent field, and past the
///     largest finite value it lands exactly on the infinity pattern (exponent all ones,
///     mantissa 0). In the subnormal range the stored bits are q itself, and q = 2^M is the
///     smallest normal's pattern.
///   infinity: infinity of the same sign.
///   NaN: a quiet NaN of the same sign that keeps the top M payload bits.
/// O(1).
template <class Format>
std::uint16_t round_to_small_float(double x) {
  constexpr int M = Format::mantissa_bits;
  const auto bits = std::bit_cast<std::uint64_t>(x);
  const std::uint32_t sign = (bits >> 63) != 0 ? Format::sign_bit : 0u;
  const int biased_exponent = static_cast<int>((bits >> 52) & 0x7FF);
  const std::uint64_t fraction = bits & ((std::uint64_t{1} << 52) - 1);

  if (biased_exponent == 0x7FF) {
    if (fraction == 0)
      return static_cast<std::uint16_t>(sign | Format::exponent_field);
    const auto payload = static_cast<std::uint32_t>(fraction >> (52 - M));
    return static_cast<std::uint16_t>(sign | Format::exponent_field | Format::quiet_bit | payload);
  }
  if (biased_exponent == 0 && fraction == 0)
    return static_cast<std::uint16_t>(sign);

  // Double subnormals keep exponent -1022 without the implicit bit; they are far below
  // half the smallest subnormal of either format and end in the `shift > 63` branch.
  const int exponent = biased_exponent == 0 ? -1022 : biased_exponent - 1023;
  const std::uint64_t significand =
      biased_exponent == 0 ? fraction : (fraction | (std::uint64_t{1} << 52));
  if (exponent > Format::max_exponent) {
    return static_cast<std::uint16_t>(sign | Format::exponent_field);  // |x| >= 2^(emax + 1)
  }

  const int quantum_exponent = std::max(exponent, Format::min_normal_exponent) - M;
  const int shift = quantum_exponent - (exponent - 52);
  if (shift > 63)
    return static_cast<std::uint16_t>(sign);  // |x| < 2^(quantum - 11): rounds to 0
  std::uint64_t q = significand >> shift;
  const std::uint64_t remainder = significand & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t half = std::uint64_t{1} << (shift - 1);
  if (remainder > half || (remainder == half && (q & 1) != 0))
    ++q;

  std::uint32_t magnitude = 0;
  if (exponent < Format::min_normal_exponent) {
    magnitude = static_cast<std::uint32_t>(q);
  } else {
    magnitude = (static_cast<std::uint32_t>(exponent + Format::bias) << M) +
                static_cast<std::uint32_t>(q - (std::uint64_t{1} << M));
  }
  return static_cast<std::uint16_t>(sign | magnitude);
}

}  // namespace nlb::io::detail
