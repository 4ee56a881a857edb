// Reading the components of tokenizer.json around the model — normalizer, pre_tokenizer,
// decoder, post_processor — into nlbudget's steps (normalization.hpp, pre_tokenization.hpp,
// decoding.hpp, the template of tokenizer.hpp). Each reader knows the types and options nlbudget
// implements and names anything else in a FormatError (file, entry, expected, found), so a file
// whose ids would differ from HF tokenizers' is refused rather than encoded differently.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "nlb/text/decoding.hpp"
#include "nlb/text/detail/json_object.hpp"
#include "nlb/text/detail/messages.hpp"
#include "nlb/text/normalization.hpp"
#include "nlb/text/pre_tokenization.hpp"

namespace nlb::text::detail {

// The split patterns as tokenizer.json writes them (JSON-unescaped), and what each one is.
inline constexpr std::string_view gpt2_split_regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view llama3_split_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view qwen2_split_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

/// The string of a {"String": "..."} pattern (Replace); FormatError for a regular expression
/// or anything else.
inline std::string read_string_pattern(const JsonObject& object) {
  const nlohmann::json& pattern = object.at("pattern");
  const char* expected =
      "{\"String\": \"...\"} with a non-empty string (nlbudget implements "
      "string patterns, not regular expressions)";
  if (pattern.is_object() && pattern.size() == 1 && pattern.contains("Regex") &&
      pattern["Regex"].is_string())
    object.errors().fail(object.entry(), "pattern", expected,
                         "regex " + quote_text(pattern["Regex"].get<std::string>()));
  if (!pattern.is_object() || pattern.size() != 1 || !pattern.contains("String") ||
      !pattern["String"].is_string() || pattern["String"].get<std::string>().empty())
    object.fail("pattern", expected, pattern);
  return pattern["String"].get<std::string>();
}

/// Appends the steps of the normalizer `value` (not null) at `entry` to `steps`.
inline void read_normalizer(const TextFileErrors& errors, const std::string& entry,
                            const nlohmann::json& value, std::vector<NormalizerStep>& steps) {
  const std::string type =
      component_type(errors, entry, value, {"NFC", "Sequence", "Prepend", "Replace"});
  if (type == "NFC") {
    const JsonObject object(errors, entry, value, {"type"});
    steps.push_back({NormalizerStep::Kind::nfc, "", ""});
  } else if (type == "Sequence") {
    const JsonObject object(errors, entry, value, {"type", "normalizers"});
    const nlohmann::json& list = object.array("normalizers");
    for (std::size_t i = 0; i < list.size(); ++i)
      read_normalizer(errors, entry + ".normalizers[" + std::to_string(i) + "]", list[i], steps);
  } else if (type == "Prepend") {
    const JsonObject object(errors, entry, value, {"type", "prepend"});
    steps.push_back({NormalizerStep::Kind::prepend, "", object.string("prepend")});
  } else {
    const JsonObject object(errors, entry, value, {"type", "pattern", "content"});
    std::string pattern = read_string_pattern(object);
    steps.push_back({NormalizerStep::Kind::replace, std::move(pattern), object.string("content")});
  }
}

/// The prepend scheme of a Metaspace object, as HF reads it: "prepend_scheme" (default
/// "always"); a legacy "add_prefix_space": false means "never" and contradicts any other scheme.
inline PrependScheme read_prepend_scheme(const JsonObject& object) {
  PrependScheme scheme = PrependScheme::always;
  if (const nlohmann::json* value = object.find("prepend_scheme")) {
    const std::string name = object.string("prepend_scheme");
    if (name == "first")
      scheme = PrependScheme::first;
    else if (name == "never")
      scheme = PrependScheme::never;
    else if (name != "always")
      object.fail("prepend_scheme", "\"first\", \"always\" or \"never\"", *value);
  }
  if (!object.boolean("add_prefix_space", true)) {
    if (scheme != PrependScheme::never)
      object.fail("add_prefix_space",
                  "true or absent (false means prepend_scheme \"never\", which it is not)",
                  *object.find("add_prefix_space"));
  }
  if (const nlohmann::json* rep = object.find("str_rep"); rep && !rep->is_string())
    object.fail("str_rep", "a string", *rep);
  return scheme;
}

/// What the pre-tokenizer says beyond its steps.
struct PreTokenizerFacts {
  bool byte_level = false;  // a ByteLevel step: the vocabulary is byte-level
  bool metaspace = false;
};

/// Appends the steps of the pre-tokenizer `value` (not null) at `entry` to `steps`.
inline void read_pre_tokenizer(const TextFileErrors& errors, const std::string& entry,
                               const nlohmann::json& value, std::vector<PreTokenizerStep>& steps,
                               PreTokenizerFacts& facts) {
  const std::string type =
      component_type(errors, entry, value, {"ByteLevel", "Split", "Sequence", "Metaspace"});
  if (type == "Sequence") {
    const JsonObject object(errors, entry, value, {"type", "pretokenizers"});
    const nlohmann::json& list = object.array("pretokenizers");
    for (std::size_t i = 0; i < list.size(); ++i)
      read_pre_tokenizer(errors, entry + ".pretokenizers[" + std::to_string(i) + "]", list[i],
                         steps, facts);
    return;
  }
  // ByteLevel turns bytes into its alphabet; nlbudget's BPE then reads bytes, so nothing may
  // follow it and a Metaspace (which works on characters) cannot be combined with it.
  if (facts.byte_level)
    errors.fail(entry, "type", "no pre-tokenizer after ByteLevel (nlbudget's BPE reads bytes)",
                quote_text(type));
  if (type == "ByteLevel") {
    if (facts.metaspace)
      errors.fail(entry, "type", "no ByteLevel with a Metaspace pre-tokenizer", "\"ByteLevel\"");
    const JsonObject object(errors, entry, value,
                            {"type", "add_prefix_space", "trim_offsets", "use_regex"});
    object.boolean("trim_offsets", true);
    object.require_boolean("add_prefix_space", false, false);
    if (object.boolean("use_regex", true))
      steps.push_back({PreTokenizerStep::Kind::split, SplitPattern::gpt2});
    facts.byte_level = true;
  } else if (type == "Split") {
    const JsonObject object(errors, entry, value, {"type", "pattern", "behavior", "invert"});
    const nlohmann::json& pattern = object.at("pattern");
    const char* expected =
        "{\"Regex\": ...} with the pattern of GPT-2, Llama 3 or Qwen2 (nlbudget implements "
        "these as scanners, not a regex engine)";
    if (!pattern.is_object() || pattern.size() != 1 || !pattern.contains("Regex") ||
        !pattern["Regex"].is_string())
      object.fail("pattern", expected, pattern);
    const std::string regex = pattern["Regex"].get<std::string>();
    SplitPattern kind = SplitPattern::gpt2;
    if (regex == llama3_split_regex)
      kind = SplitPattern::llama3;
    else if (regex == qwen2_split_regex)
      kind = SplitPattern::qwen2;
    else if (regex != gpt2_split_regex)
      errors.fail(entry, "pattern", expected, "regex " + quote_text(regex, 200));
    if (object.string("behavior") != "Isolated")
      object.fail("behavior", "\"Isolated\" (the only value nlbudget implements)",
                  object.at("behavior"));
    object.require_boolean("invert", false, false);
    steps.push_back({PreTokenizerStep::Kind::split, kind});
  } else {
    const JsonObject object(
        errors, entry, value,
        {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
    PreTokenizerStep step;
    step.kind = PreTokenizerStep::Kind::metaspace;
    step.replacement = object.character("replacement");
    step.prepend = read_prepend_scheme(object);
    step.split = object.boolean("split", true);
    steps.push_back(std::move(step));
    facts.metaspace = true;
  }
}

/// Checks a ByteLevel decoder or post-processor at `entry`: its options change token offsets
/// only, so they are read for their types (FormatError when malformed) and otherwise ignored.
inline void check_offset_only_byte_level(const TextFileErrors& errors, const std::string& entry,
                                         const nlohmann::json& value) {
  const JsonObject object(errors, entry, value,
                          {"type", "add_prefix_space", "trim_offsets", "use_regex"});
  object.boolean("trim_offsets", true);
  object.boolean("add_prefix_space", false);
  object.boolean("use_regex", true);
}

/// Appends the steps of the decoder `value` (not null) at `entry` to `steps`.
inline void read_decoder(const TextFileErrors& errors, const std::string& entry,
                         const nlohmann::json& value, std::vector<DecoderStep>& steps) {
  const std::string type = component_type(
      errors, entry, value,
      {"ByteLevel", "Sequence", "Replace", "ByteFallback", "Fuse", "Strip", "Metaspace"});
  DecoderStep step;
  if (type == "ByteLevel") {
    check_offset_only_byte_level(errors, entry, value);
    step.kind = DecoderStep::Kind::byte_level;
  } else if (type == "Sequence") {
    const JsonObject object(errors, entry, value, {"type", "decoders"});
    const nlohmann::json& list = object.array("decoders");
    for (std::size_t i = 0; i < list.size(); ++i)
      read_decoder(errors, entry + ".decoders[" + std::to_string(i) + "]", list[i], steps);
    return;
  } else if (type == "Replace") {
    const JsonObject object(errors, entry, value, {"type", "pattern", "content"});
    step.kind = DecoderStep::Kind::replace;
    step.pattern = read_string_pattern(object);
    step.content = object.string("content");
  } else if (type == "ByteFallback" || type == "Fuse") {
    const JsonObject object(errors, entry, value, {"type"});
    step.kind = type == "Fuse" ? DecoderStep::Kind::fuse : DecoderStep::Kind::byte_fallback;
  } else if (type == "Strip") {
    const JsonObject object(errors, entry, value, {"type", "content", "start", "stop"});
    step.kind = DecoderStep::Kind::strip;
    step.content = object.character("content");
    object.at("start");
    object.at("stop");
    step.start = static_cast<std::size_t>(object.count("start", 0));
    step.stop = static_cast<std::size_t>(object.count("stop", 0));
  } else {
    const JsonObject object(
        errors, entry, value,
        {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
    step.kind = DecoderStep::Kind::metaspace;
    step.pattern = object.character("replacement");
    step.prepend = read_prepend_scheme(object);
    object.boolean("split", true);
  }
  steps.push_back(std::move(step));
}

/// A post-processor's template for one sequence, by special-token names, and the ids and
/// token strings its special_tokens table gives each name.
struct TemplateText {
  bool present = false;
  std::vector<std::string> before;
  std::vector<std::string> after;
  struct Special {
    std::vector<std::int64_t> ids;
    std::vector<std::string> tokens;
  };
  std::map<std::string, Special> specials;
};

/// Reads a TemplateProcessing template ("single" or "pair") at `entry`.`key`: pieces
/// {"SpecialToken": {"id", "type_id"}} naming a special token and {"Sequence": {"id",
/// "type_id"}} for the sequences, each of `sequences` ("A", or "A" then "B") exactly once.
/// `before`, `after` (single only): receive the names before the sequence A and after it.
inline void read_template(const JsonObject& object, const char* key,
                          std::initializer_list<std::string_view> sequences,
                          const std::map<std::string, TemplateText::Special>& specials,
                          std::vector<std::string>* before, std::vector<std::string>* after) {
  const nlohmann::json& list = object.array(key);
  const TextFileErrors& errors = object.errors();
  std::vector<std::string> seen;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string entry = object.entry() + "." + key + "[" + std::to_string(i) + "]";
    const nlohmann::json& piece = list[i];
    if (!piece.is_object() || piece.size() != 1 ||
        !(piece.contains("SpecialToken") || piece.contains("Sequence")))
      errors.fail(entry, "piece", "{\"SpecialToken\": {...}} or {\"Sequence\": {...}}",
                  describe_json(piece));
    const bool special = piece.contains("SpecialToken");
    const std::string inner_entry = entry + (special ? ".SpecialToken" : ".Sequence");
    const JsonObject inner(errors, inner_entry, special ? piece["SpecialToken"] : piece["Sequence"],
                           {"id", "type_id"});
    const std::string id = inner.string("id");
    inner.count("type_id", 0);
    if (special) {
      if (!specials.contains(id))
        inner.fail("id", "a name in " + object.entry() + ".special_tokens", inner.at("id"));
      if (before && seen.empty())
        before->push_back(id);
      else if (after)
        after->push_back(id);
    } else {
      std::string names;
      for (const std::string_view s : sequences)
        names += (names.empty() ? "" : " or ") + quote_text(s);
      if (std::find(sequences.begin(), sequences.end(), id) == sequences.end() ||
          std::find(seen.begin(), seen.end(), id) != seen.end())
        inner.fail("id", names + ", each once", inner.at("id"));
      seen.push_back(id);
    }
  }
  if (seen.size() != sequences.size())
    object.fail(key,
                "a template with the sequence" + std::string(sequences.size() > 1 ? "s" : "") +
                    " " + (sequences.size() > 1 ? "\"A\" and \"B\"" : "\"A\""),
                list);
}

/// Reads the post-processor `value` (not null) at `entry` into `text`.
inline void read_post_processor(const TextFileErrors& errors, const std::string& entry,
                                const nlohmann::json& value, TemplateText& text) {
  const std::string type =
      component_type(errors, entry, value, {"ByteLevel", "TemplateProcessing", "Sequence"});
  if (type == "ByteLevel") {
    check_offset_only_byte_level(errors, entry, value);
  } else if (type == "Sequence") {
    const JsonObject object(errors, entry, value, {"type", "processors"});
    const nlohmann::json& list = object.array("processors");
    for (std::size_t i = 0; i < list.size(); ++i)
      read_post_processor(errors, entry + ".processors[" + std::to_string(i) + "]", list[i], text);
  } else {
    const JsonObject object(errors, entry, value, {"type", "single", "pair", "special_tokens"});
    if (text.present)
      errors.fail(entry, "type", "one TemplateProcessing", "a second one");
    text.present = true;
    const nlohmann::json& table = object.at("special_tokens");
    if (!table.is_object())
      object.fail("special_tokens", "an object of name -> {id, ids, tokens}", table);
    for (const auto& [name, special] : table.items()) {
      const JsonObject s(errors, entry + ".special_tokens." + name, special,
                         {"id", "ids", "tokens"});
      if (s.string("id") != name)
        s.fail("id", quote_text(name) + " (its key)", s.at("id"));
      TemplateText::Special out;
      for (const nlohmann::json& id : s.array("ids")) {
        if (!id.is_number_integer() || id.get<std::int64_t>() < 0)
          s.fail("ids", "an array of non-negative integers", s.at("ids"));
        out.ids.push_back(id.get<std::int64_t>());
      }
      for (const nlohmann::json& token : s.array("tokens")) {
        if (!token.is_string())
          s.fail("tokens", "an array of strings", s.at("tokens"));
        out.tokens.push_back(token.get<std::string>());
      }
      if (out.ids.size() != out.tokens.size() || out.ids.empty())
        s.fail("tokens",
               "as many tokens as ids (" + std::to_string(out.ids.size()) + "), at least one",
               s.at("tokens"));
      text.specials.emplace(name, std::move(out));
    }
    read_template(object, "single", {"A"}, text.specials, &text.before, &text.after);
    if (object.find("pair"))
      read_template(object, "pair", {"A", "B"}, text.specials, nullptr, nullptr);
  }
}

}  // namespace nlb::text::detail
