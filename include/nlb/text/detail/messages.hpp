// FormatError messages of the tokenizer loaders, in the house style of io/messages.hpp:
// "<file>: <entry>: <what>: expected <expected>, found <found>", where the entry names the place
// in the file (a token, a line of merges.txt, a JSON key path). Values found are described
// briefly (describe_json, quote_text) so a message stays one line.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlb/core/errors.hpp"
#include "nlb/io/file_io.hpp"
#include "nlb/io/messages.hpp"

namespace nlb::text::detail {

using io::describe_json;
using io::quote_text;

class TextFileErrors {
 public:
  explicit TextFileErrors(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }

  /// Throws FormatError "<file>: [<entry>: ]<what>: expected <expected>, found <found>".
  [[noreturn]] void fail(std::string_view entry, const std::string& what,
                         const std::string& expected, const std::string& found) const {
    std::string message = file_ + ": ";
    if (!entry.empty())
      message.append(entry).append(": ");
    throw FormatError(message + nlb::detail::expected_found(what, expected, found));
  }

 private:
  std::string file_;
};

/// The file at `path` as text (FormatError naming it when it cannot be read). O(size).
inline std::string read_text_file(const std::string& path) {
  const std::vector<std::uint8_t> bytes = io::read_file_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

/// `text` parsed as JSON; FormatError naming the file and the parser's complaint otherwise.
inline nlohmann::json parse_json(const TextFileErrors& errors, const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
    errors.fail("", "JSON", "a complete JSON document", quote_text(e.what(), 200));
  }
}

}  // namespace nlb::text::detail
