// Reading memory as fast as one core can: the bound the memory-bound benchmarks (decoding,
// small-batch MLPs) are set against.
#pragma once

#include <Eigen/Core>
#include <cstddef>

namespace nlb::bench {

/// Streams summed side by side: a GEMV or a few-row GEMM reads several weight rows at once, and
/// one stream alone leaves a core's memory parallelism unused.
inline constexpr int kReadStreams = 16;

/// Sum of the n floats at p (64-byte aligned), read as kReadStreams sequential streams.
inline float sum_streams(const float* p, std::size_t n) {
  const std::size_t len = n / kReadStreams / 64 * 64;
  Eigen::Array<float, 16, kReadStreams> acc = Eigen::Array<float, 16, kReadStreams>::Zero();
  for (std::size_t i = 0; i < len; i += 16) {
    for (int s = 0; s < kReadStreams; ++s)
      acc.col(s) += Eigen::Map<const Eigen::Array<float, 16, 1>, Eigen::Aligned64>(
          p + static_cast<std::size_t>(s) * len + i);
  }
  float total = acc.sum();
  for (std::size_t i = len * kReadStreams; i < n; ++i)
    total += p[i];
  return total;
}

}  // namespace nlb::bench
