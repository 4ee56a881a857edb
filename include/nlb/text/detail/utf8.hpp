// UTF-8 decoding that never fails: a well-formed sequence gives its code point, anything else
// gives one "maximal subpart" of an ill-formed sequence (Unicode 15 §3.9, "U+FFFD substitution of
// maximal subparts", the practice the WHATWG encoding standard follows). The tokenizers treat
// such a subpart as one character of class "other", as if it were U+FFFD, but keep its bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nlb::text::detail {

/// One unit of a byte string: a code point (`valid`) or one maximal ill-formed subpart
/// (`!valid`, `code_point` = U+FFFD), `length` bytes long (1..4).
struct Utf8Unit {
  char32_t code_point;
  std::uint8_t length;
  bool valid;
};

/// The unit that starts at `text[pos]` (pos < text.size()). O(1).
inline Utf8Unit decode_utf8(std::string_view text, std::size_t pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80)
    return {lead, 1, true};
  // Length and first-continuation range by lead byte (Unicode Table 3-7): the narrowed ranges
  // after E0, ED, F0 and F4 exclude overlong forms, surrogates and code points above U+10FFFF.
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0)
      low = 0xA0;
    if (lead == 0xED)
      high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0)
      low = 0x90;
    if (lead == 0xF4)
      high = 0x8F;
  } else {
    return {U'\uFFFD', 1, false};  // a continuation byte, C0, C1 or F5..FF: never a lead
  }
  char32_t cp = lead & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
  for (std::size_t i = 1; i < length; ++i) {
    if (pos + i >= text.size())
      return {U'\uFFFD', static_cast<std::uint8_t>(i), false};  // truncated at the end
    const unsigned char c = byte(pos + i);
    if (c < low || c > high)
      return {U'\uFFFD', static_cast<std::uint8_t>(i), false};  // the subpart ends before c
    low = 0x80;
    high = 0xBF;
    cp = (cp << 6) | (c & 0x3F);
  }
  return {cp, static_cast<std::uint8_t>(length), true};
}

/// Appends the UTF-8 encoding of `cp` (a scalar value) to `out`.
inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// True when every byte of `text` is below 0x80. O(n).
inline bool is_ascii(std::string_view text) {
  for (const char c : text)
    if (static_cast<unsigned char>(c) >= 0x80)
      return false;
  return true;
}

}  // namespace nlb::text::detail
