// Whole-file reads into memory and all-or-nothing writes (temporary file + rename).
// Models here are small, so a file is read into one std::vector; memory-mapping is a later
// optimization that would not change any interface above this header.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "nlb/core/errors.hpp"

namespace nlb::io {

/// Every byte of the regular file at `path`. Throws FormatError naming the file when it is
/// missing, not a regular file, or cannot be read completely. O(file size).
inline std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw FormatError(name + ": " +
                      nlb::detail::expected_found("cannot read", "an existing file",
                                                  ec ? ec.message() : "no such file"));
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw FormatError(name + ": " +
                      nlb::detail::expected_found("cannot read", "a regular file",
                                                  std::filesystem::is_directory(status)
                                                      ? "a directory"
                                                      : "a special file"));
  }
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) {
    throw FormatError(name + ": " +
                      nlb::detail::expected_found("cannot read", "a file size", ec.message()));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw FormatError(name + ": " +
                      nlb::detail::expected_found("cannot read", "a readable file", "open failed"));
  }
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  if (size > 0) {
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  }
  const auto got = static_cast<std::uintmax_t>(in.gcount());
  if (got != size) {
    throw FormatError(name + ": " + nlb::detail::expected_found("short read", size, got));
  }
  return bytes;
}

/// A name next to `path` that no other writer in this process uses: `path` + ".tmp-" + a
/// per-call counter and a clock reading (collisions across processes are what the clock
/// makes unlikely; the rename is what makes the result all-or-nothing).
inline std::filesystem::path temporary_name_for(const std::filesystem::path& path) {
  static std::atomic<std::uint64_t> counter{0};
  const auto ticks =
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::filesystem::path tmp = path;
  tmp += ".tmp-" + std::to_string(ticks) + "-" + std::to_string(counter.fetch_add(1));
  return tmp;
}

/// Writes `bytes` to a temporary file next to `path`, then renames it over `path`, so a
/// reader sees either the old file or the complete new one, never a partial file. On any
/// failure removes the temporary file and throws nlb::Error naming `path`. (No fsync: the
/// guarantee covers a failing or killed process, not a power loss.) O(bytes).
inline void write_file_atomically(const std::filesystem::path& path,
                                  std::span<const std::uint8_t> bytes) {
  const std::filesystem::path tmp = temporary_name_for(path);
  auto fail = [&](const std::string& what) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw Error(path.string() + ": " + what);
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      fail("cannot create the temporary file " + tmp.string());
    if (!bytes.empty()) {
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    }
    out.close();
    if (out.fail())
      fail("cannot write " + std::to_string(bytes.size()) + " bytes to " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    fail("cannot rename " + tmp.string() + " over it: " + ec.message());
}

}  // namespace nlb::io
