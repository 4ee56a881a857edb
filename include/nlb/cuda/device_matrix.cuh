// Row-major matrices in device memory, and views of them (DESIGN.md §4: storage per backend).
#pragma once

#include <thrust/copy.h>
#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <Eigen/Core>
#include <cstddef>
#include <type_traits>

#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/cuda/detail/config.cuh"

namespace nlb::cuda {

/// A non-owning row-major view of device memory: [rows, cols], row r at data + r·stride
/// (stride >= cols). T may be const. Cheap to copy; valid while its storage lives and is not
/// grown.
template <class T>
struct DeviceView {
  T* data = nullptr;
  Index rows = 0;
  Index cols = 0;
  Index stride = 0;

  /// Rows [begin, begin + count) as a view.
  DeviceView middle_rows(Index begin, Index count) const {
    return {data + begin * stride, count, cols, stride};
  }
  /// The first `count` rows.
  DeviceView top_rows(Index count) const { return middle_rows(0, count); }
  /// Columns [begin, begin + count) as a view (same rows and stride).
  DeviceView middle_cols(Index begin, Index count) const {
    return {data + begin, rows, count, stride};
  }
  /// True when the rows follow each other without gaps (stride == cols).
  bool contiguous() const { return stride == cols || rows <= 1; }
  /// The same memory, read-only.
  /// (A template, so that a view of const T declares no conversion to itself.)
  template <class U, std::enable_if_t<std::is_same_v<U, T> && !std::is_const_v<U>, int> = 0>
  operator DeviceView<const U>() const {
    return {data, rows, cols, stride};
  }
};

/// An owning row-major [rows, cols] matrix in device memory (thrust::device_vector storage).
/// The storage only grows: resizing to a smaller shape keeps the allocation, so buffers whose
/// shape changes per call (a gated layer's row groups) allocate once. Contents after a resize
/// are unspecified.
template <class T>
class DeviceMatrix {
 public:
  DeviceMatrix() = default;
  DeviceMatrix(Index rows, Index cols) { resize(rows, cols); }

  /// Sets the shape to [rows, cols], growing the storage if needed.
  void resize(Index rows, Index cols) {
    if (rows < 0 || cols < 0)
      throw ShapeError(
          nlb::detail::expected_found("DeviceMatrix::resize", "non-negative sizes",
                                      std::to_string(rows) + " x " + std::to_string(cols)));
    const auto needed = static_cast<std::size_t>(rows * cols);
    if (storage_.size() < needed)
      storage_.resize(needed);
    rows_ = rows;
    cols_ = cols;
  }

  Index rows() const { return rows_; }
  Index cols() const { return cols_; }
  Index size() const { return rows_ * cols_; }
  T* data() { return thrust::raw_pointer_cast(storage_.data()); }
  const T* data() const { return thrust::raw_pointer_cast(storage_.data()); }
  DeviceView<T> view() { return {data(), rows_, cols_, cols_}; }
  DeviceView<const T> view() const { return {data(), rows_, cols_, cols_}; }

 private:
  thrust::device_vector<T> storage_;
  Index rows_ = 0;
  Index cols_ = 0;
};

/// Copies a host matrix (any Eigen expression of scalar T) into a new device matrix of its
/// shape. Synchronous.
template <class Derived>
DeviceMatrix<typename Derived::Scalar> upload(const Eigen::MatrixBase<Derived>& host) {
  using T = typename Derived::Scalar;
  const RowMatrix<T> row_major = host;  // contiguous row-major, the device layout
  DeviceMatrix<T> device(row_major.rows(), row_major.cols());
  if (row_major.size() > 0)
    thrust::copy(row_major.data(), row_major.data() + row_major.size(),
                 thrust::device_pointer_cast(device.data()));
  return device;
}

/// Copies a host matrix into an existing device view of the same shape. Synchronous.
template <class Derived, class T>
void upload_into(const Eigen::MatrixBase<Derived>& host, DeviceView<T> device) {
  check_dim("cuda::upload_into: rows", device.rows, host.rows());
  check_dim("cuda::upload_into: cols", device.cols, host.cols());
  const RowMatrix<std::remove_const_t<T>> row_major = host;
  for (Index r = 0; r < device.rows && device.cols > 0; ++r)
    thrust::copy(row_major.data() + r * device.cols, row_major.data() + (r + 1) * device.cols,
                 thrust::device_pointer_cast(device.data + r * device.stride));
}

/// Copies a device view into `host`, resized to its shape (no allocation when the shape is
/// unchanged: a decoding loop reuses one matrix). Synchronous: the copy runs on the legacy default
/// stream, which waits for the work of every blocking stream, a Context<backend::cuda>'s
/// included. One copy for contiguous rows, one per row otherwise.
template <class T>
void download_into(DeviceView<T> device, RowMatrix<std::remove_const_t<T>>& host) {
  host.resize(device.rows, device.cols);
  if (device.rows == 0 || device.cols == 0)
    return;
  if (device.contiguous()) {
    const auto first = thrust::device_pointer_cast(device.data);
    thrust::copy(first, first + device.rows * device.cols, host.data());
    return;
  }
  for (Index r = 0; r < device.rows; ++r) {
    const auto row = thrust::device_pointer_cast(device.data + r * device.stride);
    thrust::copy(row, row + device.cols, host.data() + r * device.cols);
  }
}

/// Copies a device view back into a new host row-major matrix (download_into).
template <class T>
RowMatrix<std::remove_const_t<T>> download(DeviceView<T> device) {
  RowMatrix<std::remove_const_t<T>> host;
  download_into(device, host);
  return host;
}

}  // namespace nlb::cuda

namespace nlb {

/// backend::cuda keeps its matrices in device memory.
template <class T>
struct storage_traits<backend::cuda, T, void> {
  using memory_space = backend::device_memory;
  using matrix = cuda::DeviceMatrix<T>;
  using view = cuda::DeviceView<T>;
  using const_view = cuda::DeviceView<const T>;
};

}  // namespace nlb
