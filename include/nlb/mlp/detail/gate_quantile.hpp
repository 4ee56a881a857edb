// Order statistics for the gate labels (PAPERS.md §A3): the median and numpy's default
// ("linear") percentile, found by selection rather than a full sort.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace nlb::mlp::detail {

/// numpy's interpolation between neighbouring order statistics a <= b at fraction t in [0, 1].
/// For t >= 0.5 it steps back from b, so t = 1 returns b exactly and the result never leaves
/// [a, b]; this is the form numpy (>= 1.22) uses, so thresholds agree with it bit for bit.
inline double lerp_order_statistics(double a, double b, double t) {
  const double diff = b - a;
  return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

/// The q-quantile of `values` (q in [0, 1]) with numpy's default method: sort ascending as
/// s[0..n-1], position h = q (n - 1), result s[floor h] + (h - floor h)(s[floor h + 1] - s[floor
/// h]). `values` is reordered (selection). Requires a non-empty vector without NaN. O(n).
inline double linear_quantile(std::vector<double>& values, double q) {
  const std::size_t n = values.size();
  const double position = q * static_cast<double>(n - 1);
  const auto lower = static_cast<std::size_t>(std::floor(position));
  const double fraction = position - static_cast<double>(lower);
  const auto lower_it = values.begin() + static_cast<std::ptrdiff_t>(lower);
  std::nth_element(values.begin(), lower_it, values.end());
  const double a = *lower_it;
  if (fraction == 0.0 || lower + 1 >= n)
    return a;
  // After nth_element every element right of `lower` is >= a, so the next order
  // statistic is the smallest of them.
  const double b = *std::min_element(lower_it + 1, values.end());
  return lerp_order_statistics(a, b, fraction);
}

/// The median as numpy's np.median defines it: the middle order statistic for an odd count,
/// the mean of the two middle ones for an even count. `values` is reordered. O(n).
inline double median(std::vector<double>& values) {
  const std::size_t n = values.size();
  const std::size_t upper_middle = n / 2;
  const auto upper_it = values.begin() + static_cast<std::ptrdiff_t>(upper_middle);
  std::nth_element(values.begin(), upper_it, values.end());
  const double b = *upper_it;
  if (n % 2 == 1)
    return b;
  // Every element left of `upper_middle` is <= b; the lower middle is the largest of them.
  const double a = *std::max_element(values.begin(), upper_it);
  const double mean = (a + b) / 2.0;
  // (a + b) overflows only for |values| near DBL_MAX; halve first there.
  return std::isfinite(mean) ? mean : a / 2.0 + b / 2.0;
}

}  // namespace nlb::mlp::detail
