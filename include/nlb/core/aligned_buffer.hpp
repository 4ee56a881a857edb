// Aligned contiguous storage for kernels that want full-width aligned loads.
#pragma once

#include <cstddef>
#include <vector>
#include "nlb/core/xsimd.hpp"

namespace nlb {

/// Alignment of AlignedBuffer: one cache line, enough for every AVX-512 load.
inline constexpr std::size_t buffer_alignment = 64;

/// A std::vector whose data() is 64-byte aligned (xsimd's allocator).
template <class T>
using AlignedBuffer = std::vector<T, xsimd::aligned_allocator<T, buffer_alignment>>;

}  // namespace nlb
