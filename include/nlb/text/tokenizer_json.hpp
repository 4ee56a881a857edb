// load_tokenizer_json: a Hugging Face tokenizer.json with a byte-level BPE model, as GPT-2,
// GPT-NeoX and Pythia ship it. The components nlbudget implements, and nothing else:
//   normalizer      null or {"type": "NFC"}
//   pre_tokenizer   {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true (default),
//                    "trim_offsets": any}
//   post_processor  null or ByteLevel (it changes offsets only, never ids)
//   decoder         null or ByteLevel
//   model           {"type": "BPE", "vocab": {...}, "merges": ["a b", ...] or [["a", "b"], ...],
//                    "dropout": null, "continuing_subword_prefix" and "end_of_word_suffix": null
//                    or "", "byte_fallback" and "ignore_merges": false or absent,
//                    "unk_token": null or a string (never used: every byte has a token),
//                    "fuse_unk": any}
//   added_tokens    [{"id", "content", "special", "normalized", "single_word": false,
//                    "lstrip": false, "rstrip": false}, ...]
//   truncation, padding: null
// Any other type, option value or key is a FormatError that names it, so a file whose ids would
// differ from HF tokenizers' is refused rather than encoded differently.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlb/text/bpe_model.hpp"
#include "nlb/text/detail/bpe_builder.hpp"
#include "nlb/text/detail/messages.hpp"
#include "nlb/text/gpt2_files.hpp"
#include "nlb/text/tokenizer.hpp"
#include "nlb/text/tokenizer_options.hpp"

namespace nlb::text {

namespace detail {

/// Reads one JSON object of tokenizer.json with the checks of its keys and values.
class JsonObject {
 public:
  JsonObject(const TextFileErrors& errors, std::string entry, const nlohmann::json& value,
             std::initializer_list<std::string_view> keys)
      : errors_(errors), entry_(std::move(entry)), value_(value) {
    if (!value.is_object())
      errors_.fail("", entry_.empty() ? "the document" : entry_, "an object", describe_json(value));
    for (const auto& [key, ignored] : value.items()) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        std::string names;
        for (const std::string_view k : keys)
          names += (names.empty() ? "" : ", ") + std::string(k);
        errors_.fail(entry_, "key " + io::quote_text(key),
                     "one of " + names + " (what nlbudget reads)", "an unknown key");
      }
    }
  }

  const std::string& entry() const { return entry_; }
  const TextFileErrors& errors() const { return errors_; }
  /// The member `key`, or nullptr when absent.
  const nlohmann::json* find(const char* key) const {
    const auto it = value_.find(key);
    return it == value_.end() ? nullptr : &*it;
  }
  /// The member `key`; FormatError when absent.
  const nlohmann::json& at(const char* key) const {
    const nlohmann::json* member = find(key);
    if (!member)
      errors_.fail(entry_, key, "present", "no such key");
    return *member;
  }
  [[noreturn]] void fail(const char* key, const std::string& expected,
                         const nlohmann::json& found) const {
    errors_.fail(entry_, key, expected, describe_json(found));
  }
  std::string string(const char* key) const {
    const nlohmann::json& member = at(key);
    if (!member.is_string())
      fail(key, "a string", member);
    return member.get<std::string>();
  }
  /// The boolean `key`, `fallback` when absent.
  bool boolean(const char* key, bool fallback) const {
    const nlohmann::json* member = find(key);
    if (!member)
      return fallback;
    if (!member->is_boolean())
      fail(key, "a boolean", *member);
    return member->get<bool>();
  }
  /// FormatError unless `key` is absent or has the value `required` (an option nlbudget does
  /// not implement otherwise).
  void require_boolean(const char* key, bool required, bool fallback) const {
    if (boolean(key, fallback) != required)
      fail(key, std::string(required ? "true" : "false") + " (the only value nlbudget implements)",
           *find(key));
  }
  /// FormatError unless `key` is absent, null, or one of `allowed` strings.
  void require_null_or(const char* key, std::initializer_list<std::string_view> allowed) const {
    const nlohmann::json* member = find(key);
    if (!member || member->is_null())
      return;
    if (member->is_string()) {
      const auto& text = member->get_ref<const std::string&>();
      if (std::find(allowed.begin(), allowed.end(), text) != allowed.end())
        return;
    }
    std::string expected = "null";
    for (const std::string_view a : allowed)
      expected += " or " + io::quote_text(a);
    fail(key, expected + " (the only values nlbudget implements)", *member);
  }

 private:
  const TextFileErrors& errors_;
  std::string entry_;
  const nlohmann::json& value_;
};

/// The "type" of a component object, which must be one of `types`.
inline std::string component_type(const TextFileErrors& errors, const std::string& entry,
                                  const nlohmann::json& value,
                                  std::initializer_list<std::string_view> types) {
  std::string expected;
  for (const std::string_view t : types)
    expected += (expected.empty() ? "" : " or ") + io::quote_text(t);
  expected += " (the types nlbudget implements)";
  if (!value.is_object())
    errors.fail(entry, "type", expected, describe_json(value));
  const auto it = value.find("type");
  if (it == value.end() || !it->is_string() ||
      std::find(types.begin(), types.end(), it->get_ref<const std::string&>()) == types.end())
    errors.fail(entry, "type", expected, it == value.end() ? "no type" : describe_json(*it));
  return it->get<std::string>();
}

/// Checks a ByteLevel component. `ids_matter`: for the pre-tokenizer, whose options change
/// ids (a prefix space, or no split); the post-processor and decoder options change offsets.
inline void check_byte_level(const TextFileErrors& errors, const std::string& entry,
                             const nlohmann::json& value, bool ids_matter) {
  component_type(errors, entry, value, {"ByteLevel"});
  const JsonObject object(errors, entry, value,
                          {"type", "add_prefix_space", "trim_offsets", "use_regex"});
  object.boolean("trim_offsets", true);
  if (ids_matter) {
    object.require_boolean("add_prefix_space", false, false);
    object.require_boolean("use_regex", true, true);
  } else {
    object.boolean("add_prefix_space", false);
    object.boolean("use_regex", true);
  }
}

inline std::vector<MergeText> read_json_merges(const TextFileErrors& errors,
                                               const nlohmann::json& merges) {
  if (!merges.is_array())
    errors.fail("model", "merges", "an array", describe_json(merges));
  std::vector<MergeText> out;
  out.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const nlohmann::json& m = merges[i];
    const std::string entry = "model.merges[" + std::to_string(i) + "]";
    if (m.is_string()) {
      const auto& text = m.get_ref<const std::string&>();
      const std::size_t space = text.find(' ');
      if (space == 0 || space == std::string::npos || space + 1 == text.size() ||
          text.find(' ', space + 1) != std::string::npos)
        errors.fail(entry, "merge", "two tokens separated by one space", io::quote_text(text));
      out.push_back({text.substr(0, space), text.substr(space + 1), entry});
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.push_back({m[0].get<std::string>(), m[1].get<std::string>(), entry});
    } else {
      errors.fail(entry, "merge", "a string \"a b\" or an array of two strings", describe_json(m));
    }
  }
  return out;
}

}  // namespace detail

/// The tokenizer of the tokenizer.json at `path` (see the list of components above). eos_id()
/// is the id of "<|endoftext|>" (an added token, else a model token) when there is one. Ids of
/// the model's vocabulary number its tokens 0..M-1; an added token either repeats a model token
/// (same id, content equal to the token) or takes the next id, M, M+1, ... FormatError naming
/// the file, the entry, what was expected and what was found for anything else, and for more
/// ids than `options.embedding_size`. O(vocabulary + merges).
inline Tokenizer load_tokenizer_json(const std::filesystem::path& path,
                                     const TokenizerOptions& options = {}) {
  const detail::TextFileErrors errors(path.string());
  const nlohmann::json root = detail::parse_json(errors, detail::read_text_file(path.string()));
  const detail::JsonObject top(errors, "", root,
                               {"version", "truncation", "padding", "added_tokens", "normalizer",
                                "pre_tokenizer", "post_processor", "decoder", "model"});
  if (const nlohmann::json* version = top.find("version"); version && !version->is_string())
    top.fail("version", "a string", *version);
  for (const char* key : {"truncation", "padding"}) {
    if (const nlohmann::json* value = top.find(key); value && !value->is_null())
      top.fail(key, "null (nlbudget neither truncates nor pads)", *value);
  }

  Normalizer normalizer = Normalizer::none;
  if (const nlohmann::json* value = top.find("normalizer"); value && !value->is_null()) {
    detail::component_type(errors, "normalizer", *value, {"NFC"});
    const detail::JsonObject object(errors, "normalizer", *value, {"type"});
    normalizer = Normalizer::nfc;
  }
  const nlohmann::json* pre = top.find("pre_tokenizer");
  detail::check_byte_level(errors, "pre_tokenizer", pre ? *pre : nlohmann::json(), true);
  for (const char* key : {"post_processor", "decoder"}) {
    if (const nlohmann::json* value = top.find(key); value && !value->is_null())
      detail::check_byte_level(errors, key, *value, false);
  }

  const nlohmann::json& model_json = top.at("model");
  detail::component_type(errors, "model", model_json, {"BPE"});
  const detail::JsonObject model(
      errors, "model", model_json,
      {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
       "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"});
  if (const nlohmann::json* dropout = model.find("dropout"); dropout && !dropout->is_null())
    model.fail("dropout", "null (nlbudget's BPE is deterministic)", *dropout);
  if (const nlohmann::json* unk = model.find("unk_token");
      unk && !unk->is_null() && !unk->is_string())
    model.fail("unk_token", "null or a string", *unk);
  model.require_null_or("continuing_subword_prefix", {""});
  model.require_null_or("end_of_word_suffix", {""});
  model.boolean("fuse_unk", false);
  model.require_boolean("byte_fallback", false, false);
  model.require_boolean("ignore_merges", false, false);
  detail::VocabTable vocab = detail::read_vocab(errors, model.at("vocab"), "model.vocab");
  const std::vector<BpeMerge> merges = detail::resolve_merges(
      errors, vocab, detail::read_json_merges(errors, model.at("merges")), "model.vocab");
  const auto model_size = static_cast<std::int64_t>(vocab.texts.size());

  std::vector<AddedToken> added;
  std::vector<std::pair<std::int64_t, std::size_t>> new_ids;  // (id, index) past the model
  if (const nlohmann::json* list = top.find("added_tokens"); list && !list->is_null()) {
    if (!list->is_array())
      top.fail("added_tokens", "an array", *list);
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string entry = "added_tokens[" + std::to_string(i) + "]";
      const detail::JsonObject token(
          errors, entry, (*list)[i],
          {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
      const nlohmann::json& id_json = token.at("id");
      if (!id_json.is_number_integer() || id_json.get<std::int64_t>() < 0)
        token.fail("id", "a non-negative integer", id_json);
      const auto id = id_json.get<std::int64_t>();
      const std::string content = token.string("content");
      if (content.empty())
        token.fail("content", "a non-empty string", token.at("content"));
      const bool special = token.boolean("special", false);
      const bool normalized = token.boolean("normalized", !special);
      for (const char* key : {"single_word", "lstrip", "rstrip"})
        token.require_boolean(key, false, false);
      for (std::size_t j = 0; j < added.size(); ++j) {
        if (added[j].content == content)
          token.fail("content",
                     "each content once (it is also added_tokens[" + std::to_string(j) + "])",
                     token.at("content"));
        if (added[j].id == id)
          token.fail("id", "each id once (it is also added_tokens[" + std::to_string(j) + "])",
                     id_json);
      }
      if (id < model_size) {
        const std::string& text = vocab.texts[static_cast<std::size_t>(id)];
        if (text != content) {
          errors.fail(
              entry, "id " + std::to_string(id),
              "an id of " + std::to_string(model_size) +
                  " or more, or the id of the model token equal to its content",
              "model token " + io::quote_text(text) + " for content " + io::quote_text(content));
        }
      } else {
        new_ids.emplace_back(id, i);
      }
      added.push_back({content, static_cast<std::int32_t>(id), special, normalized});
    }
  }
  std::sort(new_ids.begin(), new_ids.end());
  for (std::size_t k = 0; k < new_ids.size(); ++k) {
    const std::int64_t expected = model_size + static_cast<std::int64_t>(k);
    if (new_ids[k].first != expected) {
      errors.fail("added_tokens[" + std::to_string(new_ids[k].second) + "]", "id",
                  std::to_string(expected) + " (ids contiguous after the model's " +
                      std::to_string(model_size) + " tokens)",
                  std::to_string(new_ids[k].first));
    }
  }
  std::optional<std::int32_t> eos;
  for (const AddedToken& token : added)
    if (token.content == "<|endoftext|>")
      eos = token.id;
  if (!eos) {
    if (const auto it = vocab.ids.find("<|endoftext|>"); it != vocab.ids.end())
      eos = it->second;
  }
  detail::check_embedding_size(errors, model_size + static_cast<std::int64_t>(new_ids.size()),
                               options);
  return Tokenizer(BpeModel(std::move(vocab.bytes), merges), std::move(added), normalizer, eos);
}

}  // namespace nlb::text
