// Internals of the ridge surrogate (PAPERS.md §A1): small dense helpers in double.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <string>

#include "nlb/core.hpp"

namespace nlb::ridge::detail {

/// Copies the strictly lower triangle of the square `m` onto its strictly upper triangle,
/// so a Gram matrix updated through `selfadjointView<Lower>()` is full and symmetric again.
/// Works in 64 x 64 tiles because a plain transposed copy strides through memory. O(n²).
inline void mirror_lower_to_upper(Eigen::MatrixXd& m) {
  constexpr Index tile = 64;
  const Index n = m.rows();
  for (Index j0 = 0; j0 < n; j0 += tile) {
    const Index nj = std::min(tile, n - j0);
    // Diagonal tile: element by element.
    for (Index j = 1; j < nj; ++j) {
      for (Index i = 0; i < j; ++i)
        m(j0 + i, j0 + j) = m(j0 + j, j0 + i);
    }
    // Tiles above it in column block j0 are the transposes of the tiles left of it in row
    // block j0 (disjoint memory, so no aliasing).
    for (Index i0 = 0; i0 < j0; i0 += tile) {
      const Index ni = std::min(tile, n - i0);
      m.block(i0, j0, ni, nj) = m.block(j0, i0, nj, ni).transpose();
    }
  }
}

/// Throws ArgumentError unless λ is finite and > 0 (PAPERS.md §A1 needs λ > 0: with a
/// singular Cxx, the normal case after LayerNorm, λ = 0 has no unique solution).
inline void check_lambda(const std::string& where, double lambda) {
  if (!(std::isfinite(lambda) && lambda > 0.0)) {
    throw ArgumentError(
        nlb::detail::expected_found(where + ": lambda", "a finite value > 0", lambda));
  }
}

}  // namespace nlb::ridge::detail
