// The model stack on backend::cuda against the host (DESIGN.md §4): the device model is the same
// BasicTransformer over device blocks, Transformer<float, backend::cuda> made by
// to_backend(backend::cuda{}, host_model), and the analysis runs its passes through
// ModelRunner<float, backend::cuda>. Checked here: every attention kind (dense with and without
// partial rotary, S–D with the diagonal and the scalar filter, ELU+1 linear, factored) against
// the host component, alone and through a KV cache over decode steps; the shipped tiny-gpt2,
// tiny-neox, tiny-sd and tiny-sd-variant against PyTorch's logits and the host model, with
// KV-cache decoding equal to the full forward; generate(); gated layers (a gated MlpSlot, and
// surrogate and gated overrides in run_layers) against the host's logits and route counts; the
// host waits a forward enqueues; the refusals (tokens out of range, too many positions, a full
// cache, linear attention with a cache); the variant runner's measure, collect, time_forward and
// time_decode against the host runner; and the budget pipeline through the device runner.
//
// Host waits (ctx.synchronizations()): a forward of the dense device model, or a decode step,
// queues its work and waits for nothing; reading logits back (ops::to_host) or the next-token
// losses (ops::next_token_losses) is one wait, so generate() waits once per token; a gated layer
// waits once per call (the count of its linear rows is read back: it sizes the products of the
// two row groups), so a pass waits once per gated layer.
//
// Route counts of two engines: a gate score that lies within float rounding of its threshold may
// fall on either side on another engine (cuBLAS sums in another order), so the device's counts
// may differ from the host's by at most the rows the host finds that close
// (near_threshold_rows). What the routing decides (losses, perplexities, Δ%, a calibration's
// choices) is compared within rounding, or exactly, where both engines routed alike. The device
// ops themselves: test_cuda_ops.cpp; the MLP family: test_cuda_mlp.cpp.
//
// Built twice (docs/cuda.md): with g++ and thrust's host device system, where it runs on any
// machine; and with nvcc, where it reports Skipped (exit 77) unless a usable GPU is present.
#include "nlb/cuda.cuh"  // first: the device ops before any component (nlb/cuda/ops.cuh)

#define BOOST_TEST_NO_MAIN
#include <algorithm>
#include <array>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "model_fixture.hpp"
#include "nlb/analysis/budget/pipeline.hpp"
#include "nlb/analysis/variant_runner.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/sampling.hpp"
#include "random_mlp.hpp"
#include "tolerances.hpp"

namespace {

using nlb::Index;
using nlb::test::normal_matrix;
using nlb::test::relative_to_max;
using Cuda = nlb::backend::cuda;
using DeviceContext = nlb::Context<Cuda>;
using HostContext = nlb::Context<nlb::backend::cpu>;
using HostModel = nlb::Transformer<float>;
using DeviceModel = nlb::Transformer<float, Cuda>;
using HostGate = nlb::HyperplaneGate<float>;
using HostSurrogate = nlb::RidgeSurrogate<float>;
using HostOverride = nlb::LayerOverride<float>;
using Tokens = std::vector<std::int32_t>;
namespace tol = nlb::test::tol;

// The repository root: NLB_SOURCE_DIR from the environment when set (scripts/gpu-check.sh runs
// the binary on another machine), else the one it was built from.
const std::filesystem::path source_dir =
    std::getenv("NLB_SOURCE_DIR") != nullptr ? std::getenv("NLB_SOURCE_DIR") : NLB_SOURCE_DIR;

HostModel load(const std::string& dir) {
  return nlb::load_model<float>(source_dir / dir);
}

// `n` token ids (t · step + offset) mod 200.
Tokens tokens_of(std::size_t n, std::size_t step, std::size_t offset) {
  Tokens t(n);
  for (std::size_t i = 0; i < n; ++i)
    t[i] = static_cast<std::int32_t>((i * step + offset) % 200);
  return t;
}

template <class T>
double attention_rel() {
  return std::is_same_v<T, float> ? tol::attention_float_rel : tol::attention_double_rel;
}

// ---- rows within rounding of a gate's threshold ---------------------------------------------

// Rows of X [N, d] whose score under `gate` lies within float rounding of its threshold: the
// score s = x·w' + b' (in double) with |s − threshold| <= model_f32_rel · (Σ_j |x_j w'_j| + |b'|).
// The two engines' activations agree to model_f32_rel of their magnitude (the bound every
// device-vs-host comparison of this suite accepts), so a score, a dot product of them, agrees to
// that share of the sum of its terms' magnitudes; a row farther from the threshold routes the
// same way on both. NaN scores and infinite thresholds are never near.
template <class M>
Index near_threshold_rows(const M& X, const HostGate& gate) {
  const auto& w = gate.folded_weight();
  const double bias = gate.folded_bias(), threshold = gate.threshold();
  Index near = 0;
  for (Index i = 0; i < X.rows(); ++i) {
    double score = bias, magnitude = std::abs(bias);
    for (Index j = 0; j < X.cols(); ++j) {
      const double term = static_cast<double>(X(i, j)) * static_cast<double>(w(j));
      score += term;
      magnitude += std::abs(term);
    }
    if (std::abs(score - threshold) <= tol::model_f32_rel * magnitude)
      ++near;
  }
  return near;
}

// Near-threshold rows of host passes, per window and layer.
struct NearRows {
  std::vector<std::vector<Index>> at;  // [windows][layers]
  Index total() const {
    Index n = 0;
    for (const auto& w : at)
      for (const Index c : w)
        n += c;
    return n;
  }
  Index layer(Index l) const {
    Index n = 0;
    for (const auto& w : at)
      n += w[static_cast<std::size_t>(l)];
    return n;
  }
  bool in_window(Index w) const {
    const auto& row = at[static_cast<std::size_t>(w)];
    return std::any_of(row.begin(), row.end(), [](Index c) { return c > 0; });
  }
};

// The gate of each layer of a host pass: a gated override's, else a gated MlpSlot's, else none.
std::vector<const HostGate*> gates_of(const HostModel& host,
                                      std::span<const HostOverride> overrides) {
  std::vector<const HostGate*> gates(static_cast<std::size_t>(host.layer_count()), nullptr);
  host.for_each_layer([&](const auto& block, Index l) {
    const auto i = static_cast<std::size_t>(l);
    if (!overrides.empty() && overrides[i].mlp.active()) {
      gates[i] = overrides[i].mlp.gate;
      return;
    }
    std::visit(
        [&](const auto& mlp) {
          if constexpr (requires { mlp.gate(); })
            gates[i] = &mlp.gate();
        },
        block.mlp().kind());
  });
  return gates;
}

// The rows, over the first `windows` windows of `context` tokens, that a gated layer of `host`
// run with `overrides` (empty: its own layers) scores within rounding of the threshold: the host
// pass, each gate applied to its layer's Tap::mlp_input (the rows it routes).
NearRows near_threshold_rows(const HostModel& host, std::span<const std::int32_t> tokens,
                             Index windows, Index context,
                             std::span<const HostOverride> overrides = {}) {
  const auto gates = gates_of(host, overrides);
  const Index layers = host.layer_count();
  NearRows near;
  near.at.assign(static_cast<std::size_t>(windows),
                 std::vector<Index>(static_cast<std::size_t>(layers), 0));
  if (std::none_of(gates.begin(), gates.end(), [](const HostGate* g) { return g != nullptr; }))
    return near;
  HostContext ctx;
  HostModel::Workspace ws;
  for (Index w = 0; w < windows; ++w) {
    auto& row = near.at[static_cast<std::size_t>(w)];
    const auto taps = [&](nlb::Tap tap, Index layer, const auto& m) {
      const auto* gate = gates[static_cast<std::size_t>(layer)];
      if (tap == nlb::Tap::mlp_input && gate != nullptr)
        row[static_cast<std::size_t>(layer)] += near_threshold_rows(m, *gate);
    };
    host.embed(
        ctx,
        tokens.subspan(static_cast<std::size_t>(w * context), static_cast<std::size_t>(context)),
        ws.x, ws);
    host.run_layers(ctx, ws.x, 0, layers, ws, overrides, nullptr, taps);
  }
  return near;
}

NearRows near_threshold_rows(const HostModel& host, std::span<const std::int32_t> tokens,
                             Index windows, Index context, const nlb::ModelVariant<float>& v) {
  const auto overrides = v.overrides(host.layer_count());
  return near_threshold_rows(host, tokens, windows, context, overrides);
}

// The rows two engines routed: the same rows in all, the linear ones differing by at most the
// `near` rows the host found within rounding of a threshold.
void check_counts(const nlb::RouteCounts& device, const nlb::RouteCounts& host, Index near) {
  BOOST_TEST(device.linear + device.full == host.linear + host.full);
  BOOST_TEST(std::abs(device.linear - host.linear) <= near);
}

// The share of `rows` rows that `what` routed linear on two engines: equal, or else differing by
// at most the host's near-threshold rows (near(), counted only then). True when equal.
template <class Near>
bool same_fraction(const std::string& what, double device, double host, double rows,
                   const Near& near) {
  if (device == host)
    return true;
  const Index n = near();
  BOOST_TEST_CONTEXT(what << ": linear share " << device << " on the device, " << host
                          << " on the host, " << n << " of " << rows << " rows near a threshold") {
    BOOST_TEST(std::abs(device - host) <= static_cast<double>(n) / rows);
  }
  return false;
}

// The helper on rows of known distance from the threshold: w' = (1, −2, 0.5, 4), b' = 0.25,
// threshold 0.75 (rows 0 and 2 score it exactly); the allowed distance is model_f32_rel times
// the row's Σ|x_j w'_j| + |b'|, and the last feature (weight 4) moves a row by a chosen share of
// it.
BOOST_AUTO_TEST_CASE(near_threshold_rows_are_those_within_rounding) {
  const HostGate gate(nlb::ColVector<float>((nlb::ColVector<float>(4) << 1, -2, 0.5, 4).finished()),
                      0.25f, 0.75f);
  const double small = tol::model_f32_rel * (0.5 + 0.25);            // row 0's allowed distance
  const double large = tol::model_f32_rel * (100.5 + 100.0 + 0.25);  // row 2's
  nlb::RowMatrix<float> X(7, 4);
  X.row(0) << 0.5f, 0, 0, 0;                                    // s = 0.75 exactly: near
  X.row(1) << 0.5f, 0, 0, static_cast<float>(0.5 * small / 4);  // 0.5 of the distance above: near
  X.row(2) << 100.5f, 50, 0, 0;                                 // 0.75 after cancellation: near
  X.row(3) << 100.5f, 50, 0, static_cast<float>(0.5 * large / 4);  // within the large distance
  X.row(4) << 0.5f, 0, 0, static_cast<float>(2 * small / 4);       // twice the distance: not
  X.row(5) << 3, 0, 0, 0;                                          // far above: not
  X.row(6) << std::numeric_limits<float>::quiet_NaN(), 0, 0, 0;    // NaN: not
  BOOST_TEST(near_threshold_rows(X, gate) == 4);
  HostGate never = gate;
  never.set_threshold(std::numeric_limits<float>::infinity());
  BOOST_TEST(near_threshold_rows(X, never) == 0);
  // Row 3's offset (1.25e-2 here) is far beyond row 0's allowed distance (7.5e-5): the bound
  // scales with the terms of each row's own score.
  BOOST_TEST(0.5 * large > 100 * small);
}

// ---- attention components against the host ones ---------------------------------------------

// The device copy of `host` against it on fresh inputs [T, d] for each T; a forward queues its
// work without one host wait.
template <class T, class Host>
void compare_forwards(const Host& host, Index d, std::initializer_list<Index> row_counts,
                      std::uint64_t seed, const std::string& what) {
  const auto device = nlb::to_backend(Cuda{}, host);
  DeviceContext ctx;
  HostContext host_ctx;
  typename Host::Workspace host_ws;
  typename std::remove_const_t<decltype(device)>::Workspace ws;
  for (const Index rows : row_counts) {
    BOOST_TEST_CONTEXT(what << ", T = " << rows) {
      const nlb::RowMatrix<T> X =
          normal_matrix<T>(rows, d, 1.0, seed + static_cast<std::uint64_t>(rows));
      nlb::RowMatrix<T> want(rows, d);
      host.forward(host_ctx, X, want, host_ws);
      const auto dX = nlb::cuda::upload(ctx, X);
      nlb::cuda::DeviceMatrix<T> dY(rows, d);
      const auto waits = ctx.synchronizations();
      device.forward(ctx, dX, dY, ws);
      BOOST_TEST(ctx.synchronizations() == waits);
      const double err = relative_to_max(nlb::cuda::download(ctx, dY), want);
      BOOST_TEST_MESSAGE(what << ", T = " << rows << ": " << err);
      BOOST_TEST(err <= attention_rel<T>());
    }
  }
}

// A prefill and decode steps (`steps` rows per call) through the device KV cache against the
// host component with its own cache; then a call that would overflow the cache is refused.
template <class T, class Host>
void compare_cached_steps(const Host& host, Index d, std::initializer_list<Index> steps,
                          std::uint64_t seed, const std::string& what) {
  const auto device = nlb::to_backend(Cuda{}, host);
  DeviceContext ctx;
  HostContext host_ctx;
  typename Host::Workspace host_ws;
  typename std::remove_const_t<decltype(device)>::Workspace ws;
  Index total = 0;
  for (const Index step : steps)
    total += step;
  nlb::KVCacheLayer<T> host_cache(total + 2, d);
  nlb::KVCacheLayerOf<T, Cuda> cache(total + 2, d);
  const nlb::RowMatrix<T> X = normal_matrix<T>(total, d, 1.0, seed);
  Index done = 0;
  for (const Index step : steps) {
    BOOST_TEST_CONTEXT(what << ", cached " << done << ", step of " << step) {
      nlb::RowMatrix<T> want(step, d);
      host.forward(host_ctx, X.middleRows(done, step), want, host_ws, &host_cache);
      const auto dX = nlb::cuda::upload(ctx, X.middleRows(done, step));
      nlb::cuda::DeviceMatrix<T> dY(step, d);
      device.forward(ctx, dX, dY, ws, &cache);
      done += step;
      BOOST_TEST(cache.length == done);
      BOOST_TEST(relative_to_max(nlb::cuda::download(ctx, dY), want) <= attention_rel<T>());
    }
  }
  const auto dX = nlb::cuda::upload(ctx, X);
  nlb::cuda::DeviceMatrix<T> dY(total, d);
  BOOST_CHECK_EXCEPTION(device.forward(ctx, dX, dY, ws, &cache), nlb::ArgumentError,
                        [](const nlb::ArgumentError& e) {
                          return std::string(e.what()).find("cache positions") != std::string::npos;
                        });
}

template <class T>
nlb::AttentionWeights<T> attention_weights(Index d, std::uint64_t seed) {
  nlb::AttentionWeights<T> w;
  w.w_qkv = normal_matrix<T>(d, 3 * d, 0.3, seed);
  w.b_qkv = normal_matrix<T>(1, 3 * d, 0.1, seed + 1).row(0);
  w.w_out = normal_matrix<T>(d, d, 0.3, seed + 2);
  w.b_out = normal_matrix<T>(1, d, 0.1, seed + 3).row(0);
  return w;
}

template <class T>
void check_dense_attention(Index rotary) {
  const Index d = 24, heads = 3;
  const nlb::DenseAttention<T> host(attention_weights<T>(d, 60), heads, rotary);
  const std::string what = "DenseAttention<cuda>, rotary " + std::to_string(rotary);
  compare_forwards<T>(host, d, {1, 5, 17, 130}, 70, what);      // 130: across the 128-query tile
  compare_cached_steps<T>(host, d, {6, 1, 1, 1, 1}, 90, what);  // a prefill and 4 decode steps
}

BOOST_AUTO_TEST_CASE(dense_attention_matches_host) {
  check_dense_attention<float>(0);
  check_dense_attention<double>(0);
  check_dense_attention<float>(4);  // partial rotary: 4 of 8 head dims
  check_dense_attention<double>(8);
}

// T = 130 crosses two chunk boundaries of the device's 64-row prefix sums; a cache is refused.
template <class T>
void check_linear_attention(Index rotary) {
  const Index d = 24, heads = 3;
  const nlb::LinearAttention<T> host(attention_weights<T>(d, 61), heads, rotary);
  compare_forwards<T>(host, d, {1, 5, 64, 130}, 80,
                      "LinearAttention<cuda>, rotary " + std::to_string(rotary));
  const auto device = nlb::to_backend(Cuda{}, host);
  DeviceContext ctx;
  typename std::remove_const_t<decltype(device)>::Workspace ws;
  nlb::KVCacheLayerOf<T, Cuda> cache(8, d);
  const auto dX = nlb::cuda::upload(ctx, normal_matrix<T>(2, d, 1.0, 79));
  nlb::cuda::DeviceMatrix<T> dY(2, d);
  BOOST_CHECK_EXCEPTION(device.forward(ctx, dX, dY, ws, &cache), nlb::ArgumentError,
                        [](const nlb::ArgumentError& e) {
                          return std::string(e.what()).find("KV cache") != std::string::npos;
                        });
}

BOOST_AUTO_TEST_CASE(linear_attention_matches_host) {
  check_linear_attention<float>(0);
  check_linear_attention<double>(0);
  check_linear_attention<float>(4);
  check_linear_attention<double>(8);
}

// Heads of different feature widths (3, 8, 5) with biases and a scale, then heads of one width
// (the batched path); a prefill and decode steps through the cache.
template <class T>
void check_factored_attention() {
  const Index d = 24;
  for (const bool same_widths : {false, true}) {
    std::vector<nlb::FactoredHead<T>> heads;
    std::uint64_t seed = 200;
    for (const Index w : {Index{3}, Index{8}, Index{5}}) {
      const Index width = same_widths ? 6 : w;
      heads.push_back({normal_matrix<T>(d, width, 0.4, seed),
                       normal_matrix<T>(1, width, 0.2, seed + 1).row(0),
                       normal_matrix<T>(d, width, 0.4, seed + 2),
                       normal_matrix<T>(1, width, 0.2, seed + 3).row(0)});
      seed += 4;
    }
    const nlb::FactoredAttention<T> host(
        heads, normal_matrix<T>(d, d, 0.3, 220), normal_matrix<T>(1, d, 0.1, 221).row(0),
        normal_matrix<T>(d, d, 0.3, 222), normal_matrix<T>(1, d, 0.1, 223).row(0), T(0.6));
    const std::string what =
        std::string("FactoredAttention<cuda>, ") + (same_widths ? "equal" : "unequal") + " widths";
    compare_forwards<T>(host, d, {1, 5, 17}, 230, what);
    compare_cached_steps<T>(host, d, {5, 1, 1, 2}, 250, what);
  }
}

BOOST_AUTO_TEST_CASE(factored_attention_matches_host) {
  check_factored_attention<float>();
  check_factored_attention<double>();
}

// S–D attention (PAPERS.md §B2) with per-head skew routing of rank 4 and a filter per head.
template <class T, class Filter, class MakeFilter>
void check_sd_attention(const MakeFilter& make_filter, const std::string& what) {
  const Index d = 24, heads = 3, rank = 4;
  std::vector<nlb::SkewSymmetricRouting<T>> routing;
  std::vector<Filter> filters;
  for (Index h = 0; h < heads; ++h) {
    const auto s = 300 + 10 * static_cast<std::uint64_t>(h);
    routing.emplace_back(normal_matrix<T>(d, rank / 2, 0.4, s),
                         normal_matrix<T>(d, rank / 2, 0.4, s + 1));
    filters.push_back(make_filter(d, s + 2));
  }
  const nlb::SDAttention<nlb::SkewSymmetricRouting<T>, Filter> host(
      std::move(routing), std::move(filters), normal_matrix<T>(d, d, 0.3, 340),
      normal_matrix<T>(1, d, 0.1, 341).row(0), normal_matrix<T>(d, d, 0.3, 342),
      normal_matrix<T>(1, d, 0.1, 343).row(0));
  compare_forwards<T>(host, d, {1, 5, 17}, 350, what);
  compare_cached_steps<T>(host, d, {4, 1, 1, 3}, 360, what);
}

template <class T>
void check_sd_attention_filters() {
  check_sd_attention<T, nlb::DiagonalFilter<T>>(
      [](Index d, std::uint64_t seed) {
        return nlb::DiagonalFilter<T>(nlb::RowVector<T>(normal_matrix<T>(1, d, 1.0, seed).row(0)));
      },
      "SDAttention<cuda>, diagonal filter");
  check_sd_attention<T, nlb::ScalarFilter<T>>(
      [](Index, std::uint64_t seed) { return nlb::ScalarFilter<T>(T(0.1) * T(seed % 7)); },
      "SDAttention<cuda>, scalar filter");
}

BOOST_AUTO_TEST_CASE(sd_attention_matches_host) {
  check_sd_attention_filters<float>();
  check_sd_attention_filters<double>();
}

// ---- the whole model ------------------------------------------------------------------------

// Logits of the fixture's first window on the device against PyTorch's (float64) logits and the
// host model's, and its next-token losses against the host's; then the same tokens decoded with
// the device KV cache (a prefill of 5, then one token per step) against the full forward. The
// forward and every decode step wait for nothing; reading the logits or the losses back is one
// wait each.
void check_model(const std::string& dir, const std::string& fixture_file) {
  DeviceContext ctx;
  const auto host = load(dir);
  const auto device = nlb::to_backend(Cuda{}, host);
  static_assert(std::is_same_v<std::remove_const_t<decltype(device)>, DeviceModel>);
  BOOST_TEST(device.layer_count() == host.layer_count());
  const auto fixture = nlb::io::SafetensorsFile::open(source_dir / fixture_file);
  const auto tokens = nlb::test::window_tokens(fixture, 0);
  const Eigen::MatrixXd torch = nlb::test::window_of(fixture, "logits_f64", 0);

  DeviceModel::Workspace ws;
  DeviceModel::Logits logits;
  HostContext host_ctx;
  HostModel::Workspace host_ws;
  nlb::RowMatrix<float> host_logits;
  auto waits = ctx.synchronizations();
  device.forward(ctx, tokens, logits, ws);
  BOOST_TEST(ctx.synchronizations() == waits);  // queued, not waited for
  host.forward(host_ctx, tokens, host_logits, host_ws);
  const nlb::RowMatrix<float> got = nlb::ops::to_host(ctx, logits);
  BOOST_TEST(ctx.synchronizations() == waits + 1);
  const double vs_torch = relative_to_max(got, torch);
  const double vs_host = relative_to_max(got, host_logits);
  BOOST_TEST_MESSAGE(dir << " on backend::cuda: logits vs PyTorch " << vs_torch << ", vs host "
                         << vs_host);
  BOOST_TEST(vs_torch <= tol::model_f32_rel);
  BOOST_TEST(vs_host <= tol::model_f32_rel);

  std::vector<double> losses;
  waits = ctx.synchronizations();
  nlb::ops::next_token_losses(ctx, logits, tokens, losses, ws.head);
  BOOST_TEST(ctx.synchronizations() == waits + 1);
  const auto host_losses = nlb::next_token_losses(host_logits, tokens);
  BOOST_REQUIRE_EQUAL(losses.size(), host_losses.size());
  double worst_loss = 0;
  for (std::size_t t = 0; t < losses.size(); ++t)
    worst_loss = std::max(worst_loss, std::abs(losses[t] - host_losses[t]));
  BOOST_TEST(worst_loss <= tol::engine_loss_f32_abs);

  auto cache = device.make_cache();
  const Index rows = static_cast<Index>(tokens.size());
  const std::span<const std::int32_t> all(tokens);
  DeviceModel::Logits step_logits;
  waits = ctx.synchronizations();
  device.forward(ctx, all.first(5), step_logits, ws, {}, &cache);
  double worst = relative_to_max(nlb::cuda::download(ctx, step_logits), got.topRows(5));
  const float* step_storage = nullptr;
  bool reallocated = false;  // one-token steps reuse the logits' device storage
  std::int64_t step_waits = 0;
  for (Index t = 5; t < rows; ++t) {
    const auto before = ctx.synchronizations();
    device.forward(ctx, all.subspan(static_cast<std::size_t>(t), 1), step_logits, ws, {}, &cache);
    step_waits += ctx.synchronizations() - before;
    worst = std::max(worst,
                     relative_to_max(nlb::cuda::download(ctx, step_logits), got.middleRows(t, 1)));
    reallocated = reallocated || (step_storage != nullptr && step_logits.data() != step_storage);
    step_storage = step_logits.data();
  }
  BOOST_TEST(step_waits == 0);  // a decode step queues its work; only the read-backs waited
  BOOST_TEST(ctx.synchronizations() == waits + (rows - 5) + 1);
  BOOST_TEST(!reallocated);
  BOOST_TEST(cache.length() == rows);
  BOOST_TEST_MESSAGE(dir << " decoding with the device cache vs the full forward: " << worst);
  BOOST_TEST(worst <= tol::model_f32_rel);
}

BOOST_AUTO_TEST_CASE(tiny_gpt2_matches_pytorch_and_host) {
  check_model("models/tiny-gpt2", "tests/fixtures/tiny-gpt2-reference.safetensors");
}
BOOST_AUTO_TEST_CASE(tiny_neox_matches_pytorch_and_host) {
  // partial rotary, parallel residual, untied unembedding
  check_model("models/tiny-neox", "tests/fixtures/tiny-neox-reference.safetensors");
}
BOOST_AUTO_TEST_CASE(tiny_sd_matches_pytorch_and_host) {
  // S–D attention (diagonal filter, rank 16), no ln_1
  check_model("models/tiny-sd", "tests/fixtures/tiny-sd-reference.safetensors");
}
BOOST_AUTO_TEST_CASE(tiny_sd_variant_matches_pytorch_and_host) {
  // S–D attention with the scalar filter, ranks 16 and 8, ln_1
  check_model("tests/fixtures/tiny-sd-variant",
              "tests/fixtures/tiny-sd-variant-logits.safetensors");
}

// generate() on the device: one wait per token (its logits row read back for the sampler), and
// greedy decoding gives the host's tokens as long as the host's top two logits of a step lie
// farther apart than the two engines' logits can differ.
BOOST_AUTO_TEST_CASE(generate_waits_once_per_token_and_matches_host) {
  DeviceContext ctx;
  HostContext host_ctx;
  const auto host = load("models/tiny-gpt2");
  const auto device = nlb::to_backend(Cuda{}, host);
  const Tokens prompt = tokens_of(8, 13, 1);
  const Index count = 20;
  nlb::TokenSampler greedy({0, 0.0, 0}), host_greedy({0, 0.0, 0});
  const auto waits = ctx.synchronizations();
  const Tokens got = nlb::generate(ctx, device, prompt, count, greedy);
  BOOST_TEST(static_cast<Index>(got.size()) == count);
  BOOST_TEST(ctx.synchronizations() - waits == count);
  const Tokens want = nlb::generate(host_ctx, host, prompt, count, host_greedy);
  BOOST_REQUIRE_EQUAL(want.size(), got.size());

  // The host's margins: the logits that chose each token, by one forward over the sequence.
  Tokens sequence = prompt;
  sequence.insert(sequence.end(), want.begin(), want.end() - 1);
  HostModel::Workspace ws;
  nlb::RowMatrix<float> logits;
  host.forward(host_ctx, sequence, logits, ws);
  const double close = 2 * tol::model_f32_rel * logits.cwiseAbs().maxCoeff();
  std::size_t compared = 0;
  for (; compared < want.size(); ++compared) {
    auto row = logits.row(static_cast<Index>(prompt.size() + compared) - 1).eval();
    std::sort(row.data(), row.data() + row.size(), std::greater<float>());
    if (row(0) - row(1) <= close)
      break;  // a near tie: the engines may choose differently from here on
    BOOST_TEST(got[compared] == want[compared]);
  }
  BOOST_TEST_MESSAGE("generate on backend::cuda: " << compared << " of " << want.size()
                                                   << " greedy tokens compared with the host's");
}

// tiny-gpt2 with layers 1 and 3 made gated MLPs (random surrogates, gates with thresholds 0 and
// 0.5): the device model routes the rows the host routes, within the near-threshold rows, and
// gives its logits; the routing waits once per gated layer per call (the count of linear rows
// is read back: it sizes the two row groups' products).
BOOST_AUTO_TEST_CASE(gated_layers_route_as_on_host) {
  DeviceContext ctx;
  HostContext host_ctx;
  auto host = load("models/tiny-gpt2");
  using Slot = nlb::MlpSlot<float>;
  const Index d = host.config().d_model;
  const std::array<Index, 2> gated_layers = {1, 3};
  for (const Index l : gated_layers) {
    auto& block = host.layers()[static_cast<std::size_t>(l)];
    const auto s = static_cast<std::uint64_t>(100 + 10 * l);
    Slot::Surrogate surrogate(normal_matrix<float>(d, d, 0.05, s),
                              normal_matrix<float>(1, d, 0.05, s + 1).row(0));
    Slot::Gate gate(nlb::ColVector<float>(normal_matrix<float>(d, 1, 1.0, s + 2).col(0)), 0.0f,
                    l == 1 ? 0.0f : 0.5f);
    block.mlp() = nlb::gated_slot(block.mlp(), surrogate, gate);
  }
  const auto device = nlb::to_backend(Cuda{}, host);
  const Tokens tokens = tokens_of(40, 7, 3);
  DeviceModel::Workspace ws;
  DeviceModel::Logits logits;
  HostModel::Workspace host_ws;
  nlb::RowMatrix<float> host_logits;
  nlb::RouteCounts counts, host_counts;
  const auto waits = ctx.synchronizations();
  device.forward(ctx, tokens, logits, ws, {}, nullptr, &counts);
  BOOST_TEST(ctx.synchronizations() - waits == 2);  // one per gated layer
  host.forward(host_ctx, tokens, host_logits, host_ws, {}, nullptr, &host_counts);
  const NearRows near = near_threshold_rows(host, tokens, 1, 40);
  BOOST_TEST_MESSAGE("gated layers: " << counts.linear << " linear, " << counts.full << " full ("
                                      << near.total() << " near the threshold)");
  check_counts(counts, host_counts, near.total());
  BOOST_TEST(counts.linear > 0);
  BOOST_TEST(counts.full > 2 * 40);  // layers 0 and 2 run their full MLP on every row
  if (near.total() == 0)  // a row routed the other way changes the logits beyond rounding
    BOOST_TEST(relative_to_max(nlb::ops::to_host(ctx, logits), host_logits) <= tol::model_f32_rel);

  // Decoding: still one wait per gated layer and token.
  auto cache = device.make_cache();
  device.forward(ctx, std::span<const std::int32_t>(tokens).first(4), logits, ws, {}, &cache);
  const auto before = ctx.synchronizations();
  for (std::size_t t = 4; t < 10; ++t)
    device.forward(ctx, std::span<const std::int32_t>(tokens).subspan(t, 1), logits, ws, {},
                   &cache);
  BOOST_TEST(ctx.synchronizations() - before == 2 * 6);
}

// Overrides in run_layers on tiny-gpt2: layer 0 a surrogate on every row, layer 2 gated to its
// own MLP, layer 3's attention factored (the device overrides the host parts copied with
// to_backend): the host's logits and route counts, and one wait per call (the gated layer's).
BOOST_AUTO_TEST_CASE(overrides_in_run_layers_match_host) {
  DeviceContext ctx;
  HostContext host_ctx;
  const auto host = load("models/tiny-gpt2");
  const auto device = nlb::to_backend(Cuda{}, host);
  const Index d = host.config().d_model, layers = host.layer_count();
  const HostSurrogate linear(normal_matrix<float>(d, d, 0.05, 500),
                             normal_matrix<float>(1, d, 0.05, 501).row(0));
  const HostSurrogate surrogate(normal_matrix<float>(d, d, 0.05, 502),
                                normal_matrix<float>(1, d, 0.05, 503).row(0));
  const HostGate gate(nlb::ColVector<float>(normal_matrix<float>(d, 1, 1.0, 504).col(0)), 0.1f,
                      0.0f);
  const nlb::AttentionSlot<float> factored(nlb::FactoredAttention<float>::from_dense(
      host.layers()[3].attention().get<nlb::AttentionSlot<float>::Dense>()));
  std::vector<HostOverride> host_overrides(static_cast<std::size_t>(layers));
  host_overrides[0].mlp = nlb::MlpOverride<float>::linear(linear);
  host_overrides[2].mlp = nlb::MlpOverride<float>::gated(surrogate, gate);
  host_overrides[3].attention = &factored;

  const auto device_linear = nlb::to_backend(Cuda{}, linear);
  const auto device_surrogate = nlb::to_backend(Cuda{}, surrogate);
  const auto device_gate = nlb::to_backend(Cuda{}, gate);
  const auto device_factored = nlb::to_backend(Cuda{}, factored);
  std::vector<nlb::LayerOverride<float, Cuda>> overrides(static_cast<std::size_t>(layers));
  overrides[0].mlp = nlb::MlpOverride<float, Cuda>::linear(device_linear);
  overrides[2].mlp = nlb::MlpOverride<float, Cuda>::gated(device_surrogate, device_gate);
  overrides[3].attention = &device_factored;

  const Tokens tokens = tokens_of(48, 5, 2);
  DeviceModel::Workspace ws;
  DeviceModel::Logits logits;
  std::vector<nlb::RouteCounts> counts(static_cast<std::size_t>(layers));
  const auto waits = ctx.synchronizations();
  device.embed(ctx, tokens, ws.x, ws);
  device.run_layers(ctx, ws.x, 0, layers, ws, overrides, nullptr, nlb::NoTaps{}, counts);
  device.head(ctx, ws.x, logits, ws);
  BOOST_TEST(ctx.synchronizations() - waits == 1);  // the gated layer's routing

  HostModel::Workspace host_ws;
  nlb::RowMatrix<float> host_logits;
  std::vector<nlb::RouteCounts> host_counts(static_cast<std::size_t>(layers));
  host.embed(host_ctx, tokens, host_ws.x, host_ws);
  host.run_layers(host_ctx, host_ws.x, 0, layers, host_ws, host_overrides, nullptr, nlb::NoTaps{},
                  host_counts);
  host.head(host_ctx, host_ws.x, host_logits, host_ws);

  const NearRows near = near_threshold_rows(host, tokens, 1, 48, host_overrides);
  for (Index l = 0; l < layers; ++l) {
    BOOST_TEST_CONTEXT("layer " << l) {
      check_counts(counts[static_cast<std::size_t>(l)], host_counts[static_cast<std::size_t>(l)],
                   near.layer(l));
    }
  }
  BOOST_TEST(counts[0].linear == 48);
  BOOST_TEST(counts[2].linear > 0);
  BOOST_TEST(counts[2].full > 0);
  const double err = relative_to_max(nlb::ops::to_host(ctx, logits), host_logits);
  BOOST_TEST_MESSAGE("overrides on backend::cuda vs host: " << err << " (" << near.total()
                                                            << " rows near the threshold)");
  if (near.total() == 0)
    BOOST_TEST(err <= tol::model_f32_rel);

  // A gated override on a layer without a full MLP of its own is refused, before any routing.
  auto linear_model = host;
  linear_model.layers()[2].mlp() = nlb::linear_slot(surrogate);
  const auto device_linear_model = nlb::to_backend(Cuda{}, linear_model);
  device_linear_model.embed(ctx, tokens, ws.x, ws);
  const auto before = ctx.synchronizations();
  BOOST_CHECK_THROW(device_linear_model.run_layers(ctx, ws.x, 0, layers, ws, overrides, nullptr,
                                                   nlb::NoTaps{}, {}),
                    nlb::ArgumentError);
  BOOST_TEST(ctx.synchronizations() == before);
}

BOOST_AUTO_TEST_CASE(refusals_name_what_is_wrong) {
  DeviceContext ctx;
  const auto host = load("models/tiny-gpt2");
  const auto device = nlb::to_backend(Cuda{}, host);
  DeviceModel::Workspace ws;
  DeviceModel::Logits logits;
  const Tokens bad = {1, static_cast<std::int32_t>(host.config().vocab_size)};
  BOOST_CHECK_EXCEPTION(device.forward(ctx, bad, logits, ws), nlb::ArgumentError,
                        [](const nlb::ArgumentError& e) {
                          return std::string(e.what()).find("token 1") != std::string::npos;
                        });
  const Tokens negative = {-1};
  BOOST_CHECK_THROW(device.forward(ctx, negative, logits, ws), nlb::ArgumentError);
  BOOST_CHECK_THROW(device.forward(ctx, Tokens{}, logits, ws), nlb::ArgumentError);
  const Index positions = host.config().n_positions;
  const Tokens too_long(static_cast<std::size_t>(positions) + 1, 1);
  BOOST_CHECK_EXCEPTION(device.forward(ctx, too_long, logits, ws), nlb::ArgumentError,
                        [](const nlb::ArgumentError& e) {
                          return std::string(e.what()).find("positions") != std::string::npos;
                        });
  // A full cache: positions past n_positions are refused, and the cache is left as it was.
  auto cache = device.make_cache();
  const Tokens fill(static_cast<std::size_t>(positions), 2);
  device.forward(ctx, fill, logits, ws, {}, &cache);
  BOOST_TEST(cache.length() == positions);
  BOOST_CHECK_EXCEPTION(device.forward(ctx, Tokens{3}, logits, ws, {}, &cache), nlb::ArgumentError,
                        [](const nlb::ArgumentError& e) {
                          return std::string(e.what()).find("positions") != std::string::npos;
                        });
  BOOST_TEST(cache.length() == positions);
  // A cache of another model's layer count.
  DeviceModel::Cache other(host.layer_count() + 1, positions, host.config().d_model);
  BOOST_CHECK_THROW(device.forward(ctx, Tokens{3}, logits, ws, {}, &other), nlb::ShapeError);
}

// tiny-gpt2 with layer 0's heads as factored attention (the same scores) and layer 1's attention
// made ELU+1 linear: the device model gives the host model's logits; decoding with a cache is
// refused, as on the host, naming the KV cache.
BOOST_AUTO_TEST_CASE(linear_and_factored_layers_match_host) {
  DeviceContext ctx;
  HostContext host_ctx;
  auto host = load("models/tiny-gpt2");
  using Slot = nlb::AttentionSlot<float>;
  for (const Index layer : {Index{0}, Index{1}}) {
    const auto& block = host.layers()[static_cast<std::size_t>(layer)];
    const auto& dense = block.attention().get<Slot::Dense>();
    Slot attention = layer == 0 ? Slot(nlb::FactoredAttention<float>::from_dense(dense))
                                : Slot(nlb::LinearAttention<float>(dense.weights(), dense.heads()));
    host.layers()[static_cast<std::size_t>(layer)] =
        nlb::DynamicBlock<float>(block.ln1(), std::move(attention), block.ln2(), block.mlp(),
                                 block.parallel_residual(), block.layer_norm_eps());
  }
  const auto device = nlb::to_backend(Cuda{}, host);
  BOOST_TEST(std::string(device.layers()[0].attention().kind_name()) == "factored");
  BOOST_TEST(std::string(device.layers()[1].attention().kind_name()) == "linear");
  const Tokens tokens = tokens_of(70, 11, 5);  // two chunks of the linear layer's prefix sums
  DeviceModel::Workspace ws;
  DeviceModel::Logits logits;
  HostModel::Workspace host_ws;
  nlb::RowMatrix<float> host_logits;
  device.forward(ctx, tokens, logits, ws);
  host.forward(host_ctx, tokens, host_logits, host_ws);
  const double err = relative_to_max(nlb::ops::to_host(ctx, logits), host_logits);
  BOOST_TEST_MESSAGE("factored + linear layers on backend::cuda vs host: " << err);
  BOOST_TEST(err <= tol::model_f32_rel);
  auto cache = device.make_cache();
  BOOST_CHECK_EXCEPTION(device.forward(ctx, tokens, logits, ws, {}, &cache), nlb::ArgumentError,
                        [](const nlb::ArgumentError& e) {
                          return std::string(e.what()).find("KV cache") != std::string::npos;
                        });
}

// ---- the variant runner on the device (ModelRunner<float, backend::cuda>) -------------------

// Random surrogates for every layer of `host` and a gate for a layer (weights N(0, 1), so
// threshold 0 routes about half the rows each way).
struct RandomParts {
  std::vector<HostSurrogate> surrogates;
  explicit RandomParts(const HostModel& host) {
    const Index d = host.config().d_model;
    for (Index l = 0; l < host.layer_count(); ++l)
      surrogates.emplace_back(
          normal_matrix<float>(d, d, 0.05, 200 + static_cast<std::uint64_t>(l)),
          normal_matrix<float>(1, d, 0.05, 300 + static_cast<std::uint64_t>(l)).row(0));
  }
  HostGate gate(Index layer, float threshold) const {
    const Index d = surrogates[0].features();
    return HostGate(
        nlb::ColVector<float>(
            normal_matrix<float>(d, 1, 1.0, 400 + static_cast<std::uint64_t>(layer)).col(0)),
        0.0f, threshold);
  }
};

// One measurement by two runners: per variant, the route counts within the near-threshold rows
// (near[v], the host's rows of that variant) and the losses within the engines' rounding,
// except in windows with such a row (a row routed the other way changes its window's later
// losses beyond rounding).
void check_same_measurement(const nlb::VariantLosses& device, const nlb::VariantLosses& host,
                            const std::vector<NearRows>& near) {
  const Index per_window = host.context - 1;
  auto worst = [&](const std::vector<double>& a, const std::vector<double>& b,
                   const NearRows* skip) {
    BOOST_REQUIRE_EQUAL(a.size(), b.size());
    double w = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (skip == nullptr || !skip->in_window(static_cast<Index>(i) / per_window))
        w = std::max(w, std::abs(a[i] - b[i]));
    return w;
  };
  BOOST_TEST(worst(device.base, host.base, nullptr) <= tol::engine_loss_f32_abs);
  BOOST_REQUIRE_EQUAL(device.variant.size(), host.variant.size());
  BOOST_REQUIRE_EQUAL(near.size(), host.variant.size());
  double losses = 0;
  for (std::size_t v = 0; v < host.variant.size(); ++v) {
    losses = std::max(losses, worst(device.variant[v], host.variant[v], &near[v]));
    BOOST_REQUIRE_EQUAL(device.counts[v].size(), host.counts[v].size());
    for (std::size_t l = 0; l < host.counts[v].size(); ++l) {
      BOOST_TEST_CONTEXT("variant " << v << ", layer " << l) {
        check_counts(device.counts[v][l], host.counts[v][l], near[v].layer(static_cast<Index>(l)));
      }
    }
  }
  BOOST_TEST_MESSAGE("device runner vs host runner: losses within " << losses);
  BOOST_TEST(losses <= tol::engine_loss_f32_abs);
}

// Every layer linear alone, one layer gated, and a joint variant (two gated layers and a linear
// one) on three windows of tiny-gpt2: the device runner gives the host runner's losses and route
// counts, with the unmodified model (variants from its kept stream) and without (from the
// runner's kept prefix, then again from it); collect() fires the host's taps; the timings route
// as the host's; the refusals are the host's.
BOOST_AUTO_TEST_CASE(device_runner_measures_as_host_runner) {
  DeviceContext ctx;
  HostContext host_ctx;
  const auto host = load("models/tiny-gpt2");
  const RandomParts parts(host);
  auto variants = nlb::one_layer_linear_variants(parts.surrogates);
  nlb::ModelVariant<float> gated, joint;
  gated.add_gated(1, parts.surrogates[1], parts.gate(1, 0.0f));
  joint.add_gated(3, parts.surrogates[3], parts.gate(3, 0.5f));
  joint.add_linear(2, parts.surrogates[2]);
  joint.add_gated(1, parts.surrogates[1], parts.gate(1, -0.5f));
  variants.push_back(gated);
  variants.push_back(joint);
  const Tokens tokens = tokens_of(3 * 33 + 5, 7, 3);

  nlb::ModelRunner<float, Cuda> device(ctx, host);
  nlb::ModelRunner<float> on_host(host_ctx, host);
  BOOST_TEST(device.name() == "cuda");
  BOOST_TEST(on_host.name() == "cpu");
  BOOST_TEST(&device.model() == &host);
  BOOST_TEST(device.backend_model().layer_count() == host.layer_count());
  BOOST_TEST(&device.context() == &ctx);

  std::vector<NearRows> near;
  for (const auto& v : variants)
    near.push_back(near_threshold_rows(host, tokens, 3, 33, v));
  for (const bool with_base : {true, false, false}) {
    BOOST_TEST_CONTEXT("with_base " << with_base) {
      Index progress_calls = 0;
      const auto got = device.measure(tokens, 3, 33, variants, with_base,
                                      [&](Index, Index) { ++progress_calls; });
      const auto want = on_host.measure(tokens, 3, 33, variants, with_base);
      BOOST_TEST(progress_calls == 3);
      BOOST_TEST(got.base.size() == (with_base ? std::size_t{3 * 32} : std::size_t{0}));
      check_same_measurement(got, want, near);
    }
  }
  // The gated variant really routed both ways.
  const auto r = device.measure(tokens, 3, 33, {gated}, false);
  BOOST_TEST(r.counts[0][1].linear > 0);
  BOOST_TEST(r.counts[0][1].full > 0);

  // perplexity() through the runner: the eval protocol's number on either.
  const auto ppl = nlb::perplexity(device, tokens, 33);
  const auto host_ppl = nlb::perplexity(on_host, tokens, 33);
  BOOST_TEST(std::abs(ppl.ppl - host_ppl.ppl) / host_ppl.ppl <= tol::engine_loss_f32_abs);

  // collect(): the host taps on the device's activations (read back one by one).
  std::vector<nlb::RowMatrix<float>> taps, host_taps;
  const auto keep = [](std::vector<nlb::RowMatrix<float>>& into) {
    return [&into](nlb::Tap tap, Index, const nlb::RowMatrix<float>& m) {
      if (tap == nlb::Tap::mlp_input)
        into.push_back(m);
    };
  };
  device.collect(tokens, 2, 33, keep(taps));
  on_host.collect(tokens, 2, 33, keep(host_taps));
  BOOST_REQUIRE_EQUAL(taps.size(), host_taps.size());
  BOOST_TEST(taps.size() == std::size_t{2} * 4);
  double worst_tap = 0;
  for (std::size_t i = 0; i < taps.size(); ++i)
    worst_tap = std::max(worst_tap, relative_to_max(taps[i], host_taps[i]));
  BOOST_TEST(worst_tap <= tol::model_f32_rel);

  // The timings run the same routing as the host's (their route counts; no timing asserted):
  // every layer's rows of the timed passes, so the near rows over layers · rows.
  const auto rows_of = [&](Index windows, Index context) {
    return static_cast<double>(windows * context * host.layer_count());
  };
  const auto forward = device.time_forward(tokens, 2, 33, joint, 1);
  const auto host_forward = on_host.time_forward(tokens, 2, 33, joint, 1);
  BOOST_TEST(forward.dense_ms > 0);
  same_fraction("time_forward", forward.gated_linear_fraction, host_forward.gated_linear_fraction,
                rows_of(2, 33),
                [&] { return near_threshold_rows(host, tokens, 2, 33, joint).total(); });
  const auto decode = device.time_decode(tokens, 20, joint, 1);
  const auto host_decode = on_host.time_decode(tokens, 20, joint, 1);
  // The decoded rows are the first 20 positions' (a full forward over them scores the same rows).
  same_fraction("time_decode", decode.gated_linear_fraction, host_decode.gated_linear_fraction,
                rows_of(1, 20),
                [&] { return near_threshold_rows(host, tokens, 1, 20, joint).total(); });
  BOOST_TEST(decode.gated_linear_fraction > 0);

  // Refusals, as on the host.
  nlb::ModelVariant<float> twice;
  twice.add_linear(1, parts.surrogates[1]);
  twice.add_linear(1, parts.surrogates[1]);
  BOOST_CHECK_THROW(device.measure(tokens, 3, 33, {twice}, true), nlb::ArgumentError);
  BOOST_CHECK_THROW(device.measure(tokens, 3, 1, variants, true), nlb::ArgumentError);
  BOOST_CHECK_THROW(device.measure(tokens, 4, 33, variants, true), nlb::ArgumentError);
  BOOST_CHECK_THROW(device.time_decode(tokens, 0, joint, 1), nlb::ArgumentError);
}

// ---- the budget pipeline through the device runner ------------------------------------------

// A runner that passes every call to another and keeps what measure() measured, in order: each
// configuration a calibration tried, the rows it routed, and how many steps the calibration had
// accepted before (`accepted`, which its progress hook counts).
class RecordingRunner final : public nlb::VariantRunner<float> {
 public:
  struct Call {
    std::vector<std::int32_t> tokens;
    Index windows = 0, context = 0;
    std::vector<Variant> variants;
    Index accepted_before = 0;
    std::vector<std::vector<nlb::RouteCounts>> counts;  // [variants][layers]
  };
  explicit RecordingRunner(nlb::VariantRunner<float>& inner) : inner_(&inner) {}

  std::string name() const override { return inner_->name(); }
  const Model& model() const override { return inner_->model(); }
  nlb::VariantLosses measure(Tokens tokens, Index windows, Index context,
                             const std::vector<Variant>& variants, bool with_base,
                             const Progress& progress = {},
                             const HostTaps& base_taps = {}) override {
    const auto n = std::min(tokens.size(), static_cast<std::size_t>(windows * context));
    calls.push_back(
        {std::vector<std::int32_t>(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(n)),
         windows,
         context,
         variants,
         accepted,
         {}});
    auto r = inner_->measure(tokens, windows, context, variants, with_base, progress, base_taps);
    calls.back().counts = r.counts;
    return r;
  }
  void collect(Tokens tokens, Index windows, Index context, const HostTaps& taps,
               const Progress& progress = {}) override {
    inner_->collect(tokens, windows, context, taps, progress);
  }
  nlb::ForwardTiming time_forward(Tokens tokens, Index windows, Index context,
                                  const Variant& variant, Index repetitions) override {
    return inner_->time_forward(tokens, windows, context, variant, repetitions);
  }
  nlb::ForwardTiming time_decode(Tokens tokens, Index steps, const Variant& variant,
                                 Index repetitions) override {
    return inner_->time_decode(tokens, steps, variant, repetitions);
  }

  std::vector<Call> calls;
  Index accepted = 0;

 private:
  nlb::VariantRunner<float>* inner_;
};

bool same_counts(const std::vector<nlb::RouteCounts>& a, const std::vector<nlb::RouteCounts>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const nlb::RouteCounts& x, const nlb::RouteCounts& y) {
                      return x.linear == y.linear && x.full == y.full;
                    });
}

// Whether two lists of variants configure the same layers alike: the same surrogates, and gates
// (the same host gates, copied into each variant) at the same thresholds.
bool same_configurations(const std::vector<nlb::ModelVariant<float>>& a,
                         const std::vector<nlb::ModelVariant<float>>& b) {
  const auto same = [](const nlb::ModelVariant<float>& x, const nlb::ModelVariant<float>& y) {
    return x.attention.empty() && y.attention.empty() &&
           std::equal(x.replace.begin(), x.replace.end(), y.replace.begin(), y.replace.end(),
                      [](const auto& r, const auto& q) {
                        return r.layer == q.layer && r.surrogate == q.surrogate &&
                               r.gate.has_value() == q.gate.has_value() &&
                               (!r.gate || r.gate->threshold() == q.gate->threshold());
                      });
  };
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), same);
}

// The first of two runners' recorded measurements (of one calibration from the same inputs, in
// order) whose route counts differ, or that measured other configurations; the shorter record's
// length if none. A difference in counts must lie within the rows the host finds near a
// threshold in that measurement (checked here); the calibration's decisions up to it were made
// on the same counts.
std::size_t first_routing_difference(const HostModel& host, const RecordingRunner& device,
                                     const RecordingRunner& on_host) {
  const std::size_t n = std::min(device.calls.size(), on_host.calls.size());
  for (std::size_t c = 0; c < n; ++c) {
    const auto &d = device.calls[c], &h = on_host.calls[c];
    if (!same_configurations(d.variants, h.variants) || d.counts.size() != h.counts.size())
      return c;  // the searches went apart (compared by the caller)
    bool same = true;
    for (std::size_t v = 0; v < h.counts.size(); ++v)
      same = same && same_counts(d.counts[v], h.counts[v]);
    if (same)
      continue;
    for (std::size_t v = 0; v < h.counts.size(); ++v) {
      const NearRows near =
          near_threshold_rows(host, h.tokens, h.windows, h.context, h.variants[v]);
      BOOST_TEST_MESSAGE("measurement " << c << ", variant " << v << ": " << near.total()
                                        << " rows near a threshold");
      for (std::size_t l = 0; l < h.counts[v].size(); ++l) {
        BOOST_TEST_CONTEXT("measurement " << c << ", variant " << v << ", layer " << l) {
          check_counts(d.counts[v][l], h.counts[v][l], near.layer(static_cast<Index>(l)));
        }
      }
    }
    return c;
  }
  return n;
}

// The inputs of a joint calibration, taken from the host pipeline's fit and label stages: the
// surrogates, the gates, the label activations (so the same grid thresholds) and base losses.
struct SharedCalibration {
  const nlb::SurrogateFit<float>* fit;
  const nlb::LabelStage<float>* label;
  std::vector<nlb::Activations<float>> label_x;
};

// run_label_stage's joint calibration (detail::run_joint_calibration) through `runner` from the
// shared inputs: two runners then differ only in what they measure.
nlb::LabelStage<float> calibrate(nlb::VariantRunner<float>& runner, const SharedCalibration& s,
                                 std::span<const std::int32_t> label_tokens,
                                 const nlb::BudgetProtocol& protocol,
                                 const nlb::BudgetObserver& obs) {
  nlb::LabelStage<float> out;
  out.positions = s.label->positions;
  out.windows = s.label->windows;
  out.base_losses = s.label->base_losses;
  out.gates = s.label->gates;
  nlb::detail::run_joint_calibration(runner, *s.fit, label_tokens, s.label_x, protocol, obs, out);
  return out;
}

Tokens text(const char* name, std::size_t n) {
  auto t = nlb::io::read_text_tokens(source_dir / "data" / name);
  t.resize(std::min(t.size(), n));
  return t;
}

double rel(double a, double b) {
  return std::abs(a - b) / std::abs(b);
}

// The whole budget pipeline (a small protocol on tiny-gpt2 and the shipped texts) through the
// device runner and through the host runner. The numbers no gate decides (baseline and
// all-linear perplexities) agree within the engines' rounding. Each pipeline trains its gates
// on its own passes (a δ within rounding of the median may take the other label), so what the
// device report's gates decided is measured again by the host runner with the same gates: the
// same perplexities and Δ% and, within the near-threshold rows, the same routing, prefill and
// decode timings included. The decisions themselves (the calibrated fractions) are compared on
// the same inputs: both searches (greedy path, cost curves and knapsack) run through each runner
// from the host pipeline's surrogates, gates and label activations; they must decide alike up to
// the first measurement whose routing differs between the runners (by no more than the rows the
// host finds near a threshold).
BOOST_AUTO_TEST_CASE(run_budget_on_device_equals_host) {
  DeviceContext ctx;
  HostContext host_ctx;
  const auto host = load("models/tiny-gpt2");
  const Index layers = host.layer_count();
  const auto fit = text("kjv-fit.txt", 1000), label = text("kjv-label.txt", 1000),
             eval = text("kjv-eval.txt", 8 * 32), cross = text("jargon-eval.txt", 4 * 32);
  nlb::BudgetProtocol p;
  p.context = 32;
  p.fit_tokens = 600;
  p.label_tokens = 600;        // 20 windows of 32
  p.calibration_tokens = 300;  // the next 10 windows
  p.calibration_search = nlb::CalibrationSearch::greedy;
  p.budgets_pct = {1.0, 3.0};
  p.bootstrap_resamples = 100;
  p.calibration_step = 0.25;
  p.timing_windows = 2;
  p.timing_repetitions = 1;
  p.decode_steps = 8;
  p.no_fly_min_count = 2;
  nlb::ModelRunner<float, Cuda> device(ctx, host);
  nlb::ModelRunner<float> on_host(host_ctx, host);
  const auto got = nlb::run_budget(device, fit, label, eval, cross, p);
  const auto want = nlb::run_budget(on_host, fit, label, eval, cross, p);
  BOOST_TEST(got.runner == "cuda");
  BOOST_TEST(want.runner == "cpu");

  // Nothing gated: the engines' rounding only.
  BOOST_TEST(rel(got.label.baseline_ppl, want.label.baseline_ppl) <= tol::engine_loss_f32_abs);
  BOOST_TEST(rel(got.eval.baseline_ppl, want.eval.baseline_ppl) <= tol::engine_loss_f32_abs);
  BOOST_TEST(rel(got.no_fly.cross_baseline_ppl, want.no_fly.cross_baseline_ppl) <=
             tol::engine_loss_f32_abs);
  BOOST_REQUIRE_EQUAL(got.eval.layers.size(), want.eval.layers.size());
  for (std::size_t l = 0; l < want.eval.layers.size(); ++l) {
    BOOST_TEST(rel(got.label.all_linear_ppl[l], want.label.all_linear_ppl[l]) <=
               tol::engine_loss_f32_abs);
    BOOST_TEST(rel(got.eval.layers[l].all_linear_ppl, want.eval.layers[l].all_linear_ppl) <=
               tol::engine_loss_f32_abs);
  }

  // The device report's gated configurations measured again on the host: each gate alone
  // (threshold 0), then each budget's joint state, on the eval windows.
  const Index ctx_len = p.context, windows = got.eval.windows;
  const auto gates = got.label.plain_gates();
  std::vector<nlb::ModelVariant<float>> variants;
  for (Index l = 0; l < layers; ++l) {
    const auto ls = static_cast<std::size_t>(l);
    variants.emplace_back().add_gated(l, got.fit.surrogates[ls], gates[ls]);
  }
  for (const auto& state : got.label.joint)
    variants.push_back(nlb::joint_variant(host, got.fit.surrogates, gates, state));
  const auto r = on_host.measure(eval, windows, ctx_len, variants, true);
  double base_total = 0;
  for (const double v : r.base)
    base_total += v;
  const double rows = static_cast<double>(windows * ctx_len);
  for (Index l = 0; l < layers; ++l) {
    BOOST_TEST_CONTEXT("layer " << l << " gated alone") {
      const auto ls = static_cast<std::size_t>(l);
      const auto& e = got.eval.layers[ls];
      const auto near = [&] {
        return near_threshold_rows(host, eval, windows, ctx_len, variants[ls]).total();
      };
      if (same_fraction("eval, gated alone", e.gate_linear_fraction,
                        static_cast<double>(r.counts[ls][ls].linear) / rows, rows, near))
        BOOST_TEST(rel(e.gate_ppl, nlb::detail::ppl_of(r.variant[ls])) <= tol::engine_loss_f32_abs);
    }
  }
  BOOST_REQUIRE_EQUAL(got.eval.joint.size(), p.budgets_pct.size());
  BOOST_REQUIRE_EQUAL(got.forward_timing.size(), p.budgets_pct.size());
  BOOST_REQUIRE_EQUAL(got.decode_timing.size(), p.budgets_pct.size());
  const Index timed = std::min(p.timing_windows, windows),
              steps = std::min(p.decode_steps, ctx_len);
  for (std::size_t b = 0; b < got.eval.joint.size(); ++b) {
    BOOST_TEST_CONTEXT("budget " << p.budgets_pct[b]) {
      const std::size_t at = static_cast<std::size_t>(layers) + b;
      const auto& v = variants[at];
      const auto& j = got.eval.joint[b];
      BOOST_REQUIRE_EQUAL(j.layer_linear_fraction.size(), static_cast<std::size_t>(layers));
      bool alike = true;
      for (Index l = 0; l < layers; ++l) {
        const auto ls = static_cast<std::size_t>(l);
        const auto near = [&] {
          return near_threshold_rows(host, eval, windows, ctx_len, v).layer(l);
        };
        alike = same_fraction("eval, joint state, layer " + std::to_string(l),
                              j.layer_linear_fraction[ls],
                              static_cast<double>(r.counts[at][ls].linear) / rows, rows, near) &&
                alike;
      }
      if (alike) {
        BOOST_TEST(j.linear_fraction == nlb::linear_share(r.counts[at], rows));
        BOOST_TEST(std::abs(j.delta_pct.value - nlb::variant_delta_pct(r, at, base_total)) <=
                   tol::budget_delta_pct_f32_abs);
      }
      // The timed passes: every layer's rows of `timed` windows, and of the `steps` decoded
      // positions (the rows a forward over them routes).
      const auto forward = on_host.time_forward(eval, timed, ctx_len, v, 1);
      same_fraction("forward timing", got.forward_timing[b].gated_linear_fraction,
                    forward.gated_linear_fraction, static_cast<double>(timed * ctx_len * layers),
                    [&] { return near_threshold_rows(host, eval, timed, ctx_len, v).total(); });
      const auto decode = on_host.time_decode(eval, steps, v, 1);
      same_fraction("decode timing", got.decode_timing[b].gated_linear_fraction,
                    decode.gated_linear_fraction, static_cast<double>(steps * layers),
                    [&] { return near_threshold_rows(host, eval, 1, steps, v).total(); });
    }
  }

  // The decisions, from the same inputs through either runner.
  SharedCalibration shared{&want.fit, &want.label, {}};
  {
    nlb::LabelTapCollector<float> collector(layers, host.config().d_model, ctx_len, p.label_tokens);
    on_host.collect(
        label, want.label.windows, ctx_len,
        [&](nlb::Tap tap, Index l, const nlb::RowMatrix<float>& m) { collector(tap, l, m); });
    collector.check();
    shared.label_x = collector.activations().x;
  }
  const auto cal_tokens = std::span<const std::int32_t>(label).subspan(
      static_cast<std::size_t>(want.label.windows * ctx_len));
  const Index cal_windows = p.calibration_windows();
  for (const auto search : {nlb::CalibrationSearch::greedy, nlb::CalibrationSearch::allocation}) {
    BOOST_TEST_CONTEXT(nlb::to_string(search) << " search") {
      auto pa = p;
      pa.calibration_search = search;
      RecordingRunner on_host_recorded(on_host), on_device_recorded(device);
      nlb::BudgetObserver host_steps, device_steps;  // count the accepted greedy steps
      host_steps.counter = [&](long long, long long) { ++on_host_recorded.accepted; };
      device_steps.counter = [&](long long, long long) { ++on_device_recorded.accepted; };
      const auto b_host = calibrate(on_host_recorded, shared, label, pa, host_steps);
      const auto b_device = calibrate(on_device_recorded, shared, label, pa, device_steps);
      const bool greedy = search == nlb::CalibrationSearch::greedy;
      const std::size_t calls = on_host_recorded.calls.size();
      const bool same_calls = on_device_recorded.calls.size() == calls;
      const std::size_t differ =
          first_routing_difference(host, on_device_recorded, on_host_recorded);
      // Every measurement decides but the greedy search's last, which measures the chosen states
      // on the calibration split.
      const std::size_t deciding = calls - (greedy ? 1 : 0);
      const bool decided_alike = same_calls && differ >= deciding;
      const bool same_routing = same_calls && differ == calls;
      BOOST_TEST_MESSAGE(nlb::to_string(search)
                         << " search: " << calls << " measurements on the host, "
                         << on_device_recorded.calls.size() << " on the device; routing "
                         << (same_routing ? "the same in all"
                                          : "first different in #" + std::to_string(differ)));
      BOOST_REQUIRE_EQUAL(b_device.joint.size(), b_host.joint.size());
      if (greedy) {
        const auto& path = b_host.calibration.path;
        const auto& device_path = b_device.calibration.path;
        BOOST_TEST(path.size() > 1);  // the search took steps
        // The steps accepted before the first measurement whose routing differs were decided on
        // the same counts and losses within rounding.
        const std::size_t decided =
            differ >= deciding
                ? path.size()
                : static_cast<std::size_t>(on_host_recorded.calls[differ].accepted_before) + 1;
        BOOST_TEST_MESSAGE("greedy path: " << path.size() << " states, the first " << decided
                                           << " decided on the same routing");
        if (decided_alike)
          BOOST_TEST(device_path.size() == path.size());
        for (std::size_t i = 0; i < std::min(decided, path.size()); ++i) {
          BOOST_TEST_CONTEXT("path state " << i) {
            BOOST_REQUIRE(i < device_path.size());
            BOOST_TEST(device_path[i].fractions == path[i].fractions,
                       boost::test_tools::per_element());
            BOOST_TEST(device_path[i].label_linear_fraction == path[i].label_linear_fraction);
            BOOST_TEST(std::abs(device_path[i].label_delta_pct - path[i].label_delta_pct) <=
                       tol::budget_delta_pct_f32_abs);
          }
        }
      } else {
        // Every cost-curve point: where the layer routed alike, Δ% within rounding; elsewhere
        // the linear fraction within the rows near the threshold.
        const auto& curves = b_host.cost_curves;
        const auto& device_curves = b_device.cost_curves;
        BOOST_REQUIRE_EQUAL(device_curves.delta_pct.size(), curves.delta_pct.size());
        const double cal_rows = static_cast<double>(cal_windows * ctx_len);
        for (std::size_t l = 0; l < curves.delta_pct.size(); ++l) {
          BOOST_REQUIRE_EQUAL(device_curves.delta_pct[l].size(), curves.delta_pct[l].size());
          for (std::size_t k = 1; k < curves.delta_pct[l].size(); ++k) {
            BOOST_TEST_CONTEXT("layer " << l << ", step " << k) {
              if (device_curves.linear_fraction[l][k] == curves.linear_fraction[l][k]) {
                BOOST_TEST(std::abs(device_curves.delta_pct[l][k] - curves.delta_pct[l][k]) <=
                           tol::budget_delta_pct_f32_abs);
                continue;
              }
              nlb::ModelVariant<float> v;
              auto g = shared.label->gates[l].gate;
              g.set_threshold(static_cast<float>(b_host.thresholds[l][k]));
              v.add_gated(static_cast<Index>(l), shared.fit->surrogates[l], g);
              const Index n =
                  near_threshold_rows(host, cal_tokens, cal_windows, ctx_len, v).total();
              BOOST_TEST(
                  std::abs(device_curves.linear_fraction[l][k] - curves.linear_fraction[l][k]) <=
                  static_cast<double>(n) / cal_rows);
            }
          }
        }
      }
      // The chosen states: decided alike when every deciding measurement routed alike; their
      // calibration-split numbers (the greedy search's last measurement, or the allocation's
      // chosen try) equal when that routed alike too (else first_routing_difference checked the
      // counts against the near rows).
      for (std::size_t b = 0; b < b_host.joint.size(); ++b) {
        BOOST_TEST_CONTEXT("budget " << pa.budgets_pct[b]) {
          const auto &d = b_device.joint[b], &h = b_host.joint[b];
          if (!greedy)
            BOOST_TEST(h.calibration_delta_pct.high <= pa.budgets_pct[b]);
          if (!decided_alike)
            continue;
          BOOST_TEST(d.fractions == h.fractions, boost::test_tools::per_element());
          if (!same_routing)
            continue;
          BOOST_TEST(d.calibration_linear_fraction == h.calibration_linear_fraction);
          BOOST_TEST(std::abs(d.calibration_delta_pct.high - h.calibration_delta_pct.high) <=
                     tol::budget_delta_pct_f32_abs);
        }
      }
    }
  }
}

}  // namespace

// Without a usable device the nvcc build reports Skipped to CTest (SKIP_RETURN_CODE 77), never
// Passed; the host-system build always runs.
int main(int argc, char* argv[]) {
  const nlb::cuda::DeviceStatus status = nlb::cuda::device_status();
  if (!status.usable) {
    std::cout << "test_cuda_model: skipped: " << status.description << "\n";
    return 77;
  }
  std::cout << "test_cuda_model: " << status.description << "\n";
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
