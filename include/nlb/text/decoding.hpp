// Decoding: how a tokenizer turns the tokens of ids back into text (HF tokenizers' "decoder").
// A list of steps over the list of token strings; the strings left at the end are concatenated.
// The steps nlbudget implements (what the shipped families use):
//   byte_level     the tokens' bytes concatenated into one string (the tokens of a byte-level
//                  vocabulary are kept as bytes already)
//   replace        every occurrence of `pattern` in each token by `content` ("▁" -> " ")
//   byte_fallback  runs of tokens "<0xNN>" become the bytes NN
//   fuse           all tokens concatenated into one
//   strip          up to `start` leading and `stop` trailing `content` characters removed from
//                  each token
//   metaspace      each `replacement` becomes a space, except in the first token unless
//                  `prepend` is never, where it is dropped
// Where the bytes are not well-formed UTF-8, IllFormedUtf8 says what happens: `keep` leaves the
// bytes as they are (a prefix of a text's ids may cut a character; streaming output wants the
// bytes), `replace` puts U+FFFD where HF tokenizers puts it — per maximal ill-formed subpart of
// byte_level's output (Rust's from_utf8_lossy), one per byte token of a byte_fallback run that
// is not well-formed as a whole.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlb/text/detail/utf8.hpp"
#include "nlb/text/normalization.hpp"
#include "nlb/text/pre_tokenization.hpp"

namespace nlb::text {

/// What decoding does with bytes that are not well-formed UTF-8.
enum class IllFormedUtf8 {
  keep,     ///< the bytes as they are
  replace,  ///< U+FFFD where HF tokenizers' decode puts it
};

/// One decoder.
struct DecoderStep {
  enum class Kind { byte_level, replace, byte_fallback, fuse, strip, metaspace };
  Kind kind = Kind::byte_level;
  std::string pattern;    ///< replace: what is replaced (non-empty); metaspace: the replacement
  std::string content;    ///< replace: the replacement; strip: the character stripped
  std::size_t start = 0;  ///< strip: leading characters at most
  std::size_t stop = 0;   ///< strip: trailing characters at most
  PrependScheme prepend = PrependScheme::always;  ///< metaspace
};

/// A list of decoder steps.
class Decoding {
 public:
  Decoding() = default;
  explicit Decoding(std::vector<DecoderStep> steps) : steps_(std::move(steps)) {}
  /// ByteLevel alone (GPT-2, GPT-NeoX, Llama 3, Qwen2).
  static Decoding byte_level() { return Decoding({DecoderStep{}}); }

  const std::vector<DecoderStep>& steps() const { return steps_; }
  bool empty() const { return steps_.empty(); }
  /// True when the steps are ByteLevel alone.
  bool is_byte_level() const {
    return steps_.size() == 1 && steps_[0].kind == DecoderStep::Kind::byte_level;
  }

  /// The text of `tokens` (the decoder's input strings, in order): the steps, then the strings
  /// left joined by `separator`. O(total bytes · steps).
  std::string apply(std::vector<std::string> tokens, IllFormedUtf8 ill_formed,
                    std::string_view separator = "") const {
    for (const DecoderStep& step : steps_) {
      switch (step.kind) {
        case DecoderStep::Kind::byte_level: {
          std::string joined = join(tokens, "");
          tokens.assign(1, ill_formed == IllFormedUtf8::replace ? lossy(joined) : joined);
          break;
        }
        case DecoderStep::Kind::fuse:
          tokens.assign(1, join(tokens, ""));
          break;
        case DecoderStep::Kind::replace:
          for (std::string& token : tokens)
            token = Normalization::replace_all(token, step.pattern, step.content);
          break;
        case DecoderStep::Kind::byte_fallback:
          tokens = byte_fallback(std::move(tokens), ill_formed);
          break;
        case DecoderStep::Kind::strip:
          for (std::string& token : tokens)
            token = strip(token, step);
          break;
        case DecoderStep::Kind::metaspace:
          for (std::size_t i = 0; i < tokens.size(); ++i) {
            const bool drop = i == 0 && step.prepend != PrependScheme::never;
            tokens[i] = Normalization::replace_all(tokens[i], step.pattern, drop ? "" : " ");
          }
          break;
      }
    }
    return join(tokens, separator);
  }

  /// `bytes` with each maximal ill-formed subpart replaced by U+FFFD. O(n).
  static std::string lossy(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    for (std::size_t pos = 0; pos < bytes.size();) {
      const detail::Utf8Unit unit = detail::decode_utf8(bytes, pos);
      if (unit.valid)
        out.append(bytes.substr(pos, unit.length));
      else
        out.append("\xef\xbf\xbd");
      pos += unit.length;
    }
    return out;
  }

  /// The byte a byte-fallback token stands for: "<0xNN>" with two hex digits of either case
  /// (what HF's ByteFallback decoder reads), else -1.
  static int fallback_byte(std::string_view token) {
    if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>')
      return -1;
    const auto digit = [](char c) {
      if (c >= '0' && c <= '9')
        return c - '0';
      if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
      if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
      return -1;
    };
    const int high = digit(token[3]), low = digit(token[4]);
    return high < 0 || low < 0 ? -1 : high * 16 + low;
  }

 private:
  static std::string join(const std::vector<std::string>& tokens, std::string_view separator) {
    std::string out;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0)
        out.append(separator);
      out.append(tokens[i]);
    }
    return out;
  }

  static bool well_formed(std::string_view bytes) {
    for (std::size_t pos = 0; pos < bytes.size();) {
      const detail::Utf8Unit unit = detail::decode_utf8(bytes, pos);
      if (!unit.valid)
        return false;
      pos += unit.length;
    }
    return true;
  }

  // A run of byte tokens becomes one token of its bytes; under `replace`, a run that is not
  // well-formed UTF-8 as a whole becomes one U+FFFD per byte token instead (HF's rule).
  static std::vector<std::string> byte_fallback(std::vector<std::string> tokens,
                                                IllFormedUtf8 ill_formed) {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    std::size_t run_tokens = 0;
    const auto flush = [&] {
      if (run_tokens == 0)
        return;
      if (ill_formed == IllFormedUtf8::keep || well_formed(run)) {
        out.push_back(run);
      } else {
        for (std::size_t k = 0; k < run_tokens; ++k)
          out.emplace_back("\xef\xbf\xbd");
      }
      run.clear();
      run_tokens = 0;
    };
    for (std::string& token : tokens) {
      if (const int byte = fallback_byte(token); byte >= 0) {
        run += static_cast<char>(byte);
        ++run_tokens;
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    return out;
  }

  // Strips up to step.start leading and step.stop trailing step.content characters; a token
  // made only of them is emptied once (HF would fail on a start and stop that overlap).
  static std::string strip(std::string_view token, const DecoderStep& step) {
    const std::string_view c = step.content;
    std::size_t begin = 0, end = token.size();
    for (std::size_t k = 0; k < step.start && token.substr(begin).starts_with(c); ++k)
      begin += c.size();
    for (std::size_t k = 0;
         k < step.stop && end >= begin + c.size() && token.substr(0, end).ends_with(c); ++k)
      end -= c.size();
    return std::string(token.substr(begin, end - begin));
  }

  std::vector<DecoderStep> steps_;
};

}  // namespace nlb::text
