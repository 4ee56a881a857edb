// Element types of safetensors files (names as the safetensors format spells them) and the
// exact conversions between float/double and the two 16-bit floating formats:
//   F16  = IEEE 754 binary16 (1 sign, 5 exponent, 10 mantissa bits; max 65504),
//   BF16 = bfloat16 (1 sign, 8 exponent, 7 mantissa bits; float32's exponent range).
// Decoding is exact (every F16/BF16 value is a float). Encoding rounds to nearest, ties to
// even, with gradual underflow into subnormals, overflow to infinity at max + ulp/2, and NaN
// kept NaN (same sign, top payload bits kept, quiet bit set). See docs/safetensors.md.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "nlb/io/detail/small_float.hpp"

namespace nlb::io {

/// Element type of a tensor in a safetensors file. `BOOL` (one byte, 0 or 1) is read because
/// published checkpoints carry boolean buffers (e.g. causal-mask tensors); a model loader
/// decides whether to use or skip them.
enum class DType { F64, F32, F16, BF16, I64, I32, U8, BOOL };

/// Every DType, in declaration order.
inline constexpr std::array<DType, 8> all_dtypes = {DType::F64,  DType::F32, DType::F16,
                                                    DType::BF16, DType::I64, DType::I32,
                                                    DType::U8,   DType::BOOL};

/// Bytes per element: 8, 4, 2, 2, 8, 4, 1, 1.
constexpr std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F64:
    case DType::I64:
      return 8;
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::U8:
    case DType::BOOL:
      return 1;
  }
  return 0;  // unreachable for valid enumerators
}

/// The name safetensors uses: "F64", "F32", "F16", "BF16", "I64", "I32", "U8", "BOOL".
constexpr std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::F64:
      return "F64";
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::I64:
      return "I64";
    case DType::I32:
      return "I32";
    case DType::U8:
      return "U8";
    case DType::BOOL:
      return "BOOL";
  }
  return "?";
}

/// The DType called `name` (exact, case-sensitive match), or nullopt.
constexpr std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType d : all_dtypes) {
    if (to_string(d) == name)
      return d;
  }
  return std::nullopt;
}

/// True for F64, F32, F16, BF16.
constexpr bool is_floating(DType dtype) {
  return dtype == DType::F64 || dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

/// The float whose binary16 pattern is `bits` (exact; NaN payload kept). O(1).
inline float f16_bits_to_float(std::uint16_t bits) {
  // Branch-free (all three cases computed, one chosen by bit masks, no ?: that GCC keeps as
  // control flow), so that converting a whole tensor vectorizes: loading an F16 checkpoint
  // spends its time here.
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t magnitude = bits & 0x7FFFu;  // exponent and mantissa
  // Normal: rebias the exponent 15 -> 127 and widen the mantissa 10 -> 23 bits.
  const std::uint32_t normal = (magnitude << 13) + ((127u - 15u) << 23);
  // Subnormal (exponent 0): mantissa x 2^-24, exact in float (zero included).
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(
      static_cast<float>(static_cast<std::int32_t>(magnitude)) * 0x1p-24f);
  // Infinity or NaN (exponent 31): the float exponent 255 with the mantissa (payload) kept.
  const std::uint32_t special = 0x7F800000u | ((magnitude & 0x3FFu) << 13);
  const std::uint32_t is_special = 0u - static_cast<std::uint32_t>(magnitude >= 0x7C00u);
  const std::uint32_t is_normal = 0u - static_cast<std::uint32_t>(magnitude >= 0x0400u);
  const std::uint32_t finite = (normal & is_normal) | (subnormal & ~is_normal);
  return std::bit_cast<float>(sign | (special & is_special) | (finite & ~is_special));
}

/// The float whose bfloat16 pattern is `bits`: bfloat16 is the top half of a float32. O(1).
inline float bf16_bits_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

/// `x` rounded to nearest-even binary16. A float argument converts to double exactly, so
/// this is the single correct rounding for float inputs too (no double rounding). O(1).
inline std::uint16_t to_f16_bits(double x) {
  return detail::round_to_small_float<detail::Binary16Format>(x);
}

/// `x` rounded to nearest-even bfloat16 (see to_f16_bits). O(1).
inline std::uint16_t to_bf16_bits(double x) {
  return detail::round_to_small_float<detail::BFloat16Format>(x);
}

}  // namespace nlb::io
