// Token streams from files (DESIGN.md §5).
//   Text: the bytes of the file are the tokens (byte-level models, vocabulary 256).
//   Binary: token ids as little-endian uint16 (default) or uint32, back to back with no
//     header: the format common GPT-2 data-preparation scripts write (numpy
//     `array.astype(np.uint16).tofile(path)`).
// Errors are FormatError naming the file, what was expected and what was found.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nlb/core/errors.hpp"
#include "nlb/io/detail/byte_order.hpp"
#include "nlb/io/file_io.hpp"

namespace nlb::io {

/// Width of the token ids in a binary token file.
enum class TokenDType { U16, U32 };

/// Bytes per token id: 2 or 4.
constexpr std::size_t token_dtype_size(TokenDType dtype) {
  return dtype == TokenDType::U16 ? 2 : 4;
}

/// "u16" or "u32" (the spelling of the command-line option --token-dtype).
constexpr std::string_view to_string(TokenDType dtype) {
  return dtype == TokenDType::U16 ? "u16" : "u32";
}

/// The TokenDType spelled `name` ("u16" or "u32"); ArgumentError otherwise.
inline TokenDType parse_token_dtype(std::string_view name) {
  if (name == "u16")
    return TokenDType::U16;
  if (name == "u32")
    return TokenDType::U32;
  throw ArgumentError(
      nlb::detail::expected_found("token dtype", "u16 or u32", "\"" + std::string(name) + "\""));
}

/// The bytes of the file at `path` as tokens 0..255 (an empty file gives no tokens).
/// FormatError naming the file if it cannot be read. O(file size).
inline std::vector<std::int32_t> read_text_tokens(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> bytes = read_file_bytes(path);
  return std::vector<std::int32_t>(bytes.begin(), bytes.end());
}

/// The token ids in the binary file at `path` (little-endian `dtype`). FormatError naming the
/// file if it cannot be read, if its size is not a multiple of the id width, if an id does not
/// fit int32 (U32 only), or — when vocab_size >= 1 — if an id is >= vocab_size (the message
/// names the position and the value). vocab_size = -1 checks no bound; any other value < 1 is
/// an ArgumentError. O(file size).
inline std::vector<std::int32_t> read_token_file(const std::filesystem::path& path,
                                                 TokenDType dtype = TokenDType::U16,
                                                 std::int64_t vocab_size = -1) {
  if (vocab_size != -1 && vocab_size < 1) {
    throw ArgumentError(
        nlb::detail::expected_found("read_token_file: vocab_size", "-1 or >= 1", vocab_size));
  }
  const std::vector<std::uint8_t> bytes = read_file_bytes(path);
  const std::size_t width = token_dtype_size(dtype);
  const std::string file = path.string();
  if (bytes.size() % width != 0) {
    throw FormatError(
        file + ": " +
        nlb::detail::expected_found("size of a " + std::string(to_string(dtype)) + " token file",
                                    "a multiple of " + std::to_string(width) + " bytes",
                                    std::to_string(bytes.size()) + " bytes"));
  }
  const std::size_t count = bytes.size() / width;
  std::vector<std::int32_t> tokens(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::int64_t id = dtype == TokenDType::U16
                                ? std::int64_t{detail::load_le<std::uint16_t>(&bytes[2 * i])}
                                : std::int64_t{detail::load_le<std::uint32_t>(&bytes[4 * i])};
    if (id > std::numeric_limits<std::int32_t>::max()) {
      throw FormatError(file + ": " +
                        nlb::detail::expected_found("token at position " + std::to_string(i),
                                                    "an id <= 2147483647", id));
    }
    if (vocab_size != -1 && id >= vocab_size) {
      throw FormatError(
          file + ": " +
          nlb::detail::expected_found("token at position " + std::to_string(i),
                                      "an id < vocab_size " + std::to_string(vocab_size), id));
    }
    tokens[i] = static_cast<std::int32_t>(id);
  }
  return tokens;
}

/// Writes `tokens` as a binary token file (little-endian `dtype`), all or nothing (temporary
/// file + rename). ArgumentError if a token is negative or does not fit `dtype`; nlb::Error
/// naming the path on I/O failure. O(tokens).
inline void write_token_file(const std::filesystem::path& path,
                             std::span<const std::int32_t> tokens,
                             TokenDType dtype = TokenDType::U16) {
  const std::size_t width = token_dtype_size(dtype);
  const std::int64_t max_id =
      dtype == TokenDType::U16 ? 65535 : std::numeric_limits<std::int32_t>::max();
  std::vector<std::uint8_t> bytes(tokens.size() * width);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::int32_t id = tokens[i];
    if (id < 0 || id > max_id) {
      throw ArgumentError(
          nlb::detail::expected_found("write_token_file: token at position " + std::to_string(i),
                                      "an id in [0, " + std::to_string(max_id) + "]", id));
    }
    if (dtype == TokenDType::U16) {
      detail::store_le<std::uint16_t>(&bytes[2 * i], static_cast<std::uint16_t>(id));
    } else {
      detail::store_le<std::uint32_t>(&bytes[4 * i], static_cast<std::uint32_t>(id));
    }
  }
  write_file_atomically(path, bytes);
}

}  // namespace nlb::io
