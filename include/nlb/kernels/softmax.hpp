// Softmax of one row, in place, with a causal limit (attention weights of one query).
//
//   row[j] = exp(row[j] - m) / sum_{k < limit} exp(row[k] - m)   for j < limit,
//   row[j] = 0                                                    for limit <= j < n,
//
// with m = max_{k < limit} row[k]. Subtracting the maximum leaves the result unchanged and
// keeps every exponent <= 0, so nothing overflows and the denominator is >= 1. For query i
// of a causal attention row over n keys, limit = i + 1 (the masked logits need not be set
// to -inf first). Three passes: max, exponentials and their sum, scale. softmax_tile is the
// first two on one tile of a row, for attention that streams a row in tiles.
// Scalar reference and xsimd form chosen by the backend tag (see gelu.hpp).
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "nlb/core.hpp"
#include "nlb/kernels/detail/simd_row.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels {

namespace detail {

/// Throws ArgumentError unless 1 <= limit <= n.
inline void check_softmax_limit(Index n, Index limit) {
  if (limit < 1 || limit > n) {
    throw ArgumentError(nlb::detail::expected_found(
        "softmax: limit", "a value in [1, n] with n = " + std::to_string(n), limit));
  }
}

}  // namespace detail

/// The running state of a softmax row streamed in tiles (tiled attention): the largest scaled
/// logit seen so far and the sum of exp(scaled logit − maximum) over the logits seen so far.
template <class T>
struct SoftmaxTileState {
  T maximum;
  T sum;
};

/// One tile of a softmax row streamed in tiles (the online normaliser of Milakov and
/// Gimelshein, arXiv:1805.02867, as tiled attention uses it): with m = max(floor, max_{j < limit}
/// scale·row[j]),
///   row[j] = exp(scale·row[j] − m) for j < limit,  row[j] = 0 for limit <= j < n,
/// returns {m, Σ_{j < limit} row[j]}. Pass floor = the row's running maximum (or
/// std::numeric_limits<T>::lowest() for its first tile); the caller rescales what it
/// accumulated from earlier tiles by exp(previous maximum − m). scale > 0. Scalar reference.
/// O(n). Throws ArgumentError unless 1 <= limit <= n.
template <class T>
SoftmaxTileState<T> softmax_tile(backend::scalar, T* row, Index n, Index limit, T scale, T floor) {
  detail::check_softmax_limit(n, limit);
  T maximum = row[0];
  for (Index j = 1; j < limit; ++j) {
    maximum = std::max(maximum, row[j]);
  }
  // scale > 0 and rounding is monotonic: fl(scale·max) = max_j fl(scale·row[j]).
  maximum = std::max(floor, scale * maximum);
  T sum = T(0);
  for (Index j = 0; j < limit; ++j) {
    row[j] = std::exp(scale * row[j] - maximum);
    sum += row[j];
  }
  std::fill(row + limit, row + n, T(0));
  return {maximum, sum};
}

/// softmax_tile with xsimd batches for Arch: each pass runs limit / W full batches and one
/// padded tail batch (W = xsimd::batch<T, Arch>::size); the exponent is one FMA,
/// scale·row[j] − m. O(n). Throws ArgumentError unless 1 <= limit <= n.
template <class T, class Arch, class Gemm>
SoftmaxTileState<T> softmax_tile(backend::simd<Arch, Gemm>, T* row, Index n, Index limit, T scale,
                                 T floor) {
  detail::check_softmax_limit(n, limit);
  using batch = xsimd::batch<T, Arch>;
  constexpr Index width = detail::batch_width<T, Arch>;
  const Index full = limit - limit % width;  // [0, full) in whole batches, [full, limit) the tail
  const Index tail = limit - full;

  // Pass 1: maximum. Padding lanes repeat row[0], which cannot change the maximum.
  batch maxima(row[0]);
  for (Index j = 0; j < full; j += width) {
    maxima = xsimd::max(maxima, batch::load_unaligned(row + j));
  }
  if (tail > 0) {
    maxima = xsimd::max(maxima, detail::load_partial<Arch>(row + full, tail, row[0]));
  }
  const T row_max = detail::reduce_max(maxima);
  const T maximum = std::max(floor, scale * row_max);
  const batch scales(scale), shift(-maximum);

  // Pass 2: exponentials, written back, and their sum.
  batch sums(T(0));
  for (Index j = 0; j < full; j += width) {
    const batch e = xsimd::exp(xsimd::fma(batch::load_unaligned(row + j), scales, shift));
    e.store_unaligned(row + j);
    sums += e;
  }
  if (tail > 0) {
    // Padding lanes hold the row's maximum (exponent <= 0, never overflows): store only the
    // valid lanes, then reload them with zero padding for the sum.
    const batch e = xsimd::exp(
        xsimd::fma(detail::load_partial<Arch>(row + full, tail, row_max), scales, shift));
    detail::store_partial<Arch>(e, row + full, tail);
    sums += detail::load_partial<Arch>(row + full, tail, T(0));
  }
  std::fill(row + limit, row + n, T(0));
  return {maximum, detail::reduce_sum(sums)};
}

/// Softmax of row[0, limit) in place; row[limit, n) is set to 0. Scalar reference. O(n).
/// Throws ArgumentError unless 1 <= limit <= n.
template <class T>
void softmax(backend::scalar backend, T* row, Index n, Index limit) {
  const T sum = softmax_tile(backend, row, n, limit, T(1), std::numeric_limits<T>::lowest()).sum;
  for (Index j = 0; j < limit; ++j) {
    row[j] /= sum;
  }
}

/// Softmax of row[0, limit) in place, row[limit, n) set to 0, with xsimd batches for Arch
/// (softmax_tile, then a pass multiplying by 1 / sum). O(n). Throws ArgumentError unless
/// 1 <= limit <= n.
template <class T, class Arch, class Gemm>
void softmax(backend::simd<Arch, Gemm> backend, T* row, Index n, Index limit) {
  using batch = xsimd::batch<T, Arch>;
  const T sum = softmax_tile(backend, row, n, limit, T(1), std::numeric_limits<T>::lowest()).sum;
  const batch scale(T(1) / sum);
  detail::transform_in_place<Arch>(row, limit, T(0), [&](batch e) { return e * scale; });
}

/// Softmax of the whole row (limit = n), scalar reference. Throws ArgumentError if n < 1.
template <class T>
void softmax(backend::scalar backend, T* row, Index n) {
  softmax(backend, row, n, n);
}

/// Softmax of the whole row (limit = n), xsimd form. Throws ArgumentError if n < 1.
template <class T, class Arch, class Gemm>
void softmax(backend::simd<Arch, Gemm> backend, T* row, Index n) {
  softmax(backend, row, n, n);
}

}  // namespace nlb::kernels

NLB_XSIMD_GUARD_END
