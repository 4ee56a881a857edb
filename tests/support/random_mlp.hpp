// Random MLP weights for tests, benchmarks and examples: GPT-2-like scales.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

#include "nlb/core.hpp"

namespace nlb::test {

/// [rows, cols] with i.i.d. N(0, scale²) entries, cast to T, with compile-time sizes R, C.
template <class T, int R = Dynamic, int C = Dynamic>
RowMatrix<T, R, C> normal_matrix(Index rows, Index cols, double scale, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  RowMatrix<T, R, C> m(rows, cols);
  for (Index i = 0; i < m.size(); ++i)
    m.data()[i] = static_cast<T>(normal(rng));
  return m;
}

}  // namespace nlb::test
