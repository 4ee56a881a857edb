// How a host backend stores a model's large weight matrices (DESIGN.md §4): storage policies.
//
// storage::f32 keeps them as Eigen matrices of the model's scalar (the default, every component
// and analysis reads them directly). storage::f16 and storage::bf16 keep them as HalfMatrix, half
// the bytes, for forwards that are bound by reading the weights (batch-1 decoding); storage::q8
// keeps them as Q8Matrix, 8-bit integers with a float scale per block of 32 (about 0.28 of
// float's bytes); activations, biases, norms and accumulation stay in the scalar type.
// storage::mapped keeps them as
// MappedMatrix: a loaded model reads a tensor where the checkpoint's mapping holds it when the
// file stores it as the model reads it (same dtype, same layout), so loading copies nothing of
// it; other tensors are converted into matrices of their own. A backend names its storage as
// `Backend::weights` (backend::with_weights<storage::bf16> on top of a CPU backend).
//
// Which to pick for decoding, measured (docs/benchmarks.md): f16/bf16 move every logit by ~1e-3
// of its scale; q8 moves perplexity by a fraction of a percent (the table in
// docs/half_precision.md) and reads the least.
#pragma once

#include <type_traits>
#include <utility>

#include "nlb/core/half_matrix.hpp"
#include "nlb/core/mapped_matrix.hpp"
#include "nlb/core/matrix.hpp"
#include "nlb/core/q8_matrix.hpp"

namespace nlb::storage {

struct f32 {};
struct f16 {
  using element = Eigen::half;
};
struct bf16 {
  using element = Eigen::bfloat16;
};

/// 8-bit weights in blocks of q8_block values with a float scale each (Q8Matrix).
struct q8 {};

struct mapped {};

/// Device memory (backend::cuda): matrices of the scalar type in a cuda::DeviceMatrix. Its
/// weight_matrix is defined in nlb/cuda/device_matrix.cuh.
struct device {};

template <class S>
inline constexpr bool is_half = std::is_same_v<S, f16> || std::is_same_v<S, bf16>;

template <class S>
inline constexpr bool is_storage = std::is_same_v<S, f32> || is_half<S> || std::is_same_v<S, q8> ||
                                   std::is_same_v<S, mapped> || std::is_same_v<S, device>;

/// True for the storages whose matrices products widen to float in registers (16- and 8-bit).
template <class S>
inline constexpr bool is_narrow = is_half<S> || std::is_same_v<S, q8>;

/// The weight matrix type of storage S (a customization point: nlb/cuda/device_matrix.cuh
/// gives storage::device its own).
template <class S, class T, int Rows, int Cols>
struct weight_matrix_of {
  using type = RowMatrix<T, Rows, Cols>;
};
template <class S, class T, int Rows, int Cols>
requires is_half<S>
struct weight_matrix_of<S, T, Rows, Cols> {
  using type = HalfMatrix<typename S::element>;
};
template <class T, int Rows, int Cols>
struct weight_matrix_of<q8, T, Rows, Cols> {
  using type = Q8Matrix;
};
template <class T, int Rows, int Cols>
struct weight_matrix_of<mapped, T, Rows, Cols> {
  using type = MappedMatrix<T, Rows, Cols>;
};

}  // namespace nlb::storage

namespace nlb {

/// The weight matrix [Rows, Cols] of storage S for scalar T: RowMatrix<T, Rows, Cols> for
/// storage::f32, HalfMatrix (sizes at run time) for storage::f16 / storage::bf16, Q8Matrix for
/// storage::q8,
/// MappedMatrix<T, Rows, Cols> for storage::mapped, cuda::DeviceMatrix<T> for storage::device.
template <class S, class T, int Rows = Dynamic, int Cols = Dynamic>
using weight_matrix = typename storage::weight_matrix_of<S, T, Rows, Cols>::type;

/// The Eigen matrix `m` in storage S: moved through for storage::f32, rounded to 16 bits for
/// f16 / bf16 (as HalfMatrix rounds, O(size)), quantized in blocks for q8 (as Q8Matrix does,
/// O(size); NumericError for a non-finite value), moved into a MappedMatrix that owns it for
/// storage::mapped.
template <class S, class M>
requires std::is_base_of_v<Eigen::MatrixBase<M>, M>
auto to_weight_storage(M m) {
  static_assert(storage::is_storage<S>,
                "to_weight_storage<S>: S must be storage::f32, f16, bf16, q8 or mapped");
  using Scalar = typename M::Scalar;
  if constexpr (storage::is_half<S>)
    return HalfMatrix<typename S::element>(m);
  else if constexpr (std::is_same_v<S, storage::q8>)
    return Q8Matrix(m);
  else if constexpr (std::is_same_v<S, storage::mapped>)
    return MappedMatrix<Scalar, M::RowsAtCompileTime, M::ColsAtCompileTime>(
        RowMatrix<Scalar, M::RowsAtCompileTime, M::ColsAtCompileTime>(std::move(m)));
  else
    return m;
}

/// A HalfMatrix of S's element is already in storage S: passed through, O(1).
template <class S, class H>
HalfMatrix<H> to_weight_storage(HalfMatrix<H> w) {
  static_assert(storage::is_half<S> && std::is_same_v<H, typename S::element>,
                "to_weight_storage<S>: a HalfMatrix passes through its own 16-bit storage only");
  return w;
}

/// A Q8Matrix is already in storage::q8: passed through, O(1).
template <class S>
Q8Matrix to_weight_storage(Q8Matrix w) {
  static_assert(std::is_same_v<S, storage::q8>,
                "to_weight_storage<S>: a Q8Matrix passes through storage::q8 only");
  return w;
}

/// A MappedMatrix (a view of a checkpoint's tensor, or a matrix it owns) is already in
/// storage::mapped: passed through, O(1).
template <class S, class T, int Rows, int Cols>
MappedMatrix<T, Rows, Cols> to_weight_storage(MappedMatrix<T, Rows, Cols> w) {
  static_assert(std::is_same_v<S, storage::mapped>,
                "to_weight_storage<S>: a MappedMatrix passes through storage::mapped only");
  return w;
}

}  // namespace nlb
