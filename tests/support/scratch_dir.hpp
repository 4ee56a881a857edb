// A fresh, empty directory for one test, removed (with everything in it) at scope exit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <system_error>
#include <vector>

namespace nlb::test {

struct ScratchDir {
  std::filesystem::path path;

  /// `tag` becomes part of the directory name, so leftovers of a crashed test say whose they are.
  explicit ScratchDir(const std::string& tag = "test") {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() /
           ("nlb-" + tag + "-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }

  /// Writes `bytes` to the file `name` in this directory and returns its path.
  std::filesystem::path write(const std::string& name,
                              const std::vector<std::uint8_t>& bytes) const {
    std::ofstream out(path / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return path / name;
  }
  std::filesystem::path write_text(const std::string& name, const std::string& text) const {
    return write(name, std::vector<std::uint8_t>(text.begin(), text.end()));
  }
  /// Every byte of the file `name` in this directory.
  std::vector<std::uint8_t> read(const std::string& name) const {
    std::ifstream in(path / name, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  /// The sorted names of the entries in this directory.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

}  // namespace nlb::test
