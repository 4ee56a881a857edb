// A read-only row-major matrix that either views memory someone else owns (a memory-mapped
// checkpoint's tensor, used where it lies) or owns a matrix of its own, behind one type: the
// weight matrix of storage::mapped (nlb/core/weight_storage.hpp).
//
// What keeps the memory alive is a shared owner: the file's mapping, or the owned matrix; copies
// share it. The elements are read through Eigen::Map expressions made on demand (map(), row(),
// transpose()); ops::gemm takes a MappedMatrix as its right operand (nlb/ops/gemm.hpp).
#pragma once

#include <Eigen/Core>
#include <memory>
#include <utility>

#include "nlb/core/matrix.hpp"

namespace nlb {

/// Shape [rows, cols], row-major and contiguous, read-only (Rows and Cols compile-time sizes or
/// Dynamic). Either a view of `data` kept alive by `owner` (no copy), or the owner of a matrix
/// moved in. Copies and assignments share the owner and copy no element (O(1)). The data need
/// not be aligned beyond alignof(T).
template <class T, int Rows = Dynamic, int Cols = Dynamic>
class MappedMatrix {
 public:
  using Scalar = T;
  static constexpr int RowsAtCompileTime = Rows;
  static constexpr int ColsAtCompileTime = Cols;
  /// The matrix as an Eigen expression [rows, cols], and its transpose [cols, rows] (the same
  /// bytes read column-major).
  using MapType = Eigen::Map<const RowMatrix<T, Rows, Cols>>;
  using TransposedMapType = Eigen::Map<const Eigen::Matrix<T, Cols, Rows, Eigen::ColMajor>>;

  /// An empty matrix: 0 × 0 (the compile-time sizes for fixed ones, with no data to read).
  MappedMatrix() : rows_(size_or<Rows>(0)), cols_(size_or<Cols>(0)) {}

  /// A view of rows · cols values at `data` (row-major), kept valid by `owner`.
  MappedMatrix(const T* data, Index rows, Index cols, std::shared_ptr<const void> owner)
      : owner_(std::move(owner)), data_(data), rows_(rows), cols_(cols), borrowed_(true) {}

  /// Takes `m` over (moved into shared storage: a Dynamic matrix's elements are not copied).
  explicit MappedMatrix(RowMatrix<T, Rows, Cols>&& m) {
    auto owned = std::make_shared<RowMatrix<T>>(std::move(m));  // [rows, cols]
    data_ = owned->data();
    rows_ = owned->rows();
    cols_ = owned->cols();
    owner_ = std::move(owned);
  }

  Index rows() const { return rows_; }
  Index cols() const { return cols_; }
  Index size() const { return rows_ * cols_; }
  const T* data() const { return data_; }
  T operator()(Index r, Index c) const { return data_[r * cols_ + c]; }

  MapType map() const { return MapType(data_, rows_, cols_); }
  /// Row r [1, cols].
  Eigen::Map<const RowVector<T, Cols>> row(Index r) const {
    return Eigen::Map<const RowVector<T, Cols>>(data_ + r * cols_, 1, cols_);
  }
  TransposedMapType transpose() const { return TransposedMapType(data_, cols_, rows_); }

  /// True when the values lie in memory this matrix did not allocate (a file's mapping).
  bool is_view() const { return borrowed_; }

 private:
  std::shared_ptr<const void> owner_;
  const T* data_ = nullptr;
  Index rows_ = 0, cols_ = 0;
  bool borrowed_ = false;
};

}  // namespace nlb
