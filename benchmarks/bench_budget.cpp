// The whole shipped tiny-gpt2 model, dense against gated at the joint thresholds of the MLP
// budget pipeline (PAPERS §A7, docs/budget.md), tokens/s side by side in one run.
//
//   build/release/benchmarks/bench_budget --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
//   (one command line)
//
// Setup (once per process, not timed): surrogates from 10,000 fit positions of
// data/kjv-fit.txt, gates and a quick joint calibration on 5,000 label positions of
// data/kjv-label.txt (step 0.1) for budgets 1% and 3%, as `nlb budget` does with smaller label
// settings. Also "uniform" variants — every layer gated at the same label linear fraction — to
// show what routing can save at all at d = 128. Timed: Transformer::forward over 8 windows of
// 128 tokens of data/kjv-eval.txt.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "nlb/analysis/budget/pipeline.hpp"
#include "nlb/analysis/variant_runner.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"

namespace {

namespace fs = std::filesystem;
using Model = nlb::Transformer<float>;

const fs::path repo = fs::path(__FILE__).parent_path().parent_path();
constexpr nlb::Index windows = 8, context = 128;

struct Setup {
  nlb::Context<nlb::backend::cpu> ctx;  // one thread, as the other side-by-side benchmarks
  Model model = nlb::load_model<float>(repo / "models/tiny-gpt2");
  std::vector<std::int32_t> eval = nlb::io::read_text_tokens(repo / "data/kjv-eval.txt");
  nlb::BudgetProtocol protocol;
  nlb::SurrogateFit<float> fit;
  nlb::LabelStage<float> label;
  std::vector<nlb::JointState> states;  // budgets 1%, 3%, then uniform 0.25, 0.5, 1.0
  Setup() {
    protocol.label_tokens = 5000;
    protocol.calibration_tokens = 3 * 5000;  // as nlb budget --label-positions 5000
    protocol.calibration_step = 0.1;
    const auto fit_tokens = nlb::io::read_text_tokens(repo / "data/kjv-fit.txt");
    const auto label_tokens = nlb::io::read_text_tokens(repo / "data/kjv-label.txt");
    nlb::ModelRunner<float> runner(ctx, model);
    fit = nlb::fit_surrogates(runner, fit_tokens, protocol);
    std::vector<std::pair<std::string, double>> times;
    label = nlb::run_label_stage(runner, fit, label_tokens, protocol, {}, times);
    states = label.joint;
    // The label x of every layer, for the uniform thresholds.
    nlb::LabelTapCollector<float> taps(model.layer_count(), model.config().d_model, context,
                                       protocol.label_tokens);
    std::vector<nlb::ModelVariant<float>> none;
    nlb::measure_variants(ctx, model, label_tokens, protocol.label_windows(), context, none, true,
                          taps);
    const auto gates = label.plain_gates();
    for (double f : {0.25, 0.5, 1.0}) {
      nlb::JointState s;
      for (std::size_t l = 0; l < gates.size(); ++l) {
        auto g = gates[l];
        s.fractions.push_back(f);
        s.thresholds.push_back(g.calibrate_linear_fraction(taps.activations().x[l], f));
      }
      states.push_back(s);
    }
  }
};

Setup& setup() {
  static Setup s;
  return s;
}

// state < 0: dense; else the gated model of setup().states[state].
void BM_Forward(benchmark::State& state) {
  auto& s = setup();
  const auto which = state.range(0);
  Model model = s.model;
  if (which >= 0) {
    auto v = nlb::joint_variant(model, s.fit.surrogates, s.label.plain_gates(),
                                s.states[static_cast<std::size_t>(which)]);
    // A gated copy of the model as a fixed configuration (what a deployed gated model runs).
    for (const auto& r : v.replace) {
      auto& mlp = model.layers()[static_cast<std::size_t>(r.layer)].mlp();
      mlp = nlb::gated_slot(mlp, *r.surrogate, *r.gate);
    }
  }
  Model::Workspace ws;
  nlb::RowMatrix<float> logits;
  nlb::RouteCounts counts;
  for (auto _ : state) {
    for (nlb::Index w = 0; w < windows; ++w) {
      model.forward(s.ctx,
                    std::span<const std::int32_t>(s.eval).subspan(
                        static_cast<std::size_t>(w * context), static_cast<std::size_t>(context)),
                    logits, ws, nlb::NoTaps{}, nullptr, &counts);
    }
    benchmark::DoNotOptimize(logits.data());
  }
  state.SetItemsProcessed(state.iterations() * windows * context);
  state.counters["tokens/s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * windows * context), benchmark::Counter::kIsRate);
  state.counters["linear_fraction"] = counts.linear_fraction();
  static const char* names[] = {"joint 1%", "joint 3%", "uniform f=0.25", "uniform f=0.5",
                                "uniform f=1"};
  state.SetLabel(which < 0 ? "dense" : names[which]);
}

}  // namespace

BENCHMARK(BM_Forward)
    ->Arg(-1)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Arg(3)
    ->Arg(4)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
