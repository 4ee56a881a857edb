// Which of the label positions' gate features a process holds, and how the processes that hold
// the others combine the per-row work: the label stage's gate fits, held-out AUCs and fraction
// thresholds over features spread across processes (MPI ranks, docs/scaling.md), so the
// features never move — only the Newton sums and one score per row.
#pragma once

#include <algorithm>
#include <functional>
#include <span>
#include <vector>

#include "nlb/core.hpp"
#include "nlb/mlp/row_parts.hpp"

namespace nlb {

/// The label rows [first_row, first_row + rows) of N held here, as consecutive positions of the
/// label windows [first_window, first_window + windows) (a window of `context` tokens holds
/// context − 1 predicted positions, PAPERS §A3). `parts` reduces a fit's sums over the holders
/// (nlb/mlp/row_parts.hpp); `concatenate` returns every holder's values, holder by holder, which
/// is row order. The default holds every row (nothing is reduced or gathered).
struct LabelRows {
  Index first_window = 0;
  Index windows = -1;  // -1: every label window
  Index first_row = 0;
  RowParts parts;
  std::function<std::vector<double>(std::span<const double>)> concatenate;

  /// True when other processes hold some of the rows.
  bool split() const { return static_cast<bool>(concatenate); }

  /// Every holder's `mine` in row order (the values themselves when this process holds all).
  std::vector<double> all(std::span<const double> mine) const {
    return split() ? concatenate(mine) : std::vector<double>(mine.begin(), mine.end());
  }

  /// Sets first_row for windows of `context` tokens and returns how many of the `positions`
  /// label rows are held here (0 when these windows lie past the last position).
  Index place(Index context, Index positions) {
    if (windows < 0) {
      first_row = 0;
      return positions;
    }
    first_row = first_window * (context - 1);
    return std::clamp<Index>(positions - first_row, 0, windows * (context - 1));
  }
};

}  // namespace nlb
