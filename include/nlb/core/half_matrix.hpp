// A row-major matrix of 16-bit floats: weights kept as a checkpoint stores them (F16) or in
// bfloat16, to halve the bytes a memory-bound forward (batch-1 decoding) reads per token.
//
// Values are Eigen's own 16-bit types (Eigen::half: IEEE binary16; Eigen::bfloat16: the top half
// of a float32), so rounding on the way in is Eigen's round-to-nearest-even and one value's
// conversion to float is exact. Products with these weights widen them to float in registers
// (nlb/kernels/half_weights.hpp) and accumulate in float (ops::gemm's HalfMatrix overloads).
#pragma once

#include <Eigen/Core>
#include <type_traits>

#include "nlb/core/aligned_buffer.hpp"
#include "nlb/core/matrix.hpp"

namespace nlb {

template <class H>
inline constexpr bool is_half_element =
    std::is_same_v<H, Eigen::half> || std::is_same_v<H, Eigen::bfloat16>;

template <class H>
class HalfMatrix;

/// The transpose of a HalfMatrix as a product operand (no copy): `w.transpose()`.
template <class H>
struct HalfTransposed {
  const HalfMatrix<H>& matrix;
  Index rows() const { return matrix.cols(); }
  Index cols() const { return matrix.rows(); }
};

/// Shape [rows, cols], row-major and contiguous; element H is Eigen::half or Eigen::bfloat16.
/// Built from an Eigen matrix by rounding every value to float and then to nearest-even H
/// (exactly nearest-even for float input; values beyond the 16-bit range become ±infinity, as
/// the cast does). O(rows · cols).
template <class H>
class HalfMatrix {
  static_assert(is_half_element<H>, "HalfMatrix<H>: H must be Eigen::half or Eigen::bfloat16");

 public:
  using Element = H;

  HalfMatrix() = default;

  /// Rounds every value of `m` to H (through float).
  template <class Derived>
  explicit HalfMatrix(const Eigen::MatrixBase<Derived>& m)
      : rows_(m.rows()), cols_(m.cols()), values_(static_cast<std::size_t>(m.size())) {
    for (Index r = 0; r < rows_; ++r)
      for (Index c = 0; c < cols_; ++c)
        values_[static_cast<std::size_t>(r * cols_ + c)] = H(static_cast<float>(m(r, c)));
  }

  Index rows() const { return rows_; }
  Index cols() const { return cols_; }
  Index size() const { return rows_ * cols_; }
  const H* data() const { return values_.data(); }
  const H* row(Index r) const { return values_.data() + r * cols_; }
  HalfTransposed<H> transpose() const { return {*this}; }

  /// Row r [1, cols] as an Eigen expression of T values (widened as it is read).
  template <class T = float>
  auto row_as(Index r) const {
    return Eigen::Map<const Eigen::Matrix<H, 1, Eigen::Dynamic>>(row(r), cols_).template cast<T>();
  }

  /// The values widened to T (exact for float and double). O(rows · cols).
  template <class T = float>
  RowMatrix<T> widened() const {
    RowMatrix<T> out(rows_, cols_);
    for (Index i = 0; i < size(); ++i)
      out.data()[i] = static_cast<T>(static_cast<float>(values_[static_cast<std::size_t>(i)]));
    return out;
  }

 private:
  Index rows_ = 0, cols_ = 0;
  AlignedBuffer<H> values_;
};

}  // namespace nlb
