// Counts of rows per path of a gated layer.
#pragma once

#include "nlb/core.hpp"

namespace nlb {

/// How many rows of one forward pass took each path.
struct RouteCounts {
  Index linear = 0;  // rows computed by the surrogate
  Index full = 0;    // rows computed by the MLP
  /// Share of rows routed linear (0 for an empty batch).
  double linear_fraction() const {
    const Index total = linear + full;
    return total == 0 ? 0.0 : static_cast<double>(linear) / static_cast<double>(total);
  }
  /// Adds another pass's rows (a model sums its layers', an eval its windows').
  RouteCounts& operator+=(const RouteCounts& other) {
    linear += other.linear;
    full += other.full;
    return *this;
  }
};

}  // namespace nlb
