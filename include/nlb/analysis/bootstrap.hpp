// Paired bootstrap confidence intervals of a perplexity change over evaluation windows
// (PAPERS §A7: nlbudget reports intervals, the paper did not).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "nlb/core.hpp"

namespace nlb {

/// A point estimate with its 95% interval.
struct Interval {
  double value = 0;  // the estimate on the full sample
  double low = 0;    // 2.5th percentile of the resampled estimates
  double high = 0;   // 97.5th percentile
};

/// splitmix64 (Steele, Lea & Flood 2014): a small, fully specified generator, so a seed gives
/// the same resamples with every compiler and standard library (std:: distributions do not).
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  /// An index in [0, n): next() mod n (bias < n / 2⁶⁴, negligible for any window count).
  std::uint64_t below(std::uint64_t n) { return next() % n; }

 private:
  std::uint64_t state_;
};

/// numpy's default percentile ("linear"): position q (n − 1) in the sorted values, linearly
/// interpolated. `sorted` ascending, non-empty; q in [0, 1].
inline double sorted_percentile(std::span<const double> sorted, double q) {
  if (sorted.empty())
    throw ArgumentError("sorted_percentile: expected at least one value, found none");
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

/// Δ% = 100 (PPL_variant / PPL_base − 1) = 100 (exp((Σ L_v − Σ L_b) / n) − 1) over windows
/// with equal predicted-token counts, and its paired bootstrap 95% interval: `resamples` times,
/// draw as many windows as there are with replacement (the same draws for both models — the
/// pairing keeps window difficulty out of the interval), recompute Δ%; the interval is the
/// 2.5th and 97.5th percentile of the resampled Δ% (percentile bootstrap).
/// base_sums, variant_sums: per-window loss sums [W]; tokens_per_window: predicted positions in
/// a window. The draws come from SplitMix64(seed): the same seed gives the same interval.
/// Throws ShapeError (sizes differ), ArgumentError (no windows, resamples < 1).
/// O(resamples · W).
inline Interval bootstrap_delta_pct(std::span<const double> base_sums,
                                    std::span<const double> variant_sums, Index tokens_per_window,
                                    Index resamples, std::uint64_t seed) {
  check_dim("bootstrap_delta_pct: variant windows (base windows)",
            static_cast<long long>(base_sums.size()), static_cast<long long>(variant_sums.size()));
  if (base_sums.empty())
    throw ArgumentError("bootstrap_delta_pct: expected at least one window, found none");
  if (resamples < 1)
    throw ArgumentError(
        detail::expected_found("bootstrap_delta_pct: resamples", "at least 1", resamples));
  const std::size_t w = base_sums.size();
  std::vector<double> diff(w);
  double total = 0;
  for (std::size_t i = 0; i < w; ++i) {
    diff[i] = variant_sums[i] - base_sums[i];
    total += diff[i];
  }
  const double n = static_cast<double>(w) * static_cast<double>(tokens_per_window);
  Interval out;
  out.value = 100.0 * std::expm1(total / n);
  SplitMix64 rng(seed);
  std::vector<double> draws(static_cast<std::size_t>(resamples));
  for (auto& d : draws) {
    double s = 0;
    for (std::size_t i = 0; i < w; ++i)
      s += diff[rng.below(w)];
    d = 100.0 * std::expm1(s / n);
  }
  std::sort(draws.begin(), draws.end());
  out.low = sorted_percentile(draws, 0.025);
  out.high = sorted_percentile(draws, 0.975);
  return out;
}

}  // namespace nlb
