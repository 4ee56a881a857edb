// Writer for safetensors files (format: see safetensors.hpp and docs/safetensors.md).
//
// Output is what the safetensors reference writer produces for single-dtype files: compact
// JSON header with names in sorted order, "__metadata__" only when set, the header padded
// with spaces to a multiple of 8 bytes (so the data section starts 8-byte aligned), tensor
// data back to back in name order with no gaps. The file appears all at once: it is written
// to a temporary name next to the target and renamed over it.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nlb/core/errors.hpp"
#include "nlb/io/detail/byte_order.hpp"
#include "nlb/io/dtype.hpp"
#include "nlb/io/file_io.hpp"
#include "nlb/io/messages.hpp"

namespace nlb::io {

/// Collects tensors and metadata, then writes one safetensors file.
class SafetensorsWriter {
 public:
  /// Adds floating tensor `name` of `shape` (row-major `values`), stored as `dtype`:
  /// F32 and F64 store the value (double -> F32 rounds to nearest), F16 and BF16 round to
  /// nearest-even (to_f16_bits / to_bf16_bits). Throws ArgumentError for an empty, repeated
  /// or non-UTF-8 name, the name "__metadata__", or a non-floating dtype; ShapeError if a
  /// dimension is negative or the shape's product is not values.size(). O(numel).
  void add(std::string name, DType dtype, std::vector<std::int64_t> shape,
           std::span<const float> values) {
    add_floating(std::move(name), dtype, std::move(shape), values);
  }

  /// As above, from double values.
  void add(std::string name, DType dtype, std::vector<std::int64_t> shape,
           std::span<const double> values) {
    add_floating(std::move(name), dtype, std::move(shape), values);
  }

  /// Adds integer tensor `name` stored as `dtype` (I64, I32, U8 or BOOL); ArgumentError if a
  /// value does not fit the dtype (BOOL: 0 or 1), other errors as add(). O(numel).
  void add_int(std::string name, DType dtype, std::vector<std::int64_t> shape,
               std::span<const std::int64_t> values) {
    if (is_floating(dtype)) {
      throw ArgumentError(nlb::detail::expected_found("add_int: dtype of tensor \"" + name + "\"",
                                                      "I64, I32, U8 or BOOL", to_string(dtype)));
    }
    Entry entry = start_entry(name, dtype, std::move(shape), values.size());
    const std::int64_t low = dtype == DType::I64   ? std::numeric_limits<std::int64_t>::min()
                             : dtype == DType::I32 ? std::numeric_limits<std::int32_t>::min()
                                                   : 0;
    const std::int64_t high = dtype == DType::I64   ? std::numeric_limits<std::int64_t>::max()
                              : dtype == DType::I32 ? std::numeric_limits<std::int32_t>::max()
                              : dtype == DType::U8  ? 255
                                                    : 1;
    std::uint8_t* out = entry.bytes.data();
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::int64_t v = values[i];
      if (v < low || v > high) {
        throw ArgumentError(nlb::detail::expected_found(
            "add_int: tensor \"" + name + "\" element " + std::to_string(i),
            "a value in [" + std::to_string(low) + ", " + std::to_string(high) + "] for " +
                std::string(to_string(dtype)),
            v));
      }
      switch (dtype) {
        case DType::I64:
          detail::store_le<std::int64_t>(out + 8 * i, v);
          break;
        case DType::I32:
          detail::store_le<std::int32_t>(out + 4 * i, static_cast<std::int32_t>(v));
          break;
        default:  // U8, BOOL
          out[i] = static_cast<std::uint8_t>(v);
          break;
      }
    }
    entries_.emplace(std::move(name), std::move(entry));
  }

  /// Sets metadata `key` to `value` (a later call with the same key replaces it).
  /// ArgumentError if either is not valid UTF-8.
  void set_metadata(std::string key, std::string value) {
    check_utf8("metadata key", key);
    check_utf8("metadata value", value);
    metadata_[std::move(key)] = std::move(value);
  }

  /// The complete file: 8-byte header length, header, data. O(total bytes).
  std::vector<std::uint8_t> to_bytes() const {
    nlohmann::json header = nlohmann::json::object();  // std::map inside: keys sorted
    if (!metadata_.empty())
      header["__metadata__"] = metadata_;
    std::uint64_t offset = 0;
    for (const auto& [name, entry] : entries_) {  // name order, as the header lists them
      header[name] = {{"dtype", std::string(to_string(entry.dtype))},
                      {"shape", entry.shape},
                      {"data_offsets", {offset, offset + entry.bytes.size()}}};
      offset += entry.bytes.size();
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::vector<std::uint8_t> bytes(8 + text.size() + offset);
    detail::store_le<std::uint64_t>(bytes.data(), text.size());
    std::copy(text.begin(), text.end(), bytes.begin() + 8);
    auto position = bytes.begin() + 8 + static_cast<std::ptrdiff_t>(text.size());
    for (const auto& [name, entry] : entries_) {
      position = std::copy(entry.bytes.begin(), entry.bytes.end(), position);
    }
    return bytes;
  }

  /// Writes the file to `path` + a temporary suffix, then renames it over `path`: nothing is
  /// ever half-written. Throws nlb::Error naming the path on any I/O failure (the temporary
  /// file is removed). O(total bytes).
  void write(const std::filesystem::path& path) const { write_file_atomically(path, to_bytes()); }

 private:
  struct Entry {
    DType dtype;
    std::vector<std::int64_t> shape;
    std::vector<std::uint8_t> bytes;  // little-endian elements, row-major
  };

  static void check_utf8(const std::string& what, const std::string& text) {
    try {
      (void)nlohmann::json(text).dump();  // dump() validates UTF-8
    } catch (const nlohmann::json::exception&) {
      throw ArgumentError(nlb::detail::expected_found(what, "valid UTF-8", quote_text(text)));
    }
  }

  /// Checks name and shape and returns an entry with room for `count` elements.
  Entry start_entry(const std::string& name, DType dtype, std::vector<std::int64_t> shape,
                    std::size_t count) const {
    if (name.empty() || name == "__metadata__") {
      throw ArgumentError(nlb::detail::expected_found(
          "tensor name", "a non-empty name other than \"__metadata__\"", quote_text(name)));
    }
    if (entries_.count(name) != 0) {
      throw ArgumentError(
          nlb::detail::expected_found("tensor name", "a name not added before", quote_text(name)));
    }
    check_utf8("tensor name", name);
    std::uint64_t numel = 1;
    for (std::int64_t d : shape) {
      if (d < 0 || !multiply_within(numel, static_cast<std::uint64_t>(d),
                                    std::numeric_limits<std::int64_t>::max(), numel)) {
        throw ShapeError(nlb::detail::expected_found(
            "tensor \"" + name + "\" shape", "non-negative dimensions with an int64 product",
            format_shape(shape)));
      }
    }
    if (numel != count) {
      throw ShapeError(nlb::detail::expected_found(
          "tensor \"" + name + "\": number of values for shape " + format_shape(shape), numel,
          count));
    }
    return Entry{dtype, std::move(shape), std::vector<std::uint8_t>(count * dtype_size(dtype))};
  }

  template <class T>
  void add_floating(std::string name, DType dtype, std::vector<std::int64_t> shape,
                    std::span<const T> values) {
    if (!is_floating(dtype)) {
      throw ArgumentError(nlb::detail::expected_found("add: dtype of tensor \"" + name + "\"",
                                                      "F64, F32, F16 or BF16", to_string(dtype)));
    }
    Entry entry = start_entry(name, dtype, std::move(shape), values.size());
    std::uint8_t* out = entry.bytes.data();
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double v = static_cast<double>(values[i]);  // exact for float and double
      switch (dtype) {
        case DType::F64:
          detail::store_le<double>(out + 8 * i, v);
          break;
        case DType::F32:
          detail::store_le<float>(out + 4 * i, static_cast<float>(values[i]));
          break;
        case DType::F16:
          detail::store_le<std::uint16_t>(out + 2 * i, to_f16_bits(v));
          break;
        default:  // BF16
          detail::store_le<std::uint16_t>(out + 2 * i, to_bf16_bits(v));
          break;
      }
    }
    entries_.emplace(std::move(name), std::move(entry));
  }

  std::map<std::string, Entry, std::less<>> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace nlb::io
