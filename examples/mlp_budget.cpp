// The default job until the budget report exists (README "Quick start").
//
// Builds a GPT-2-sized MLP (d = 768, h = 3072) with fixed random weights that is partly
// linear, fits a RidgeSurrogate (PAPERS.md §A1) and a HyperplaneGate (§A3) on 10,000
// tokens, then on 4,096 held-out tokens prints the fit R², the share routed linear, the
// output error of the gated MLP, and its measured speedup over the dense MLP.
//
// How the MLP is made partly linear: 60% of the hidden units have a bias of +4, so their
// GELU works in its identity regime for every token; the other 40% read only the first 64
// input features ("the nonlinear subspace") with bias 0. Half of the tokens ("quiet") have
// small values there, so those units stay near GELU's origin where it is close to linear;
// the other half ("loud") push them through the curved part. The gate has to find which
// is which from x alone — a linear direction here, as the loud tokens sit off-centre.
//
// --quick: a d = 128 MLP and 2,000 tokens, so CTest can run it in a Debug build.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "nlb/nlb.hpp"

namespace {

using nlb::Index;
using Matrix = nlb::Activations<float>;
using MlpT = nlb::Mlp<float, nlb::Dynamic, nlb::Dynamic, nlb::GeluTanh>;
using SurrogateT = nlb::RidgeSurrogate<float>;
using GateT = nlb::HyperplaneGate<float>;

constexpr Index nonlinear_features = 64;

struct Sizes {
  Index d, fit_tokens, eval_tokens, batch;
};

MlpT make_partly_linear_mlp(Index d, std::mt19937_64& rng) {
  const Index h = 4 * d;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  nlb::RowMatrix<float> w_fc = nlb::RowMatrix<float>::Zero(d, h);
  nlb::RowVector<float> b_fc(h);
  const Index linear_units = h * 6 / 10;
  const float fc_scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (Index j = 0; j < h; ++j) {
    const bool linear_unit = j < linear_units;
    const Index reads = linear_unit ? d : nonlinear_features;
    const float scale = linear_unit ? fc_scale : 1.0f / std::sqrt(float(nonlinear_features));
    for (Index i = 0; i < reads; ++i)
      w_fc(i, j) = scale * normal(rng);
    b_fc(j) = linear_unit ? 4.0f : 0.0f;
  }
  nlb::RowMatrix<float> w_proj(h, d);
  for (Index i = 0; i < w_proj.size(); ++i) {
    w_proj.data()[i] = normal(rng) / std::sqrt(static_cast<float>(h));
  }
  nlb::RowVector<float> b_proj = nlb::RowVector<float>::Zero(d);
  return MlpT(std::move(w_fc), std::move(b_fc), std::move(w_proj), std::move(b_proj));
}

// Tokens: N(0, 1) features; in the nonlinear subspace quiet tokens are N(0, 0.1²) and loud
// ones N(2.5, 1).
Matrix make_tokens(Index n, Index d, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::bernoulli_distribution loud(0.5);
  Matrix X(n, d);
  for (Index t = 0; t < n; ++t) {
    const bool is_loud = loud(rng);
    for (Index i = 0; i < d; ++i) {
      const float z = normal(rng);
      X(t, i) = i < nonlinear_features ? (is_loud ? 2.5f + z : 0.1f * z) : z;
    }
  }
  return X;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Median wall time of `repeats` runs of `work` (one warm-up run first).
template <class Work>
double median_seconds(int repeats, Work&& work) {
  work();
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    work();
    times.push_back(seconds_since(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const Sizes sizes = quick ? Sizes{128, 2000, 1024, 256} : Sizes{768, 10000, 4096, 512};
  std::mt19937_64 rng(2026);
  std::printf("nlbudget MLP-budget demo: d = %ld, h = %ld, %ld fit tokens, %ld held-out tokens\n",
              long(sizes.d), long(4 * sizes.d), long(sizes.fit_tokens), long(sizes.eval_tokens));

  // Every component runs as forward(ctx, X, Y, workspace): the context says how many threads an
  // operation may use (one here), the workspace holds the scratch memory, reused across calls.
  nlb::Context<nlb::backend::cpu> ctx;
  const MlpT mlp = make_partly_linear_mlp(sizes.d, rng);
  MlpT::Workspace dense_ws;
  SurrogateT::Workspace linear_ws;
  const Matrix X_fit = make_tokens(sizes.fit_tokens, sizes.d, rng);
  Matrix Y_fit(sizes.fit_tokens, sizes.d);
  mlp.forward(ctx, X_fit, Y_fit, dense_ws);

  // 1. Ridge surrogate from streamed statistics (PAPERS.md §A1, λ = 0.01).
  nlb::RidgeStats<> stats(sizes.d, sizes.d);
  for (Index start = 0; start < sizes.fit_tokens; start += sizes.batch) {
    const Index rows = std::min(sizes.batch, sizes.fit_tokens - start);
    stats.add(X_fit.middleRows(start, rows), Y_fit.middleRows(start, rows));
  }
  SurrogateT surrogate;
  surrogate.fit(stats, 0.01);
  std::printf("ridge surrogate fit R^2:            %.4f\n", surrogate.r2());

  // 2. Gate labels from δ (§A3). With no language-model loss here, δ is the squared output
  //    error the surrogate makes on each token.
  Matrix Y_lin_fit(sizes.fit_tokens, sizes.d);
  surrogate.forward(ctx, X_fit, Y_lin_fit, linear_ws);
  std::vector<double> delta(static_cast<std::size_t>(sizes.fit_tokens));
  for (Index t = 0; t < sizes.fit_tokens; ++t) {
    delta[static_cast<std::size_t>(t)] =
        (Y_lin_fit.row(t) - Y_fit.row(t)).template cast<double>().squaredNorm();
  }
  const nlb::GateLabels labels = nlb::make_gate_labels(delta);
  GateT gate;
  const nlb::GateFitReport report = gate.fit(X_fit, labels.labels);
  std::printf("hyperplane gate: %d Newton steps, training accuracy %.3f\n", report.iterations,
              report.training_accuracy);

  // 3. Held-out tokens: routing, output error, speed.
  const Matrix X_eval = make_tokens(sizes.eval_tokens, sizes.d, rng);
  const nlb::GatedMLP<MlpT, SurrogateT, GateT> gated(mlp, surrogate, gate);
  Matrix Y_dense(sizes.eval_tokens, sizes.d), Y_gated(sizes.eval_tokens, sizes.d);
  decltype(gated)::Workspace gated_ws;
  nlb::RouteCounts counts;
  auto run_dense = [&] {
    for (Index s = 0; s < sizes.eval_tokens; s += sizes.batch) {
      const Index rows = std::min(sizes.batch, sizes.eval_tokens - s);
      mlp.forward(ctx, X_eval.middleRows(s, rows), Y_dense.middleRows(s, rows), dense_ws);
    }
  };
  auto run_gated = [&] {
    counts = {};
    for (Index s = 0; s < sizes.eval_tokens; s += sizes.batch) {
      const Index rows = std::min(sizes.batch, sizes.eval_tokens - s);
      const auto c =
          gated.forward(ctx, X_eval.middleRows(s, rows), Y_gated.middleRows(s, rows), gated_ws);
      counts.linear += c.linear;
      counts.full += c.full;
    }
  };
  const int repeats = quick ? 3 : 7;
  const double dense_s = median_seconds(repeats, run_dense);
  const double gated_s = median_seconds(repeats, run_gated);

  Matrix Y_all_linear(sizes.eval_tokens, sizes.d);
  surrogate.forward(ctx, X_eval, Y_all_linear, linear_ws);
  const double norm = Y_dense.template cast<double>().norm();
  const double gated_error = (Y_gated - Y_dense).template cast<double>().norm() / norm;
  const double linear_error = (Y_all_linear - Y_dense).template cast<double>().norm() / norm;
  const double f = counts.linear_fraction();

  std::printf("fraction routed linear (held out):  %.3f\n", f);
  std::printf("output error, gated   ||Y-Y_mlp||/||Y_mlp||: %.4f\n", gated_error);
  std::printf("output error, all linear (for comparison):   %.4f\n", linear_error);
  std::printf("dense MLP %.2f ms, gated MLP %.2f ms per %ld tokens\n", 1e3 * dense_s, 1e3 * gated_s,
              long(sizes.eval_tokens));
  std::printf("measured speedup: %.2fx (FLOP-predicted %.2fx, PAPERS.md §A5)\n", dense_s / gated_s,
              nlb::flops::predicted_mlp_speedup(f));
  // Sanity of the demo itself: the gate must route some tokens each way and beat all-linear.
  if (!(f > 0.05 && f < 0.95 && gated_error < linear_error && surrogate.r2() > 0.0)) {
    std::fprintf(stderr, "demo failed its own sanity check\n");
    return 1;
  }
  return 0;
}
