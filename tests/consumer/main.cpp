// Uses every public component through the installed package. Exits non-zero on a wrong result.
#include <cstdio>
#include <nlb/nlb.hpp>
#include <nlb/version.hpp>
#include <random>
#include <string_view>
#include <vector>

int main() {
  using nlb::Index;
  constexpr int d = 8;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  auto random = [&](Index rows, Index cols) {
    nlb::RowMatrix<float> m(rows, cols);
    for (Index i = 0; i < m.size(); ++i)
      m.data()[i] = normal(rng);
    return m;
  };

  // Kernels.
  std::vector<float> row{1.0f, 2.0f, 3.0f};
  nlb::kernels::softmax(nlb::backend::cpu{}, row.data(), 3, 3);
  nlb::kernels::layer_norm(nlb::backend::scalar{}, row.data(), row.data(), nullptr, nullptr,
                           Index{3}, 1e-5f);

  // A fixed-size MLP, its ridge surrogate and gate, composed into a GatedMLP.
  using MlpT = nlb::Mlp<float, d, 4 * d, nlb::GeluErf>;
  const MlpT mlp(random(d, 4 * d), random(1, 4 * d), random(4 * d, d), random(1, d));
  const nlb::Activations<float, d> X = random(256, d);
  const auto Y = mlp.forward(X);
  nlb::RidgeStats<d, d> stats;
  stats.add(X, Y);
  nlb::RidgeSurrogate<float, d, d> surrogate;
  surrogate.fit(stats, 0.01);

  std::vector<double> delta(256);
  const auto Y_lin = surrogate.apply(X);
  for (Index t = 0; t < 256; ++t)
    delta[t] = (Y_lin.row(t) - Y.row(t)).squaredNorm();
  const auto labels = nlb::make_gate_labels(delta);
  nlb::HyperplaneGate<float, d> gate;
  gate.fit(X, labels.labels);
  gate.calibrate_linear_fraction(X, 0.5);

  const nlb::GatedMLP<MlpT, nlb::RidgeSurrogate<float, d, d>, nlb::HyperplaneGate<float, d>> gated(
      mlp, surrogate, gate);
  nlb::Activations<float, d> out(256, d);
  const auto counts = gated.forward(X, out);

  const double saved = nlb::flops::mlp_saving_per_token(d, 4 * d, counts.linear_fraction());
  std::printf("consumer: R^2 %.3f, %ld of 256 rows linear, %.0f FLOPs/token saved\n",
              surrogate.r2(), static_cast<long>(counts.linear), saved);
  try {
    mlp.forward(random(2, d + 1));
    return 1;  // a shape error must have been raised
  } catch (const nlb::ShapeError&) {
  }
  // The installed nlb/version.hpp states the version of the package find_package found.
  if (nlb::version.string != std::string_view(NLB_PACKAGE_VERSION)) {
    std::printf("consumer: nlb/version.hpp says %s, the package %s\n", NLB_VERSION_STRING,
                NLB_PACKAGE_VERSION);
    return 1;
  }
  return (counts.linear == 128 && surrogate.r2() > 0.0) ? 0 : 1;
}
