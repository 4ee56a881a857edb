// Softmax of one row, in place, with a causal limit (attention weights of one query).
//
//   row[j] = exp(row[j] - m) / sum_{k < limit} exp(row[k] - m)   for j < limit,
//   row[j] = 0                                                    for limit <= j < n,
//
// with m = max_{k < limit} row[k]. Subtracting the maximum leaves the result unchanged and
// keeps every exponent <= 0, so nothing overflows and the denominator is >= 1. For query i
// of a causal attention row over n keys, limit = i + 1 (the masked logits need not be set
// to -inf first). Three passes: max, exponentials and their sum, scale.
// Scalar reference and xsimd form chosen by the backend tag (see gelu.hpp).
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (detail/xsimd_include.hpp).
#include "nlb/core/detail/xsimd_include.hpp"

#include <algorithm>
#include <cmath>
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

/// Softmax of row[0, limit) in place; row[limit, n) is set to 0. Scalar reference. O(n).
/// Throws ArgumentError unless 1 <= limit <= n.
template <class T>
void softmax(backend::scalar, T* row, Index n, Index limit) {
  detail::check_softmax_limit(n, limit);
  T maximum = row[0];
  for (Index j = 1; j < limit; ++j) {
    maximum = std::max(maximum, row[j]);
  }
  T sum = T(0);
  for (Index j = 0; j < limit; ++j) {
    row[j] = std::exp(row[j] - maximum);
    sum += row[j];
  }
  for (Index j = 0; j < limit; ++j) {
    row[j] /= sum;
  }
  std::fill(row + limit, row + n, T(0));
}

/// Softmax of row[0, limit) in place, row[limit, n) set to 0, with xsimd batches for Arch:
/// each pass runs limit / W full batches and one padded tail batch
/// (W = xsimd::batch<T, Arch>::size); the division is a multiplication by 1 / sum.
/// O(n). Throws ArgumentError unless 1 <= limit <= n.
template <class T, class Arch, class Gemm>
void softmax(backend::simd<Arch, Gemm>, T* row, Index n, Index limit) {
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
  const batch maximum(row_max);

  // Pass 2: exponentials, written back, and their sum.
  batch sums(T(0));
  for (Index j = 0; j < full; j += width) {
    const batch e = xsimd::exp(batch::load_unaligned(row + j) - maximum);
    e.store_unaligned(row + j);
    sums += e;
  }
  if (tail > 0) {
    // Padding lanes hold the maximum (exp(0) = 1, never overflows): store only the valid
    // lanes, then reload them with zero padding for the sum.
    const batch e = xsimd::exp(detail::load_partial<Arch>(row + full, tail, row_max) - maximum);
    detail::store_partial<Arch>(e, row + full, tail);
    sums += detail::load_partial<Arch>(row + full, tail, T(0));
  }
  const batch scale(T(1) / detail::reduce_sum(sums));

  // Pass 3: normalize, then clear the masked part.
  detail::transform_in_place<Arch>(row, limit, T(0), [&](batch e) { return e * scale; });
  std::fill(row + limit, row + n, T(0));
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
