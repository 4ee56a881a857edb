// Shared pieces of the SIMD row kernels: batch width, partial (tail) loads and stores,
// horizontal reductions. Internal to nlb/kernels.
//
// Tail policy: a row of n values is processed as floor(n / W) full batches followed by
// one padded batch for the n mod W remaining values. The tail is copied into a small
// stack buffer whose unused lanes hold a caller-chosen neutral value (0 for sums, 1 for
// scales, an element of the row for a maximum), computed with the same batch code, and
// only the valid lanes are copied back. Every element therefore goes through the same
// arithmetic whatever its position, and no load ever reads past the end of the row.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include <algorithm>
#include <array>
#include <cstddef>

#include "nlb/core/matrix.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels::detail {

/// Lanes per batch of T on Arch, as an Index (W in the docs).
template <class T, class Arch>
inline constexpr Index batch_width = static_cast<Index>(xsimd::batch<T, Arch>::size);

/// Loads the `count` values at `p` (0 <= count <= W) into the first lanes of a batch;
/// the other lanes are `fill`. Reads exactly `count` values.
template <class Arch, class T>
xsimd::batch<T, Arch> load_partial(const T* p, Index count, T fill) {
  alignas(Arch::alignment()) std::array<T, xsimd::batch<T, Arch>::size> buffer;
  buffer.fill(fill);
  std::copy(p, p + count, buffer.begin());
  return xsimd::batch<T, Arch>::load_aligned(buffer.data());
}

/// Stores the first `count` lanes of `b` (0 <= count <= W) to `p`. Writes exactly `count` values.
template <class Arch, class T>
void store_partial(const xsimd::batch<T, Arch>& b, T* p, Index count) {
  alignas(Arch::alignment()) std::array<T, xsimd::batch<T, Arch>::size> buffer;
  b.store_aligned(buffer.data());
  std::copy(buffer.begin(), buffer.begin() + count, p);
}

/// Sum of all lanes.
template <class Arch, class T>
T reduce_sum(const xsimd::batch<T, Arch>& b) {
  return xsimd::hadd(b);
}

/// Largest lane. xsimd 8.1 has no horizontal max, so: store, then a scalar loop over W lanes.
template <class Arch, class T>
T reduce_max(const xsimd::batch<T, Arch>& b) {
  alignas(Arch::alignment()) std::array<T, xsimd::batch<T, Arch>::size> buffer;
  b.store_aligned(buffer.data());
  return *std::max_element(buffer.begin(), buffer.end());
}

/// Applies `f` (batch -> batch) in place to data[0, n): full batches, then one padded tail
/// batch whose unused lanes hold `fill` (chosen so `f` stays finite and cheap on them).
template <class Arch, class T, class F>
void transform_in_place(T* data, Index n, T fill, F f) {
  using batch = xsimd::batch<T, Arch>;
  constexpr Index width = batch_width<T, Arch>;
  Index i = 0;
  for (; i + width <= n; i += width) {
    f(batch::load_unaligned(data + i)).store_unaligned(data + i);
  }
  if (i < n) {
    store_partial<Arch>(f(load_partial<Arch>(data + i, n - i, fill)), data + i, n - i);
  }
}

}  // namespace nlb::kernels::detail

NLB_XSIMD_GUARD_END
