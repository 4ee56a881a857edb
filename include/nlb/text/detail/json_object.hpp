// Reading tokenizer.json's JSON objects with the checks of their keys and value types: every
// key known, every value of the expected type, each failure a FormatError naming the file, the
// entry (a JSON key path), what was expected and what was found (messages.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "nlb/text/detail/messages.hpp"
#include "nlb/text/detail/utf8.hpp"

namespace nlb::text::detail {

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
  /// The array `key`; FormatError when absent or not an array.
  const nlohmann::json& array(const char* key) const {
    const nlohmann::json& member = at(key);
    if (!member.is_array())
      fail(key, "an array", member);
    return member;
  }
  /// The non-negative integer `key`, `fallback` when absent.
  std::int64_t count(const char* key, std::int64_t fallback) const {
    const nlohmann::json* member = find(key);
    if (!member)
      return fallback;
    if (!member->is_number_integer() || member->get<std::int64_t>() < 0)
      fail(key, "a non-negative integer", *member);
    return member->get<std::int64_t>();
  }
  /// The string `key`, which must be one character (one code point of well-formed UTF-8).
  std::string character(const char* key) const {
    std::string text = string(key);
    const bool one = !text.empty() && [&] {
      const Utf8Unit unit = decode_utf8(text, 0);
      return unit.valid && unit.length == text.size();
    }();
    if (!one)
      fail(key, "a string of one character", at(key));
    return text;
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

}  // namespace nlb::text::detail
