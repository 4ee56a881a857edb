// Loading checkpoints at real scale: GPT-2-XL-shaped (1.56 B parameters) and Pythia-1B-shaped
// (1.01 B) random checkpoints, stored as F32 and as F16, written once to a temporary directory
// (NLB_BENCH_LOAD_DIR, default $TMPDIR/nlb-bench-load; about 15 GB, removed at the end unless
// NLB_BENCH_LOAD_KEEP is set). Two measurements per checkpoint:
//   BM_LoadModel      load_model<float> in this process, files already in the page cache:
//                     file_GBps = file bytes / load time (the target: >= 1 GB/s).
//                     <mapped>: the same with backend::with_weights<storage::mapped>, where the
//                     tensors the file holds as used stay in its mapping (no copy).
//   BM_LoadAndFirstToken  load, then a forward of one token (every weight read once): the time
//                     to a model that has computed, page faults of mapped weights included.
//   BM_FreshMemoryWrite  the machine's limit for any load that copies: fresh memory allocated as
//                     the loader allocates it (64 MiB matrices, pages populated in one call)
//                     and written once, 4 GiB per iteration: GBps = bytes / time.
//   BM_EvalPeakRss    `nlb eval` on 2 windows of 128 tokens in a child process: its peak
//                     resident set (getrusage ru_maxrss) against the float32 weight bytes
//                     (target: <= 1.15).
// GPT-2-XL F32 is written sharded (model.safetensors.index.json, 1 GiB shards), the others as
// one model.safetensors, so both layouts are measured.
//
// Today's checkpoints at their published shapes, BF16 as the Hub ships them (random weights):
// Llama-3.2-1B (d 2048, 16 layers, 32 heads over 8 KV heads, SwiGLU 8192, vocabulary 128,256,
// tied) and Qwen2.5-0.5B (d 896, 24 layers, 14 heads over 2 KV heads, SwiGLU 4864, q/k/v biases,
// vocabulary 151,936, tied). Besides the four above, kept in BF16 (--weights bf16):
//   BM_LoadModel<bf16>  load_model<float, with_weights<bf16>>; rss_growth_GB: resident memory
//                     after the load minus before (the allocator may reuse freed pages).
//   BM_EvalPeakRss    with --weights bf16, against the BF16 weight bytes.
//   BM_DecodeBf16/c   prompt 16, then 16 single-token steps, 2 threads: tokens_per_second
//                     against the read bound (bytes per token: every weight matrix in BF16, the
//                     tied unembedding once, the KV cache rows; bandwidth of re-reading that many
//                     bytes, measured in the same run).
//   BM_Prefill<S>/c   one forward of 128 tokens with logits, 2 threads, weights in S (f32 or
//                     bf16): tokens/s. benchmarks/torch_llama.py times PyTorch on the same shapes.
// docs/benchmarks.md has the figures.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nlb/io/detail/file_bytes.hpp"
#include "nlb/io/safetensors_writer.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/model_summary.hpp"
#include "read_bandwidth.hpp"

namespace {

namespace fs = std::filesystem;
using nlb::io::DType;

// One tensor of a checkpoint: random N(0, 0.02)-like values, or a constant (LayerNorm gains 1,
// biases 0).
struct TensorSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  bool random = true;
  float fill = 0.0f;
};

struct Checkpoint {
  std::string name;  // directory name
  std::vector<TensorSpec> tensors;
  nlohmann::json config;
  const char* tokenizer_dir;  // shipped tokenizer files copied next to the weights
  std::vector<const char*> tokenizer_files;
};

Checkpoint gpt2_xl() {
  const std::int64_t V = 50257, P = 1024, D = 1600, L = 48;
  Checkpoint c{"gpt2-xl", {}, {}, "models/gpt2-tokenizer", {"vocab.json", "merges.txt"}};
  auto& t = c.tensors;
  t.push_back({"transformer.wte.weight", {V, D}});
  t.push_back({"transformer.wpe.weight", {P, D}});
  for (std::int64_t i = 0; i < L; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    t.push_back({p + "ln_1.weight", {D}, false, 1.0f});
    t.push_back({p + "ln_1.bias", {D}, false});
    t.push_back({p + "attn.c_attn.weight", {D, 3 * D}});
    t.push_back({p + "attn.c_attn.bias", {3 * D}, false});
    t.push_back({p + "attn.c_proj.weight", {D, D}});
    t.push_back({p + "attn.c_proj.bias", {D}, false});
    t.push_back({p + "ln_2.weight", {D}, false, 1.0f});
    t.push_back({p + "ln_2.bias", {D}, false});
    t.push_back({p + "mlp.c_fc.weight", {D, 4 * D}});
    t.push_back({p + "mlp.c_fc.bias", {4 * D}, false});
    t.push_back({p + "mlp.c_proj.weight", {4 * D, D}});
    t.push_back({p + "mlp.c_proj.bias", {D}, false});
  }
  t.push_back({"transformer.ln_f.weight", {D}, false, 1.0f});
  t.push_back({"transformer.ln_f.bias", {D}, false});
  c.config = {{"model_type", "gpt2"},
              {"n_embd", D},
              {"n_layer", L},
              {"n_head", 25},
              {"n_positions", P},
              {"vocab_size", V},
              {"layer_norm_epsilon", 1e-5},
              {"activation_function", "gelu_new"},
              {"eos_token_id", 50256},
              {"bos_token_id", 50256}};
  return c;
}

Checkpoint pythia_1b() {
  const std::int64_t V = 50304, P = 2048, D = 2048, L = 16;
  Checkpoint c{"pythia-1b", {}, {}, "models/neox-style-tokenizer", {"tokenizer.json"}};
  auto& t = c.tensors;
  t.push_back({"gpt_neox.embed_in.weight", {V, D}});
  for (std::int64_t i = 0; i < L; ++i) {
    const std::string p = "gpt_neox.layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", {D}, false, 1.0f});
    t.push_back({p + "input_layernorm.bias", {D}, false});
    t.push_back({p + "post_attention_layernorm.weight", {D}, false, 1.0f});
    t.push_back({p + "post_attention_layernorm.bias", {D}, false});
    t.push_back({p + "attention.query_key_value.weight", {3 * D, D}});
    t.push_back({p + "attention.query_key_value.bias", {3 * D}, false});
    t.push_back({p + "attention.dense.weight", {D, D}});
    t.push_back({p + "attention.dense.bias", {D}, false});
    t.push_back({p + "mlp.dense_h_to_4h.weight", {4 * D, D}});
    t.push_back({p + "mlp.dense_h_to_4h.bias", {4 * D}, false});
    t.push_back({p + "mlp.dense_4h_to_h.weight", {D, 4 * D}});
    t.push_back({p + "mlp.dense_4h_to_h.bias", {D}, false});
  }
  t.push_back({"gpt_neox.final_layer_norm.weight", {D}, false, 1.0f});
  t.push_back({"gpt_neox.final_layer_norm.bias", {D}, false});
  t.push_back({"embed_out.weight", {V, D}});
  c.config = {{"model_type", "gpt_neox"},
              {"hidden_size", D},
              {"num_hidden_layers", L},
              {"num_attention_heads", 8},
              {"intermediate_size", 4 * D},
              {"max_position_embeddings", P},
              {"vocab_size", V},
              {"rotary_pct", 0.25},
              {"rotary_emb_base", 10000},
              {"use_parallel_residual", true},
              {"layer_norm_eps", 1e-5},
              {"hidden_act", "gelu"},
              {"tie_word_embeddings", false},
              {"eos_token_id", 0},
              {"bos_token_id", 0}};
  return c;
}

// A Llama-family checkpoint: `model_type` "llama" or "qwen2" (q/k/v biases), tied embeddings.
Checkpoint llama_family(const std::string& name, const std::string& model_type, std::int64_t V,
                        std::int64_t D, std::int64_t L, std::int64_t H, std::int64_t KV,
                        std::int64_t I, double theta) {
  Checkpoint c{name, {}, {}, "models/llama3-style-tokenizer", {"tokenizer.json"}};
  const std::int64_t hd = D / H;
  const bool qkv_bias = model_type == "qwen2";
  auto& t = c.tensors;
  t.push_back({"model.embed_tokens.weight", {V, D}});
  for (std::int64_t i = 0; i < L; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", {D}, false, 1.0f});
    t.push_back({p + "self_attn.q_proj.weight", {D, D}});
    t.push_back({p + "self_attn.k_proj.weight", {KV * hd, D}});
    t.push_back({p + "self_attn.v_proj.weight", {KV * hd, D}});
    if (qkv_bias) {
      t.push_back({p + "self_attn.q_proj.bias", {D}, false});
      t.push_back({p + "self_attn.k_proj.bias", {KV * hd}, false});
      t.push_back({p + "self_attn.v_proj.bias", {KV * hd}, false});
    }
    t.push_back({p + "self_attn.o_proj.weight", {D, D}});
    t.push_back({p + "post_attention_layernorm.weight", {D}, false, 1.0f});
    t.push_back({p + "mlp.gate_proj.weight", {I, D}});
    t.push_back({p + "mlp.up_proj.weight", {I, D}});
    t.push_back({p + "mlp.down_proj.weight", {D, I}});
  }
  t.push_back({"model.norm.weight", {D}, false, 1.0f});
  c.config = {{"model_type", model_type},
              {"hidden_size", D},
              {"num_hidden_layers", L},
              {"num_attention_heads", H},
              {"num_key_value_heads", KV},
              {"intermediate_size", I},
              {"max_position_embeddings", 4096},  // the published 131,072 / 32,768: unused here
              {"vocab_size", V},
              {"rms_norm_eps", 1e-5},
              {"hidden_act", "silu"},
              {"rope_theta", theta},
              {"tie_word_embeddings", true}};
  if (model_type == "llama")
    c.config["rope_scaling"] = {{"rope_type", "llama3"},
                                {"factor", 32.0},
                                {"low_freq_factor", 1.0},
                                {"high_freq_factor", 4.0},
                                {"original_max_position_embeddings", 8192}};
  return c;
}

Checkpoint llama_32_1b() {
  return llama_family("llama-3.2-1b", "llama", 128256, 2048, 16, 32, 8, 8192, 500000.0);
}
Checkpoint qwen25_05b() {
  return llama_family("qwen2.5-0.5b", "qwen2", 151936, 896, 24, 14, 2, 4864, 1000000.0);
}

fs::path bench_root() {
  const char* dir = std::getenv("NLB_BENCH_LOAD_DIR");
  return dir != nullptr ? fs::path(dir) : fs::temp_directory_path() / "nlb-bench-load";
}

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto s : shape)
    n *= s;
  return n;
}

// Writes `c` stored as `dtype` under bench_root(), once per process; returns its directory.
// Shards of at most `shard_bytes` (0: one model.safetensors).
fs::path write_checkpoint(const Checkpoint& c, DType dtype, std::uint64_t shard_bytes) {
  const fs::path dir = bench_root() / (c.name + "-" + std::string(nlb::io::to_string(dtype)));
  if (fs::exists(dir / "config.json"))
    return dir;  // written earlier in this run (or kept from an earlier one)
  fs::create_directories(dir);
  std::uint64_t state = 0x9E3779B97F4A7C15ull;  // xorshift64: fast, deterministic values
  std::vector<std::vector<const TensorSpec*>> shards(1);
  std::uint64_t in_shard = 0;
  for (const auto& t : c.tensors) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(numel(t.shape)) * dtype_size(dtype);
    if (shard_bytes > 0 && in_shard > 0 && in_shard + bytes > shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&t);
    in_shard += bytes;
  }
  nlohmann::json weight_map = nlohmann::json::object();
  for (std::size_t s = 0; s < shards.size(); ++s) {
    char shard_name[64];
    std::snprintf(shard_name, sizeof shard_name, "model-%05zu-of-%05zu.safetensors", s + 1,
                  shards.size());
    const std::string file = shard_bytes > 0 ? shard_name : "model.safetensors";
    nlb::io::SafetensorsWriter writer;
    writer.set_metadata("format", "pt");
    for (const TensorSpec* t : shards[s]) {
      std::vector<float> values(static_cast<std::size_t>(numel(t->shape)), t->fill);
      if (t->random) {
        for (auto& v : values) {
          state ^= state << 13;
          state ^= state >> 7;
          state ^= state << 17;
          // Uniform in [-0.035, 0.035): the standard deviation of N(0, 0.02).
          v = static_cast<float>(static_cast<double>(state >> 11) * 0x1p-53 - 0.5) * 0.07f;
        }
      }
      writer.add(t->name, dtype, t->shape, std::span<const float>(values));
      weight_map[t->name] = file;
    }
    writer.write(dir / file);
  }
  if (shard_bytes > 0) {
    std::ofstream(dir / "model.safetensors.index.json")
        << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2);
  }
  for (const char* f : c.tokenizer_files)
    fs::copy_file(fs::path(NLB_SOURCE_DIR) / c.tokenizer_dir / f, dir / f,
                  fs::copy_options::overwrite_existing);
  // config.json last: its presence marks a complete checkpoint.
  std::ofstream(dir / "config.json") << c.config.dump(2);
  return dir;
}

// Flushes the freshly written files to disk (so that write-back does not run during the
// measurement), then reads every file of `dir` once, so the load is measured from the page
// cache.
void warm_page_cache(const fs::path& dir) {
  ::sync();
  std::vector<char> buffer(1 << 20);
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    }
  }
}

struct Case {
  Checkpoint (*make)();
  DType dtype;
  std::uint64_t shard_bytes;
};

const Case cases[] = {
    {gpt2_xl, DType::F32, 1ull << 30},
    {gpt2_xl, DType::F16, 0},
    {pythia_1b, DType::F32, 0},
    {pythia_1b, DType::F16, 0},
    {llama_32_1b, DType::BF16, 1ull << 30},  // sharded, as the Hub's larger Llama files
    {qwen25_05b, DType::BF16, 0},
};
constexpr long kFirstLlamaCase = 4;

// One case's checkpoint, written (once) and read into the page cache, with its summary and the
// label both benchmarks print.
struct Prepared {
  fs::path dir;
  nlb::ModelSummary summary;
  std::string label;
};

Prepared prepare(const Case& c) {
  const Checkpoint checkpoint = c.make();
  Prepared p;
  p.dir = write_checkpoint(checkpoint, c.dtype, c.shard_bytes);
  p.summary = nlb::summarize_model(p.dir);
  p.label = checkpoint.name + " " + std::string(nlb::io::to_string(c.dtype)) +
            (c.shard_bytes > 0 ? " sharded" : "");
  warm_page_cache(p.dir);
  return p;
}

using MappedWeights = nlb::backend::with_weights<nlb::storage::mapped>;
using Bf16Weights = nlb::backend::with_weights<nlb::storage::bf16>;

// This process's resident set in bytes (/proc/self/statm).
double resident_bytes() {
  std::ifstream in("/proc/self/statm");
  double pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE));
}

template <class Backend>
void BM_LoadModel(benchmark::State& state) {
  const auto [dir, summary, label] = prepare(cases[state.range(0)]);
  double growth = 0;
  for (auto _ : state) {
    const double before = resident_bytes();
    const auto model = nlb::load_model<float, Backend>(dir);
    growth = std::max(growth, resident_bytes() - before);
    benchmark::DoNotOptimize(&model);
  }
  state.SetLabel(label);
  state.counters["rss_growth_GB"] = growth / 1e9;
  const double files = static_cast<double>(summary.file_bytes());
  const double weights = static_cast<double>(summary.weight_bytes<float>());
  state.counters["file_GB"] = files / 1e9;
  state.counters["file_GBps"] =
      benchmark::Counter(files / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weights_GBps"] =
      benchmark::Counter(weights / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

template <class Backend>
void BM_LoadAndFirstToken(benchmark::State& state) {
  const auto [dir, summary, label] = prepare(cases[state.range(0)]);
  const std::int32_t token[] = {0};
  nlb::Context<Backend> ctx;
  for (auto _ : state) {
    const auto model = nlb::load_model<float, Backend>(dir);
    typename nlb::Transformer<float, Backend>::Logits logits;
    typename nlb::Transformer<float, Backend>::Workspace ws;
    model.forward(ctx, token, logits, ws);
    benchmark::DoNotOptimize(logits.data());
  }
  state.SetLabel(label);
}

// What a copying load cannot beat: writing the weights' bytes into memory the process has not
// touched before. On a VM the first write to such memory can cost far more than later ones (the
// host backs the guest's pages lazily), so this, not the copy, bounds the load.
void BM_FreshMemoryWrite(benchmark::State& state) {
  constexpr nlb::Index rows = 4096, cols = 4096;  // 64 MiB of float, a large weight matrix
  constexpr int matrices = 64;                    // 4 GiB
  for (auto _ : state) {
    std::vector<nlb::RowMatrix<float>> weights(matrices);
    for (auto& m : weights) {
      m.resize(rows, cols);
      nlb::io::detail::populate_for_write(m.data(), static_cast<std::size_t>(m.size()) * 4);
      m.setConstant(1.0f);
    }
    benchmark::DoNotOptimize(weights.back().data());
  }
  const double bytes = double{matrices} * rows * cols * 4;
  state.counters["GB"] = bytes / 1e9;
  state.counters["GBps"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// Runs `argv` as a child process; returns its peak resident set in bytes and its exit status.
std::pair<std::uint64_t, int> run_child(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    // Quiet child: the benchmark's own output stays readable.
    if (std::freopen("/dev/null", "w", stdout) == nullptr ||
        std::freopen("/dev/null", "w", stderr) == nullptr)
      _exit(126);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  return {static_cast<std::uint64_t>(usage.ru_maxrss) * 1024,
          WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

void BM_EvalPeakRss(benchmark::State& state) {
  const bool bf16 = state.range(0) >= kFirstLlamaCase;  // kept in BF16, as a user would
  const auto [dir, summary, label] = prepare(cases[state.range(0)]);
  if (std::string(NLB_TOOL_PATH).empty()) {
    state.SkipWithError("built without the nlb tool (NLB_BUILD_TOOLS=OFF)");
    return;
  }
  // Linux carries a process's peak resident set over fork and exec into the child's ru_maxrss:
  // with this process holding models (the decode and prefill benchmarks keep theirs), the child's
  // figure would be ours. Run these alone (--benchmark_filter=BM_EvalPeakRss) when it refuses.
  if (resident_bytes() > 0.5e9) {
    state.SkipWithError("this process holds more than 0.5 GB: run BM_EvalPeakRss alone");
    return;
  }
  std::uint64_t peak = 0;
  for (auto _ : state) {
    std::vector<std::string> argv{
        NLB_TOOL_PATH,   "eval",
        "--model",       dir.string(),
        "--text",        std::string(NLB_SOURCE_DIR) + "/data/kjv-eval.txt",
        "--context",     "128",
        "--max-windows", "2"};
    if (bf16) {
      argv.push_back("--weights");
      argv.push_back("bf16");
    }
    const auto [rss, status] = run_child(argv);
    if (status != 0) {
      state.SkipWithError(("nlb eval exited with status " + std::to_string(status)).c_str());
      return;
    }
    peak = std::max(peak, rss);
  }
  state.SetLabel(label + (bf16 ? " --weights bf16" : ""));
  // The weights as held: float32, or the BF16 matrices (the norms and biases are a rounding error).
  const double weights = static_cast<double>(summary.weight_bytes<float>()) / (bf16 ? 2.0 : 1.0);
  state.counters["weights_GB"] = weights / 1e9;
  state.counters["peak_rss_GB"] = static_cast<double>(peak) / 1e9;
  state.counters["rss_over_weights"] = static_cast<double>(peak) / weights;
}

// `n` token ids drawn uniformly below `vocab` (fixed seed).
std::vector<std::int32_t> random_tokens(nlb::Index n, nlb::Index vocab) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
  std::uint64_t state = 7;
  for (auto& t : tokens) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    t = static_cast<std::int32_t>((state >> 33) % static_cast<std::uint64_t>(vocab));
  }
  return tokens;
}

// Bytes one decoding step reads at `span` cached positions: every weight matrix in BF16 (the
// tied unembedding once: the embedding row is one row), the F32 norms and biases, the KV cache.
double llama_step_bytes(const nlb::ModelConfig& c, double span) {
  const double d = static_cast<double>(c.d_model), h = static_cast<double>(c.d_hidden);
  const double kv = static_cast<double>(c.kv_width()), layers = static_cast<double>(c.n_layers);
  const double matrices =
      layers * (2 * d * d + 2 * d * kv + 3 * d * h) + static_cast<double>(c.vocab_size) * d;
  const double vectors = layers * (2 * d + (c.attention_bias ? d + 2 * kv : 0)) + d;
  return 2 * matrices + 4 * (vectors + layers * 2 * span * kv);
}

template <class Backend>
const nlb::Transformer<float, Backend>& llama_model(long i) {
  static std::map<long, nlb::Transformer<float, Backend>> models;
  auto it = models.find(i);
  if (it == models.end())
    it = models.emplace(i, nlb::load_model<float, Backend>(prepare(cases[i]).dir)).first;
  return it->second;
}

void BM_DecodeBf16(benchmark::State& state) {
  constexpr nlb::Index prompt = 16, steps = 16;
  constexpr int threads = 2;
  const long i = state.range(0);
  const auto& model = llama_model<Bf16Weights>(i);
  using Model = nlb::Transformer<float, Bf16Weights>;
  nlb::Context<Bf16Weights> ctx(threads);
  const auto tokens = random_tokens(prompt + steps, model.config().vocab_size);
  auto cache = model.make_cache(prompt + steps);
  Model::Workspace ws;
  Model::Logits logits;
  double seconds = 0;
  for (auto _ : state) {
    cache.clear();
    model.forward(ctx, std::span(tokens).first(prompt), logits, ws, nlb::NoTaps{}, &cache);
    const auto start = std::chrono::steady_clock::now();
    for (nlb::Index t = prompt; t < prompt + steps; ++t)
      model.forward(ctx, std::span(tokens).subspan(static_cast<std::size_t>(t), 1), logits, ws,
                    nlb::NoTaps{}, &cache);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(s);
    seconds += s;
  }
  const double bytes = llama_step_bytes(model.config(), prompt + (steps + 1) / 2.0);
  const double bandwidth = nlb::bench::read_bandwidth(threads, bytes);
  const double rate = static_cast<double>(steps * state.iterations()) / seconds;
  state.SetLabel(prepare(cases[i]).label);
  state.counters["tokens_per_second"] = rate;
  state.counters["bytes_per_token_GB"] = bytes / 1e9;
  state.counters["read_GBps"] = bandwidth / 1e9;
  state.counters["bound_tokens_per_second"] = bandwidth / bytes;
  state.counters["pct_of_bound"] = 100 * rate * bytes / bandwidth;
}

template <class Backend>
void BM_Prefill(benchmark::State& state) {
  constexpr nlb::Index length = 128;
  const long i = state.range(0);
  const auto& model = llama_model<Backend>(i);
  nlb::Context<Backend> ctx(2);
  const auto tokens = random_tokens(length, model.config().vocab_size);
  typename nlb::Transformer<float, Backend>::Workspace ws;
  typename nlb::Transformer<float, Backend>::Logits logits;
  model.forward(ctx, tokens, logits, ws);  // warm-up
  for (auto _ : state) {
    model.forward(ctx, tokens, logits, ws);
    benchmark::DoNotOptimize(logits.data());
  }
  state.SetLabel(prepare(cases[i]).label);
  state.counters["tokens_per_second"] = benchmark::Counter(
      static_cast<double>(length), benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  benchmark::RegisterBenchmark("BM_FreshMemoryWrite", BM_FreshMemoryWrite)
      ->Iterations(3)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  for (long i = kFirstLlamaCase; i < static_cast<long>(std::size(cases)); ++i) {
    benchmark::RegisterBenchmark("BM_LoadModel<bf16>", BM_LoadModel<Bf16Weights>)
        ->Arg(i)
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_DecodeBf16", BM_DecodeBf16)
        ->Arg(i)
        ->Iterations(3)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_Prefill<bf16>", BM_Prefill<Bf16Weights>)
        ->Arg(i)
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_Prefill<f32>", BM_Prefill<nlb::backend::cpu>)
        ->Arg(i)
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (long i = 0; i < static_cast<long>(std::size(cases)); ++i) {
    benchmark::RegisterBenchmark("BM_LoadModel<f32>", BM_LoadModel<nlb::backend::cpu>)
        ->Arg(i)
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_LoadModel<mapped>", BM_LoadModel<MappedWeights>)
        ->Arg(i)
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_LoadAndFirstToken<f32>",
                                 BM_LoadAndFirstToken<nlb::backend::cpu>)
        ->Arg(i)
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_LoadAndFirstToken<mapped>",
                                 BM_LoadAndFirstToken<MappedWeights>)
        ->Arg(i)
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_EvalPeakRss", BM_EvalPeakRss)
        ->Arg(i)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (std::getenv("NLB_BENCH_LOAD_KEEP") == nullptr) {
    std::error_code ignored;
    fs::remove_all(bench_root(), ignored);
  }
  return 0;
}
