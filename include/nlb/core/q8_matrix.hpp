// A row-major matrix of 8-bit integers with one float scale per block of q8_block consecutive
// values of a row: weights at a quarter of float's bytes (plus 4 bytes per block), for forwards
// bound by reading the weights (batch-1 decoding).
//
// The layout is ggml's Q8_0 idea — symmetric blocks of 32 values, value = scale · q with q an
// integer in [−127, 127] and scale = (largest |value| of the block) / 127 — with the scales kept
// as float32 in an array of their own ([rows, blocks per row]) rather than as F16 beside each
// block: every block's rounding error is then at most scale / 2, and the 8-bit values of a row
// stay contiguous for the SIMD loads (nlb/kernels/q8_weights.hpp). A row whose length is not a
// multiple of q8_block ends in a shorter block with a scale of its own. Blocks run along rows
// whichever way a product reads the matrix: x · W folds x[i] · scale into one factor per block of
// row i, x · Wᵀ scales each block's partial dot product.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "nlb/core/aligned_buffer.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/core/matrix.hpp"

namespace nlb {

/// Values per scale of a Q8Matrix row (ggml's Q8_0 block).
inline constexpr Index q8_block = 32;

class Q8Matrix;

/// The transpose of a Q8Matrix as a product operand (no copy): `w.transpose()`.
struct Q8Transposed {
  const Q8Matrix& matrix;
  Index rows() const;
  Index cols() const;
};

/// Shape [rows, cols], row-major: int8 values [rows, cols] and float scales
/// [rows, blocks_per_row()], block b of row r covering columns [b·q8_block, min((b+1)·q8_block,
/// cols)). Built from an Eigen matrix: per block, scale = max |value| / 127 (rounded to float;
/// 0 for an all-zero block) and q = the nearest integer to value / scale (ties to even), so
/// |scale · q − value| ≤ scale / 2. O(rows · cols). Throws NumericError naming the row and
/// column of a NaN or infinite value (a scale would carry it to the whole block).
class Q8Matrix {
 public:
  Q8Matrix() = default;

  template <class Derived>
  explicit Q8Matrix(const Eigen::MatrixBase<Derived>& m)
      : rows_(m.rows()),
        cols_(m.cols()),
        values_(static_cast<std::size_t>(m.size())),
        scales_(static_cast<std::size_t>(m.rows() * blocks_for(m.cols()))) {
    for (Index r = 0; r < rows_; ++r) {
      for (Index b = 0; b < blocks_per_row(); ++b) {
        const Index begin = b * q8_block, end = std::min(cols_, begin + q8_block);
        double largest = 0;
        for (Index c = begin; c < end; ++c) {
          const double v = static_cast<double>(m(r, c));
          if (!std::isfinite(v))
            throw NumericError("Q8Matrix: the value at row " + std::to_string(r) + ", column " +
                               std::to_string(c) + " is " + std::to_string(v) +
                               "; 8-bit weights need finite values");
          largest = std::max(largest, std::abs(v));
        }
        const float scale = static_cast<float>(largest / 127);
        scales_[static_cast<std::size_t>(r * blocks_per_row() + b)] = scale;
        for (Index c = begin; c < end; ++c) {
          const double q = scale == 0 ? 0 : std::nearbyint(static_cast<double>(m(r, c)) / scale);
          values_[static_cast<std::size_t>(r * cols_ + c)] =
              static_cast<std::int8_t>(std::clamp(q, -127.0, 127.0));
        }
      }
    }
  }

  Index rows() const { return rows_; }
  Index cols() const { return cols_; }
  Index size() const { return rows_ * cols_; }
  Index blocks_per_row() const { return blocks_for(cols_); }
  /// Bytes held: one per value and four per block.
  Index bytes() const { return size() + 4 * rows_ * blocks_per_row(); }
  const std::int8_t* data() const { return values_.data(); }
  const std::int8_t* row(Index r) const { return values_.data() + r * cols_; }
  const float* scales() const { return scales_.data(); }
  const float* row_scales(Index r) const { return scales_.data() + r * blocks_per_row(); }
  Q8Transposed transpose() const { return {*this}; }

  /// Value (r, c) as float: scale · q (exact: an 8-bit integer times a float).
  float value(Index r, Index c) const {
    return row_scales(r)[c / q8_block] * static_cast<float>(row(r)[c]);
  }

  /// Row r [1, cols] as an Eigen expression of T values (scale · q, computed as it is read: no
  /// copy, so an embedding lookup per token allocates nothing). O(cols) to read.
  template <class T = float>
  auto row_as(Index r) const {
    return RowVector<T>::NullaryExpr(cols_,
                                     [this, r](Index c) { return static_cast<T>(value(r, c)); });
  }

  /// The values in T. O(rows · cols).
  template <class T = float>
  RowMatrix<T> widened() const {
    RowMatrix<T> out(rows_, cols_);
    for (Index r = 0; r < rows_; ++r)
      out.row(r) = row_as<T>(r);
    return out;
  }

 private:
  static Index blocks_for(Index cols) { return (cols + q8_block - 1) / q8_block; }

  Index rows_ = 0, cols_ = 0;
  AlignedBuffer<std::int8_t> values_;
  AlignedBuffer<float> scales_;
};

inline Index Q8Transposed::rows() const {
  return matrix.cols();
}
inline Index Q8Transposed::cols() const {
  return matrix.rows();
}

}  // namespace nlb
