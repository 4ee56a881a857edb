// log(sum_j exp(row[j])) of one row, as a double: the normaliser of a next-token loss over the
// vocabulary (model/loss.hpp). With m = max_j row[j], lse = m + log(sum_j exp(row[j] - m));
// every exponent is <= 0, so nothing overflows and the sum is >= 1.
//
// The scalar reference computes in double. The xsimd form takes the maximum and the
// exponentials in T (xsimd's exp is accurate to a few ulp) and adds them in T only within
// blocks of 16 batches, each block's sum then added in double: the relative error of the sum is
// a few T ulp (about 1e-6 for float at most), which a float model's logits already exceed.
// Over GPT-2's 50 257-token vocabulary the double exp of every logit was half of an
// evaluation's time (docs/benchmarks.md, "Loss over a large vocabulary").
#pragma once
// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include <algorithm>
#include <cmath>

#include "nlb/core.hpp"
#include "nlb/kernels/detail/simd_row.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels {

/// log(sum_{j < n} exp(row[j])) in double; scalar reference. ArgumentError if n < 1. O(n).
template <class T>
double log_sum_exp(backend::scalar, const T* row, Index n) {
  if (n < 1)
    throw ArgumentError(nlb::detail::expected_found("log_sum_exp: n", "at least 1", n));
  double maximum = static_cast<double>(row[0]);
  for (Index j = 1; j < n; ++j)
    maximum = std::max(maximum, static_cast<double>(row[j]));
  double sum = 0;
  for (Index j = 0; j < n; ++j)
    sum += std::exp(static_cast<double>(row[j]) - maximum);
  return maximum + std::log(sum);
}

/// log(sum_{j < n} exp(row[j])) in double, with xsimd batches for Arch (see the header comment
/// for the accuracy). ArgumentError if n < 1. O(n).
template <class T, class Arch, class Gemm>
double log_sum_exp(backend::simd<Arch, Gemm>, const T* row, Index n) {
  if (n < 1)
    throw ArgumentError(nlb::detail::expected_found("log_sum_exp: n", "at least 1", n));
  using batch = xsimd::batch<T, Arch>;
  constexpr Index width = detail::batch_width<T, Arch>;
  constexpr Index block = 16 * width;  // elements summed in T before the double sum
  const Index full = n - n % width;
  // Maximum. Padding lanes repeat row[0], which cannot change it.
  batch maxima(row[0]);
  for (Index j = 0; j < full; j += width)
    maxima = xsimd::max(maxima, batch::load_unaligned(row + j));
  if (full < n)
    maxima = xsimd::max(maxima, detail::load_partial<Arch>(row + full, n - full, row[0]));
  const T row_max = detail::reduce_max(maxima);
  const batch maximum(row_max);
  double sum = 0;
  for (Index b0 = 0; b0 < full; b0 += block) {
    const Index b1 = std::min(full, b0 + block);
    batch sums(T(0));
    for (Index j = b0; j < b1; j += width)
      sums += xsimd::exp(batch::load_unaligned(row + j) - maximum);
    sum += static_cast<double>(detail::reduce_sum(sums));
  }
  // The tail (fewer than one batch), in double.
  for (Index j = full; j < n; ++j)
    sum += std::exp(static_cast<double>(row[j]) - static_cast<double>(row_max));
  return static_cast<double>(row_max) + std::log(sum);
}

}  // namespace nlb::kernels

NLB_XSIMD_GUARD_END
