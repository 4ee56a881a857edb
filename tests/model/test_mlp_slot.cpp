// MlpSlot: the run-time MLP kind of a loaded model's layer dispatches to the right component.
#include <boost/test/unit_test.hpp>
#include <limits>
#include <type_traits>

#include "nlb/model/mlp_slot.hpp"
#include "random_mlp.hpp"

namespace {
using Slot = nlb::MlpSlot<double>;
using nlb::test::normal_matrix;

Slot::MlpErf random_mlp() {
  return {normal_matrix<double>(6, 24, 0.3, 1), normal_matrix<double>(1, 24, 0.1, 2),
          normal_matrix<double>(24, 6, 0.3, 3), normal_matrix<double>(1, 6, 0.1, 4)};
}
Slot::Surrogate random_surrogate() {
  return {normal_matrix<double>(6, 6, 0.3, 5), normal_matrix<double>(1, 6, 0.1, 6)};
}
}  // namespace

BOOST_AUTO_TEST_CASE(slot_dispatches_and_counts_rows) {
  const auto X = normal_matrix<double>(10, 6, 1.0, 9);
  nlb::Activations<double> Y(10, 6);
  nlb::RouteCounts counts;
  nlb::Context<nlb::backend::cpu> ctx;
  Slot::Workspace ws;
  // The component's own output for X (a fresh output and workspace): what the slot must give.
  const auto alone = [&](const auto& component) {
    typename std::decay_t<decltype(component)>::Workspace own;
    nlb::Activations<double> out(X.rows(), X.cols());
    component.forward(ctx, X, out, own);
    return out;
  };

  const Slot full(random_mlp());
  BOOST_TEST(full.is_full());
  counts += full.forward(ctx, X, Y, ws);
  BOOST_TEST((Y.array() == alone(random_mlp()).array()).all());
  BOOST_TEST(counts.full == 10);

  const Slot linear(random_surrogate());
  BOOST_TEST(!linear.is_full());
  counts += linear.forward(ctx, X, Y, ws);
  BOOST_TEST((Y.array() == alone(random_surrogate()).array()).all());
  BOOST_TEST(counts.linear == 10);

  // A gate that sends every row linear: the gated slot equals the surrogate and counts them.
  const Slot gated(Slot::GatedErf(
      random_mlp(), random_surrogate(),
      Slot::Gate(nlb::ColVector<double>::Zero(6), 0.0, -std::numeric_limits<double>::infinity())));
  counts += gated.forward(ctx, X, Y, ws);
  BOOST_TEST((Y.array() == alone(random_surrogate()).array()).all());
  BOOST_TEST(counts.linear == 20);
  BOOST_TEST(gated.features() == 6);
}
