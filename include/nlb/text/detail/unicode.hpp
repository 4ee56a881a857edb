// The Unicode facts the tokenizers need, from utf8proc (Debian libutf8proc-dev,
// docs/dependencies.md): the character classes of the GPT-2 split pattern and NFC.
#pragma once

#include <utf8proc.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "nlb/text/detail/utf8.hpp"

namespace nlb::text::detail {

/// The classes the GPT-2 split pattern distinguishes: \p{L}, \p{N}, \s, everything else.
enum class CharClass : std::uint8_t { letter, number, white_space, other };

/// Unicode White_Space (PropList.txt): the Z* categories (Zs, Zl, Zp) and six controls, TAB..CR
/// and U+0085 NEXT LINE. U+FEFF (Cf) and U+200B (Cf) are not white space. This is what `\s`
/// means in Python's `regex`, Rust's `regex`/`fancy-regex` (tiktoken) and Oniguruma (HF
/// tokenizers); JavaScript's `\s` differs (it includes U+FEFF, excludes U+0085). The test checks
/// this function against the Unicode data of node's ICU over all code points.
inline bool is_white_space(char32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85)
    return true;
  const utf8proc_category_t category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return category == UTF8PROC_CATEGORY_ZS || category == UTF8PROC_CATEGORY_ZL ||
         category == UTF8PROC_CATEGORY_ZP;
}

/// The class of `cp` from its general category (L* letter, N* number). O(1).
inline CharClass classify_code_point(char32_t cp) {
  if (is_white_space(cp))
    return CharClass::white_space;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return CharClass::letter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return CharClass::number;
    default:
      return CharClass::other;
  }
}

/// The classes of the 128 ASCII code points, filled from utf8proc once (most text is mostly
/// ASCII, and a table read is cheaper than utf8proc's two-level lookup).
inline const std::array<CharClass, 128> ascii_classes = [] {
  std::array<CharClass, 128> classes{};
  for (char32_t cp = 0; cp < 128; ++cp)
    classes[cp] = classify_code_point(cp);
  return classes;
}();

/// The class of a unit: an ill-formed subpart counts as U+FFFD (a symbol, class other).
// Always inlined: the split scanners call it per code point, and GCC stops inlining it once a
// translation unit has several of them (3% more instructions in GPT-2's encode).
[[gnu::always_inline]] inline CharClass classify(const Utf8Unit& unit) {
  if (unit.code_point < 128)
    return ascii_classes[unit.code_point];
  return unit.valid ? classify_code_point(unit.code_point) : CharClass::other;
}

/// Appends the NFC form of `text` (well-formed UTF-8) to `out`. O(n).
inline void append_nfc_of_valid(std::string& out, std::string_view text) {
  if (text.empty())
    return;
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (length < 0) {  // only out of memory: the input was checked to be well-formed
    out.append(text);
    return;
  }
  out.append(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(length));
  std::free(mapped);
}

/// `text` in Normalization Form C. Ill-formed subparts pass through unchanged and separate
/// the well-formed runs around them, each of which is normalized on its own (so no byte is
/// lost or altered outside the well-formed runs). Text whose code points are all below U+0300
/// is returned as it is: no such code point has NFC_Quick_Check No or Maybe (UAX #15), so NFC
/// leaves it unchanged. O(n).
inline std::string nfc(std::string_view text) {
  std::size_t pos = 0;
  bool stable = true;
  while (pos < text.size()) {
    const Utf8Unit unit = decode_utf8(text, pos);
    if (!unit.valid || unit.code_point >= 0x300) {
      stable = false;
      break;
    }
    pos += unit.length;
  }
  if (stable)
    return std::string(text);
  std::string out;
  out.reserve(text.size());
  std::size_t run = 0;
  pos = 0;
  while (pos < text.size()) {
    const Utf8Unit unit = decode_utf8(text, pos);
    if (!unit.valid) {
      append_nfc_of_valid(out, text.substr(run, pos - run));
      out.append(text.substr(pos, unit.length));
      run = pos + unit.length;
    }
    pos += unit.length;
  }
  append_nfc_of_valid(out, text.substr(run));
  return out;
}

}  // namespace nlb::text::detail
