// The Llama 3 and Qwen2 split ("pre-tokenization"): the text is cut into pieces, each encoded by
// BPE on its own, exactly as HF tokenizers' Split pre-tokenizer (Oniguruma, behavior "Isolated")
// cuts it with the pattern these checkpoints' tokenizer.json files carry:
//
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
//
// (Llama 3; Qwen2's differs only in `\p{N}` for `\p{N}{1,3}`: one digit per piece), written as a
// scanner over code points, not a regex engine: at each position the first alternative that
// matches wins, each as greedy as its quantifiers allow, which for these alternatives is the
// longest run the class admits, cut back where a look-ahead or a required tail demands it.
// The classes are those of the GPT-2 split (detail/unicode.hpp): `\s` Unicode White_Space, \p{L}
// and \p{N} the general categories L* and N*. What differs from GPT-2's pattern: contractions
// match in any case ("'S", "'LL"; Oniguruma's case folding also takes U+017F LONG S for "s",
// checked against HF tokenizers), one character that is neither a letter, a digit nor CR/LF
// glues to the letters after it ("(hello", "\tword"), digits come in groups of at most 3 (or
// 1), punctuation takes the CR/LF after it, and white space up to its last CR/LF is one piece.
//
// Ill-formed UTF-8: as in the GPT-2 split, each maximal ill-formed subpart (detail/utf8.hpp)
// counts as U+FFFD, a symbol, and keeps its bytes, so the pieces concatenate to the input.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "nlb/text/detail/unicode.hpp"
#include "nlb/text/detail/utf8.hpp"

namespace nlb::text {

/// Calls `piece(std::string_view)` for each piece of `text` under the Llama 3 pattern
/// (`max_digits` 3) or the Qwen2 pattern (`max_digits` 1), in order; the pieces are non-empty
/// and concatenate to `text`. O(n) in the bytes of `text`.
template <class Piece>
void for_each_llama_piece(std::string_view text, std::size_t max_digits, Piece&& piece) {
  using detail::CharClass;
  const std::size_t n = text.size();
  const auto unit_at = [&](std::size_t pos) { return detail::decode_utf8(text, pos); };
  const auto class_at = [&](std::size_t pos) { return detail::classify(unit_at(pos)); };
  const auto is_cr_lf = [](const detail::Utf8Unit& u) {
    return u.code_point == U'\r' || u.code_point == U'\n';
  };
  // The end of the run of units of class `cls` starting at `pos`.
  const auto run_end = [&](std::size_t pos, CharClass cls) {
    while (pos < n) {
      const detail::Utf8Unit unit = unit_at(pos);
      if (detail::classify(unit) != cls)
        break;
      pos += unit.length;
    }
    return pos;
  };
  // The contraction letter at `pos`, folded to ASCII lower case (0 for anything else): (?i)
  // folds 'S' and U+017F LATIN SMALL LETTER LONG S to 's'; no other letter of the contractions
  // has a fold outside ASCII.
  const auto folded_at = [&](std::size_t pos, std::size_t& next) -> char32_t {
    if (pos >= n)
      return 0;
    const detail::Utf8Unit unit = unit_at(pos);
    next = pos + unit.length;
    if (!unit.valid)
      return 0;
    if (unit.code_point == 0x17F)
      return U's';
    if (unit.code_point >= U'A' && unit.code_point <= U'Z')
      return unit.code_point - U'A' + U'a';
    return unit.code_point;
  };
  std::size_t pos = 0;
  while (pos < n) {
    const detail::Utf8Unit unit = unit_at(pos);
    const CharClass cls = detail::classify(unit);
    const std::size_t after = pos + unit.length;
    std::size_t end = pos;
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (unit.code_point == U'\'' && unit.valid) {
      std::size_t second = 0, third = 0;
      const char32_t c1 = folded_at(after, second);
      if (c1 == U's' || c1 == U't' || c1 == U'm' || c1 == U'd') {
        end = second;
      } else if (c1 == U'r' || c1 == U'v' || c1 == U'l') {
        const char32_t c2 = folded_at(second, third);
        if ((c1 == U'l' && c2 == U'l') || (c1 != U'l' && c2 == U'e'))
          end = third;
      }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (end == pos) {
      if (cls == CharClass::letter)
        end = run_end(after, CharClass::letter);
      else if (cls != CharClass::number && !is_cr_lf(unit) && after < n &&
               class_at(after) == CharClass::letter)
        end = run_end(after, CharClass::letter);
    }
    // \p{N}{1,max_digits}
    if (end == pos && cls == CharClass::number) {
      end = after;
      for (std::size_t k = 1; k < max_digits && end < n; ++k) {
        const detail::Utf8Unit next = unit_at(end);
        if (detail::classify(next) != CharClass::number)
          break;
        end += next.length;
      }
    }
    // " ?[^\s\p{L}\p{N}]+[\r\n]*"
    if (end == pos) {
      std::size_t start = pos;
      if (unit.code_point == U' ' && after < n && class_at(after) == CharClass::other)
        start = after;
      if (class_at(start) == CharClass::other) {
        end = run_end(start, CharClass::other);
        while (end < n && (text[end] == '\r' || text[end] == '\n'))
          ++end;
      }
    }
    if (end == pos && cls == CharClass::white_space) {
      // The white-space run [pos, run) and the start of its last unit and after its last CR/LF.
      std::size_t run = pos, last = pos, after_cr_lf = pos;
      while (run < n) {
        const detail::Utf8Unit u = unit_at(run);
        if (detail::classify(u) != CharClass::white_space)
          break;
        last = run;
        run += u.length;
        if (is_cr_lf(u))
          after_cr_lf = run;
      }
      if (after_cr_lf > pos)
        end = after_cr_lf;  // \s*[\r\n]+
      else if (run < n && last > pos)
        end = last;  // \s+(?!\S): the last unit is left to glue to what follows
      else
        end = run;  // \s+(?!\S) at the end of the text, or \s+
    }
    if (end == pos)
      end = after;  // unreachable: the alternatives cover every class; kept for termination
    piece(text.substr(pos, end - pos));
    pos = end;
  }
}

/// The pieces of `text` (views into it), as for_each_llama_piece gives them. O(n).
inline std::vector<std::string_view> split_llama_pieces(std::string_view text,
                                                        std::size_t max_digits) {
  std::vector<std::string_view> pieces;
  for_each_llama_piece(text, max_digits, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

}  // namespace nlb::text
