// Little-endian loads and stores on byte buffers. safetensors and token files are
// little-endian and their data may sit at any offset (a tensor's begin offset need not be a
// multiple of its element size), so values are always copied out with std::memcpy, never
// read through a reinterpret_cast pointer into the buffer.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace nlb::io::detail {

/// The unsigned integer of the same width as T (T: an arithmetic type of 1, 2, 4 or 8 bytes).
template <class T>
using same_width_uint = std::conditional_t<
    sizeof(T) == 1, std::uint8_t,
    std::conditional_t<sizeof(T) == 2, std::uint16_t,
                       std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;

/// Reverses the bytes of an unsigned integer (std::byteswap is C++23).
template <class U>
constexpr U byte_swap(U value) {
  U out = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) {
    out = static_cast<U>((out << 8) | ((value >> (8 * i)) & 0xFF));
  }
  return out;
}

/// The value of type T stored little-endian at `source` (any alignment). O(sizeof(T)).
template <class T>
T load_le(const std::uint8_t* source) {
  static_assert(std::is_arithmetic_v<T> && sizeof(T) <= 8);
  using U = same_width_uint<T>;
  U bits;
  std::memcpy(&bits, source, sizeof(U));
  if constexpr (std::endian::native == std::endian::big)
    bits = byte_swap(bits);
  return std::bit_cast<T>(bits);
}

/// Stores `value` little-endian at `destination` (any alignment). O(sizeof(T)).
template <class T>
void store_le(std::uint8_t* destination, T value) {
  static_assert(std::is_arithmetic_v<T> && sizeof(T) <= 8);
  using U = same_width_uint<T>;
  U bits = std::bit_cast<U>(value);
  if constexpr (std::endian::native == std::endian::big)
    bits = byte_swap(bits);
  std::memcpy(destination, &bits, sizeof(U));
}

}  // namespace nlb::io::detail
