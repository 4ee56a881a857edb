// Reading memory as fast as one core can: the bound the memory-bound benchmarks (decoding,
// small-batch MLPs) are set against.
#pragma once

#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "nlb/core/aligned_buffer.hpp"

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

/// Floats of the buffer read_once reads: 2 GiB, several times any L3.
inline constexpr std::size_t kBandwidthFloats = std::size_t{1} << 29;

/// The buffer read_once reads, allocated and touched on first use (no page faults timed).
inline const nlb::AlignedBuffer<float>& bandwidth_buffer() {
  static const nlb::AlignedBuffer<float> buffer = [] {
    nlb::AlignedBuffer<float> b(kBandwidthFloats);
    std::fill(b.data(), b.data() + b.size(), 1.0f);
    return b;
  }();
  return buffer;
}

/// Reads the first `floats` of the buffer once with `threads` threads, each summing a contiguous
/// part.
inline float read_once(int threads, std::size_t floats) {
  const auto& buffer = bandwidth_buffer();
  std::vector<float> sums(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  const std::size_t part = floats / static_cast<std::size_t>(threads);
  auto sum_part = [&](int t) {
    const float* p = buffer.data() + part * static_cast<std::size_t>(t);
    sums[static_cast<std::size_t>(t)] = sum_streams(p, part);
  };
  for (int t = 1; t < threads; ++t)
    workers.emplace_back(sum_part, t);
  sum_part(0);
  for (auto& w : workers)
    w.join();
  float total = 0;
  for (float s : sums)
    total += s;
  return total;
}

/// Bytes per second of reading `bytes` (at most the buffer) again and again with `threads`
/// threads, what a decoding step does with its weights: the best of 5 passes after one warm-up,
/// measured once per (threads, size) in a process.
inline double read_bandwidth(int threads, double bytes) {
  static std::map<std::pair<int, std::size_t>, double> measured;
  const std::size_t floats =
      std::min(kBandwidthFloats, static_cast<std::size_t>(bytes / sizeof(float)) / 64 * 64);
  const auto key = std::make_pair(threads, floats);
  if (auto it = measured.find(key); it != measured.end())
    return it->second;
  double best = 0;
  read_once(threads, floats);  // warm
  for (int pass = 0; pass < 5; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(read_once(threads, floats));
    const std::chrono::duration<double> s = std::chrono::steady_clock::now() - start;
    best = std::max(best, static_cast<double>(floats * sizeof(float)) / s.count());
  }
  return measured[key] = best;
}

}  // namespace nlb::bench
