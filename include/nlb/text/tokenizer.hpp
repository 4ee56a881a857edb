// Tokenizer: text <-> token ids for byte-level BPE models (GPT-2, GPT-NeoX / Pythia). The
// pipeline is HF tokenizers' for these models:
//   1. added tokens whose content is matched on the raw text ("normalized": false; GPT-NeoX's
//      "<|endoftext|>") are found first, leftmost-longest;
//   2. the text between them is normalized (none, or NFC), and added tokens matched on
//      normalized text ("normalized": true; GPT-NeoX's runs of spaces) are found in it;
//   3. the rest is split into pieces (pre_tokenizer.hpp) and each piece's bytes are merged by
//      the BPE model (bpe_model.hpp).
// Special added tokens are found only when the caller allows them (SpecialTokens::allowed);
// otherwise "<|endoftext|>" in the text is ordinary text. Non-special added tokens are part of
// the vocabulary and always found. Any byte string can be encoded (ill-formed UTF-8 included:
// its bytes go through BPE like any others, split as pre_tokenizer.hpp documents), and
// decode(encode(text)) == text when the normalizer is none, == the NFC form otherwise.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlb/core/errors.hpp"
#include "nlb/text/bpe_model.hpp"
#include "nlb/text/detail/added_token_matcher.hpp"
#include "nlb/text/detail/unicode.hpp"
#include "nlb/text/pre_tokenizer.hpp"

namespace nlb::text {

/// Whether encode() recognises special tokens in the text.
enum class SpecialTokens {
  as_text,  ///< "<|endoftext|>" in the text is encoded as ordinary text (the safe default)
  allowed,  ///< special tokens in the text become their ids
};

/// The normalization applied to text before it is split (step 2 above).
enum class Normalizer { none, nfc };

/// A token matched as a whole before BPE (HF tokenizers' "added_tokens").
struct AddedToken {
  std::string content;  ///< the bytes it matches (and decodes to)
  std::int32_t id;
  bool special;     ///< matched only with SpecialTokens::allowed
  bool normalized;  ///< matched on normalized text (content normalized too), else on raw text
};

class Tokenizer {
 public:
  /// `model` with `added` tokens. Every id in 0..vocab_size()-1 must be a model token or an
  /// added one (the loaders check it). `eos_id` is the end-of-text token, if any.
  /// O(model + added bytes).
  Tokenizer(BpeModel model, std::vector<AddedToken> added, Normalizer normalizer,
            std::optional<std::int32_t> eos_id)
      : model_(std::move(model)),
        added_(std::move(added)),
        normalizer_(normalizer),
        eos_id_(eos_id) {
    std::int32_t size = model_.size();
    for (const AddedToken& token : added_)
      size = std::max(size, token.id + 1);
    pieces_.resize(static_cast<std::size_t>(size));
    for (std::int32_t id = 0; id < model_.size(); ++id)
      pieces_[static_cast<std::size_t>(id)] = model_.token(id);
    for (const AddedToken& token : added_) {
      pieces_[static_cast<std::size_t>(token.id)] = token.content;
      if (token.normalized && normalizer_ == Normalizer::nfc)
        normalized_.add(detail::nfc(token.content), token.id, token.special);
      else if (token.normalized)
        normalized_.add(token.content, token.id, token.special);
      else
        raw_.add(token.content, token.id, token.special);
    }
  }

  /// The ids of `text` (any bytes). Special tokens are recognised only with
  /// SpecialTokens::allowed. O(n log n) in the bytes of the text (O(n) for cached pieces).
  std::vector<std::int32_t> encode(std::string_view text,
                                   SpecialTokens special = SpecialTokens::as_text) const {
    std::vector<std::int32_t> ids;
    ids.reserve(text.size() / 3 + 1);
    const bool allow = special == SpecialTokens::allowed;
    split_on(raw_, text, allow, ids, [&](std::string_view segment) {
      if (normalizer_ == Normalizer::nfc) {
        const std::string normalized = detail::nfc(segment);
        split_on(normalized_, normalized, allow, ids,
                 [&](std::string_view rest) { encode_plain(rest, ids); });
      } else {
        split_on(normalized_, segment, allow, ids,
                 [&](std::string_view rest) { encode_plain(rest, ids); });
      }
    });
    return ids;
  }

  /// The bytes of `ids` concatenated (model tokens as their bytes, added tokens as their
  /// content). The result may be ill-formed UTF-8 where the ids split a character (as they do
  /// for a prefix of a text's ids); it is never repaired. ArgumentError naming the position and
  /// the id if an id is outside 0..vocab_size()-1. O(output bytes).
  std::string decode(std::span<const std::int32_t> ids) const {
    std::string text;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::int32_t id = ids[i];
      if (id < 0 || id >= vocab_size()) {
        throw ArgumentError(
            "decode: token " + std::to_string(i) + ": " +
            nlb::detail::expected_found("id", "0.." + std::to_string(vocab_size() - 1), id));
      }
      text += pieces_[static_cast<std::size_t>(id)];
    }
    return text;
  }

  /// Number of ids (model tokens and added tokens).
  std::int32_t vocab_size() const { return static_cast<std::int32_t>(pieces_.size()); }
  /// The end-of-text token ("<|endoftext|>"), if the vocabulary has one.
  std::optional<std::int32_t> eos_id() const { return eos_id_; }
  /// The id of the token whose bytes (an added token's content, else a model token's bytes)
  /// are `bytes`, if any. O(added tokens + length).
  std::optional<std::int32_t> token_id(std::string_view bytes) const {
    for (const AddedToken& token : added_)
      if (token.content == bytes)
        return token.id;
    return model_.find(bytes);
  }
  /// The bytes id `id` decodes to (0 <= id < vocab_size()).
  const std::string& token_bytes(std::int32_t id) const {
    return pieces_[static_cast<std::size_t>(id)];
  }
  /// Empties the BPE model's piece cache (bpe_model.hpp).
  void clear_cache() const { model_.clear_cache(); }
  const BpeModel& model() const { return model_; }
  std::span<const AddedToken> added_tokens() const { return added_; }
  Normalizer normalizer() const { return normalizer_; }

 private:
  // Calls rest(segment) for the text between matches of `matcher` and appends the matches' ids.
  template <class Rest>
  static void split_on(const detail::AddedTokenMatcher& matcher, std::string_view text,
                       bool allow_special, std::vector<std::int32_t>& ids, Rest&& rest) {
    std::size_t pos = 0;
    while (pos < text.size()) {
      const auto match = matcher.find(text, pos, allow_special);
      if (!match)
        break;
      if (match->start > pos)
        rest(text.substr(pos, match->start - pos));
      ids.push_back(match->id);
      pos = match->start + match->length;
    }
    if (pos < text.size())
      rest(text.substr(pos));
  }

  void encode_plain(std::string_view text, std::vector<std::int32_t>& ids) const {
    for_each_gpt2_piece(text, [&](std::string_view piece) { model_.encode_piece(piece, ids); });
  }

  BpeModel model_;
  std::vector<AddedToken> added_;
  Normalizer normalizer_;
  std::optional<std::int32_t> eos_id_;
  std::vector<std::string> pieces_;  // id -> the bytes it decodes to
  detail::AddedTokenMatcher raw_;
  detail::AddedTokenMatcher normalized_;
};

}  // namespace nlb::text
