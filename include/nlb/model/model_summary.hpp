// What a model directory holds, read from config.json and the safetensors headers only (no
// tensor data is read): architecture, sizes, the stored dtypes, parameter count and the memory
// a loaded model needs. `nlb info` prints it; a program can check a checkpoint before loading.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "nlb/io/dtype.hpp"
#include "nlb/model/config.hpp"
#include "nlb/model/detail/tensor_source.hpp"

namespace nlb {

/// The tensors of one stored dtype.
struct DTypeShare {
  std::int64_t tensors = 0;
  std::int64_t elements = 0;
  std::uint64_t bytes = 0;  // elements x the dtype's size
};

/// One safetensors file of the model.
struct ModelFileInfo {
  std::filesystem::path path;
  std::uint64_t bytes = 0;  // the whole file: header and data
  std::int64_t tensors = 0;
};

/// A model directory's summary (summarize_model).
struct ModelSummary {
  ModelConfig config;
  std::vector<ModelFileInfo> files;          // one file, or the shards of an index
  std::map<io::DType, DTypeShare> by_dtype;  // every stored tensor, buffers included
  std::int64_t parameters = 0;               // elements of the parameter tensors
  std::int64_t buffer_elements = 0;          // stored non-parameter buffers (causal masks, ...)

  /// Bytes of the weights once loaded as T (every parameter converted to T; buffers are not
  /// kept). The memory a forward needs beyond this is its activations (docs/model_files.md).
  template <class T>
  std::uint64_t weight_bytes() const {
    return static_cast<std::uint64_t>(parameters) * sizeof(T);
  }

  /// Total bytes of the safetensors files.
  std::uint64_t file_bytes() const {
    std::uint64_t n = 0;
    for (const auto& f : files)
      n += f.bytes;
    return n;
  }
};

/// Reads `dir`/config.json and the headers of its model.safetensors (or of the shards that
/// model.safetensors.index.json lists), validating them as a load would; no tensor data is
/// read. Throws FormatError naming the file, entry, expected and found. O(header sizes).
inline ModelSummary summarize_model(const std::filesystem::path& dir) {
  ModelSummary s;
  s.config = read_model_directory_config(dir);
  const detail::TensorSource source(dir);
  for (const auto& file : source.files()) {
    s.files.push_back(
        {file.path(), file.file_size(), static_cast<std::int64_t>(file.tensors().size())});
    for (const auto& t : file.tensors()) {
      DTypeShare& share = s.by_dtype[t.dtype];
      share.tensors += 1;
      share.elements += t.numel();
      share.bytes += t.end - t.begin;
      (detail::is_non_parameter_buffer(t.name) ? s.buffer_elements : s.parameters) += t.numel();
    }
  }
  return s;
}

}  // namespace nlb
