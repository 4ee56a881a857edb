// The nlb program as a user runs it: eval/forward/generate contracts, token files, help pages
// and the version, renamed options, and a corpus of malformed model directories (each a
// FormatError naming what is wrong, and a clean non-zero exit from `nlb eval`, never a crash).

#include <boost/test/unit_test.hpp>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "cli_runner.hpp"
#include "model_copy.hpp"
#include "nlb/io/safetensors.hpp"
#include "nlb/io/safetensors_writer.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/sampling.hpp"
#include "nlb/version.hpp"
#include "scratch_dir.hpp"
#include "tolerances.hpp"

namespace {

namespace fs = std::filesystem;
const fs::path source_dir = NLB_SOURCE_DIR;
const fs::path tiny_gpt2 = source_dir / "models/tiny-gpt2";
const fs::path eval_text = source_dir / "data/kjv-eval.txt";

using nlb::test::contains;
using nlb::test::slurp;

// One directory per test process, removed when the process exits.
fs::path scratch_dir() {
  static const nlb::test::ScratchDir dir("cli-test");
  return dir.path;
}

// Runs `nlb <args>` in the scratch directory; captures stdout and stderr.
nlb::test::CliResult run_nlb(const std::string& args) {
  return nlb::test::run_nlb(scratch_dir(), args);
}

double fixture_ppl_8_windows() {
  std::ifstream in(source_dir / "tests/fixtures/tiny-gpt2-ppl.json");
  const auto j = nlohmann::json::parse(in);
  for (const auto& run : j.at("runs")) {
    if (run.at("text") == "data/kjv-eval.txt" && run.at("windows") == 8)
      return run.at("ppl");
  }
  throw std::runtime_error("tiny-gpt2-ppl.json has no 8-window kjv-eval run");
}

// ---- malformed model directories, made from the shipped model ------------------------------

using nlb::test::TensorMap;
const auto read_all = nlb::test::read_all_tensors;

// The model directory scratch/<name>, written from `tensors` and `config`.
fs::path write_model(const std::string& name, const TensorMap& tensors,
                     const nlohmann::json& config) {
  const fs::path dir = scratch_dir() / name;
  nlb::test::write_model_dir(dir, tensors, config);
  return dir;
}

struct MalformedCase {
  std::string name;
  std::string phrase;  // must appear in the FormatError message
  std::function<fs::path()> make;
};

using Edit = std::function<void(TensorMap&, nlohmann::json&)>;

// A maker of edited copies of the model in `source`: with(name, edit) is a function that writes
// scratch/<name>, the source's tensors and config changed by `edit`.
std::function<std::function<fs::path()>(std::string, Edit)> edited_copies(const fs::path& source) {
  const TensorMap tensors = read_all(source / "model.safetensors");
  const auto config = nlohmann::json::parse(slurp(source / "config.json"));
  return [=](std::string name, Edit edit) -> std::function<fs::path()> {
    return [=] {
      TensorMap t = tensors;
      nlohmann::json c = config;
      edit(t, c);
      return write_model(name, t, c);
    };
  };
}

// A maker of scratch/<name>: `config` and a sharded index that puts `tensor` in a shard that is
// not there.
std::function<fs::path()> index_with_missing_shard(const std::string& name,
                                                   const nlohmann::json& config,
                                                   const std::string& tensor) {
  return [=] {
    const fs::path dir = scratch_dir() / name;
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << config.dump();
    std::ofstream(dir / "model.safetensors.index.json")
        << nlohmann::json{{"weight_map", {{tensor, "model-00002-of-00002.safetensors"}}}}.dump();
    return dir;
  };
}

std::vector<MalformedCase> malformed_model_cases() {
  const TensorMap good = read_all(tiny_gpt2 / "model.safetensors");
  const auto config = nlohmann::json::parse(slurp(tiny_gpt2 / "config.json"));
  const auto with = edited_copies(tiny_gpt2);
  std::vector<MalformedCase> cases{
      {"missing_tensor", "missing tensor \"transformer.h.0.ln_1.weight\"",
       with("missing_tensor", [](auto& t, auto&) { t.erase("transformer.h.0.ln_1.weight"); })},
      {"unexpected_tensor", "unexpected tensor \"transformer.h.0.attn.extra\"",
       with("unexpected_tensor",
            [](auto& t, auto&) {
              t["transformer.h.0.attn.extra"] = {{2}, {1.0f, 2.0f}};
            })},
      {"wrong_shape", "shape: expected [128, 384]",
       with("wrong_shape",
            [](auto& t, auto&) {
              auto& w = t["transformer.h.1.attn.c_attn.weight"];
              w.shape = {384, 128};  // transposed: the layout of a Linear, not a Conv1D
            })},
      {"config_vocab_conflict", "transformer.wte.weight",
       with("config_vocab_conflict", [](auto&, auto& c) { c["vocab_size"] = 300; })},
      {"config_more_layers", "missing tensor \"transformer.h.4.ln_1.weight\"",
       with("config_more_layers", [](auto&, auto& c) { c["n_layer"] = 5; })},
      {"config_fewer_layers", "unexpected tensor \"transformer.h.3.",
       with("config_fewer_layers", [](auto&, auto& c) { c["n_layer"] = 3; })},
      {"config_missing_key", "missing config key \"n_embd\"",
       with("config_missing_key", [](auto&, auto& c) { c.erase("n_embd"); })},
      {"config_unknown_model_type", "found \"falcon\"",
       with("config_unknown_model_type", [](auto&, auto& c) { c["model_type"] = "falcon"; })},
      {"config_heads_do_not_divide", "multiple of the head count",
       with("config_heads_do_not_divide", [](auto&, auto& c) { c["n_head"] = 3; })},
      {"config_wrong_type", "expected a positive integer",
       with("config_wrong_type", [](auto&, auto& c) { c["n_embd"] = "128"; })},
      {"config_bad_activation", "activation_function",
       with("config_bad_activation", [](auto&, auto& c) { c["activation_function"] = "relu"; })},
      {"buffer_wrong_shape", "buffer \"transformer.h.0.attn.bias\" shape",
       with("buffer_wrong_shape",
            [](auto& t, auto&) {
              t["transformer.h.0.attn.bias"] = {{1, 1, 2, 2}, {1, 0, 1, 1}};
            })},
      {"lm_head_wrong_shape", "tensor \"lm_head.weight\": shape",
       with("lm_head_wrong_shape",
            [](auto& t, auto&) {
              t["lm_head.weight"] = {{2, 2}, {0, 0, 0, 0}};
            })},
      {"config_not_json", "config is not valid JSON",
       [=] {
         const fs::path dir = write_model("config_not_json", good, config);
         std::ofstream(dir / "config.json") << "{\"model_type\": \"gpt2\",";
         return dir;
       }},
      {"no_weights_file", "no model.safetensors",
       [=] {
         const fs::path dir = scratch_dir() / "no_weights_file";
         fs::create_directories(dir);
         std::ofstream(dir / "config.json") << config.dump();
         return dir;
       }},
      {"not_a_directory", "not a model directory",
       [=] { return scratch_dir() / "does_not_exist"; }},
      {"index_missing_shard", "model-00002-of-00002.safetensors",
       index_with_missing_shard("index_missing_shard", config, "transformer.wte.weight")},
      {"truncated_weights", "model.safetensors",
       [=] {
         const fs::path dir = write_model("truncated_weights", good, config);
         fs::resize_file(dir / "model.safetensors", fs::file_size(dir / "model.safetensors") / 2);
         return dir;
       }},
  };
  // The Llama family's keys and names, from the shipped tiny-llama.
  const fs::path tiny_llama = source_dir / "models/tiny-llama";
  const auto llama_config = nlohmann::json::parse(slurp(tiny_llama / "config.json"));
  const auto llama_with = edited_copies(tiny_llama);
  const std::string layer0 = "model.layers.0.self_attn.";
  std::vector<MalformedCase> llama_cases{
      {"llama_kv_heads_not_a_divisor", "num_key_value_heads",
       llama_with("llama_kv_heads_not_a_divisor",
                  [](auto&, auto& c) { c["num_key_value_heads"] = 3; })},
      {"llama_rope_scaling_unknown_type", "found \"yarn\"",
       llama_with("llama_rope_scaling_unknown_type",
                  [](auto&, auto& c) { c["rope_scaling"]["rope_type"] = "yarn"; })},
      {"llama_rope_scaling_missing_factor", "missing config key \"factor\"",
       llama_with("llama_rope_scaling_missing_factor",
                  [](auto&, auto& c) { c["rope_scaling"].erase("factor"); })},
      {"llama_mlp_bias", "mlp_bias",
       llama_with("llama_mlp_bias", [](auto&, auto& c) { c["mlp_bias"] = true; })},
      {"llama_missing_k_proj", "missing tensor \"" + layer0 + "k_proj.weight\"",
       llama_with("llama_missing_k_proj",
                  [=](auto& t, auto&) { t.erase(layer0 + "k_proj.weight"); })},
      {"llama_v_proj_for_every_head", "tensor \"" + layer0 + "v_proj.weight\": shape",
       llama_with("llama_v_proj_for_every_head",
                  [=](auto& t, auto&) {
                    auto& v = t[layer0 + "v_proj.weight"];  // [48, 96]: 2 KV heads of 24
                    v.shape = {96, 96};
                    v.values.resize(96 * 96, 0.0f);
                  })},
      {"llama_missing_lm_head", "missing tensor \"lm_head.weight\"",
       llama_with("llama_missing_lm_head", [](auto& t, auto&) { t.erase("lm_head.weight"); })},
      {"llama_unexpected_q_bias", "unexpected tensor \"" + layer0 + "q_proj.bias\"",
       llama_with("llama_unexpected_q_bias",
                  [=](auto& t, auto&) {
                    t[layer0 + "q_proj.bias"] = {{96}, std::vector<float>(96, 0.0f)};
                  })},
      {"llama_index_missing_shard", "model-00002-of-00002.safetensors",
       index_with_missing_shard("llama_index_missing_shard", llama_config,
                                "model.embed_tokens.weight")},
  };
  cases.insert(cases.end(), llama_cases.begin(), llama_cases.end());
  // Every malformed safetensors file of the reader's corpus, as a model's weights.
  for (const auto& entry :
       fs::directory_iterator(source_dir / "tests/fixtures/malformed-safetensors")) {
    const std::string stem = entry.path().stem().string();
    cases.push_back({"file_" + stem, "model.safetensors", [=] {
                       const fs::path dir = scratch_dir() / ("file_" + stem);
                       fs::create_directories(dir);
                       fs::copy_file(entry.path(), dir / "model.safetensors",
                                     fs::copy_options::overwrite_existing);
                       std::ofstream(dir / "config.json") << config.dump();
                       return dir;
                     }});
  }
  return cases;
}

}  // namespace

BOOST_AUTO_TEST_CASE(eval_json_matches_pytorch_perplexity) {
  const auto r = run_nlb("eval --model '" + tiny_gpt2.string() + "' --text '" + eval_text.string() +
                         "' --context 128 --max-windows 8 --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"ppl", "mean_loss", "predicted_tokens", "windows", "context"}) {
    BOOST_TEST(j.contains(key), key);
  }
  BOOST_TEST(j["windows"] == 8);
  BOOST_TEST(j["predicted_tokens"] == 8 * 127);
  BOOST_TEST(j["context"] == 128);
  const double ref = fixture_ppl_8_windows();
  BOOST_TEST(std::abs(j["ppl"].get<double>() / ref - 1) <= nlb::test::tol::model_ppl_rel);
  BOOST_TEST(std::abs(std::exp(j["mean_loss"].get<double>()) - j["ppl"].get<double>()) <= 1e-9);
}

// --device cuda: with a usable GPU, eval gives the CPU run's perplexity and budget writes a report
// that says where its passes ran; without one, a refusal that says why — exit 1 naming the reason
// no device is usable (an nlb with the CUDA backend), or exit 2 saying the backend was not built —
// from eval, generate and budget alike, before any output (no report directory). A device of
// another name is a usage error.
BOOST_AUTO_TEST_CASE(device_cuda_runs_or_says_why_not) {
  const std::string eval = "eval --model '" + tiny_gpt2.string() + "' --text '" +
                           eval_text.string() + "' --context 128 --max-windows 2 --json";
  const auto cpu = run_nlb(eval);
  BOOST_TEST_REQUIRE(cpu.exit_code == 0, cpu.err);
  const auto gpu = run_nlb(eval + " --device cuda");
  const auto generated = run_nlb("generate --model '" + tiny_gpt2.string() +
                                 "' --prompt 'And God' --max-new-tokens 4 --device cuda");
  const fs::path budget_out = scratch_dir() / "budget-on-cuda";
  fs::remove_all(budget_out);
  const auto budget = run_nlb("budget --model '" + tiny_gpt2.string() +
                              "' --context 32 --fit-positions 300 --label-positions 300 "
                              "--decode-steps 4 --json --device cuda --out '" +
                              budget_out.string() + "'");
  BOOST_TEST_MESSAGE("eval --device cuda: exit " << gpu.exit_code << ": " << gpu.err);
  if (gpu.exit_code == 0) {
    const double want = nlohmann::json::parse(cpu.out)["ppl"].get<double>();
    const double got = nlohmann::json::parse(gpu.out)["ppl"].get<double>();
    BOOST_TEST(std::abs(got / want - 1) <= nlb::test::tol::model_ppl_rel);
    BOOST_TEST(generated.exit_code == 0, generated.err);
    BOOST_TEST_REQUIRE(budget.exit_code == 0, budget.err);
    BOOST_TEST(nlohmann::json::parse(budget.out)["protocol"]["device"] == "cuda");
    BOOST_TEST(fs::exists(budget_out / "report.json"));
  } else if (gpu.exit_code == 1) {
    BOOST_TEST(contains(gpu.err, "no usable device: "));
    for (const auto* refused : {&generated, &budget}) {
      BOOST_TEST(refused->exit_code == 1);
      BOOST_TEST(contains(refused->err, "no usable device: "));
      BOOST_TEST(refused->out.empty());
    }
    BOOST_TEST(!fs::exists(budget_out));
  } else {
    BOOST_TEST(gpu.exit_code == 2);
    BOOST_TEST(contains(gpu.err, "built without the CUDA backend"));
    BOOST_TEST(generated.exit_code == 2);
    BOOST_TEST(budget.exit_code == 2);
    BOOST_TEST(!fs::exists(budget_out));
  }
  const auto other = run_nlb(eval + " --device tpu");
  BOOST_TEST(other.exit_code == 2);
  BOOST_TEST(contains(other.err, "--device: expected cpu or cuda, found \"tpu\""));
}

// nlb loads its CUDA code, the module nlb_cuda.so beside it, only for --device cuda
// (tools/nlb/device_model.hpp): a copy of nlb without the module runs everything else, and
// --device cuda names the paths it tried. Without the CUDA backend there is no module and the
// copy refuses --device cuda as nlb does.
BOOST_AUTO_TEST_CASE(device_cuda_without_its_module_names_the_paths_tried) {
  const fs::path built = NLB_BINARY;
  const bool has_module = fs::exists(built.parent_path() / "nlb_cuda.so");
  const fs::path dir = scratch_dir() / "nlb_without_its_module";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path copy = dir / "nlb";
  fs::copy_file(built, copy);
  const auto run_copy = [&](const std::string& args) {
    const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
    const int status = std::system(
        ("'" + copy.string() + "' " + args + " >'" + out.string() + "' 2>'" + err.string() + "'")
            .c_str());
    nlb::test::CliResult r;
    if (WIFEXITED(status))
      r.exit_code = WEXITSTATUS(status);
    r.out = nlb::test::slurp(out);
    r.err = nlb::test::slurp(err);
    return r;
  };
  const std::string eval = "eval --model '" + tiny_gpt2.string() + "' --text '" +
                           eval_text.string() + "' --context 128 --max-windows 1 --json";
  const auto on_cpu = run_copy(eval);
  BOOST_TEST(on_cpu.exit_code == 0, on_cpu.err);
  const auto on_cuda = run_copy(eval + " --device cuda");
  BOOST_TEST(on_cuda.out.empty());
  if (has_module) {
    BOOST_TEST(on_cuda.exit_code == 1);
    BOOST_TEST(contains(on_cuda.err, "the CUDA module nlb_cuda.so could not be loaded"),
               on_cuda.err);
    BOOST_TEST(contains(on_cuda.err, (dir / "nlb_cuda.so").string() + ": not found"), on_cuda.err);
  } else {
    BOOST_TEST(on_cuda.exit_code == 2);
    BOOST_TEST(contains(on_cuda.err, "built without the CUDA backend"), on_cuda.err);
  }
}

BOOST_AUTO_TEST_CASE(eval_reads_u16_and_u32_token_files_like_text) {
  const auto tokens = nlb::io::read_text_tokens(eval_text);
  const fs::path u16 = scratch_dir() / "eval.u16.bin", u32 = scratch_dir() / "eval.u32.bin";
  nlb::io::write_token_file(u16, tokens, nlb::io::TokenDType::U16);
  nlb::io::write_token_file(u32, tokens, nlb::io::TokenDType::U32);
  const std::string common = "eval --model '" + tiny_gpt2.string() + "' --max-windows 3 --json ";
  const auto text = run_nlb(common + "--text '" + eval_text.string() + "'");
  const auto a = run_nlb(common + "--tokens '" + u16.string() + "'");
  const auto b = run_nlb(common + "--tokens '" + u32.string() + "' --token-dtype u32");
  BOOST_TEST_REQUIRE(text.exit_code == 0, text.err);
  BOOST_TEST(a.out == text.out);
  BOOST_TEST(b.out == text.out);
  // The default context is the model's n_positions (128).
  BOOST_TEST(nlohmann::json::parse(text.out)["context"] == 128);
}

BOOST_AUTO_TEST_CASE(forward_writes_logits_atomically) {
  const fs::path out = scratch_dir() / "logits.safetensors";
  const auto r =
      run_nlb("forward --model '" + tiny_gpt2.string() + "' --text '" + eval_text.string() +
              "' --context 128 --windows 2 --out '" + out.string() + "'");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const auto written = nlb::io::SafetensorsFile::open(out);
  const auto& info = written.info("logits");
  BOOST_TEST((info.shape == std::vector<std::int64_t>{2, 128, 256}));
  BOOST_TEST((info.dtype == nlb::io::DType::F32));
  // The fixture holds PyTorch's logits of the same two windows (bytes 0..255 of the text).
  const auto ref =
      nlb::io::SafetensorsFile::open(source_dir / "tests/fixtures/tiny-gpt2-reference.safetensors");
  const auto mine = written.read<double>("logits");
  const auto theirs = ref.read<double>("logits_f64");
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    err = std::max(err, std::abs(mine[i] - theirs[i]));
    scale = std::max(scale, std::abs(theirs[i]));
  }
  BOOST_TEST(err / scale <= nlb::test::tol::model_f32_rel);

  // Asking for more windows than the text holds fails and leaves no file behind.
  const fs::path missing = scratch_dir() / "never.safetensors";
  const auto bad =
      run_nlb("forward --model '" + tiny_gpt2.string() + "' --text '" + eval_text.string() +
              "' --context 128 --windows 100000 --out '" + missing.string() + "'");
  BOOST_TEST(bad.exit_code == 1);
  BOOST_TEST(contains(bad.err, "windows"));
  BOOST_TEST(!fs::exists(missing));
  for (const auto& e : fs::directory_iterator(scratch_dir())) {
    BOOST_TEST(!contains(e.path().filename().string(), "never.safetensors.tmp"));
  }
}

BOOST_AUTO_TEST_CASE(generate_is_deterministic_for_a_seed) {
  const std::string common =
      "generate --model '" + tiny_gpt2.string() + "' --prompt 'And God said' --max-new-tokens 40 ";
  const auto a = run_nlb(common + "--top-k 5 --temperature 0.8 --seed 7");
  const auto b = run_nlb(common + "--top-k 5 --temperature 0.8 --seed 7");
  const auto greedy = run_nlb(common + "--temperature 0");
  const auto top1 = run_nlb(common + "--top-k 1 --seed 99");
  BOOST_TEST_REQUIRE(a.exit_code == 0, a.err);
  BOOST_TEST(a.out == b.out);
  BOOST_TEST(a.out.rfind("And God said", 0) == 0u);
  BOOST_TEST(a.out.size() == std::string("And God said").size() + 40 + 1);  // + newline
  BOOST_TEST(greedy.out == top1.out);
  BOOST_TEST_MESSAGE("greedy: " << greedy.out);
}

// --weights f16|bf16 keeps the weight matrices in 16 bits, q8 in 8-bit blocks. On a checkpoint
// stored in BF16 the values are the same as the f32 model's, so eval's mean loss differs only by
// the two engines' float arithmetic (engine_loss_f32_abs); on the F32 model, by what rounding
// the weights moves (nonzero). generate and forward run with them; an unknown storage and narrow
// weights on --device cuda are usage errors.
BOOST_AUTO_TEST_CASE(weights_keep_the_matrices_in_16_or_8_bits) {
  const auto mean_loss = [](const fs::path& model, const std::string& weights) {
    const auto r = run_nlb("eval --model '" + model.string() + "' --text '" + eval_text.string() +
                           "' --max-windows 8 --json --weights " + weights);
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
    return nlohmann::json::parse(r.out).at("mean_loss").get<double>();
  };
  // tiny-gpt2 rounded to BF16, checked against PyTorch's rounding (model_copy.hpp).
  const fs::path bf16_model =
      nlb::test::write_rounded_copy(tiny_gpt2, nlb::io::DType::BF16,
                                    source_dir / "tests/fixtures/tiny-gpt2-bf16-logits.safetensors",
                                    scratch_dir() / "tiny-gpt2-bf16");
  const double stored = mean_loss(bf16_model, "f32");
  BOOST_TEST(std::abs(mean_loss(bf16_model, "bf16") - stored) <=
             nlb::test::tol::engine_loss_f32_abs);
  const double f32 = mean_loss(tiny_gpt2, "f32");
  for (const char* weights : {"f16", "bf16", "q8"}) {
    const double rounded = mean_loss(tiny_gpt2, weights);
    BOOST_TEST_MESSAGE("tiny-gpt2 mean loss, " << weights << " weights: " << rounded
                                               << " (f32: " << f32 << ")");
    BOOST_TEST(rounded != f32);
    BOOST_TEST(std::abs(rounded - f32) <= 0.01);  // a rounding effect, not a broken model
  }
  for (const char* weights : {"f16", "q8"}) {
    const auto generated =
        run_nlb("generate --prompt 'In the beginning' --max-new-tokens 8 --seed 3 --weights " +
                std::string(weights));
    BOOST_TEST(generated.exit_code == 0, generated.err);
    BOOST_TEST(generated.out.rfind("In the beginning", 0) == 0);
  }
  const auto forward = run_nlb("forward --text '" + eval_text.string() +
                               "' --context 16 --windows 1 --weights bf16 --out bf16.safetensors");
  BOOST_TEST(forward.exit_code == 0, forward.err);
  BOOST_TEST(fs::exists(scratch_dir() / "bf16.safetensors"));
  const auto unknown = run_nlb("eval --text '" + eval_text.string() + "' --weights f8");
  BOOST_TEST(unknown.exit_code == 2);
  BOOST_TEST(contains(unknown.err, "expected f32, f16, bf16 or q8, found \"f8\""), unknown.err);
  const auto on_cuda =
      run_nlb("eval --text '" + eval_text.string() + "' --weights q8 --device cuda");
  BOOST_TEST(on_cuda.exit_code == 2);
  BOOST_TEST(contains(on_cuda.err, "--weights q8 runs on the CPU; --device cuda keeps f32 weights"),
             on_cuda.err);
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_2_with_a_message) {
  const auto none = run_nlb("");
  BOOST_TEST(none.exit_code == 2);
  const auto unknown = run_nlb("frobnicate");
  BOOST_TEST(unknown.exit_code == 2);
  BOOST_TEST(contains(unknown.err, "unknown command"));
  const auto both = run_nlb("eval --text a --tokens b");
  BOOST_TEST(both.exit_code == 2);
  BOOST_TEST(contains(both.err, "exactly one of"));
  const auto bad_context = run_nlb("eval --text '" + eval_text.string() + "' --context 100000");
  BOOST_TEST(bad_context.exit_code == 2);
  BOOST_TEST(contains(bad_context.err, "--context"));
  const auto missing_text = run_nlb("eval --text /nonexistent.txt");
  BOOST_TEST(missing_text.exit_code == 1);
  BOOST_TEST(contains(missing_text.err, "/nonexistent.txt"));
}

BOOST_AUTO_TEST_CASE(token_dtype_needs_a_token_file_and_a_known_width) {
  auto tokens = nlb::io::read_text_tokens(eval_text);
  tokens.resize(tokens.size() / 2 * 2);  // an even count: read as u32 the size still fits
  const fs::path u16 = scratch_dir() / "dtype.u16.bin";
  nlb::io::write_token_file(u16, tokens, nlb::io::TokenDType::U16);
  // With --text, --token-dtype would silently do nothing.
  const auto unused =
      run_nlb("eval --text '" + eval_text.string() + "' --token-dtype u32 --max-windows 1");
  BOOST_TEST(unused.exit_code == 2, unused.err);
  BOOST_TEST(contains(unused.err, "--token-dtype"));
  BOOST_TEST(contains(unused.err, "--tokens FILE"));
  const auto unknown = run_nlb("eval --tokens '" + u16.string() + "' --token-dtype u8");
  BOOST_TEST(unknown.exit_code == 2, unknown.err);
  BOOST_TEST(contains(unknown.err, "expected u16 or u32, found \"u8\""));
  // The width is used: a u16 file read as u32 pairs two ids into one, beyond the vocabulary.
  const auto wrong = run_nlb("eval --tokens '" + u16.string() + "' --token-dtype u32");
  BOOST_TEST(wrong.exit_code == 1, wrong.err);
  BOOST_TEST(contains(wrong.err, "vocab_size 256"));
}

// Every option that changed its name in the CLI coherence pass (CHANGELOG.md) fails with a usage
// error naming the new spelling, in every subcommand that had it (budget's and linearize's
// renames are checked in their own suites, generate's here).
BOOST_AUTO_TEST_CASE(generate_tokens_count_was_renamed_max_new_tokens) {
  const auto r =
      run_nlb("generate --model '" + tiny_gpt2.string() + "' --prompt 'And God said' --tokens 40");
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(contains(r.err, "option --tokens was renamed"), r.err);
  BOOST_TEST(contains(r.err, "--max-new-tokens N"), r.err);
  BOOST_TEST(r.out.empty());
  const auto length =
      run_nlb("generate --model '" + tiny_gpt2.string() + "' --prompt 'And God said' --length 40");
  BOOST_TEST(length.exit_code == 2, length.err);
  BOOST_TEST(contains(length.err, "--max-new-tokens N"), length.err);
}

BOOST_AUTO_TEST_CASE(version_is_the_projects) {
  // The generated header follows project(VERSION) in the top-level CMakeLists.txt ...
  const std::string cmake = slurp(source_dir / "CMakeLists.txt");
  const std::string key = "project(nlbudget VERSION ";
  const auto at = cmake.find(key);
  BOOST_TEST_REQUIRE(at != std::string::npos);
  const auto begin = at + key.size();
  const std::string project_version = cmake.substr(begin, cmake.find(' ', begin) - begin);
  BOOST_TEST(std::string(NLB_VERSION_STRING) == project_version);
  BOOST_TEST(std::string(nlb::version.string) == project_version);
  BOOST_TEST(std::to_string(NLB_VERSION_MAJOR) + "." + std::to_string(NLB_VERSION_MINOR) + "." +
                 std::to_string(NLB_VERSION_PATCH) ==
             project_version);
  BOOST_TEST(std::to_string(nlb::version.major) + "." + std::to_string(nlb::version.minor) + "." +
                 std::to_string(nlb::version.patch) ==
             project_version);
  BOOST_TEST(NLB_VERSION / 10000 == NLB_VERSION_MAJOR);
  BOOST_TEST(NLB_VERSION / 100 % 100 == NLB_VERSION_MINOR);
  BOOST_TEST(NLB_VERSION % 100 == NLB_VERSION_PATCH);
  // ... and nlb prints it.
  const auto r = run_nlb("--version");
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "nlb " + project_version + "\n");
  BOOST_TEST(run_nlb("--version extra").exit_code == 2);
}

namespace {

// The words of `text` that look like options ("--name").
std::set<std::string> options_named_in(const std::string& text) {
  std::set<std::string> out;
  for (std::size_t at = text.find("--"); at != std::string::npos; at = text.find("--", at + 2)) {
    std::size_t end = at + 2;
    while (end < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '-'))
      ++end;
    if (end > at + 2)
      out.insert(text.substr(at, end - at));
    at = end - 2;
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(help_shows_the_overview_and_each_commands_page) {
  const std::vector<std::string> commands{"eval",      "forward",  "generate", "budget",
                                          "linearize", "spectrum", "info"};
  const auto overview = run_nlb("help");
  BOOST_TEST_REQUIRE(overview.exit_code == 0, overview.err);
  for (const auto& c : commands)
    BOOST_TEST(contains(overview.out, "\n  " + c + " "), c);
  BOOST_TEST(contains(overview.out, "nlb help [COMMAND]"));
  BOOST_TEST(contains(overview.out, "nlb --version"));
  // Without a command the overview goes to stderr, with the usage-error exit code.
  const auto none = run_nlb("");
  BOOST_TEST(none.exit_code == 2);
  BOOST_TEST(none.err == overview.out);

  for (const auto& c : commands) {
    const auto page = run_nlb("help " + c);
    BOOST_TEST_REQUIRE(page.exit_code == 0, c << ": " << page.err);
    BOOST_TEST(page.out.rfind("usage: nlb " + c + " ", 0) == 0u, c << ":\n" << page.out);
    BOOST_TEST(page.out != overview.out);
    const auto dash_help = run_nlb(c + " --help");
    BOOST_TEST(dash_help.exit_code == 0, c);
    BOOST_TEST(dash_help.out == page.out, c);
    // Every option the page names is one the command accepts: given it, the parser goes on to
    // the next argument (a probe option it does not know) instead of stopping at it. A value
    // option swallows the first probe as its value, hence two.
    const auto named = options_named_in(page.out);
    BOOST_TEST(named.count("--model") == 1u, c);
    for (const auto& option : named) {
      const auto r = run_nlb(c + " " + option + " --zz-probe --zz-probe");
      BOOST_TEST(r.exit_code == 2, c << " " << option << ": " << r.err);
      BOOST_TEST(contains(r.err, "unknown option --zz-probe"), c << " " << option << ": " << r.err);
    }
  }
  const auto unknown = run_nlb("help frobnicate");
  BOOST_TEST(unknown.exit_code == 2);
  BOOST_TEST(contains(unknown.err, "unknown command \"frobnicate\""));
  BOOST_TEST(unknown.out.empty());
  // A usage error points to the command's page.
  const auto bad = run_nlb("eval --bogus");
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(contains(bad.err, "unknown option --bogus"));
  BOOST_TEST(contains(bad.err, "nlb help eval"));
}

BOOST_AUTO_TEST_CASE(generate_page_prints_the_sampler_defaults) {
  const nlb::SamplingOptions defaults;
  const auto page = run_nlb("help generate").out;
  BOOST_TEST(
      contains(page, "--top-k K             sample among the K most likely tokens (default " +
                         std::to_string(defaults.top_k)));
  BOOST_TEST(contains(page, "--seed S              seed of the sampler (default " +
                                std::to_string(defaults.seed) + ")"));
}

BOOST_AUTO_TEST_CASE(text_on_a_large_vocabulary_model_without_tokenizer_says_to_pass_tokens) {
  // A tiny model with a 300-entry vocabulary: the shipped one with a wider embedding.
  TensorMap t = read_all(tiny_gpt2 / "model.safetensors");
  auto config = nlohmann::json::parse(slurp(tiny_gpt2 / "config.json"));
  auto& wte = t["transformer.wte.weight"];
  wte.values.resize(300 * 128, 0.01f);
  wte.shape = {300, 128};
  config["vocab_size"] = 300;
  const fs::path dir = write_model("vocab300", t, config);
  const auto r = run_nlb("eval --model '" + dir.string() + "' --text '" + eval_text.string() + "'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "--tokens FILE"), r.err);
  BOOST_TEST(contains(r.err, "300"));
  BOOST_TEST(contains(r.err, "no tokenizer files"), r.err);
}

#if NLB_WITH_TEXT
// A GPT-2 model with the real 50257-entry vocabulary and its tokenizer files: the shipped
// tiny-gpt2 with its embedding widened (rows 256.. small constants). With `eos_always` the
// final LayerNorm outputs one fixed vector that the (tied) embedding row of <|endoftext|>
// matches best, so every next token is <|endoftext|>.
fs::path bpe_model_dir(const std::string& name, bool eos_always) {
  constexpr std::int64_t vocab = 50257, d = 128;
  TensorMap t = read_all(tiny_gpt2 / "model.safetensors");
  auto config = nlohmann::json::parse(slurp(tiny_gpt2 / "config.json"));
  auto& wte = t["transformer.wte.weight"];
  wte.values.resize(vocab * d, 0.01f);
  wte.shape = {vocab, d};
  config["vocab_size"] = vocab;
  if (eos_always) {
    auto& gamma = t["transformer.ln_f.weight"].values;
    auto& beta = t["transformer.ln_f.bias"].values;
    std::fill(gamma.begin(), gamma.end(), 0.0f);
    std::fill(beta.begin(), beta.end(), 1.0f);
    std::fill(wte.values.begin() + (vocab - 1) * d, wte.values.end(), 1.0f);
  }
  const fs::path dir = write_model(name, t, config);
  for (const char* file : {"vocab.json", "merges.txt"})
    fs::copy_file(source_dir / "models/gpt2-tokenizer" / file, dir / file,
                  fs::copy_options::overwrite_existing);
  return dir;
}

BOOST_AUTO_TEST_CASE(tokenize_gives_tiktokens_ids) {
  // Independent reference: the tiktoken package's gpt2 encoding (tests/fixtures/README.md).
  std::ifstream in(source_dir / "tests/fixtures/tokenizer-reference.json");
  BOOST_TEST_REQUIRE(in.good(), "tests/fixtures/tokenizer-reference.json is missing");
  const auto fixture = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& c : fixture.at("cases")) {
    const std::string text = c.at("text");
    // Strings a shell argument carries unchanged (no quote, no NUL): the rest are checked
    // through the library in tests/text.
    if (text.empty() || text.size() > 200 || text.find('\'') != std::string::npos ||
        text.find('\0') != std::string::npos)
      continue;
    const auto r =
        run_nlb("tokenize --tokenizer '" + (source_dir / "models/gpt2-tokenizer").string() +
                "' --string '" + text + "' --json");
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
    const auto out = nlohmann::json::parse(r.out);
    BOOST_TEST(out.at("ids") == c.at("gpt2").at("tiktoken"), c.at("name"));
    BOOST_TEST(out.at("count") == c.at("gpt2").at("tiktoken").size());
    if (++checked == 20)
      break;
  }
  BOOST_TEST(checked == 20);
  // Special tokens only when allowed.
  const std::string gpt2 = (source_dir / "models/gpt2-tokenizer").string();
  const auto as_text =
      run_nlb("tokenize --tokenizer '" + gpt2 + "' --string '<|endoftext|>' --json");
  const auto allowed = run_nlb("tokenize --tokenizer '" + gpt2 +
                               "' --string '<|endoftext|>' --json --allow-special");
  BOOST_TEST(nlohmann::json::parse(allowed.out).at("ids") == nlohmann::json::array({50256}));
  BOOST_TEST(nlohmann::json::parse(as_text.out).at("count").get<int>() > 1);
  // Usage errors.
  BOOST_TEST(run_nlb("tokenize --string x --json").exit_code == 2);
  BOOST_TEST(run_nlb("tokenize --tokenizer '" + gpt2 + "' --json").exit_code == 2);
  const auto none = run_nlb("tokenize --tokenizer '" + tiny_gpt2.string() + "' --string x");
  BOOST_TEST(none.exit_code == 2);
  BOOST_TEST(contains(none.err, "no tokenizer files"), none.err);
}

// The shipped Llama-family model (RMSNorm, SwiGLU, 4 query heads over 2 KV heads, llama3 rope
// scaling, BF16 weights, its own llama3-style tokenizer.json) through every command that takes
// text: info names its parts, tokenize gives Hugging Face's token count (the fixture's, from the
// npm binding), eval and forward give PyTorch's perplexity and logits, generate continues a prompt.
BOOST_AUTO_TEST_CASE(shipped_llama_model_runs_every_command_from_text) {
  const fs::path llama = source_dir / "models/tiny-llama";
  std::ifstream in(source_dir / "tests/fixtures/tiny-llama-ppl.json");
  BOOST_TEST_REQUIRE(in.good(), "tests/fixtures/tiny-llama-ppl.json is missing");
  const auto fixture = nlohmann::json::parse(in);
  const auto& run = fixture.at("runs").at(0);
  BOOST_TEST_REQUIRE(run.at("max_windows") == 8);

  const auto info = run_nlb("info --model '" + llama.string() + "' --json");
  BOOST_TEST_REQUIRE(info.exit_code == 0, info.err);
  const auto i = nlohmann::json::parse(info.out);
  BOOST_TEST(i.at("architecture") == "llama");
  BOOST_TEST(i.at("heads") == 4);
  BOOST_TEST(i.at("key_value_heads") == 2);
  BOOST_TEST(i.at("norm") == "RMSNorm");
  BOOST_TEST(contains(i.at("mlp").get<std::string>(), "SwiGLU"));
  BOOST_TEST(contains(i.at("position").get<std::string>(), "llama3"));
  const auto text_info = run_nlb("info --model '" + llama.string() + "'");
  BOOST_TEST(contains(text_info.out, "grouped-query"), text_info.out);

  const auto count = run_nlb("tokenize --model '" + llama.string() + "' --text '" +
                             eval_text.string() + "' --json");
  BOOST_TEST_REQUIRE(count.exit_code == 0, count.err);
  BOOST_TEST(nlohmann::json::parse(count.out).at("count") == run.at("text_tokens"));

  const auto eval = run_nlb("eval --model '" + llama.string() + "' --text '" + eval_text.string() +
                            "' --context 128 --max-windows 8 --json");
  BOOST_TEST_REQUIRE(eval.exit_code == 0, eval.err);
  const auto e = nlohmann::json::parse(eval.out);
  BOOST_TEST(e.at("predicted_tokens") == run.at("predicted_tokens"));
  BOOST_TEST(std::abs(e.at("ppl").get<double>() / run.at("ppl").get<double>() - 1) <=
             nlb::test::tol::model_ppl_rel);
  // BF16 storage: the checkpoint's own values, so the same perplexity up to float arithmetic.
  const auto bf16 = run_nlb("eval --model '" + llama.string() + "' --text '" + eval_text.string() +
                            "' --context 128 --max-windows 8 --json --weights bf16");
  BOOST_TEST_REQUIRE(bf16.exit_code == 0, bf16.err);
  BOOST_TEST(std::abs(nlohmann::json::parse(bf16.out).at("ppl").get<double>() /
                          run.at("ppl").get<double>() -
                      1) <= nlb::test::tol::model_ppl_rel);

  // forward: the fixture's two windows are the first 256 tokens of the same text.
  const fs::path out = scratch_dir() / "llama-logits.safetensors";
  const auto forward =
      run_nlb("forward --model '" + llama.string() + "' --text '" + eval_text.string() +
              "' --context 128 --windows 2 --out '" + out.string() + "'");
  BOOST_TEST_REQUIRE(forward.exit_code == 0, forward.err);
  const auto written = nlb::io::SafetensorsFile::open(out);
  BOOST_TEST((written.info("logits").shape == std::vector<std::int64_t>{2, 128, 3261}));
  const auto ref = nlb::io::SafetensorsFile::open(
      source_dir / "tests/fixtures/tiny-llama-reference.safetensors");
  const auto mine = written.read<double>("logits");
  const auto theirs = ref.read<double>("logits_f64");  // [2, 9, vocab] at logit_positions
  const auto positions = ref.read<std::int64_t>("logit_positions");
  const std::size_t vocab = 3261, kept = positions.size();
  double err = 0, scale = 0;
  for (std::size_t w = 0; w < 2; ++w)
    for (std::size_t k = 0; k < kept; ++k)
      for (std::size_t v = 0; v < vocab; ++v) {
        const double a = mine[(w * 128 + static_cast<std::size_t>(positions[k])) * vocab + v];
        const double b = theirs[(w * kept + k) * vocab + v];
        err = std::max(err, std::abs(a - b));
        scale = std::max(scale, std::abs(b));
      }
  BOOST_TEST(err / scale <= nlb::test::tol::model_f32_rel);

  const auto generated = run_nlb("generate --model '" + llama.string() +
                                 "' --prompt 'And God said' --max-new-tokens 20 --temperature 0");
  BOOST_TEST_REQUIRE(generated.exit_code == 0, generated.err);
  BOOST_TEST(generated.out.rfind("And God said", 0) == 0u, generated.out);
  BOOST_TEST(generated.out.size() > std::string("And God said").size() + 5);
  BOOST_TEST_MESSAGE("tiny-llama greedy: " << generated.out);
}

BOOST_AUTO_TEST_CASE(text_on_a_bpe_model_is_encoded_with_its_tokenizer) {
  const fs::path dir = bpe_model_dir("bpe50257", false);
  const fs::path ids = scratch_dir() / "eval-bpe.u16.bin";
  const auto tok = run_nlb("tokenize --model '" + dir.string() + "' --text '" + eval_text.string() +
                           "' --out '" + ids.string() + "'");
  BOOST_TEST_REQUIRE(tok.exit_code == 0, tok.err);
  const auto tokens = nlb::io::read_token_file(ids, nlb::io::TokenDType::U16);
  // BPE: fewer tokens than bytes, and ids beyond the byte range.
  BOOST_TEST(tokens.size() < fs::file_size(eval_text) / 2);
  BOOST_TEST(*std::max_element(tokens.begin(), tokens.end()) > 255);
  const std::string common = "eval --model '" + dir.string() + "' --max-windows 2 --json ";
  const auto by_text = run_nlb(common + "--text '" + eval_text.string() + "'");
  const auto by_ids = run_nlb(common + "--tokens '" + ids.string() + "'");
  BOOST_TEST_REQUIRE(by_text.exit_code == 0, by_text.err);
  BOOST_TEST_REQUIRE(by_ids.exit_code == 0, by_ids.err);
  BOOST_TEST(nlohmann::json::parse(by_text.out) == nlohmann::json::parse(by_ids.out));
}

BOOST_AUTO_TEST_CASE(generate_on_a_bpe_model_streams_text_and_stops_at_end_of_text) {
  const fs::path dir = bpe_model_dir("bpe50257-eos", true);
  const auto r = run_nlb("generate --model '" + dir.string() +
                         "' --prompt 'In the beginning' --max-new-tokens 20 --temperature 0");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "In the beginning\n");  // <|endoftext|> first: nothing after the prompt
  const fs::path plain = bpe_model_dir("bpe50257", false);
  const std::string common =
      "generate --model '" + plain.string() + "' --prompt 'In the beginning' --max-new-tokens 12 ";
  const auto a = run_nlb(common + "--seed 3 --top-k 50");
  const auto b = run_nlb(common + "--seed 3 --top-k 50");
  BOOST_TEST_REQUIRE(a.exit_code == 0, a.err);
  BOOST_TEST(a.out == b.out);
  BOOST_TEST(a.out.rfind("In the beginning", 0) == 0u);
  BOOST_TEST(a.out.size() > std::string("In the beginning\n").size());
}
#endif

// Not under the sanitizers (asan preset): the 50 257-way log-sum-exp of every position is
// instrumented there and the run takes tens of minutes; the dev build runs it in CI.
#if NLB_WITH_TEXT && !defined(__SANITIZE_ADDRESS__)
BOOST_AUTO_TEST_CASE(shipped_bpe_model_reproduces_pytorchs_perplexity) {
  // models/tiny-gpt2-bpe/metrics.json: PyTorch in float64 on the same text, tokenized by
  // `nlb tokenize` (models/README.md); the tokenizer itself is checked against tiktoken.
  const fs::path dir = source_dir / "models/tiny-gpt2-bpe";
  const auto metrics = nlohmann::json::parse(slurp(dir / "metrics.json")).at("kjv_eval");
  const auto r =
      run_nlb("eval --model '" + dir.string() + "' --text '" + eval_text.string() + "' --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const auto got = nlohmann::json::parse(r.out);
  BOOST_TEST(got.at("predicted_tokens") == metrics.at("predicted_tokens"));
  BOOST_TEST(got.at("windows") == metrics.at("windows"));
  BOOST_TEST(got.at("ppl").get<double>() == metrics.at("ppl").get<double>(),
             boost::test_tools::tolerance(nlb::test::tol::model_ppl_rel));
}
#endif

BOOST_AUTO_TEST_CASE(info_reports_the_models_pytorch_counted) {
  // The parameter count of each shipped model is PyTorch's (train.py writes it to
  // metrics.json), an independent count; nlb info reads only headers.
  for (const char* name : {"tiny-gpt2", "tiny-neox", "tiny-sd", "tiny-gpt2-bpe"}) {
    const fs::path dir = source_dir / "models" / name;
    const auto metrics = nlohmann::json::parse(slurp(dir / "metrics.json"));
    const auto r = run_nlb("info --model '" + dir.string() + "' --json");
    BOOST_TEST_REQUIRE(r.exit_code == 0, name << ": " << r.err);
    const auto info = nlohmann::json::parse(r.out);
    const auto parameters = metrics.at("parameters").get<std::int64_t>();
    BOOST_TEST(info.at("parameters").get<std::int64_t>() == parameters, name);
    BOOST_TEST(info.at("memory").at("weights_float32_bytes").get<std::int64_t>() == 4 * parameters,
               name);
    BOOST_TEST(info.at("files").size() == 1u, name);
    BOOST_TEST(info.at("files")[0].at("bytes").get<std::uintmax_t>() ==
                   fs::file_size(dir / "model.safetensors"),
               name);
    const auto text = run_nlb("info --model '" + dir.string() + "'");
    BOOST_TEST_REQUIRE(text.exit_code == 0, name << ": " << text.err);
    BOOST_TEST(contains(text.out, "architecture  " + info.at("architecture").get<std::string>()),
               text.out);
  }
  // The BPE model: a BF16 embedding [50257, 64] beside F32 tensors, and its GPT-2 tokenizer.
  const auto bpe = nlohmann::json::parse(
      run_nlb("info --model '" + (source_dir / "models/tiny-gpt2-bpe").string() + "' --json").out);
  // The GEMM provider the build configured, and whether it runs (under CTest OpenBLAS is given
  // kernels by OPENBLAS_CORETYPE where the CPU has AVX2: tests/CMakeLists.txt).
  BOOST_TEST(bpe.at("gemm").at("provider") ==
             nlb::gemm_provider::name<nlb::gemm_provider::default_provider>());
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr)
    BOOST_TEST(bpe.at("gemm").at("in_use") == true);
  BOOST_TEST(bpe.at("dtypes").at("BF16").at("tensors") == 1);
  BOOST_TEST(bpe.at("dtypes").at("BF16").at("elements") == 50257 * 64);
  BOOST_TEST(bpe.at("vocab_size") == 50257);
#if NLB_WITH_TEXT
  BOOST_TEST(bpe.at("tokenizer").at("kind") == "vocab.json + merges.txt");
  BOOST_TEST(bpe.at("tokenizer").at("vocabulary") == 50257);
#endif
  // A sharded copy of tiny-gpt2: two files, the same parameters.
  const TensorMap all = read_all(tiny_gpt2 / "model.safetensors");
  const fs::path sharded = scratch_dir() / "info_sharded";
  fs::create_directories(sharded);
  nlb::io::SafetensorsWriter first, second;
  nlohmann::json index{{"weight_map", nlohmann::json::object()}};
  std::size_t k = 0;
  for (const auto& [name, t] : all) {
    const bool in_first = k++ % 2 == 0;
    (in_first ? first : second)
        .add(name, nlb::io::DType::F32, t.shape, std::span<const float>(t.values));
    index["weight_map"][name] = in_first ? "a.safetensors" : "b.safetensors";
  }
  first.write(sharded / "a.safetensors");
  second.write(sharded / "b.safetensors");
  std::ofstream(sharded / "model.safetensors.index.json") << index.dump();
  fs::copy_file(tiny_gpt2 / "config.json", sharded / "config.json",
                fs::copy_options::overwrite_existing);
  const auto r = run_nlb("info --model '" + sharded.string() + "' --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const auto info = nlohmann::json::parse(r.out);
  BOOST_TEST(info.at("files").size() == 2u);
  BOOST_TEST(info.at("parameters") ==
             nlohmann::json::parse(slurp(tiny_gpt2 / "metrics.json")).at("parameters"));
  // Not a model directory: a clean error.
  const auto missing = run_nlb("info --model '" + (scratch_dir() / "no-such-model").string() + "'");
  BOOST_TEST(missing.exit_code == 1);
  BOOST_TEST(contains(missing.err, "not a model directory"), missing.err);
}

// The published forms of the checkpoints: GPT-2 hub files without the "transformer." prefix and
// with attn.bias / attn.masked_bias buffers; older Pythia files with attention.bias,
// attention.masked_bias and rotary_emb.inv_freq buffers; a sharded checkpoint. Each loads and
// gives the logits of the shipped model.
BOOST_AUTO_TEST_CASE(published_checkpoint_forms_load_and_agree) {
  const fs::path tiny_neox = source_dir / "models/tiny-neox";
  auto logits_of = [](const fs::path& dir) {
    const auto model = nlb::load_model<double>(dir);
    const std::vector<std::int32_t> tokens{'I', 'n', ' ', 't', 'h', 'e', ' ', 'b'};
    nlb::Context<nlb::backend::cpu> ctx;
    nlb::Transformer<double>::Workspace ws;
    nlb::RowMatrix<double> logits;
    model.forward(ctx, tokens, logits, ws);
    return logits;
  };
  const auto config2 = nlohmann::json::parse(slurp(tiny_gpt2 / "config.json"));
  const auto config_neox = nlohmann::json::parse(slurp(tiny_neox / "config.json"));
  const long long P = config2["n_positions"].get<long long>();

  // GPT-2 as on the hub: no prefix, causal-mask buffers.
  TensorMap hub;
  for (const auto& [name, t] : read_all(tiny_gpt2 / "model.safetensors")) {
    hub[name.substr(std::string("transformer.").size())] = t;
  }
  for (int i = 0; i < config2["n_layer"].get<int>(); ++i) {
    nlb::test::TensorCopy mask{{1, 1, P, P},
                               std::vector<float>(static_cast<std::size_t>(P * P), 1.0f)};
    hub["h." + std::to_string(i) + ".attn.bias"] = mask;
    hub["h." + std::to_string(i) + ".attn.masked_bias"] = {{}, {-1e4f}};
  }
  const auto gpt2_hub = write_model("gpt2_hub_form", hub, config2);
  BOOST_TEST((logits_of(gpt2_hub) - logits_of(tiny_gpt2)).cwiseAbs().maxCoeff() == 0.0);

  // An explicit lm_head equal to wte (some fine-tuned exports) is used and agrees.
  TensorMap with_head = read_all(tiny_gpt2 / "model.safetensors");
  with_head["lm_head.weight"] = with_head["transformer.wte.weight"];
  BOOST_TEST((logits_of(write_model("gpt2_lm_head", with_head, config2)) - logits_of(tiny_gpt2))
                 .cwiseAbs()
                 .maxCoeff() == 0.0);

  // Older Pythia: non-parameter buffers.
  TensorMap old = read_all(tiny_neox / "model.safetensors");
  const long long Pn = config_neox["max_position_embeddings"].get<long long>();
  const long long head = config_neox["hidden_size"].get<long long>() /
                         config_neox["num_attention_heads"].get<long long>();
  const long long rot =
      static_cast<long long>(static_cast<double>(head) * config_neox["rotary_pct"].get<double>());
  for (int i = 0; i < config_neox["num_hidden_layers"].get<int>(); ++i) {
    const std::string p = "gpt_neox.layers." + std::to_string(i) + ".attention.";
    old[p + "bias"] = {{1, 1, Pn, Pn}, std::vector<float>(static_cast<std::size_t>(Pn * Pn), 1.0f)};
    old[p + "masked_bias"] = {{}, {-1e9f}};
    old[p + "rotary_emb.inv_freq"] = {{rot / 2},
                                      std::vector<float>(static_cast<std::size_t>(rot / 2), 1.0f)};
  }
  const auto neox_old = write_model("neox_old_form", old, config_neox);
  BOOST_TEST((logits_of(neox_old) - logits_of(tiny_neox)).cwiseAbs().maxCoeff() == 0.0);

  // Sharded: two files and an index.
  const TensorMap all = read_all(tiny_gpt2 / "model.safetensors");
  const fs::path sharded = scratch_dir() / "gpt2_sharded";
  fs::create_directories(sharded);
  nlb::io::SafetensorsWriter first, second;
  nlohmann::json index{{"metadata", nlohmann::json::object()},
                       {"weight_map", nlohmann::json::object()}};
  std::size_t k = 0;
  for (const auto& [name, t] : all) {
    auto& w = (k++ % 2 == 0) ? first : second;
    w.add(name, nlb::io::DType::F32, t.shape, std::span<const float>(t.values));
    index["weight_map"][name] =
        (k % 2 == 1) ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  first.write(sharded / "model-00001-of-00002.safetensors");
  second.write(sharded / "model-00002-of-00002.safetensors");
  std::ofstream(sharded / "model.safetensors.index.json") << index.dump();
  std::ofstream(sharded / "config.json") << config2.dump();
  BOOST_TEST((logits_of(sharded) - logits_of(tiny_gpt2)).cwiseAbs().maxCoeff() == 0.0);
}

BOOST_AUTO_TEST_CASE(malformed_model_directories_fail_cleanly) {
  const auto cases = malformed_model_cases();
  BOOST_TEST(cases.size() >= 15u + 41u);
  for (const auto& c : cases) {
    const fs::path dir = c.make();
    std::string message;
    try {
      nlb::load_model<float>(dir);
    } catch (const nlb::FormatError& e) {
      message = e.what();
    }
    BOOST_TEST(contains(message, c.phrase),
               c.name << ": \"" << message << "\" lacks \"" << c.phrase << "\"");
    const auto r = run_nlb("eval --model '" + dir.string() + "' --text '" + eval_text.string() +
                           "' --max-windows 1");
    BOOST_TEST(r.exit_code == 1, c.name << " exit " << r.exit_code << ": " << r.err);
    BOOST_TEST(contains(r.err, "error:"), c.name);
  }
}
