// GPT-2-small on backend::cuda, and the gated MLP against the dense one on the device
// (docs/benchmarks.md, "CUDA"; the PyTorch side is benchmarks/cuda/torch_cuda.py, run on the same
// model directory in the same session by scripts/gpu-check.sh).
//
// Built with nvcc as bench_cuda (scripts/gpu-check.sh prepare) and with g++ and thrust's host
// system as bench_cuda_host (not built by default; a smoke run of this program's logic on a
// machine without a GPU: NLB_BENCH_SMALL=1 shrinks every shape). The model directory is
// NLB_BENCH_MODEL when set (the GPT-2-small directory torch_cuda.py reads too), else a
// GPT-2-small directory with random weights written to the temporary directory.
//
// The device model and components are the library's one model stack on backend::cuda: the host
// model uploaded with to_backend, called as on the CPU with a Context<backend::cuda>.

// First: the components call the ops by qualified name, so the device ops must be declared
// before any component header (nlb/cuda.cuh).
#include "nlb/cuda.cuh"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../gpt2_small_model.hpp"
#include "../random_matrix.hpp"
#include "../run_benchmarks.hpp"
#include "nlb/analysis/flops.hpp"
#include "nlb/model/load_model.hpp"

namespace {

using nlb::Index;
using Cuda = nlb::backend::cuda;
using DeviceModel = nlb::Transformer<float, Cuda>;
using nlb::bench::random_matrix;

bool small() {
  const char* s = std::getenv("NLB_BENCH_SMALL");
  return s != nullptr && std::string(s) == "1";
}

// The device model, loaded once per process.
struct DeviceGpt2 {
  nlb::Context<Cuda> ctx;
  std::unique_ptr<DeviceModel> model;
  std::vector<std::int32_t> tokens;  // [n_positions · 8], fixed pseudo-random ids
  DeviceGpt2() {
    const char* dir = std::getenv("NLB_BENCH_MODEL");
    const auto host =
        nlb::load_model<float>(dir ? std::filesystem::path(dir) : nlb::bench::gpt2_small_dir());
    model = std::make_unique<DeviceModel>(nlb::to_backend(Cuda{}, host));
    const auto& c = host.config();
    tokens.resize(static_cast<std::size_t>(c.n_positions) * 8);
    for (std::size_t i = 0; i < tokens.size(); ++i)
      tokens[i] =
          static_cast<std::int32_t>((i * 7919 + 13) % static_cast<std::size_t>(c.vocab_size));
  }
};

DeviceGpt2& gpt2() {
  static DeviceGpt2 g;
  return g;
}

// Prefill: `windows` windows of T tokens, one forward each (the device model has no batch
// dimension: a batch of windows is that many calls on one stream), logits left on the device.
void BM_CudaForward(benchmark::State& state) {
  auto& g = gpt2();
  const Index T = small() ? std::min<Index>(state.range(0), 32) : state.range(0);
  const Index windows = state.range(1);
  DeviceModel::Workspace ws;
  DeviceModel::Logits logits;  // [T, vocab] on the device
  const std::span<const std::int32_t> all(g.tokens);
  auto run = [&] {
    for (Index w = 0; w < windows; ++w)
      g.model->forward(g.ctx,
                       all.subspan(static_cast<std::size_t>(w * T), static_cast<std::size_t>(T)),
                       logits, ws);
    g.ctx.synchronize();
  };
  run();  // warm-up: workspace growth, cuBLAS heuristics
  for (auto _ : state)
    run();
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(T * windows),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["T"] = static_cast<double>(T);
  state.counters["windows"] = static_cast<double>(windows);
}
BENCHMARK(BM_CudaForward)
    ->Args({128, 1})
    ->Args({1024, 1})
    ->Args({1024, 8})  // T = 8192 as a batch of 8 windows
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);

// Batch-1 decoding: a prompt of 16 tokens, then `steps` tokens one at a time through the device
// KV cache, each forward's logits (all its rows) copied back and the next token chosen on the
// host (greedy), as a generation loop does. The prompt's prefill is in the time, as in
// torch_cuda.py.
void BM_CudaDecode(benchmark::State& state) {
  auto& g = gpt2();
  const Index prompt = 16, steps = small() ? 8 : state.range(0);
  DeviceModel::Workspace ws;
  auto cache = g.model->make_cache();
  DeviceModel::Logits logits;  // on the device
  nlb::RowMatrix<float> host;  // its copy on the host
  const std::span<const std::int32_t> all(g.tokens);
  for (auto _ : state) {
    cache.clear();
    g.model->forward(g.ctx, all.first(prompt), logits, ws, nlb::NoTaps{}, &cache);
    host = nlb::cuda::download(g.ctx, logits);
    std::int32_t next = 0;
    for (Index s = 0; s < steps; ++s) {
      Eigen::Index best = 0;
      host.row(host.rows() - 1).maxCoeff(&best);
      next = static_cast<std::int32_t>(best);
      g.model->forward(g.ctx, std::span<const std::int32_t>(&next, 1), logits, ws, nlb::NoTaps{},
                       &cache);
      host = nlb::cuda::download(g.ctx, logits);
    }
    benchmark::DoNotOptimize(next);
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_CudaDecode)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

// ---- GatedMLP against Mlp on the device (d = 1024, h = 4d) ------------------------------------

using HostMlp = nlb::Mlp<float, nlb::Dynamic, nlb::Dynamic, nlb::GeluTanh, nlb::backend::scalar>;
using HostSurrogate = nlb::RidgeSurrogate<float, nlb::Dynamic, nlb::Dynamic, nlb::backend::scalar>;
using HostGate = nlb::HyperplaneGate<float, nlb::Dynamic, nlb::backend::scalar>;

HostMlp random_mlp(Index d) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  return HostMlp(random_matrix(d, 4 * d, scale, 1), random_matrix(1, 4 * d, 0.1f, 2),
                 random_matrix(4 * d, d, scale / 2, 3), random_matrix(1, d, 0.1f, 4));
}

Index mlp_width() {
  return small() ? 64 : 1024;
}
Index mlp_rows(const benchmark::State& state) {
  return small() ? std::min<Index>(state.range(0), 256) : state.range(0);
}

void BM_CudaMlp(benchmark::State& state) {
  nlb::Context<Cuda> ctx;
  const Index d = mlp_width(), T = mlp_rows(state);
  const auto mlp = nlb::to_backend(Cuda{}, random_mlp(d));
  const auto X = nlb::cuda::upload(ctx, random_matrix(T, d, 1.0f, 5));
  nlb::cuda::DeviceMatrix<float> Y(T, d);
  typename decltype(mlp)::Workspace ws;
  mlp.forward(ctx, X.view(), Y.view(), ws);
  ctx.synchronize();
  for (auto _ : state) {
    mlp.forward(ctx, X.view(), Y.view(), ws);
    ctx.synchronize();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      nlb::flops::dense_mlp_per_token(double(d), 4.0 * double(d)) * double(T) * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate);
  state.counters["T"] = static_cast<double>(T);
}
BENCHMARK(BM_CudaMlp)->Arg(4096)->Arg(65536)->Unit(benchmark::kMillisecond)->UseRealTime();

// The gate's threshold is set on the host so that a fraction f of the rows is routed linear.
void BM_CudaGatedMlp(benchmark::State& state) {
  nlb::Context<Cuda> ctx;
  const Index d = mlp_width(), T = mlp_rows(state);
  const double fraction = static_cast<double>(state.range(1)) / 100.0;
  const nlb::RowMatrix<float> x = random_matrix(T, d, 1.0f, 5);
  HostGate gate(nlb::ColVector<float>(random_matrix(d, 1, 1.0f, 6).col(0)), 0.0f);
  gate.calibrate_linear_fraction(x, fraction);
  const nlb::GatedMLP<HostMlp, HostSurrogate, HostGate> host(
      random_mlp(d), HostSurrogate(random_matrix(d, d, 0.03f, 7), random_matrix(1, d, 0.1f, 8)),
      gate);
  const auto gated = nlb::to_backend(Cuda{}, host);
  const auto X = nlb::cuda::upload(ctx, x);
  nlb::cuda::DeviceMatrix<float> Y(T, d);
  typename decltype(gated)::Workspace ws;
  nlb::RouteCounts counts = gated.forward(ctx, X.view(), Y.view(), ws);
  ctx.synchronize();
  for (auto _ : state) {
    counts = gated.forward(ctx, X.view(), Y.view(), ws);
    ctx.synchronize();
  }
  const double f = counts.linear_fraction();
  state.counters["T"] = static_cast<double>(T);
  state.counters["linear_fraction"] = f;
  state.counters["predicted_speedup"] = nlb::flops::predicted_mlp_speedup(f);
}
BENCHMARK(BM_CudaGatedMlp)
    ->ArgsProduct({{4096, 65536}, {0, 25, 50, 75}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

// Without a usable device: say why and exit 77 (as the test suites do).
int main(int argc, char** argv) {
  const nlb::cuda::DeviceStatus status = nlb::cuda::device_status();
  if (!status.usable) {
    std::cout << "bench_cuda: no usable device: " << status.description << "\n";
    return 77;
  }
  return nlb::bench::run_benchmarks(argc, argv);
}
