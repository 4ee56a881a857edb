// The budget allocation across layers (analysis/budget/allocation.hpp): the multiple-choice
// knapsack against exhaustive enumeration (a different algorithm), its rounding bound off the
// capacity grid, and the corrected search against a synthetic joint measurement whose joint cost
// exceeds the sum of the per-layer costs (as the real one does, PAPERS §A7).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "nlb/analysis/budget/allocation.hpp"

namespace {

using Table = std::vector<std::vector<double>>;

struct Best {
  double value = -1e300;
  std::vector<nlb::Index> choice;
};

// Every combination of one option per layer, keeping the most valuable within `capacity`.
Best brute_force(const Table& cost, const Table& value, double capacity) {
  Best best;
  std::vector<nlb::Index> k(cost.size(), 0);
  for (;;) {
    double c = 0, v = 0;
    for (std::size_t l = 0; l < k.size(); ++l) {
      c += cost[l][static_cast<std::size_t>(k[l])];
      v += value[l][static_cast<std::size_t>(k[l])];
    }
    if (c <= capacity * (1 + 1e-12) && v > best.value) {
      best.value = v;
      best.choice = k;
    }
    std::size_t l = 0;
    while (l < k.size() && ++k[l] == static_cast<nlb::Index>(cost[l].size()))
      k[l++] = 0;
    if (l == k.size())
      return best;
  }
}

double total(const Table& t, const std::vector<nlb::Index>& k) {
  double s = 0;
  for (std::size_t l = 0; l < k.size(); ++l)
    s += t[l][static_cast<std::size_t>(k[l])];
  return s;
}

// A random instance: option 0 is (0, 0); costs are whole units of capacity / resolution when
// `on_grid`, any non-negative value otherwise; values may be negative.
void random_instance(std::mt19937& rng, Table& cost, Table& value, double capacity,
                     nlb::Index resolution, bool on_grid) {
  std::uniform_int_distribution<int> layers(1, 5), options(1, 6),
      units(0, static_cast<int>(2 * resolution / 3));
  std::uniform_real_distribution<double> real(0.0, 0.7 * capacity), val(-0.2, 1.0);
  cost.assign(static_cast<std::size_t>(layers(rng)), {});
  value.assign(cost.size(), {});
  for (std::size_t l = 0; l < cost.size(); ++l) {
    cost[l] = {0.0};
    value[l] = {0.0};
    const int n = options(rng);
    for (int k = 1; k < n; ++k) {
      cost[l].push_back(on_grid ? units(rng) * capacity / static_cast<double>(resolution)
                                : real(rng));
      value[l].push_back(val(rng));
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(knapsack_equals_exhaustive_search_on_the_grid) {
  std::mt19937 rng(11);
  const nlb::Index resolution = 40;
  for (int trial = 0; trial < 300; ++trial) {
    Table cost, value;
    const double capacity = 2.5;
    random_instance(rng, cost, value, capacity, resolution, true);
    const auto k = nlb::allocate_knapsack(cost, value, capacity, resolution);
    const Best b = brute_force(cost, value, capacity);
    BOOST_TEST_CONTEXT("trial " << trial) {
      BOOST_TEST(total(cost, k) <= capacity * (1 + 1e-12));
      BOOST_TEST(std::fabs(total(value, k) - b.value) <= 1e-12);
    }
  }
}

BOOST_AUTO_TEST_CASE(knapsack_off_the_grid_stays_within_capacity_and_loses_at_most_a_unit) {
  // Rounding each cost up by less than one unit: the answer fits, and it is at least as good as
  // the best choice within capacity − layers · unit.
  std::mt19937 rng(12);
  const nlb::Index resolution = 100;
  for (int trial = 0; trial < 300; ++trial) {
    Table cost, value;
    const double capacity = 1.0;
    random_instance(rng, cost, value, capacity, resolution, false);
    const auto k = nlb::allocate_knapsack(cost, value, capacity, resolution);
    const double unit = capacity / static_cast<double>(resolution);
    const Best tighter =
        brute_force(cost, value, capacity - static_cast<double>(cost.size()) * unit);
    BOOST_TEST_CONTEXT("trial " << trial) {
      BOOST_TEST(total(cost, k) <= capacity);
      BOOST_TEST(total(value, k) >= tighter.value - 1e-12);
    }
  }
}

BOOST_AUTO_TEST_CASE(knapsack_edge_cases) {
  const Table cost{{0, 0.5, 1.0}, {0, 0.2}}, value{{0, 1.5, 2}, {0, 1}};
  BOOST_TEST((nlb::allocate_knapsack(cost, value, 0.0) == std::vector<nlb::Index>{0, 0}));
  BOOST_TEST((nlb::allocate_knapsack(cost, value, -1.0) == std::vector<nlb::Index>{0, 0}));
  // On the grid (unit 0.1) a total equal to the capacity fits.
  BOOST_TEST((nlb::allocate_knapsack(cost, value, 1.2, 12) == std::vector<nlb::Index>{2, 1}));
  BOOST_TEST((nlb::allocate_knapsack(cost, value, 0.7, 7) == std::vector<nlb::Index>{1, 1}));
  BOOST_TEST((nlb::allocate_knapsack(cost, value, 0.6, 6) == std::vector<nlb::Index>{1, 0}));
  // A negative cost counts as 0: the option is free, never a credit.
  BOOST_TEST((nlb::allocate_knapsack({{0, -5.0}, {0, 1.0}}, {{0, 1}, {0, 1}}, 0.5) ==
              std::vector<nlb::Index>{1, 0}));
  BOOST_CHECK_THROW(nlb::allocate_knapsack(cost, {{0, 1, 2}}, 1.0), nlb::ShapeError);
  BOOST_CHECK_THROW(nlb::allocate_knapsack(cost, {{0, 1, 2}, {0}}, 1.0), nlb::ShapeError);
  BOOST_CHECK_THROW(nlb::allocate_knapsack(cost, value, 1.0, 0), nlb::ArgumentError);
}

namespace {

// Three layers, fractions 0, 0.25, .., 1; costs convex in the fraction, the first layer dearest.
nlb::LayerCostCurves synthetic_curves() {
  nlb::LayerCostCurves c;
  const double scale[] = {8.0, 1.0, 0.5};
  for (double s : scale) {
    std::vector<double> d, f;
    for (int k = 0; k <= 4; ++k) {
      f.push_back(0.25 * k);
      d.push_back(s * (0.25 * k) * (0.25 * k));
    }
    c.delta_pct.push_back(d);
    c.linear_fraction.push_back(f);
  }
  return c;
}

// The joint cost: 1.5 × the per-layer sum + 0.1, with an interval of ± 0.2.
nlb::JointMeasurement synthetic_joint(const nlb::LayerCostCurves& c,
                                      const std::vector<nlb::Index>& k) {
  double sum = 0;
  nlb::JointMeasurement m;
  for (std::size_t l = 0; l < k.size(); ++l) {
    sum += c.delta_pct[l][static_cast<std::size_t>(k[l])];
    m.layer_linear_fraction.push_back(c.linear_fraction[l][static_cast<std::size_t>(k[l])]);
  }
  const double v = 1.5 * sum + 0.1;
  m.delta_pct = {v, v - 0.2, v + 0.2};
  return m;
}

}  // namespace

BOOST_AUTO_TEST_CASE(allocation_search_corrects_the_capacity_until_the_joint_bound_meets) {
  const auto curves = synthetic_curves();
  Table value(3);
  for (std::size_t l = 0; l < 3; ++l)
    for (double f : curves.linear_fraction[l])
      value[l].push_back(f);  // value = fraction: every layer saves alike
  const auto saving = [](std::size_t l, nlb::Index, const nlb::JointMeasurement& m) {
    return m.layer_linear_fraction[l];
  };
  int passes = 0;
  const auto measure = [&](const std::vector<nlb::Index>& k) {
    ++passes;
    return synthetic_joint(curves, k);
  };
  for (double budget : {0.4, 1.0, 2.0}) {
    passes = 0;
    const auto a = nlb::allocate_budget(curves, value, budget, measure, saving);
    BOOST_TEST_CONTEXT("budget " << budget) {
      BOOST_TEST(a.evaluations == passes);
      BOOST_TEST_REQUIRE(a.chosen >= 0);
      const auto& chosen = a.tries[static_cast<std::size_t>(a.chosen)];
      BOOST_TEST(chosen.meets);
      BOOST_TEST(chosen.calibration.delta_pct.high <= budget);
      // The first try spends the budget as if costs added: the joint cost breaks it.
      BOOST_TEST(!a.tries.front().meets);
      double best = 0;
      for (const auto& t : a.tries) {
        BOOST_TEST((t.steps == nlb::allocate_knapsack(curves.delta_pct, value, t.capacity_pct)));
        BOOST_TEST(t.meets == (synthetic_joint(curves, t.steps).delta_pct.high <= budget));
        if (t.meets)
          best = std::max(best, total(value, t.steps));
      }
      BOOST_TEST(total(value, chosen.steps) == best);
      // Against exhaustive search over every state the synthetic joint measurement accepts: the
      // search may stop short of the best state, but not by more than one grid step per layer.
      double optimum = 0;
      std::vector<nlb::Index> k(3, 0);
      for (k[0] = 0; k[0] <= 4; ++k[0])
        for (k[1] = 0; k[1] <= 4; ++k[1])
          for (k[2] = 0; k[2] <= 4; ++k[2])
            if (synthetic_joint(curves, k).delta_pct.high <= budget)
              optimum = std::max(optimum, total(value, k));
      BOOST_TEST_MESSAGE("budget " << budget << ": chosen value " << best << ", optimum " << optimum
                                   << ", " << a.tries.size() << " tries");
      BOOST_TEST(best >= optimum - 0.25 - 1e-12);
    }
  }
}

BOOST_AUTO_TEST_CASE(allocation_without_a_meeting_state_chooses_no_gates) {
  const auto curves = synthetic_curves();
  Table value(3);
  for (std::size_t l = 0; l < 3; ++l)
    for (double f : curves.linear_fraction[l])
      value[l].push_back(f);
  // Every gated state's interval reaches above 5%: only "no gates" meets a 1% budget.
  const auto measure = [](const std::vector<nlb::Index>& k) {
    nlb::JointMeasurement m;
    m.layer_linear_fraction.assign(k.size(), 0.25);
    m.delta_pct = {0.5, 0.0, 5.0};
    return m;
  };
  const auto a = nlb::allocate_budget(
      curves, value, 1.0, measure, [](std::size_t l, nlb::Index, const nlb::JointMeasurement& m) {
        return m.layer_linear_fraction[l];
      });
  for (const auto& t : a.tries) {
    const bool none = t.steps == std::vector<nlb::Index>(3, 0);
    BOOST_TEST(t.meets == none);
  }
  BOOST_TEST_REQUIRE(a.chosen >= 0);  // "no gates" is reached by shrinking the capacity
  const auto& chosen = a.tries[static_cast<std::size_t>(a.chosen)];
  BOOST_TEST((chosen.steps == std::vector<nlb::Index>(3, 0)));
  BOOST_TEST(!chosen.measured);
}

BOOST_AUTO_TEST_CASE(allocation_stops_when_every_layer_is_at_its_best_option) {
  const auto curves = synthetic_curves();
  Table value(3);
  for (std::size_t l = 0; l < 3; ++l)
    for (double f : curves.linear_fraction[l])
      value[l].push_back(f);
  int passes = 0;
  const auto a = nlb::allocate_budget(
      curves, value, 1000.0,
      [&](const std::vector<nlb::Index>& k) {
        ++passes;
        return synthetic_joint(curves, k);
      },
      [](std::size_t l, nlb::Index, const nlb::JointMeasurement& m) {
        return m.layer_linear_fraction[l];
      });
  BOOST_TEST(a.tries.size() == 1u);
  BOOST_TEST(passes == 1);
  BOOST_TEST((a.tries[0].steps == std::vector<nlb::Index>{4, 4, 4}));
  BOOST_TEST(a.chosen == 0);
}
