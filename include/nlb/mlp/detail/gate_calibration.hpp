// Internals of HyperplaneGate::calibrate_linear_fraction: pick a threshold that lets a chosen
// number of scores through (score > threshold), with a stated rule for ties.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include <Eigen/Core>

namespace nlb::mlp::detail {

/// A value t with low <= t < high (requires low < high): the midpoint where it is representable
/// strictly below `high`, else `low`. The midpoint leaves the same margin on both sides, so a
/// held-out score between the two calibration scores is not decided by which one it is nearer.
template <class T>
T threshold_between(T low, T high) {
  const auto mid = static_cast<T>(0.5 * static_cast<double>(low) + 0.5 * static_cast<double>(high));
  return (mid >= low && mid < high) ? mid : low;
}

/// The largest T below `value` (−Inf for −Inf): a threshold every score >= value exceeds.
template <class T>
T threshold_below(T value) {
  return std::nextafter(value, -std::numeric_limits<T>::infinity());
}

/// Threshold t such that #{scores > t} is the achievable count nearest to `wanted` (0 <= wanted
/// <= n). A threshold cannot split scores that are equal, so when a group of equal scores
/// straddles the wanted count, the count is either all of the group or none of it; the nearer
/// one wins and an exact draw goes to the smaller count (fewer rows on the linear path, the
/// cheaper but lossy one). Without ties the count is exactly `wanted`. `scores` must hold no NaN
/// and is reordered. O(n log n).
template <class T>
T threshold_for_count(std::vector<T>& scores, Eigen::Index wanted) {
  std::sort(scores.begin(), scores.end(), std::greater<T>());  // descending
  const auto n = static_cast<Eigen::Index>(scores.size());
  auto at = [&](Eigen::Index i) { return scores[static_cast<std::size_t>(i)]; };
  if (wanted <= 0)
    return at(0);  // nothing exceeds the maximum
  if (wanted >= n)
    return threshold_below(at(n - 1));
  const T last_in = at(wanted - 1);  // the wanted-th largest score
  const T first_out = at(wanted);    // the next one
  if (last_in > first_out)
    return threshold_between(first_out, last_in);
  // A group of equal scores straddles the cut: [above, at_or_above) are the rows equal to it.
  const T tied = last_in;
  const auto above = static_cast<Eigen::Index>(
      std::lower_bound(scores.begin(), scores.end(), tied, std::greater<T>()) - scores.begin());
  const auto at_or_above = static_cast<Eigen::Index>(
      std::upper_bound(scores.begin(), scores.end(), tied, std::greater<T>()) - scores.begin());
  if (wanted - above <= at_or_above - wanted)
    return tied;  // the group stays out
  if (at_or_above == n)
    return threshold_below(tied);  // the group (and all) go in
  return threshold_between(at(at_or_above), tied);
}

}  // namespace nlb::mlp::detail
