// A fit whose training rows are split over several parts (processes that each hold some rows):
// the element-wise reductions the fit needs to act as one fit over all rows (PAPERS §A3's gate,
// fitted over MPI ranks by nlb/distributed/row_parts.hpp).
#pragma once

#include <functional>
#include <span>

namespace nlb {

/// Element-wise reductions over the parts of a fit's rows. Each function replaces its argument,
/// on every part, by the sum (or maximum) over all parts' arguments of the same length, and must
/// return the same bits on every part (e.g. a sum in a fixed order), so that every part takes the
/// same decisions; every part calls them together, in the same order. Empty functions (the
/// default) mean one part holding every row: nothing is reduced and nothing changes.
struct RowParts {
  std::function<void(std::span<double>)> sum;
  std::function<void(std::span<double>)> max;

  void add_up(std::span<double> values) const {
    if (sum)
      sum(values);
  }
  void take_max(std::span<double> values) const {
    if (max)
      max(values);
  }
};

}  // namespace nlb
