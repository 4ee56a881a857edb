// Read-only bytes of a whole file: memory-mapped on POSIX systems, so that opening a
// multi-gigabyte checkpoint reads only its header, and the pages a loader has copied out can
// be handed back to the page cache (release()) instead of staying in the process's resident
// set. Elsewhere the file is read into memory. The bytes may also be an owned vector
// (SafetensorsFile::from_bytes).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nlb/core/errors.hpp"
#include "nlb/io/file_io.hpp"

#if __has_include(<sys/mman.h>) && __has_include(<unistd.h>) && __has_include(<fcntl.h>)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#define NLB_HAS_MMAP 1
#else
#define NLB_HAS_MMAP 0
#endif

namespace nlb::io::detail {

/// The bytes of one file (or of an owned buffer), immutable while the object lives.
/// Not copyable (it owns a mapping); share it through a shared_ptr.
class FileBytes {
 public:
  /// Maps the regular file at `path` read-only (reads it into memory where mmap is absent).
  /// Throws FormatError naming the file when it is missing, not a regular file, or cannot be
  /// opened or mapped. O(1) with mmap (pages are read when first touched), O(size) without.
  static FileBytes map(const std::filesystem::path& path) {
#if NLB_HAS_MMAP
    const std::string name = path.string();
    // The same checks and wording as read_file_bytes (missing, directory, special file).
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status) || !std::filesystem::is_regular_file(status)) {
      return FileBytes(read_file_bytes(path));  // throws the FormatError that says which
    }
    const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      throw FormatError(
          name + ": " +
          nlb::detail::expected_found("cannot read", "a readable file", std::strerror(errno)));
    }
    struct ::stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      throw FormatError(
          name + ": " +
          nlb::detail::expected_found("cannot read", "a file size", std::strerror(err)));
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    if (size == 0) {
      ::close(fd);
      return FileBytes(std::vector<std::uint8_t>{});
    }
    void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);  // the mapping keeps the file open
    if (address == MAP_FAILED) {
      throw FormatError(
          name + ": " +
          nlb::detail::expected_found("cannot map", "a mappable file", std::strerror(err)));
    }
    FileBytes bytes;
    bytes.mapped_ = static_cast<const std::uint8_t*>(address);
    bytes.size_ = size;
    return bytes;
#else
    return FileBytes(read_file_bytes(path));
#endif
  }

  /// Owns `bytes`.
  explicit FileBytes(std::vector<std::uint8_t> bytes) : owned_(std::move(bytes)) {}

  FileBytes(FileBytes&& other) noexcept
      : owned_(std::move(other.owned_)),
        mapped_(std::exchange(other.mapped_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  FileBytes& operator=(FileBytes&& other) noexcept {
    if (this != &other) {
      unmap();
      owned_ = std::move(other.owned_);
      mapped_ = std::exchange(other.mapped_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  ~FileBytes() {
    unmap();
  }

  /// Every byte.
  std::span<const std::uint8_t> bytes() const {
    return mapped_ != nullptr ? std::span<const std::uint8_t>(mapped_, size_)
                              : std::span<const std::uint8_t>(owned_);
  }
  const std::uint8_t* data() const {
    return bytes().data();
  }
  std::size_t size() const {
    return bytes().size();
  }

  /// Hints that bytes [offset, offset + length) are about to be read: their pages are mapped
  /// in one call (MADV_POPULATE_READ, Linux 5.14+) instead of one page fault per 64 KiB. A
  /// no-op for owned bytes or where the hint is unknown. Thread-safe.
  void prefetch(std::size_t offset, std::size_t length) const {
#if NLB_HAS_MMAP && defined(MADV_POPULATE_READ)
    advise(offset, length, MADV_POPULATE_READ);
#else
    (void)offset;
    (void)length;
#endif
  }

  /// Hints that bytes [offset, offset + length) will not be needed soon: their pages leave
  /// the resident set (the page cache keeps them; a later read faults them back in, so this
  /// never changes what is read). A no-op for owned bytes. Thread-safe.
  void release(std::size_t offset, std::size_t length) const {
#if NLB_HAS_MMAP
    // Pages shared with a neighbouring range are released too: they are read back from the
    // page cache if that range is read later.
    advise(offset, length, MADV_DONTNEED);
#else
    (void)offset;
    (void)length;
#endif
  }

 private:
  FileBytes() = default;

#if NLB_HAS_MMAP
  // madvise over the pages that bytes [offset, offset + length) touch (a hint: failures,
  // e.g. an advice the kernel does not know, change nothing that is read).
  void advise(std::size_t offset, std::size_t length, int advice) const {
    if (mapped_ == nullptr || length == 0 || offset >= size_)
      return;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t first = offset / page * page;
    const std::size_t last = std::min(size_, offset + length);
    ::madvise(const_cast<std::uint8_t*>(mapped_) + first, last - first, advice);
  }
#endif

  void unmap() {
#if NLB_HAS_MMAP
    if (mapped_ != nullptr)
      ::munmap(const_cast<std::uint8_t*>(mapped_), size_);
#endif
    mapped_ = nullptr;
    size_ = 0;
  }

  std::vector<std::uint8_t> owned_;
  const std::uint8_t* mapped_ = nullptr;  // the mapping, or null for owned bytes
  std::size_t size_ = 0;                  // bytes mapped
};

/// Maps every page of the fresh buffer [data, data + bytes) for writing in one call
/// (MADV_POPULATE_WRITE, Linux 5.14+), before a loader fills it: one system call instead of a
/// page fault per 4 KiB, which was a fifth of a checkpoint's load time (docs/benchmarks.md,
/// "Loading checkpoints"). Only whole pages inside the buffer; a no-op below 1 MiB, where the
/// hint is unknown, or when it fails. Nothing read or written changes.
inline void populate_for_write(void* data, std::size_t bytes) {
#if NLB_HAS_MMAP && defined(MADV_POPULATE_WRITE)
  if (bytes < (std::size_t{1} << 20))
    return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (begin + page - 1) / page * page;
  const std::uintptr_t last = (begin + bytes) / page * page;
  if (last > first)
    ::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace nlb::io::detail
