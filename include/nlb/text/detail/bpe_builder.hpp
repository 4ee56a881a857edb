// Reading a byte-level BPE vocabulary and its merges into a BpeModel, with the checks both file
// layouts share (vocab.json + merges.txt, and tokenizer.json's "model"): ids are integers that
// number the tokens 0..N-1, each once; every token is text in the byte-level alphabet; every
// byte has its token; each merge names two tokens whose concatenation is a token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "nlb/text/bpe_model.hpp"
#include "nlb/text/detail/byte_level.hpp"
#include "nlb/text/detail/messages.hpp"

namespace nlb::text::detail {

/// Hash for heterogeneous lookup of std::string keys by std::string_view.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

/// A vocabulary read from a file: by id, the token as written (byte-level text) and its bytes.
struct VocabTable {
  std::vector<std::string> texts;
  std::vector<std::string> bytes;
  std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>> ids;  // text -> id
};

/// A merge as written: its two parts and where it is (for messages: "line 7", "model.merges[6]").
struct MergeText {
  std::string left;
  std::string right;
  std::string entry;
};

/// The vocabulary of the JSON object `vocab` (token -> id). `where` prefixes entries in
/// messages ("" for vocab.json, "model.vocab" for tokenizer.json). `byte_level`: the tokens are
/// written in the byte-level alphabet and each of the 256 bytes has one (otherwise a token's
/// bytes are its text, any non-empty string). O(tokens).
inline VocabTable read_vocab(const TextFileErrors& errors, const nlohmann::json& vocab,
                             const std::string& where, bool byte_level = true) {
  const std::string prefix = where.empty() ? "" : where + " ";
  if (!vocab.is_object())
    errors.fail(where, "vocabulary", "an object of token -> id", describe_json(vocab));
  if (vocab.empty())
    errors.fail(where, "vocabulary", "at least the 256 byte tokens", "no tokens");
  const std::size_t count = vocab.size();
  VocabTable table;
  table.texts.resize(count);
  table.bytes.resize(count);
  std::vector<bool> seen(count, false);
  for (const auto& [text, value] : vocab.items()) {
    const std::string entry = prefix + "token " + quote_text(text);
    if (!value.is_number_integer())
      errors.fail(entry, "id", "an integer", describe_json(value));
    const auto id = value.get<std::int64_t>();
    if (id < 0 || id >= static_cast<std::int64_t>(count)) {
      errors.fail(entry, "id",
                  "0.." + std::to_string(count - 1) + " (the " + std::to_string(count) +
                      " tokens numbered contiguously from 0)",
                  std::to_string(id));
    }
    const auto index = static_cast<std::size_t>(id);
    if (seen[index]) {
      errors.fail(entry, "id " + std::to_string(id), "each id used by one token",
                  "it also used by token " + quote_text(table.texts[index]));
    }
    seen[index] = true;
    const std::optional<std::string> bytes =
        byte_level ? bytes_of_byte_level(text) : std::optional<std::string>(text);
    if (!byte_level && text.empty())
      errors.fail(entry, "token", "a non-empty string", "an empty token");
    if (!bytes || bytes->empty()) {
      errors.fail(entry, "token", "non-empty text in GPT-2's byte-level alphabet",
                  text.empty() ? "an empty token" : "a character outside it");
    }
    table.texts[index] = text;
    table.bytes[index] = *bytes;
    table.ids.emplace(text, static_cast<std::int32_t>(id));
  }
  if (!byte_level)
    return table;
  std::vector<bool> byte_seen(256, false);
  for (const std::string& bytes : table.bytes)
    if (bytes.size() == 1)
      byte_seen[static_cast<unsigned char>(bytes[0])] = true;
  for (unsigned byte = 0; byte < 256; ++byte) {
    if (!byte_seen[byte]) {
      std::string text;
      append_utf8(text, byte_to_code_point[byte]);
      errors.fail(where, "vocabulary", "a token for each of the 256 bytes",
                  "none for byte " + std::to_string(byte) + " (" + quote_text(text) + ")");
    }
  }
  return table;
}

/// The merges as ids, in rank order; FormatError (in `errors`, the merges' file) naming the
/// merge whose part or result is not a token of the vocabulary. O(merges).
inline std::vector<BpeMerge> resolve_merges(const TextFileErrors& errors, const VocabTable& vocab,
                                            const std::vector<MergeText>& merges,
                                            const std::string& vocab_name) {
  std::vector<BpeMerge> resolved;
  resolved.reserve(merges.size());
  const auto id_of = [&](const MergeText& merge, const std::string& text, const char* what) {
    const auto it = vocab.ids.find(text);
    if (it == vocab.ids.end()) {
      errors.fail(merge.entry + " (" + quote_text(merge.left + " " + merge.right) + ")", what,
                  "a token of " + vocab_name, quote_text(text) + ", which is not");
    }
    return it->second;
  };
  for (const MergeText& merge : merges) {
    const std::int32_t left = id_of(merge, merge.left, "merge part");
    const std::int32_t right = id_of(merge, merge.right, "merge part");
    const std::int32_t result = id_of(merge, merge.left + merge.right, "merge result");
    resolved.push_back({left, right, result});
  }
  return resolved;
}

}  // namespace nlb::text::detail
