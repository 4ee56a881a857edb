// Normalization: what a tokenizer does to text before splitting it (HF tokenizers' "normalizer").
// The steps nlbudget implements are those the shipped model families use: NFC (GPT-NeoX, Qwen2),
// and Prepend + Replace (Llama 2, Mistral and TinyLlama's tokenizer.json: "▁" in front of the
// text and for every space). A Sequence of normalizers is a list of steps applied in order.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlb/text/detail/unicode.hpp"

namespace nlb::text {

/// One normalizer.
struct NormalizerStep {
  enum class Kind {
    nfc,      ///< Unicode Normalization Form C (ill-formed subparts pass unchanged)
    prepend,  ///< `content` in front of the text, unless the text is empty
    replace,  ///< every occurrence of `pattern` (a string, not a regex) by `content`
  };
  Kind kind = Kind::nfc;
  std::string pattern;  ///< replace: what is replaced (non-empty)
  std::string content;  ///< prepend: what is prepended; replace: the replacement
};

/// A list of normalizer steps applied in order; empty: the text is left as it is.
class Normalization {
 public:
  Normalization() = default;
  explicit Normalization(std::vector<NormalizerStep> steps) : steps_(std::move(steps)) {}

  bool empty() const { return steps_.empty(); }
  const std::vector<NormalizerStep>& steps() const { return steps_; }
  /// True when the only step is NFC (GPT-NeoX's and Qwen2's normalizer).
  bool is_nfc() const { return steps_.size() == 1 && steps_[0].kind == NormalizerStep::Kind::nfc; }

  /// `text` normalized. Any bytes: NFC keeps ill-formed subparts as they are; Replace matches
  /// bytes, which for a well-formed pattern only ever matches whole characters (UTF-8 is
  /// self-synchronizing, and a maximal ill-formed subpart never takes a lead byte). O(n) per
  /// step (Replace: O(n · pattern) in the worst case).
  std::string apply(std::string_view text) const {
    std::string current(text);
    for (const NormalizerStep& step : steps_) {
      switch (step.kind) {
        case NormalizerStep::Kind::nfc:
          current = detail::nfc(current);
          break;
        case NormalizerStep::Kind::prepend:
          if (!current.empty())
            current.insert(0, step.content);
          break;
        case NormalizerStep::Kind::replace:
          current = replace_all(current, step.pattern, step.content);
          break;
      }
    }
    return current;
  }

  /// `text` with every non-overlapping occurrence of `pattern` (non-empty), leftmost first,
  /// replaced by `content`. O(n · pattern) worst case.
  static std::string replace_all(std::string_view text, std::string_view pattern,
                                 std::string_view content) {
    std::string out;
    out.reserve(text.size());
    std::size_t pos = 0;
    while (true) {
      const std::size_t hit = text.find(pattern, pos);
      if (hit == std::string_view::npos)
        break;
      out.append(text.substr(pos, hit - pos)).append(content);
      pos = hit + pattern.size();
    }
    out.append(text.substr(pos));
    return out;
  }

 private:
  std::vector<NormalizerStep> steps_;
};

}  // namespace nlb::text
