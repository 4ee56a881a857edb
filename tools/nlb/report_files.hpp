// The files of a report directory (report.md, report.json, CSV, SVG), staged in memory and
// written only when everything has been computed: an error anywhere before write() leaves no
// partial report behind, and each file itself is written to a temporary name and renamed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "nlb/core/errors.hpp"
#include "nlb/io/file_io.hpp"

namespace nlb::cli {

class ReportFiles {
 public:
  explicit ReportFiles(std::filesystem::path dir) : dir_(std::move(dir)) {}

  /// Stages `content` as the file `name` (a plain file name inside the report directory).
  /// Throws ArgumentError for a name with a directory part or an already staged name.
  void add(std::string name, std::string content) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      throw ArgumentError(
          detail::expected_found("report file name", "a plain file name", "\"" + name + "\""));
    }
    for (const auto& file : files_) {
      if (file.first == name) {
        throw ArgumentError(
            detail::expected_found("report file name", "a name used once", "\"" + name + "\""));
      }
    }
    files_.emplace_back(std::move(name), std::move(content));
  }

  /// Creates the directory (and its parents) and writes every staged file atomically.
  /// Throws nlb::Error naming the directory or file on failure.
  void write() const {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec || !std::filesystem::is_directory(dir_)) {
      throw Error(dir_.string() + ": " +
                  detail::expected_found("cannot create the report directory", "a directory",
                                         ec ? ec.message() : "a file of that name"));
    }
    for (const auto& [name, content] : files_) {
      const auto* bytes = reinterpret_cast<const std::uint8_t*>(content.data());
      io::write_file_atomically(dir_ / name, std::span<const std::uint8_t>(bytes, content.size()));
    }
  }

  const std::filesystem::path& directory() const { return dir_; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& file : files_)
      out.push_back(file.first);
    return out;
  }

 private:
  std::filesystem::path dir_;
  std::vector<std::pair<std::string, std::string>> files_;
};

}  // namespace nlb::cli
