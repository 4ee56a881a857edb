// load_gpt2_tokenizer: GPT-2's tokenizer from a directory's vocab.json (token -> id, tokens in
// the byte-level alphabet) and merges.txt (an optional "#version" line, then one merge per
// line: two tokens separated by one space, in rank order) — the files of Hugging Face's gpt2
// repository and of OpenAI's release (encoder.json, vocab.bpe).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlb/text/bpe_model.hpp"
#include "nlb/text/detail/bpe_builder.hpp"
#include "nlb/text/detail/messages.hpp"
#include "nlb/text/tokenizer.hpp"
#include "nlb/text/tokenizer_options.hpp"

namespace nlb::text {

namespace detail {

/// The merges of merges.txt. Lines end in "\n" or "\r\n"; a line starting "#version" is
/// skipped (as HF tokenizers does); an empty line is an error except after the last newline.
inline std::vector<MergeText> parse_merges_txt(const TextFileErrors& errors,
                                               std::string_view text) {
  std::vector<MergeText> merges;
  std::size_t pos = 0;
  for (std::size_t line = 1; pos < text.size(); ++line) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view content = text.substr(pos, end - pos);
    pos = end + 1;
    if (content.ends_with('\r'))
      content.remove_suffix(1);
    if (content.starts_with("#version"))
      continue;
    const std::size_t space = content.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == content.size() ||
        content.find(' ', space + 1) != std::string_view::npos) {
      errors.fail("line " + std::to_string(line), "merge", "two tokens separated by one space",
                  content.empty() ? std::string("an empty line") : io::quote_text(content));
    }
    merges.push_back({std::string(content.substr(0, space)), std::string(content.substr(space + 1)),
                      "line " + std::to_string(line)});
  }
  return merges;
}

/// FormatError naming `file` when the vocabulary has more ids than the model's embedding rows.
inline void check_embedding_size(const TextFileErrors& errors, std::int64_t vocab_size,
                                 const TokenizerOptions& options) {
  if (options.embedding_size >= 0 && vocab_size > options.embedding_size) {
    errors.fail(
        "", "vocabulary size",
        "at most " + std::to_string(options.embedding_size) + " (the model's embedding rows)",
        std::to_string(vocab_size));
  }
}

}  // namespace detail

/// The tokenizer of `dir`/vocab.json and `dir`/merges.txt. Every token of more than one byte
/// must be made by a merge (which is how a truncated merges.txt shows), except tokens written
/// "<...>" (such as "<|endoftext|>"): those are special tokens, recognised only when encode()
/// is told SpecialTokens::allowed. eos_id() is "<|endoftext|>"'s id when it is one of them. No
/// normalizer. FormatError naming the file, the entry, what was expected and what was found for
/// a missing, unreadable or malformed file, a merge naming a token not in vocab.json (or whose
/// result is not), duplicate or non-contiguous ids, a byte without a token, or more ids than
/// `options.embedding_size`. O(vocabulary + merges).
inline Tokenizer load_gpt2_tokenizer(const std::filesystem::path& dir,
                                     const TokenizerOptions& options = {}) {
  const std::string vocab_path = (dir / "vocab.json").string();
  const std::string merges_path = (dir / "merges.txt").string();
  const detail::TextFileErrors vocab_errors(vocab_path);
  const detail::TextFileErrors merges_errors(merges_path);
  const nlohmann::json vocab_json =
      detail::parse_json(vocab_errors, detail::read_text_file(vocab_path));
  detail::VocabTable vocab = detail::read_vocab(vocab_errors, vocab_json, "");
  const std::vector<detail::MergeText> merge_texts =
      detail::parse_merges_txt(merges_errors, detail::read_text_file(merges_path));
  const std::vector<BpeMerge> merges =
      detail::resolve_merges(merges_errors, vocab, merge_texts, "vocab.json");

  std::vector<bool> made(vocab.texts.size(), false);
  for (const BpeMerge& merge : merges)
    made[static_cast<std::size_t>(merge.result)] = true;
  std::vector<AddedToken> specials;
  std::optional<std::int32_t> eos;
  for (std::size_t id = 0; id < vocab.texts.size(); ++id) {
    if (made[id] || vocab.bytes[id].size() == 1)
      continue;
    const std::string& text = vocab.texts[id];
    if (text.size() < 3 || !text.starts_with('<') || !text.ends_with('>')) {
      merges_errors.fail(
          "", "merges",
          "a merge making each token of vocab.json longer than one byte "
          "(merges.txt truncated?)",
          "none for token " + io::quote_text(text) + " (id " + std::to_string(id) + ")");
    }
    specials.push_back({vocab.bytes[id], static_cast<std::int32_t>(id), true, false});
    if (text == "<|endoftext|>")
      eos = static_cast<std::int32_t>(id);
  }
  detail::check_embedding_size(vocab_errors, static_cast<std::int64_t>(vocab.texts.size()),
                               options);
  return Tokenizer(BpeModel(std::move(vocab.bytes), merges), std::move(specials), Normalizer::none,
                   eos);
}

}  // namespace nlb::text
