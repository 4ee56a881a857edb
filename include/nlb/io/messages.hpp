// Pieces of FormatError messages for the file readers: every message starts with the file
// name, then the tensor (if any), then "<what>: expected <expected>, found <found>".
// Values found in a file are described briefly and never recursively (a hostile header may
// nest arrays a million deep), and long strings are cut, so a message stays one short line.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "nlb/core/errors.hpp"

namespace nlb::io {

/// `text` in double quotes, cut to `max_chars` characters with "..." appended when longer.
inline std::string quote_text(std::string_view text, std::size_t max_chars = 80) {
  std::string out = "\"";
  out.append(text.substr(0, max_chars));
  if (text.size() > max_chars)
    out += "...";
  out += "\"";
  return out;
}

/// A one-line description of a JSON value: scalars as written, strings quoted (cut),
/// arrays and objects by their size only. O(1) apart from cutting a string.
inline std::string describe_json(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::string:
      return "string " + quote_text(value.get_ref<const std::string&>());
    case nlohmann::json::value_t::array:
      return "an array of " + std::to_string(value.size()) + " elements";
    case nlohmann::json::value_t::object:
      return "an object with " + std::to_string(value.size()) + " keys";
    case nlohmann::json::value_t::null:
      return "null";
    default:  // number or boolean: short by construction
      return std::string(value.type_name()) + " " + value.dump();
  }
}

/// "[2, 3]"; a shape of more than 16 dimensions is cut after 16 with its rank appended.
inline std::string format_shape(std::span<const std::int64_t> shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i == 16) {
      out += ", ... (" + std::to_string(shape.size()) + " dimensions)";
      break;
    }
    if (i > 0)
      out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

/// `a * b` into `product`; false (product untouched) when it would exceed `limit`.
inline bool multiply_within(std::uint64_t a, std::uint64_t b, std::uint64_t limit,
                            std::uint64_t& product) {
  if (a != 0 && b > limit / a)
    return false;
  product = a * b;
  return product <= limit;
}

/// Builds and throws FormatErrors that name one file.
class FileErrors {
 public:
  explicit FileErrors(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }

  /// Throws FormatError "<file>: [tensor "<tensor>": ]<what>: expected <expected>, found <found>".
  [[noreturn]] void fail(std::string_view tensor, const std::string& what,
                         const std::string& expected, const std::string& found) const {
    std::string message = file_ + ": ";
    if (!tensor.empty())
      message += "tensor " + quote_text(tensor) + ": ";
    throw FormatError(message + nlb::detail::expected_found(what, expected, found));
  }

 private:
  std::string file_;
};

}  // namespace nlb::io
