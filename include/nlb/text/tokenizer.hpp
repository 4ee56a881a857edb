// Tokenizer: text <-> token ids for BPE models (GPT-2, GPT-NeoX / Pythia, Llama 3, Qwen2, and
// the SentencePiece-style BPE of Llama 2 / Mistral / TinyLlama). The pipeline is HF tokenizers':
//   1. added tokens whose content is matched on the raw text ("normalized": false; GPT-NeoX's
//      "<|endoftext|>", Llama's "<s>") are found first, leftmost-longest;
//   2. the text between them is normalized (normalization.hpp: none, NFC, or Prepend/Replace),
//      and added tokens matched on normalized text ("normalized": true; GPT-NeoX's runs of
//      spaces) are found in it;
//   3. the rest is split into pieces (pre_tokenization.hpp) and each piece is encoded by the
//      BPE model (bpe_model.hpp);
//   4. on request, the post-processor's template frames the ids (Llama's BOS in front).
// Special added tokens are found only when the caller allows them (SpecialTokens::allowed);
// otherwise "<|endoftext|>" in the text is ordinary text. Non-special added tokens are part of
// the vocabulary and always found. Any byte string can be encoded (ill-formed UTF-8 included:
// byte-level vocabularies take its bytes like any others, split as pre_tokenizer.hpp documents;
// character vocabularies give each ill-formed subpart its byte-fallback tokens), and for
// byte-level vocabularies decode(encode(text)) == text when the normalizer is none, == the NFC
// form with NFC. Decoding runs the file's decoder (decoding.hpp).
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
#include "nlb/text/decoding.hpp"
#include "nlb/text/detail/added_token_matcher.hpp"
#include "nlb/text/detail/unicode.hpp"
#include "nlb/text/normalization.hpp"
#include "nlb/text/pre_tokenization.hpp"
#include "nlb/text/pre_tokenizer.hpp"

namespace nlb::text {

/// Whether encode() recognises special tokens in the text.
enum class SpecialTokens {
  as_text,  ///< "<|endoftext|>" in the text is encoded as ordinary text (the safe default)
  allowed,  ///< special tokens in the text become their ids
};

/// The normalization applied to text before it is split (step 2 above), in brief.
enum class Normalizer {
  none,
  nfc,
  other,  ///< another list of steps (Tokenizer::pipeline().normalization has them)
};

/// A token matched as a whole before BPE (HF tokenizers' "added_tokens").
struct AddedToken {
  std::string content;  ///< the bytes it matches (and decodes to)
  std::int32_t id;
  bool special;     ///< matched only with SpecialTokens::allowed
  bool normalized;  ///< matched on normalized text (content normalized too), else on raw text
};

/// The stages of a tokenizer around its BPE model (what a tokenizer.json's normalizer,
/// pre_tokenizer, decoder and post_processor say). The defaults are GPT-2's.
struct TokenizerPipeline {
  Normalization normalization;
  PreTokenization pre_tokenization = PreTokenization::gpt2();
  /// For a byte-level model, ByteLevel or nothing (both: the tokens' bytes concatenated); for a
  /// character model, nothing joins the tokens' text with spaces, as HF tokenizers does.
  Decoding decoding = Decoding::byte_level();
  /// The post-processor's template for one sequence: ids put before and after it by
  /// with_special_tokens (Llama's BOS; empty for GPT-2).
  std::vector<std::int32_t> before;
  std::vector<std::int32_t> after;
};

class Tokenizer {
 public:
  /// `model` with `added` tokens, GPT-2's split and decoding, and `normalizer` (none or NFC).
  /// Every id in 0..vocab_size()-1 must be a model token or an added one (the loaders check
  /// it). `eos_id` is the end-of-text token, if any. O(model + added bytes).
  Tokenizer(BpeModel model, std::vector<AddedToken> added, Normalizer normalizer,
            std::optional<std::int32_t> eos_id)
      : Tokenizer(std::move(model), std::move(added), gpt2_pipeline(normalizer), eos_id) {}

  /// `model` with `added` tokens and the stages of `pipeline`. The preconditions as above; the
  /// template's ids must be ids of the vocabulary. O(model + added bytes).
  Tokenizer(BpeModel model, std::vector<AddedToken> added, TokenizerPipeline pipeline,
            std::optional<std::int32_t> eos_id)
      : model_(std::move(model)),
        added_(std::move(added)),
        pipeline_(std::move(pipeline)),
        eos_id_(eos_id) {
    normalizer_ = pipeline_.normalization.empty()    ? Normalizer::none
                  : pipeline_.normalization.is_nfc() ? Normalizer::nfc
                                                     : Normalizer::other;
    // GPT-2's split alone is called directly (the common case; no step dispatch per segment).
    const auto& steps = pipeline_.pre_tokenization.steps();
    gpt2_split_ = steps.size() == 1 && steps[0].kind == PreTokenizerStep::Kind::split &&
                  steps[0].pattern == SplitPattern::gpt2;
    concatenate_ =
        model_.byte_level() && (pipeline_.decoding.empty() || pipeline_.decoding.is_byte_level());
    std::int32_t size = model_.size();
    for (const AddedToken& token : added_)
      size = std::max(size, token.id + 1);
    pieces_.resize(static_cast<std::size_t>(size));
    for (std::int32_t id = 0; id < model_.size(); ++id)
      pieces_[static_cast<std::size_t>(id)] = model_.token(id);
    for (const AddedToken& token : added_) {
      // A token matched on normalized text is looked for in its normalized form, and the
      // decoder receives that form too, as HF does ("hello world" under Prepend + Replace
      // decodes as "▁hello▁world" would).
      std::string form =
          token.normalized ? pipeline_.normalization.apply(token.content) : token.content;
      if (token.normalized)
        normalized_.add(form, token.id, token.special);
      else
        raw_.add(token.content, token.id, token.special);
      // (Not followed: HF's ByteLevel decoder reads an added token made only of characters of
      // the byte-level alphabet as the bytes they stand for, so "<|café|>" would decode with a
      // lone byte 0xE9; nlbudget decodes an added token to its text. No shipped file has one.)
      pieces_[static_cast<std::size_t>(token.id)] = std::move(form);
    }
  }

  /// The ids of `text` (any bytes). Special tokens are recognised only with
  /// SpecialTokens::allowed. O(n log n) in the bytes of the text (O(n) for cached pieces).
  std::vector<std::int32_t> encode(std::string_view text,
                                   SpecialTokens special = SpecialTokens::as_text) const {
    std::vector<std::int32_t> ids;
    ids.reserve(text.size() / 3 + 1);
    const bool allow = special == SpecialTokens::allowed;
    // `at_start`: the segment begins the text (Metaspace's "first" scheme needs it).
    split_on(raw_, text, allow, ids, [&](std::size_t start, std::string_view segment) {
      const auto rest = [&](std::size_t sub_start, std::string_view part) {
        encode_plain(part, start == 0 && sub_start == 0, ids);
      };
      if (pipeline_.normalization.empty()) {
        split_on(normalized_, segment, allow, ids, rest);
      } else {
        const std::string normalized = pipeline_.normalization.apply(segment);
        split_on(normalized_, normalized, allow, ids, rest);
      }
    });
    return ids;
  }

  /// `ids` framed by the post-processor's template for one sequence — what HF tokenizers'
  /// encode with add_special_tokens gives (Llama's BOS in front; GPT-2's ids unchanged).
  /// O(ids).
  std::vector<std::int32_t> with_special_tokens(std::span<const std::int32_t> ids) const {
    std::vector<std::int32_t> out(pipeline_.before);
    out.insert(out.end(), ids.begin(), ids.end());
    out.insert(out.end(), pipeline_.after.begin(), pipeline_.after.end());
    return out;
  }

  /// The text of `ids` through the decoder (decoding.hpp): for byte-level vocabularies the
  /// tokens' bytes concatenated (added tokens as their content); for SentencePiece-style ones
  /// the file's steps ("▁" to spaces, byte tokens to bytes, the first space dropped). Special
  /// tokens are kept. With IllFormedUtf8::keep (the default) bytes that are not well-formed
  /// UTF-8 — where ids cut a character, as a prefix of a text's ids does — are returned as they
  /// are; with IllFormedUtf8::replace they become U+FFFD as in HF tokenizers' decode.
  /// ArgumentError naming the position and the id if an id is outside 0..vocab_size()-1.
  /// O(output bytes · decoder steps).
  std::string decode(std::span<const std::int32_t> ids,
                     IllFormedUtf8 ill_formed = IllFormedUtf8::keep) const {
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::int32_t id = ids[i];
      if (id < 0 || id >= vocab_size()) {
        throw ArgumentError(
            "decode: token " + std::to_string(i) + ": " +
            nlb::detail::expected_found("id", "0.." + std::to_string(vocab_size() - 1), id));
      }
    }
    if (concatenate_) {
      std::string text;
      for (const std::int32_t id : ids)
        text += pieces_[static_cast<std::size_t>(id)];
      return ill_formed == IllFormedUtf8::replace ? Decoding::lossy(text) : text;
    }
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (const std::int32_t id : ids)
      tokens.push_back(pieces_[static_cast<std::size_t>(id)]);
    return pipeline_.decoding.apply(std::move(tokens), ill_formed,
                                    pipeline_.decoding.empty() ? " " : "");
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
  /// The string the decoder receives for id `id` (0 <= id < vocab_size()): for byte-level
  /// vocabularies the bytes it decodes to, otherwise the vocabulary's text ("▁the", "<0x0A>"),
  /// which the decoder turns into text only in the context of the ids around it.
  const std::string& token_bytes(std::int32_t id) const {
    return pieces_[static_cast<std::size_t>(id)];
  }
  /// Empties the BPE model's piece cache (bpe_model.hpp).
  void clear_cache() const { model_.clear_cache(); }
  const BpeModel& model() const { return model_; }
  std::span<const AddedToken> added_tokens() const { return added_; }
  Normalizer normalizer() const { return normalizer_; }
  const TokenizerPipeline& pipeline() const { return pipeline_; }

 private:
  static TokenizerPipeline gpt2_pipeline(Normalizer normalizer) {
    TokenizerPipeline pipeline;
    if (normalizer == Normalizer::nfc)
      pipeline.normalization = Normalization({NormalizerStep{}});
    return pipeline;
  }

  // Calls rest(offset, segment) for the text between matches of `matcher` and appends the
  // matches' ids.
  template <class Rest>
  static void split_on(const detail::AddedTokenMatcher& matcher, std::string_view text,
                       bool allow_special, std::vector<std::int32_t>& ids, Rest&& rest) {
    std::size_t pos = 0;
    while (pos < text.size()) {
      const auto match = matcher.find(text, pos, allow_special);
      if (!match)
        break;
      if (match->start > pos)
        rest(pos, text.substr(pos, match->start - pos));
      ids.push_back(match->id);
      pos = match->start + match->length;
    }
    if (pos < text.size())
      rest(pos, text.substr(pos));
  }

  void encode_plain(std::string_view text, bool at_start, std::vector<std::int32_t>& ids) const {
    const auto encode = [&](std::string_view piece) { model_.encode_piece(piece, ids); };
    if (gpt2_split_)
      for_each_gpt2_piece(text, encode);
    else
      pipeline_.pre_tokenization.for_each_piece(text, at_start, encode);
  }

  BpeModel model_;
  std::vector<AddedToken> added_;
  TokenizerPipeline pipeline_;
  Normalizer normalizer_ = Normalizer::none;
  bool gpt2_split_ = false;
  bool concatenate_ = false;
  std::optional<std::int32_t> eos_id_;
  std::vector<std::string> pieces_;  // id -> the bytes it decodes to
  detail::AddedTokenMatcher raw_;
  detail::AddedTokenMatcher normalized_;
};

}  // namespace nlb::text
