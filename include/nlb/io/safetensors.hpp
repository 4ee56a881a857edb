// Strict reader for Hugging Face safetensors files (DESIGN.md §5, docs/safetensors.md).
//
// Layout: 8 bytes N (u64 little-endian) | N bytes of UTF-8 JSON header | data section.
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the data section; row-major, little-endian elements) plus an
// optional "__metadata__" object of strings.
//
// The file is memory-mapped (io/detail/file_bytes.hpp) and its header validated before
// anything is exposed: a SafetensorsFile that exists is consistent, so every later read is in
// bounds by construction. Opening reads only the header's pages; a tensor's pages are read
// when it is, and handed back to the page cache after it is copied out, so loading a model
// holds little more than the model in memory (docs/safetensors.md, "Memory"). Every violation
// throws FormatError naming the file, the tensor (if any), what was expected and what was
// found. Tensor data may sit at any byte offset; elements are always copied out with memcpy.
// The file must not be truncated or rewritten in place while it is open (as with any
// memory-mapped file; writers here replace files by rename, which is safe).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlb/core/errors.hpp"
#include "nlb/core/mapped_matrix.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/io/detail/byte_order.hpp"
#include "nlb/io/detail/file_bytes.hpp"
#include "nlb/io/dtype.hpp"
#include "nlb/io/messages.hpp"

namespace nlb::io {

/// One tensor's header entry, validated.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;  // [] for a scalar
  std::uint64_t begin = 0;          // data_offsets, relative to the data section: [begin, end)
  std::uint64_t end = 0;

  /// Product of the shape (1 for a scalar, 0 if any dimension is 0). Validated at open to fit
  /// in int64. O(rank).
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape)
      n *= d;
    return n;
  }
};

/// The largest header accepted: 100 MiB (real headers are kilobytes to a few megabytes).
inline constexpr std::uint64_t max_safetensors_header_bytes = 100ull * 1024 * 1024;

/// A validated safetensors file, memory-mapped. Copyable (copies share the mapping) and
/// movable; all accessors are const and thread-safe.
class SafetensorsFile {
 public:
  /// Maps the file at `path` and validates its header. Throws FormatError (message names
  /// `path`) if it cannot be read or breaks any rule in docs/safetensors.md. O(header size +
  /// tensors log tensors): the data section is not read until a tensor is.
  static SafetensorsFile open(const std::filesystem::path& path) {
    return SafetensorsFile(path, detail::FileBytes::map(path));
  }

  /// Validates an in-memory file; messages name `name_for_messages` (fuzzing, tests).
  static SafetensorsFile from_bytes(std::vector<std::uint8_t> bytes,
                                    std::string name_for_messages) {
    return SafetensorsFile(std::filesystem::path(std::move(name_for_messages)),
                           detail::FileBytes(std::move(bytes)));
  }

  /// The size of the whole file in bytes.
  std::uint64_t file_size() const { return bytes_->size(); }

  /// The path given to open(), or the name given to from_bytes().
  const std::filesystem::path& path() const { return path_; }

  /// Every tensor, sorted by name (bytewise).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  /// True if a tensor called `name` exists. O(log n).
  bool contains(std::string_view name) const { return find(name) != nullptr; }

  /// The tensor called `name`; FormatError "missing tensor" naming file and tensor if absent.
  /// O(log n).
  const TensorInfo& info(std::string_view name) const {
    const TensorInfo* t = find(name);
    if (t == nullptr) {
      errors_.fail({}, "missing tensor " + quote_text(name), "a tensor of that name",
                   "none among " + std::to_string(tensors_.size()) + " tensors");
    }
    return *t;
  }

  /// The "__metadata__" strings (empty when the header has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  /// The tensor's raw little-endian bytes (end - begin of them), any alignment; valid while
  /// this object (or a copy) lives.
  std::span<const std::uint8_t> raw_bytes(std::string_view name) const {
    const TensorInfo& t = info(name);
    return {bytes_->data() + data_begin_ + t.begin, static_cast<std::size_t>(t.end - t.begin)};
  }

  /// The elements of tensor `name` in row-major order, converted to T.
  /// T = float or double: the tensor must have a floating dtype (F64, F32, F16, BF16; F16 and
  ///   BF16 widen exactly, F64 -> float rounds to nearest).
  /// T = an integer type: the tensor must have an integer dtype (I64, I32, U8, BOOL) and every
  ///   value must fit T.
  /// If `expected_shape` is non-empty the tensor's shape must equal it.
  /// Throws FormatError naming file, tensor, expected and found. O(numel). The tensor's
  /// pages leave the resident set afterwards (read() again faults them back in).
  template <class T>
  std::vector<T> read(std::string_view name, std::span<const std::int64_t> expected_shape) const {
    const TensorInfo& t = info(name);
    if (!expected_shape.empty()) {
      check_shape(t, expected_shape);
    }
    std::vector<T> out(static_cast<std::size_t>(t.numel()));
    decode_into(t, out.data());
    return out;
  }

  /// read() with the expected shape written in place: `read<float>("w", {768, 3072})`;
  /// `read<float>("w")` checks no shape.
  template <class T>
  std::vector<T> read(std::string_view name,
                      std::initializer_list<std::int64_t> expected_shape = {}) const {
    return read<T>(name,
                   std::span<const std::int64_t>(expected_shape.begin(), expected_shape.size()));
  }

  /// A 2-D tensor of shape [rows, cols] as a row-major matrix [rows, cols] (element types as
  /// read()). FormatError if the shape differs; ArgumentError if rows or cols < 0. O(numel).
  template <class T>
  RowMatrix<T> read_matrix(std::string_view name, Index rows, Index cols) const {
    check_size_argument("read_matrix: rows", rows);
    check_size_argument("read_matrix: cols", cols);
    const TensorInfo& t = info(name);
    const std::int64_t shape[] = {rows, cols};
    check_shape(t, shape);
    RowMatrix<T> out(rows, cols);
    decode_into(t, out.data());
    return out;
  }

  /// A 2-D tensor of shape [rows, cols] as a read-only matrix [rows, cols] of T, without a copy
  /// where the file holds T's values as they lie: dtype F32 for float (F64 for double) on a
  /// little-endian machine, at an address that is a multiple of alignof(T). Such a matrix views
  /// the file's bytes (MappedMatrix::is_view) and keeps the mapping alive after this object is
  /// gone; its pages are read when first touched and stay in the page cache's keeping. Any other
  /// tensor is converted as read_matrix converts it, into a matrix the result owns. Checks and
  /// errors as read_matrix. O(1) for a view, O(numel) otherwise.
  template <class T>
  MappedMatrix<T> map_matrix(std::string_view name, Index rows, Index cols) const {
    static_assert(std::is_floating_point_v<T>, "map_matrix: T is float or double");
    check_size_argument("map_matrix: rows", rows);
    check_size_argument("map_matrix: cols", cols);
    const TensorInfo& t = info(name);
    const std::int64_t shape[] = {rows, cols};
    check_shape(t, shape);
    const std::uint8_t* at = bytes_->data() + data_begin_ + t.begin;
    const bool as_they_lie = std::endian::native == std::endian::little &&
                             t.dtype == (std::is_same_v<T, float> ? DType::F32 : DType::F64) &&
                             reinterpret_cast<std::uintptr_t>(at) % alignof(T) == 0;
    if (!as_they_lie || rows * cols == 0)
      return MappedMatrix<T>(read_matrix<T>(name, rows, cols));
    return MappedMatrix<T>(reinterpret_cast<const T*>(at), rows, cols, bytes_);
  }

  /// A 2-D tensor of shape [rows, cols] as its transpose [cols, rows] (row-major): element
  /// (o, i) of the tensor lands at (i, column_of_row[o]), or at (i, o) when column_of_row is
  /// empty (a torch.nn.Linear weight [out, in] read as the [in, out] that y = x W uses; a
  /// permutation also reorders the outputs, as GPT-NeoX's fused q/k/v needs). Converted from the
  /// file in blocks of 32 rows, without a copy of the untransposed tensor. Element types as
  /// read(). FormatError if the shape differs; ArgumentError if rows or cols < 0 or
  /// column_of_row is neither empty nor a permutation of 0..rows-1. O(numel).
  template <class T>
  RowMatrix<T> read_matrix_transposed(std::string_view name, Index rows, Index cols,
                                      std::span<const Index> column_of_row = {}) const {
    check_size_argument("read_matrix_transposed: rows", rows);
    check_size_argument("read_matrix_transposed: cols", cols);
    if (!column_of_row.empty()) {
      if (static_cast<Index>(column_of_row.size()) != rows)
        throw ArgumentError(nlb::detail::expected_found(
            "read_matrix_transposed: column_of_row size", rows, column_of_row.size()));
      std::vector<bool> taken(static_cast<std::size_t>(rows), false);
      for (const Index c : column_of_row) {
        if (c < 0 || c >= rows || taken[static_cast<std::size_t>(c)])
          throw ArgumentError(
              nlb::detail::expected_found("read_matrix_transposed: column_of_row entry",
                                          "a permutation of 0.." + std::to_string(rows - 1), c));
        taken[static_cast<std::size_t>(c)] = true;
      }
    }
    const TensorInfo& t = info(name);
    const std::int64_t shape[] = {rows, cols};
    check_shape(t, shape);
    RowMatrix<T> out(cols, rows);  // [cols, rows]
    // 32 rows at a time: converted into `block` [32, cols], then written out along the rows of
    // `out` (the other loop order misses the cache on every write: 3x slower). The block's rows
    // are padded by 16 elements: at a power-of-two stride the 32 rows read together would all
    // map to one L1 cache set.
    constexpr Index block_rows = 32;
    const Index stride = cols + 16;
    std::vector<T> block(static_cast<std::size_t>(block_rows * stride));
    with_tensor_pages(t, out.data(), static_cast<std::size_t>(out.size()) * sizeof(T), [&] {
      for (Index o0 = 0; o0 < rows; o0 += block_rows) {
        const Index n_rows = std::min(block_rows, rows - o0);
        for (Index o = 0; o < n_rows; ++o) {
          convert_into(t, static_cast<std::size_t>((o0 + o) * cols), static_cast<std::size_t>(cols),
                       block.data() + o * stride);
        }
        // The block's output columns: o0.. in order (contiguous stores, which vectorize), or
        // the permutation's.
        const Index* permuted = column_of_row.empty() ? nullptr : column_of_row.data() + o0;
        for (Index i = 0; i < cols; ++i) {
          T* to = out.data() + i * rows;
          const T* from = block.data() + i;
          if (permuted == nullptr) {
            for (Index o = 0; o < n_rows; ++o)
              to[o0 + o] = from[o * stride];
          } else {
            for (Index o = 0; o < n_rows; ++o)
              to[permuted[o]] = from[o * stride];
          }
        }
      }
    });
    return out;
  }

  /// A 1-D tensor of shape [n] as a row vector [1, n] (element types as read()). FormatError
  /// if the shape differs; ArgumentError if n < 0. O(n).
  template <class T>
  RowVector<T> read_row_vector(std::string_view name, Index n) const {
    check_size_argument("read_row_vector: n", n);
    const TensorInfo& t = info(name);
    const std::int64_t shape[] = {n};
    check_shape(t, shape);
    RowVector<T> out(1, n);
    decode_into(t, out.data());
    return out;
  }

 private:
  SafetensorsFile(std::filesystem::path path, detail::FileBytes bytes)
      : path_(std::move(path)),
        bytes_(std::make_shared<const detail::FileBytes>(std::move(bytes))),
        errors_(path_.string()) {
    validate();
  }

  const TensorInfo* find(std::string_view name) const {
    const auto it = std::lower_bound(
        tensors_.begin(), tensors_.end(), name,
        [](const TensorInfo& t, std::string_view key) { return std::string_view(t.name) < key; });
    return (it != tensors_.end() && it->name == name) ? &*it : nullptr;
  }

  static void check_size_argument(const std::string& what, Index value) {
    if (value < 0)
      throw ArgumentError(nlb::detail::expected_found(what, "a size >= 0", value));
  }

  void check_shape(const TensorInfo& t, std::span<const std::int64_t> expected) const {
    if (!std::equal(t.shape.begin(), t.shape.end(), expected.begin(), expected.end())) {
      errors_.fail(t.name, "shape", format_shape(expected), format_shape(t.shape));
    }
  }

  // ---- validation (runs once, in the constructor) ----------------------------------------

  /// The header's JSON, parsed strictly: plain JSON (no comments), and no object may repeat
  /// a key (nlohmann::json would silently keep the last one, so a repeated tensor name could
  /// hide a second, different entry).
  nlohmann::json parse_header(std::uint64_t header_length) const {
    const auto* first = bytes_->data() + 8;
    const auto* last = first + header_length;
    std::vector<std::set<std::string>> open_objects;  // keys seen, per object being parsed
    std::string duplicate;
    const auto on_event = [&](int /*depth*/, nlohmann::json::parse_event_t event,
                              nlohmann::json& parsed) {
      using event_t = nlohmann::json::parse_event_t;
      if (event == event_t::object_start) {
        open_objects.emplace_back();
      } else if (event == event_t::object_end) {
        if (!open_objects.empty())
          open_objects.pop_back();
      } else if (event == event_t::key && !open_objects.empty() && duplicate.empty()) {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!open_objects.back().insert(key).second)
          duplicate = key;
      }
      return true;
    };
    // nlohmann::json stops at a NUL byte as if the input ended there, so "{}\0<anything>"
    // would parse; JSON allows no raw NUL anywhere, so any NUL is rejected first.
    if (const auto* nul = std::find(first, last, std::uint8_t{0}); nul != last) {
      errors_.fail({}, "header is not valid JSON", "a UTF-8 JSON object",
                   "a NUL byte at header offset " + std::to_string(nul - first));
    }
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(first, last, on_event, /*allow_exceptions=*/true,
                                     /*ignore_comments=*/false);
    } catch (const nlohmann::json::exception& e) {
      errors_.fail({}, "header is not valid JSON", "a UTF-8 JSON object", e.what());
    }
    if (!duplicate.empty()) {
      errors_.fail({}, "header has a duplicate key", "each key once in its object",
                   quote_text(duplicate) + " twice");
    }
    return header;
  }

  void validate() {
    const std::uint64_t file_size = bytes_->size();
    const std::uint8_t* bytes = bytes_->data();
    if (file_size < 8) {
      errors_.fail({}, "file too short for the 8-byte header length", "at least 8 bytes",
                   std::to_string(file_size) + " bytes");
    }
    const auto header_length = detail::load_le<std::uint64_t>(bytes);
    if (header_length > max_safetensors_header_bytes) {
      errors_.fail({}, "header length over the 100 MiB limit",
                   "at most " + std::to_string(max_safetensors_header_bytes) + " bytes",
                   std::to_string(header_length) + " bytes");
    }
    if (header_length > file_size - 8) {
      errors_.fail({}, "header length runs past the end of the file",
                   "at most " + std::to_string(file_size - 8) + " bytes (file size " +
                       std::to_string(file_size) + " - 8)",
                   std::to_string(header_length) + " bytes");
    }
    // The format requires the header to start with '{' (whitespace before it is not allowed).
    if (header_length == 0 || bytes[8] != '{') {
      errors_.fail(
          {}, "header does not start with '{'", "'{' at byte 8",
          header_length == 0 ? std::string("an empty header") : "byte " + std::to_string(bytes[8]));
    }
    data_begin_ = 8 + header_length;
    const std::uint64_t data_size = file_size - data_begin_;

    // A JSON text that starts with '{' and parses is an object: no separate check needed.
    const nlohmann::json header = parse_header(header_length);
    for (const auto& [key, value] : header.items()) {
      if (key == "__metadata__") {
        read_metadata(value);
      } else {
        tensors_.push_back(read_entry(key, value, data_size));
      }
    }
    std::sort(tensors_.begin(), tensors_.end(),
              [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
    check_disjoint();
  }

  void read_metadata(const nlohmann::json& value) {
    if (!value.is_object()) {
      errors_.fail({}, "__metadata__ is not an object", "an object of strings",
                   describe_json(value));
    }
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string()) {
        errors_.fail({}, "__metadata__ value " + quote_text(key) + " is not a string", "a string",
                     describe_json(item));
      }
      metadata_.emplace(key, item.get<std::string>());
    }
  }

  /// A non-negative JSON integer that fits `limit`, or a FormatError about `what`.
  std::uint64_t read_count(const std::string& tensor, const std::string& what,
                           const nlohmann::json& value, std::uint64_t limit) const {
    if (value.is_number_unsigned()) {
      const auto v = value.get<std::uint64_t>();
      if (v > limit) {
        errors_.fail(tensor, what + " is too large", "at most " + std::to_string(limit),
                     std::to_string(v));
      }
      return v;
    }
    if (value.is_number_integer()) {
      errors_.fail(tensor, what + " is negative", "a non-negative integer", describe_json(value));
    }
    errors_.fail(tensor, what + " is not an integer", "a non-negative integer",
                 describe_json(value));
  }

  TensorInfo read_entry(const std::string& name, const nlohmann::json& entry,
                        std::uint64_t data_size) const {
    static constexpr const char* keys_text = "dtype, shape, data_offsets";
    if (name.empty()) {
      errors_.fail({}, "tensor name is empty", "a non-empty name", "\"\"");
    }
    if (!entry.is_object()) {
      errors_.fail(name, "entry is not an object", std::string("an object with keys ") + keys_text,
                   describe_json(entry));
    }
    for (const auto& [key, unused] : entry.items()) {
      if (key != "dtype" && key != "shape" && key != "data_offsets") {
        errors_.fail(name, "unexpected key " + quote_text(key),
                     std::string("only the keys ") + keys_text, quote_text(key));
      }
    }
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(key)) {
        errors_.fail(name, std::string("missing key \"") + key + "\"",
                     std::string("the keys ") + keys_text,
                     std::to_string(entry.size()) + " of them");
      }
    }
    TensorInfo t;
    t.name = name;

    const auto& dtype = entry["dtype"];
    if (!dtype.is_string()) {
      errors_.fail(name, "dtype is not a string", "a dtype name such as \"F32\"",
                   describe_json(dtype));
    }
    const auto parsed_dtype = dtype_from_name(dtype.get_ref<const std::string&>());
    if (!parsed_dtype) {
      errors_.fail(name, "unknown dtype", "one of F64, F32, F16, BF16, I64, I32, U8, BOOL",
                   quote_text(dtype.get_ref<const std::string&>()));
    }
    t.dtype = *parsed_dtype;

    const auto& shape = entry["shape"];
    if (!shape.is_array()) {
      errors_.fail(name, "shape is not an array", "an array of non-negative integers",
                   describe_json(shape));
    }
    constexpr auto int64_max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    std::uint64_t numel = 1;
    bool numel_overflows = false;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const std::uint64_t dim =
          read_count(name, "dimension shape[" + std::to_string(i) + "]", shape[i], int64_max);
      t.shape.push_back(static_cast<std::int64_t>(dim));
      // A zero dimension makes the product 0 whatever follows, but a later overflow in the
      // raw product is still reported: no shape whose literal product overflows is accepted.
      if (!numel_overflows && !multiply_within(numel, dim, int64_max, numel)) {
        numel_overflows = true;
      }
    }
    if (numel_overflows) {
      errors_.fail(name, "element count overflows", "a shape whose product fits in int64",
                   format_shape(t.shape));
    }

    const auto& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2) {
      errors_.fail(name, "data_offsets is not [begin, end]", "an array of 2 non-negative integers",
                   describe_json(offsets));
    }
    t.begin =
        read_count(name, "data_offsets[0]", offsets[0], std::numeric_limits<std::uint64_t>::max());
    t.end =
        read_count(name, "data_offsets[1]", offsets[1], std::numeric_limits<std::uint64_t>::max());
    if (t.begin > t.end) {
      errors_.fail(name, "data_offsets begin > end", "begin <= end",
                   "[" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]");
    }
    std::uint64_t nbytes = 0;
    if (!multiply_within(numel, dtype_size(t.dtype), std::numeric_limits<std::uint64_t>::max(),
                         nbytes)) {
      errors_.fail(name, "byte count overflows",
                   "numel x " + std::to_string(dtype_size(t.dtype)) + " bytes to fit in 64 bits",
                   "numel " + std::to_string(numel));
    }
    if (t.end - t.begin != nbytes) {
      errors_.fail(name, "byte count does not match shape and dtype",
                   std::to_string(nbytes) + " bytes (" + std::string(to_string(t.dtype)) + " " +
                       format_shape(t.shape) + ")",
                   std::to_string(t.end - t.begin) + " bytes (data_offsets [" +
                       std::to_string(t.begin) + ", " + std::to_string(t.end) + "])");
    }
    if (t.end > data_size) {
      errors_.fail(name, "data_offsets end beyond the data section",
                   "end <= " + std::to_string(data_size) + " (the data section's size)",
                   std::to_string(t.end));
    }
    return t;
  }

  /// No two tensors share a byte: sort the non-empty ranges by begin and compare each with
  /// the furthest end seen so far (which also catches one range nested inside another).
  void check_disjoint() const {
    std::vector<const TensorInfo*> by_begin;
    for (const auto& t : tensors_) {
      if (t.end > t.begin)
        by_begin.push_back(&t);
    }
    std::sort(by_begin.begin(), by_begin.end(), [](const TensorInfo* a, const TensorInfo* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->name < b->name;
    });
    const TensorInfo* furthest = nullptr;
    for (const TensorInfo* t : by_begin) {
      if (furthest != nullptr && t->begin < furthest->end) {
        // Appended piece by piece: `"[" + std::to_string(...)` trips GCC 12's false
        // -Wrestrict at -O3 (GCC bug 105329) once this is inlined into a large caller.
        const auto range = [](const TensorInfo* x) {
          std::string text = "[";
          text += std::to_string(x->begin);
          text += ", ";
          text += std::to_string(x->end);
          text += ")";
          return text;
        };
        errors_.fail(
            {},
            "tensors " + quote_text(furthest->name) + " and " + quote_text(t->name) + " overlap",
            "disjoint byte ranges", range(furthest) + " and " + range(t));
      }
      if (furthest == nullptr || t->end > furthest->end)
        furthest = t;
    }
  }

  // ---- element conversion ------------------------------------------------------------------

  template <class T>
  static std::string integer_type_name() {
    return std::string(std::is_signed_v<T> ? "int" : "uint") + std::to_string(8 * sizeof(T));
  }

  /// Runs `fill`, which reads tensor `t` and writes the fresh buffer [out, out + out_bytes),
  /// with the page handling of docs/safetensors.md, "Memory": the tensor's pages mapped and the
  /// buffer's populated first (one call each), the tensor's pages released afterwards.
  template <class Fill>
  void with_tensor_pages(const TensorInfo& t, void* out, std::size_t out_bytes, Fill&& fill) const {
    bytes_->prefetch(data_begin_ + t.begin, t.end - t.begin);
    detail::populate_for_write(out, out_bytes);
    fill();
    bytes_->release(data_begin_ + t.begin, t.end - t.begin);
  }

  /// Converts the tensor's elements into out[0 .. numel) (callers size `out`).
  template <class T>
  void decode_into(const TensorInfo& t, T* out) const {
    const auto n = static_cast<std::size_t>(t.numel());
    with_tensor_pages(t, out, n * sizeof(T), [&] { convert_into(t, 0, n, out); });
  }

  /// Converts elements [first, first + n) of the tensor (row-major order) into out[0 .. n).
  template <class T>
  void convert_into(const TensorInfo& t, std::size_t first, std::size_t n, T* out) const {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> ||
                      (std::is_integral_v<T> && !std::is_same_v<T, bool>),
                  "SafetensorsFile reads into float, double or an integer type");
    static_assert(std::numeric_limits<double>::is_iec559 && std::numeric_limits<float>::is_iec559);
    if (n == 0)
      return;  // an empty tensor's `out` may be null (memcpy forbids null even for 0 bytes)
    const std::uint8_t* source =
        bytes_->data() + data_begin_ + t.begin + first * dtype_size(t.dtype);
    if constexpr (std::is_floating_point_v<T>) {
      // Same type, same byte order: the bytes are the values (one memcpy, no conversion).
      if (std::endian::native == std::endian::little &&
          t.dtype == (std::is_same_v<T, float> ? DType::F32 : DType::F64)) {
        std::memcpy(out, source, n * sizeof(T));
        return;
      }
      switch (t.dtype) {
        case DType::F64:
          for (std::size_t i = 0; i < n; ++i) {
            out[i] = static_cast<T>(detail::load_le<double>(source + 8 * i));
          }
          return;
        case DType::F32:
          for (std::size_t i = 0; i < n; ++i) {
            out[i] = static_cast<T>(detail::load_le<float>(source + 4 * i));
          }
          return;
        case DType::F16:
          for (std::size_t i = 0; i < n; ++i) {
            out[i] =
                static_cast<T>(f16_bits_to_float(detail::load_le<std::uint16_t>(source + 2 * i)));
          }
          return;
        case DType::BF16:
          for (std::size_t i = 0; i < n; ++i) {
            out[i] =
                static_cast<T>(bf16_bits_to_float(detail::load_le<std::uint16_t>(source + 2 * i)));
          }
          return;
        default:
          errors_.fail(t.name, "dtype",
                       "a floating dtype (F64, F32, F16, BF16) to read as " +
                           std::string(std::is_same_v<T, float> ? "float" : "double"),
                       std::string(to_string(t.dtype)));
      }
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        std::int64_t v = 0;
        switch (t.dtype) {
          case DType::I64:
            v = detail::load_le<std::int64_t>(source + 8 * i);
            break;
          case DType::I32:
            v = detail::load_le<std::int32_t>(source + 4 * i);
            break;
          case DType::U8:
            v = source[i];
            break;
          case DType::BOOL:
            v = source[i];
            if (v > 1) {
              errors_.fail(t.name, "element " + std::to_string(first + i) + " of a BOOL tensor",
                           "0 or 1", std::to_string(v));
            }
            break;
          default:
            errors_.fail(
                t.name, "dtype",
                "an integer dtype (I64, I32, U8, BOOL) to read as " + integer_type_name<T>(),
                std::string(to_string(t.dtype)));
        }
        if (!std::in_range<T>(v)) {
          errors_.fail(
              t.name,
              "element " + std::to_string(first + i) + " does not fit " + integer_type_name<T>(),
              "a value in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
                  std::to_string(std::numeric_limits<T>::max()) + "]",
              std::to_string(v));
        }
        out[i] = static_cast<T>(v);
      }
    }
  }

  std::filesystem::path path_;
  std::shared_ptr<const detail::FileBytes> bytes_;  // the file, mapped or owned
  FileErrors errors_;
  std::uint64_t data_begin_ = 0;  // 8 + header length
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace nlb::io
