// Editable copies of a model's weights, for tests that write malformed, re-laid-out or rounded
// model directories from a shipped model.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "nlb/io/safetensors.hpp"
#include "nlb/io/safetensors_writer.hpp"

namespace nlb::test {

/// One tensor as float32 values in row-major order.
struct TensorCopy {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};
using TensorMap = std::map<std::string, TensorCopy>;

/// Every tensor of a safetensors file, converted to float32.
inline TensorMap read_all_tensors(const std::filesystem::path& file) {
  const auto f = io::SafetensorsFile::open(file);
  TensorMap m;
  for (const auto& t : f.tensors())
    m[t.name] = {t.shape, f.read<float>(t.name)};
  return m;
}

/// Writes dir/model.safetensors (every tensor as `dtype`; F16 and BF16 round to nearest even)
/// and dir/config.json; creates dir.
inline void write_model_dir_as(io::DType dtype, const std::filesystem::path& dir,
                               const TensorMap& tensors, const nlohmann::json& config) {
  std::filesystem::create_directories(dir);
  io::SafetensorsWriter w;
  for (const auto& [name, t] : tensors)
    w.add(name, dtype, t.shape, std::span<const float>(t.values));
  w.write(dir / "model.safetensors");
  std::ofstream(dir / "config.json") << config.dump(2);
}

/// Writes dir/model.safetensors (every tensor as F32) and dir/config.json; creates dir.
inline void write_model_dir(const std::filesystem::path& dir, const TensorMap& tensors,
                            const nlohmann::json& config) {
  write_model_dir_as(io::DType::F32, dir, tensors, config);
}

/// FNV-1a (64-bit) over the stored bytes of every tensor of a safetensors file, tensors in name
/// order, as 16 lower-case hex digits: what tools/python/make_fixtures.py (fnv1a64_of_tensors)
/// records as `weights_fnv1a64` for the weights its rounded-weights fixtures come from.
inline std::string weights_fnv1a64(const std::filesystem::path& file) {
  const auto f = io::SafetensorsFile::open(file);
  std::map<std::string, std::span<const std::uint8_t>> by_name;
  for (const auto& t : f.tensors())
    by_name[t.name] = f.raw_bytes(t.name);
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& [name, bytes] : by_name)
    for (const std::uint8_t b : bytes)
      h = (h ^ b) * 0x100000001b3ULL;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

/// `source` (a Hugging Face directory with F32 weights) with every tensor rounded once to
/// `dtype` (F16 or BF16, nearest even), written to `dir` with config.json's torch_dtype set;
/// returns `dir`. `logits_fixture` (tiny-gpt2-{f16,bf16}-logits.safetensors, tests/fixtures/
/// README.md) holds PyTorch's logits of the same rounding and, as `weights_fnv1a64`, the checksum
/// of PyTorch's rounded bytes: a copy whose bytes differ is refused (std::runtime_error), so the
/// logits are compared on exactly PyTorch's weights. O(parameters).
inline std::filesystem::path write_rounded_copy(const std::filesystem::path& source,
                                                io::DType dtype,
                                                const std::filesystem::path& logits_fixture,
                                                const std::filesystem::path& dir) {
  if (dtype != io::DType::F16 && dtype != io::DType::BF16)
    throw std::invalid_argument("write_rounded_copy: F16 or BF16 expected");
  const auto meta = io::SafetensorsFile::open(logits_fixture).metadata();
  const auto entry = meta.find("weights_fnv1a64");
  if (entry == meta.end())
    throw std::runtime_error("write_rounded_copy: " + logits_fixture.string() +
                             " has no metadata entry weights_fnv1a64");
  const std::string& expected_fnv1a64 = entry->second;
  nlohmann::json config = nlohmann::json::parse(std::ifstream(source / "config.json"));
  config["torch_dtype"] = dtype == io::DType::F16 ? "float16" : "bfloat16";
  write_model_dir_as(dtype, dir, read_all_tensors(source / "model.safetensors"), config);
  const std::string got = weights_fnv1a64(dir / "model.safetensors");
  if (got != expected_fnv1a64)
    throw std::runtime_error("write_rounded_copy: " + (dir / "model.safetensors").string() +
                             ": FNV-1a of the rounded weights is " + got + ", PyTorch's is " +
                             expected_fnv1a64);
  return dir;
}

}  // namespace nlb::test
