// Row-major matrices in device memory, and views of them: the storage of backend::cuda
// (DESIGN.md §4; nlb/core/storage.hpp). They carry Eigen's member names (rows(), cols(),
// topRows(), middleRows(), middleCols(), leftCols(), rightCols(), resize()), so the components and
// composites, written once for every backend, read the same on the host and on the device.
#pragma once

#include <thrust/copy.h>
#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>

#include "nlb/core/backend.hpp"
#include "nlb/core/checks.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/half_matrix.hpp"
#include "nlb/core/mapped_matrix.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/core/storage.hpp"
#include "nlb/cuda/context.cuh"
#include "nlb/cuda/detail/config.cuh"

namespace nlb::cuda {

/// A non-owning row-major view of device memory: [rows, cols], row r at data + r·stride
/// (stride >= cols). T may be const. Cheap to copy; valid while its storage lives and is not
/// grown.
template <class T>
class DeviceView {
 public:
  using Scalar = std::remove_const_t<T>;

  DeviceView() = default;
  DeviceView(T* data, Index rows, Index cols, Index stride)
      : data_(data), rows_(rows), cols_(cols), stride_(stride) {}

  T* data() const { return data_; }
  Index rows() const { return rows_; }
  Index cols() const { return cols_; }
  Index size() const { return rows_ * cols_; }
  /// Values from one row to the next (Eigen's name for a row-major matrix's leading dimension).
  Index outerStride() const { return stride_; }

  /// Rows [begin, begin + count).
  DeviceView middleRows(Index begin, Index count) const {
    return {data_ + begin * stride_, count, cols_, stride_};
  }
  DeviceView topRows(Index count) const { return middleRows(0, count); }
  DeviceView bottomRows(Index count) const { return middleRows(rows_ - count, count); }
  /// Columns [begin, begin + count) (same rows and stride).
  DeviceView middleCols(Index begin, Index count) const {
    return {data_ + begin, rows_, count, stride_};
  }
  DeviceView leftCols(Index count) const { return middleCols(0, count); }
  DeviceView rightCols(Index count) const { return middleCols(cols_ - count, count); }
  /// True when the rows follow each other without gaps.
  bool contiguous() const { return stride_ == cols_ || rows_ <= 1; }

  /// The same memory, read-only. (A template, so that a view of const T declares no
  /// conversion to itself.)
  template <class U, std::enable_if_t<std::is_same_v<U, T> && !std::is_const_v<U>, int> = 0>
  operator DeviceView<const U>() const {
    return {data_, rows_, cols_, stride_};
  }

 private:
  T* data_ = nullptr;
  Index rows_ = 0;
  Index cols_ = 0;
  Index stride_ = 0;
};

/// An owning row-major [rows, cols] matrix in device memory (thrust::device_vector storage).
/// The storage only grows: resizing to a smaller shape keeps the allocation, so buffers whose
/// shape changes per call (a gated layer's row groups, a growing KV cache's scores) allocate
/// once. Contents after a resize are unspecified.
template <class T>
class DeviceMatrix {
 public:
  using Scalar = T;

  DeviceMatrix() = default;
  DeviceMatrix(Index rows, Index cols) { resize(rows, cols); }

  /// Sets the shape to [rows, cols], growing the storage if needed. ShapeError for a negative
  /// size.
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
  Index outerStride() const { return cols_; }
  T* data() { return thrust::raw_pointer_cast(storage_.data()); }
  const T* data() const { return thrust::raw_pointer_cast(storage_.data()); }

  DeviceView<T> view() { return {data(), rows_, cols_, cols_}; }
  DeviceView<const T> view() const { return {data(), rows_, cols_, cols_}; }
  operator DeviceView<T>() { return view(); }              // NOLINT: a matrix is its view
  operator DeviceView<const T>() const { return view(); }  // NOLINT

  DeviceView<T> middleRows(Index begin, Index count) { return view().middleRows(begin, count); }
  DeviceView<const T> middleRows(Index begin, Index count) const {
    return view().middleRows(begin, count);
  }
  DeviceView<T> topRows(Index count) { return view().topRows(count); }
  DeviceView<const T> topRows(Index count) const { return view().topRows(count); }
  DeviceView<T> bottomRows(Index count) { return view().bottomRows(count); }
  DeviceView<const T> bottomRows(Index count) const { return view().bottomRows(count); }
  DeviceView<T> middleCols(Index begin, Index count) { return view().middleCols(begin, count); }
  DeviceView<const T> middleCols(Index begin, Index count) const {
    return view().middleCols(begin, count);
  }
  DeviceView<T> leftCols(Index count) { return view().leftCols(count); }
  DeviceView<const T> leftCols(Index count) const { return view().leftCols(count); }
  DeviceView<T> rightCols(Index count) { return view().rightCols(count); }
  DeviceView<const T> rightCols(Index count) const { return view().rightCols(count); }

 private:
  thrust::device_vector<T> storage_;
  Index rows_ = 0;
  Index cols_ = 0;
};

/// The view of a device matrix or view, writable (T non-const) or read-only: how the device ops
/// take their operands, whichever of the two a component hands them.
template <class T>
DeviceView<T> view_of(DeviceView<T> v) {
  return v;
}
template <class T>
DeviceView<T> view_of(DeviceMatrix<T>& m) {
  return m.view();
}
template <class T>
DeviceView<const T> view_of(const DeviceMatrix<T>& m) {
  return m.view();
}
template <class T>
DeviceView<const T> const_view_of(DeviceView<T> v) {
  return v;
}
template <class T>
DeviceView<const T> const_view_of(const DeviceMatrix<T>& m) {
  return m.view();
}

/// A device matrix or view (any constness, any reference): what the device ops take as operands.
template <class M>
concept device_operand = requires(const std::remove_cvref_t<M>& m) {
  const_view_of(m);
};
/// The scalar of a device operand (float for a DeviceView<const float>).
template <class M>
using scalar_of = typename std::remove_cvref_t<M>::Scalar;
/// A device operand of scalar T.
template <class M, class T>
concept device_operand_of = device_operand<M> && std::is_same_v<scalar_of<M>, T>;

/// The writable view of an operation's output: a DeviceMatrix or a DeviceView of non-const T.
template <class M>
DeviceView<scalar_of<M>> writable_view_of(M& m) {
  auto v = view_of(m);
  static_assert(std::is_same_v<decltype(v), DeviceView<scalar_of<M>>>,
                "nlb/cuda: a read-only matrix or view was given as an operation's output");
  return v;
}

namespace detail {
// rows × cols values, row strides from_stride and to_stride, host or device memory, queued on
// ctx's stream. CUDA stages a pageable host source before returning (it may then be freed); a
// host destination needs ctx.synchronize() (which counts the wait).
template <class T>
void copy_2d(Context<backend::cuda>& ctx, const T* from, Index from_stride, T* to, Index to_stride,
             Index rows, Index cols) {
  if (rows <= 0 || cols <= 0)
    return;
#if NLB_CUDA_DEVICE_BUILD
  const auto bytes = [](Index n) { return static_cast<std::size_t>(n) * sizeof(T); };
  check(cudaMemcpy2DAsync(to, bytes(to_stride), from, bytes(from_stride), bytes(cols),
                          static_cast<std::size_t>(rows), cudaMemcpyDefault, ctx.stream()),
        "cudaMemcpy2DAsync");
#else
  (void)ctx;
  for (Index r = 0; r < rows; ++r)
    std::copy(from + r * from_stride, from + r * from_stride + cols, to + r * to_stride);
#endif
}
}  // namespace detail

/// A device copy of a host matrix (any Eigen expression), queued on ctx's stream; the host data
/// may go away when this returns. O(size); no wait.
template <class Derived>
DeviceMatrix<typename Derived::Scalar> upload(Context<backend::cuda>& ctx,
                                              const Eigen::MatrixBase<Derived>& host) {
  const RowMatrix<typename Derived::Scalar> row_major = host;  // the device layout
  DeviceMatrix<typename Derived::Scalar> device(host.rows(), host.cols());
  detail::copy_2d(ctx, row_major.data(), row_major.cols(), device.data(), device.cols(),
                  row_major.rows(), row_major.cols());
  return device;
}
/// A host copy of a device matrix or view, after the work queued before it on ctx's stream: one
/// wait (counted by ctx.synchronizations()). O(size).
template <device_operand M>
RowMatrix<scalar_of<M>> download(Context<backend::cuda>& ctx, const M& m) {
  const DeviceView<const scalar_of<M>> from = const_view_of(m);
  RowMatrix<scalar_of<M>> host(from.rows(), from.cols());
  detail::copy_2d(ctx, from.data(), from.outerStride(), host.data(), host.cols(), host.rows(),
                  host.cols());
  ctx.synchronize();
  return host;
}

}  // namespace nlb::cuda

namespace nlb {

template <class T>
struct matrix_in<backend::device_memory, T> {
  using type = cuda::DeviceMatrix<T>;
};

namespace storage {
template <class T, int Rows, int Cols>
struct weight_matrix_of<storage::device, T, Rows, Cols> {
  using type = cuda::DeviceMatrix<T>;
};
}  // namespace storage

/// backend::cuda keeps its matrices, weights included, in device memory as float (or double);
/// host weights in 16 bits are widened when they are copied over.
template <class T>
struct storage_traits<backend::cuda, T, void> {
  using memory_space = backend::device_memory;
  template <int Cols = Dynamic>
  using activations = cuda::DeviceMatrix<T>;
  using matrix = cuda::DeviceMatrix<T>;
  using view = cuda::DeviceView<T>;
  using const_view = cuda::DeviceView<const T>;
  template <int Rows = Dynamic, int Cols = Dynamic>
  using weights = weight_matrix<storage::device, T, Rows, Cols>;  // a DeviceMatrix
  template <int N = Dynamic>
  using vector = typename vector_in<memory_space, T, N>::type;  // a DeviceMatrix [1, n]
  using index_vector = thrust::device_vector<Index>;

  /// A host matrix (any Eigen expression of T, a HalfMatrix or a MappedMatrix) copied into a new
  /// device matrix of its shape. Complete when it returns (thrust waits for its copy), so work
  /// on any context's stream, non-blocking ones included, sees it. Not counted as a context's
  /// synchronisation: no context is involved (weights are copied once, before any forward).
  template <int Rows = Dynamic, int Cols = Dynamic, class Source>
  static cuda::DeviceMatrix<T> from_host(const Source& m) {
    if constexpr (requires { m.template widened<T>(); })
      return upload(m.template widened<T>());
    else if constexpr (requires { m.map(); })
      return upload(m.map());
    else
      return upload(m);
  }
  template <int N = Dynamic, class Source>
  static cuda::DeviceMatrix<T> vector_from_host(const Source& v) {
    return upload(v);
  }

 private:
  template <class Derived>
  static cuda::DeviceMatrix<T> upload(const Eigen::MatrixBase<Derived>& host) {
    const RowMatrix<T> row_major = host;  // contiguous row-major, the device layout
    cuda::DeviceMatrix<T> device(row_major.rows(), row_major.cols());
    if (row_major.size() > 0)
      thrust::copy(row_major.data(), row_major.data() + row_major.size(),
                   thrust::device_pointer_cast(device.data()));
    return device;
  }
};

}  // namespace nlb
