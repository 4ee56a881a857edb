// Grow-only scratch storage for work matrices whose shape changes from call to call.
#pragma once

#include <cstddef>

#include <Eigen/Core>

#include "nlb/core/aligned_buffer.hpp"
#include "nlb/core/matrix.hpp"

namespace nlb {

/// Storage for a row-major work matrix: view(rows, cols) maps the first rows · cols values as a
/// contiguous [rows, cols] matrix (outer stride cols, the layout of a RowMatrix of that shape),
/// and allocates only when rows · cols exceeds every earlier request. Eigen's resize()
/// reallocates whenever the total size changes, so a buffer whose width follows a growing KV
/// cache (one score row per decoded token) would otherwise allocate on every token.
/// The data is 64-byte aligned (AlignedBuffer); a view's contents are unspecified until written.
template <class T>
class ScratchMatrix {
 public:
  using View = Eigen::Map<RowMatrix<T>, Eigen::Aligned64>;

  /// A [rows, cols] view of the storage, grown if needed (invalidating earlier views).
  View view(Index rows, Index cols) {
    const auto n = static_cast<std::size_t>(rows * cols);
    if (storage_.size() < n)
      storage_.resize(n);
    return View(storage_.data(), rows, cols);
  }

  /// Grows the storage to at least n values now (a KV-cache user reserves rows · capacity once,
  /// so no later position grows it).
  void reserve(Index n) {
    if (storage_.size() < static_cast<std::size_t>(n))
      storage_.resize(static_cast<std::size_t>(n));
  }

  /// Values held (the largest rows · cols requested so far).
  std::size_t capacity() const { return storage_.size(); }

 private:
  AlignedBuffer<T> storage_;
};

}  // namespace nlb
