// GPT-2's byte-level alphabet: each of the 256 byte values stands for one printable code point
// (OpenAI's `bytes_to_unicode`), so a vocabulary of byte strings can be written as text in
// vocab.json / tokenizer.json. The bytes 0x21..0x7E, 0xA1..0xAC and 0xAE..0xFF stand for
// themselves (as code points); the other 68 bytes, in increasing order, for U+0100, U+0101, ...
// (so the space 0x20 is U+0120 'Ġ'). nlbudget converts vocabularies to bytes when loading and
// merges bytes, so the alphabet is needed only at the file boundary.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "nlb/text/detail/utf8.hpp"

namespace nlb::text::detail {

/// True for the bytes that stand for themselves in the byte-level alphabet.
constexpr bool byte_stands_for_itself(unsigned byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
}

/// byte -> the code point that stands for it.
inline constexpr std::array<char32_t, 256> byte_to_code_point = [] {
  std::array<char32_t, 256> table{};
  char32_t next = 0x100;
  for (unsigned byte = 0; byte < 256; ++byte)
    table[byte] = byte_stands_for_itself(byte) ? static_cast<char32_t>(byte) : next++;
  return table;
}();

/// The byte a code point of the alphabet stands for; nullopt for any other code point.
constexpr std::optional<std::uint8_t> code_point_to_byte(char32_t cp) {
  if (cp < 0x100)
    return byte_stands_for_itself(cp) ? std::optional<std::uint8_t>(static_cast<std::uint8_t>(cp))
                                      : std::nullopt;
  if (cp >= 0x100 + 68)
    return std::nullopt;
  unsigned index = cp - 0x100;  // the index-th byte that does not stand for itself
  for (unsigned byte = 0; byte < 256; ++byte) {
    if (!byte_stands_for_itself(byte) && index-- == 0)
      return static_cast<std::uint8_t>(byte);
  }
  return std::nullopt;
}

/// The bytes a vocabulary entry written in the byte-level alphabet stands for; nullopt when it
/// is not well-formed UTF-8 or has a code point outside the alphabet. O(length).
inline std::optional<std::string> bytes_of_byte_level(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  std::size_t pos = 0;
  while (pos < token.size()) {
    const Utf8Unit unit = decode_utf8(token, pos);
    if (!unit.valid)
      return std::nullopt;
    const std::optional<std::uint8_t> byte = code_point_to_byte(unit.code_point);
    if (!byte)
      return std::nullopt;
    bytes += static_cast<char>(*byte);
    pos += unit.length;
  }
  return bytes;
}

/// `bytes` written in the byte-level alphabet (as vocab.json writes tokens). O(length).
inline std::string byte_level_of_bytes(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (const char c : bytes)
    append_utf8(text, byte_to_code_point[static_cast<unsigned char>(c)]);
  return text;
}

}  // namespace nlb::text::detail
