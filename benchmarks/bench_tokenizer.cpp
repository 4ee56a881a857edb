// nlb/text: GPT-2 encode throughput (MB/s of input text, one thread) on the repo's English
// texts, with the piece cache warm (the text was encoded before) and cold (emptied before each
// encode). tools/node/bench_tiktoken.mjs measures tiktoken (WASM) on the same texts;
// docs/benchmarks.md compares them.
#include <benchmark/benchmark.h>

#include <fstream>
#include <iterator>
#include <string>

#include "nlb/text.hpp"

namespace {

std::string read(const std::string& name) {
  std::ifstream in(std::string(NLB_SOURCE_DIR) + "/data/" + name, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const nlb::text::Tokenizer& gpt2() {
  static const nlb::text::Tokenizer t =
      nlb::text::load_gpt2_tokenizer(std::string(NLB_SOURCE_DIR) + "/models/gpt2-tokenizer");
  return t;
}

void run(benchmark::State& state, const std::string& file, bool cold) {
  const std::string text = read(file);
  if (text.empty()) {
    state.SkipWithError(("cannot read data/" + file).c_str());
    return;
  }
  std::size_t tokens = 0;
  benchmark::DoNotOptimize(gpt2().encode(text));
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      gpt2().clear_cache();
      state.ResumeTiming();
    }
    const auto ids = gpt2().encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

// The split alone (pre_tokenizer.hpp), the part of encoding no cache saves.
void BM_split_jargon(benchmark::State& state) {
  const std::string text = read("jargon-eval.txt");
  for (auto _ : state) {
    std::size_t pieces = 0;
    nlb::text::for_each_gpt2_piece(text, [&](std::string_view) { ++pieces; });
    benchmark::DoNotOptimize(pieces);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}

void BM_encode_kjv_warm(benchmark::State& s) {
  run(s, "kjv-eval.txt", false);
}
void BM_encode_kjv_cold(benchmark::State& s) {
  run(s, "kjv-eval.txt", true);
}
void BM_encode_jargon_warm(benchmark::State& s) {
  run(s, "jargon-eval.txt", false);
}
void BM_encode_jargon_cold(benchmark::State& s) {
  run(s, "jargon-eval.txt", true);
}

}  // namespace

BENCHMARK(BM_split_jargon)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_encode_kjv_warm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_encode_kjv_cold)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_encode_jargon_warm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_encode_jargon_cold)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
