// Input checks shared by every component: finite data, matching shapes.
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <string>

#include "nlb/core/errors.hpp"

namespace nlb {

/// Throws NumericError naming `what` and the first non-finite entry if any entry
/// of `m` is NaN or Inf. O(size).
template <class Derived>
void check_finite(const std::string& what, const Eigen::DenseBase<Derived>& m) {
  for (Eigen::Index r = 0; r < m.rows(); ++r) {
    for (Eigen::Index c = 0; c < m.cols(); ++c) {
      const auto v = m(r, c);
      if (!std::isfinite(static_cast<double>(v))) {
        throw NumericError(detail::expected_found(
            what + " entry (" + std::to_string(r) + ", " + std::to_string(c) + ")",
            "a finite value", v));
      }
    }
  }
}

}  // namespace nlb
