// Deterministic random inputs shared by the benchmark programs.
#pragma once

#include <cstdint>
#include <random>

#include "nlb/core/matrix.hpp"

namespace nlb::bench {

/// [rows, cols] row-major with i.i.d. N(0, scale²) entries from `seed`.
inline RowMatrix<float> random_matrix(Index rows, Index cols, float scale, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  RowMatrix<float> m(rows, cols);
  for (Index i = 0; i < m.size(); ++i)
    m.data()[i] = normal(rng);
  return m;
}

}  // namespace nlb::bench
