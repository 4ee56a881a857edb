// Progress and stage times of the MLP budget pipeline (PAPERS §A): the hooks a caller passes
// (BudgetObserver) and how a stage reports through them.
#pragma once

#include <chrono>
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nlb/core.hpp"

namespace nlb {

/// Stage hooks for progress reporting: begin(stage name), counter(done, total) while a stage
/// runs, end(stage name, seconds). Any may be empty.
struct BudgetObserver {
  std::function<void(const std::string&)> begin;
  std::function<void(long long, long long)> counter;
  std::function<void(const std::string&, double)> end;
};

namespace detail {
// Runs f() as a named stage: begin/end hooks and the stage's wall-clock seconds in `times`.
template <class F>
auto budget_stage(const BudgetObserver& obs, std::vector<std::pair<std::string, double>>& times,
                  const std::string& name, F&& f) {
  if (obs.begin)
    obs.begin(name);
  const auto t0 = std::chrono::steady_clock::now();
  auto finish = [&] {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    times.emplace_back(name, s);
    if (obs.end)
      obs.end(name, s);
  };
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    finish();
  } else {
    auto r = f();
    finish();
    return r;
  }
}

inline std::function<void(Index, Index)> counter_of(const BudgetObserver& obs) {
  if (!obs.counter)
    return {};
  return [&obs](Index done, Index total) { obs.counter(done, total); };
}

inline double ppl_of(std::span<const double> losses) {
  double s = 0;
  for (double v : losses)
    s += v;
  return std::exp(s / static_cast<double>(losses.size()));
}
}  // namespace detail

}  // namespace nlb
