// The GPT-2 split ("pre-tokenization"): the text is cut into pieces, each encoded by BPE on its
// own, exactly as the regular expression of GPT-2's encoder.py (also HF tokenizers' ByteLevel
// pre-tokenizer with use_regex and tiktoken's gpt2 encoding) cuts it:
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// written as a scanner over code points (one pass, no backtracking beyond one character).
// `\s` is Unicode White_Space (it includes U+0085, not U+FEFF: detail/unicode.hpp), \p{L} and
// \p{N} the general categories L* and N*, all from utf8proc. The contractions are ASCII and
// case-sensitive ("'S" is not one), as in the pattern.
//
// Ill-formed UTF-8: each maximal ill-formed subpart (detail/utf8.hpp) is split as if it were
// U+FFFD REPLACEMENT CHARACTER, a symbol: it joins the runs of [^\s\p{L}\p{N}] around it and
// takes an optional leading space, like any punctuation. Its bytes are kept as they are, so the
// pieces always concatenate to the input.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "nlb/text/detail/unicode.hpp"
#include "nlb/text/detail/utf8.hpp"

namespace nlb::text {

/// Calls `piece(std::string_view)` for each piece of `text`, in order; the pieces are
/// non-empty and concatenate to `text`. O(n) in the bytes of `text`.
template <class Piece>
void for_each_gpt2_piece(std::string_view text, Piece&& piece) {
  using detail::CharClass;
  const std::size_t n = text.size();
  // Length of the run of units of class `cls` starting at `pos`.
  const auto run_end = [&](std::size_t pos, CharClass cls) {
    while (pos < n) {
      const detail::Utf8Unit unit = detail::decode_utf8(text, pos);
      if (detail::classify(unit) != cls)
        break;
      pos += unit.length;
    }
    return pos;
  };
  std::size_t pos = 0;
  while (pos < n) {
    const detail::Utf8Unit unit = detail::decode_utf8(text, pos);
    const CharClass cls = detail::classify(unit);
    std::size_t end = pos;
    if (unit.code_point == U'\'' && pos + 1 < n) {
      // 's 't 'm 'd 're 've 'll
      const std::string_view rest = text.substr(pos + 1);
      const char c = rest[0];
      if (c == 's' || c == 't' || c == 'm' || c == 'd') {
        end = pos + 2;
      } else if (rest.starts_with("re") || rest.starts_with("ve") || rest.starts_with("ll")) {
        end = pos + 3;
      }
    }
    if (end == pos && unit.code_point == U' ' && pos + 1 < n) {
      // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": a space glues to the run after it.
      const CharClass next = detail::classify(detail::decode_utf8(text, pos + 1));
      if (next != CharClass::white_space)
        end = run_end(pos + 1, next);
    }
    if (end == pos && cls != CharClass::white_space)
      end = run_end(pos, cls);
    if (end == pos) {
      // \s+(?!\S) then \s+: a white-space run up to the end of the text is one piece; one that
      // a non-space follows leaves its last unit to the next piece (where a space glues to
      // what follows), unless it is a single unit.
      std::size_t last = pos;
      end = pos;
      while (end < n) {
        const detail::Utf8Unit u = detail::decode_utf8(text, end);
        if (detail::classify(u) != CharClass::white_space)
          break;
        last = end;
        end += u.length;
      }
      if (end < n && last > pos)
        end = last;
    }
    piece(text.substr(pos, end - pos));
    pos = end;
  }
}

/// The pieces of `text` (views into it), as for_each_gpt2_piece gives them. O(n).
inline std::vector<std::string_view> split_gpt2_pieces(std::string_view text) {
  std::vector<std::string_view> pieces;
  for_each_gpt2_piece(text, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

}  // namespace nlb::text
