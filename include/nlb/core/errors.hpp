// Typed exceptions. Every message names what was expected and what was found,
// and (for files) which file and tensor.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace nlb {

/// Base of every exception nlbudget throws.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// A malformed, truncated or inconsistent file (model, tokens, fixture).
class FormatError : public Error {
 public:
  using Error::Error;
};

/// Operands whose shapes do not fit together.
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// NaN/Inf in data, or a numerically impossible request (e.g. fitting empty statistics).
class NumericError : public Error {
 public:
  using Error::Error;
};

/// An option or argument outside its valid range (e.g. lambda <= 0).
class ArgumentError : public Error {
 public:
  using Error::Error;
};

namespace detail {

/// Builds "<what>: expected <expected>, found <found>" from streamable parts.
template <class Expected, class Found>
std::string expected_found(const std::string& what, const Expected& expected, const Found& found) {
  std::ostringstream out;
  out << what << ": expected " << expected << ", found " << found;
  return out.str();
}

}  // namespace detail

/// Throws ShapeError unless `found == expected`. `what` is a view so that a passing check
/// builds no string (a std::string parameter would heap-allocate for every literal longer
/// than the small-string buffer, on every call of every forward pass).
inline void check_dim(std::string_view what, long long expected, long long found) {
  if (expected != found)
    throw ShapeError(detail::expected_found(std::string(what), expected, found));
}

}  // namespace nlb
