// PreTokenization: how a tokenizer cuts (normalized) text into the pieces BPE encodes one by one
// (HF tokenizers' "pre_tokenizer"). A list of steps; each cuts every piece the previous step
// gave. The steps nlbudget implements:
//   split      a Split by one of the patterns the shipped families carry, written as scanners
//              (pre_tokenizer.hpp: GPT-2's, which is also ByteLevel's own with use_regex;
//              llama_pre_tokenizer.hpp: Llama 3's and Qwen2's), behavior "Isolated" (every
//              match is a piece; the patterns match every character, so there is nothing else)
//   metaspace  HF's Metaspace: every space becomes `replacement` ("▁"), which is also put in
//              front per `prepend`, and with `split` the piece is cut before each replacement
// A ByteLevel pre-tokenizer's mapping of bytes to its alphabet is not a step: nlbudget's BPE
// works on the bytes themselves (bpe_model.hpp), which is the same thing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlb/text/llama_pre_tokenizer.hpp"
#include "nlb/text/pre_tokenizer.hpp"

namespace nlb::text {

/// The split patterns nlbudget recognises.
enum class SplitPattern {
  gpt2,    ///< 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  llama3,  ///< Llama 3's: case-insensitive contractions, digits in groups of 1-3
  qwen2,   ///< Qwen2's: as Llama 3's with one digit per piece
};

/// Where Metaspace puts its replacement in front of a piece that does not start with it.
enum class PrependScheme {
  always,  ///< in front of every piece the step receives
  first,   ///< only in front of the text's first piece (the one at offset 0 of the input)
  never,
};

/// One pre-tokenizer.
struct PreTokenizerStep {
  enum class Kind { split, metaspace };
  Kind kind = Kind::split;
  SplitPattern pattern = SplitPattern::gpt2;      ///< split
  std::string replacement = "\xe2\x96\x81";       ///< metaspace: one character ("▁" U+2581)
  PrependScheme prepend = PrependScheme::always;  ///< metaspace
  bool split = true;                              ///< metaspace: cut before each replacement
};

/// A list of pre-tokenizer steps; empty: each segment of text is one piece.
class PreTokenization {
 public:
  PreTokenization() = default;
  explicit PreTokenization(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {}
  /// GPT-2's split alone (ByteLevel with use_regex).
  static PreTokenization gpt2() { return PreTokenization({PreTokenizerStep{}}); }

  const std::vector<PreTokenizerStep>& steps() const { return steps_; }

  /// Calls `piece(std::string_view)` for each non-empty piece of `segment`, in order.
  /// `at_start`: the segment begins the text (Metaspace's "first" scheme prepends only there).
  /// The views are valid during the call only (Metaspace pieces are not views of the input).
  /// O(n) per step.
  template <class Piece>
  void for_each_piece(std::string_view segment, bool at_start, Piece&& piece) const {
    apply(0, segment, at_start, piece);
  }

 private:
  template <class Piece>
  void apply(std::size_t index, std::string_view text, bool at_start, Piece& piece) const {
    if (index == steps_.size()) {
      if (!text.empty())
        piece(text);
      return;
    }
    const PreTokenizerStep& step = steps_[index];
    // A piece after the first of its text does not begin the input.
    const auto next = [&](std::string_view part, std::string_view whole) {
      apply(index + 1, part, at_start && part.data() == whole.data(), piece);
    };
    if (step.kind == PreTokenizerStep::Kind::split) {
      switch (step.pattern) {
        case SplitPattern::gpt2:
          for_each_gpt2_piece(text, [&](std::string_view p) { next(p, text); });
          return;
        case SplitPattern::llama3:
          for_each_llama_piece(text, 3, [&](std::string_view p) { next(p, text); });
          return;
        case SplitPattern::qwen2:
          for_each_llama_piece(text, 1, [&](std::string_view p) { next(p, text); });
          return;
      }
      return;
    }
    // Metaspace: spaces replaced first, so a text starting with a space is not prepended to.
    std::string replaced;
    replaced.reserve(text.size() + step.replacement.size());
    const bool prepend = !text.empty() && (step.prepend == PrependScheme::always ||
                                           (step.prepend == PrependScheme::first && at_start));
    for (const char c : text) {
      if (c == ' ')
        replaced += step.replacement;
      else
        replaced += c;
    }
    if (prepend && !std::string_view(replaced).starts_with(step.replacement))
      replaced.insert(0, step.replacement);
    const std::string_view whole = replaced;
    if (!step.split) {
      next(whole, whole);
      return;
    }
    // Cut before each replacement (HF's MergedWithNext): the replacement starts its piece.
    std::size_t start = 0;
    while (start < whole.size()) {
      std::size_t cut = whole.find(step.replacement, start + 1);
      if (cut == std::string_view::npos)
        cut = whole.size();
      next(whole.substr(start, cut - start), whole);
      start = cut;
    }
  }

  std::vector<PreTokenizerStep> steps_;
};

}  // namespace nlb::text
