// Editable copies of a model's weights, for tests that write malformed or re-laid-out model
// directories from a shipped model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
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

/// Writes dir/model.safetensors (every tensor as F32) and dir/config.json; creates dir.
inline void write_model_dir(const std::filesystem::path& dir, const TensorMap& tensors,
                            const nlohmann::json& config) {
  std::filesystem::create_directories(dir);
  io::SafetensorsWriter w;
  for (const auto& [name, t] : tensors)
    w.add(name, io::DType::F32, t.shape, std::span<const float>(t.values));
  w.write(dir / "model.safetensors");
  std::ofstream(dir / "config.json") << config.dump(2);
}

}  // namespace nlb::test
