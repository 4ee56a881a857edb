// The help pages of nlb's subcommands (`nlb help COMMAND`, `nlb COMMAND --help`); the command
// table (commands.hpp) pairs each with its entry point and its line in the overview. Defaults are
// printed from the same values the subcommands use (BudgetProtocol{}, SamplingOptions{},
// common.hpp), so the text cannot drift from the behaviour.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "common.hpp"
#include "nlb/analysis/budget/protocol.hpp"
#include "nlb/model/sampling.hpp"

namespace nlb::cli {

namespace usage_detail {

inline std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

inline std::string budgets(const std::vector<double>& pcts) {
  std::string out;
  for (std::size_t i = 0; i < pcts.size(); ++i)
    out += (i == 0 ? "" : i + 1 == pcts.size() ? " and " : ", ") + number(pcts[i]);
  return out;
}

// The lines every subcommand that reads one token stream shares.
inline const char* token_lines =
    "  --text FILE           a text file: encoded with the model directory's tokenizer\n"
    "                        (tokenizer.json, or vocab.json + merges.txt); a byte-level\n"
    "                        model's tokens are the file's bytes\n"
    "  --tokens FILE         a token-id file: little-endian ids back to back, no header\n"
    "  --token-dtype u32     the ids of --tokens are uint32 (default u16)\n";

inline const char* model_line =
    "  --model DIR           a Hugging Face model directory (default: models/tiny-gpt2)\n";

inline const std::string device_line =
    "  --device cpu|cuda     where the forward passes run (default cpu); cuda needs an nlb\n"
    "                        built with the CUDA backend and a usable GPU (docs/cuda.md)\n";

inline const char* weights_line =
    "  --weights f32|f16|bf16|q8  how the weight matrices are kept (default f32): 16 bits\n"
    "                        halve the bytes decoding reads (rounded at load from an F32\n"
    "                        file, kept as stored from an F16/BF16 one); q8: 8-bit integers\n"
    "                        with a scale per 32 values, 0.28 of the bytes\n"
    "                        (docs/half_precision.md)\n";

}  // namespace usage_detail

inline std::string eval_help() {
  using namespace usage_detail;
  return "usage: nlb eval [--model DIR] (--text FILE | --tokens FILE [--token-dtype u32])\n"
         "                [--context N] [--max-windows K] [--device cpu|cuda]\n"
         "                [--weights f32|f16|bf16|q8] [--json]\n\n"
         "Perplexity under the windowed protocol (PAPERS §A2): non-overlapping windows\n"
         "from the file start, every position but a window's first predicted. Under\n"
         "mpirun -n K the windows are spread over K ranks; rank 0 prints the result of\n"
         "one process (docs/scaling.md).\n\n" +
         std::string(model_line) + token_lines +
         "  --context N           window length (default: the model's n_positions)\n"
         "  --max-windows K       at most K windows (default 0: all)\n" +
         device_line + weights_line +
         "  --json                print the result as one JSON object\n";
}

inline std::string forward_help() {
  using namespace usage_detail;
  return "usage: nlb forward [--model DIR] (--text FILE | --tokens FILE [--token-dtype "
         "u32])\n"
         "                   --context N --windows K --out FILE [--device cpu|cuda]\n"
         "                   [--weights f32|f16|bf16|q8]\n\n"
         "Writes tensor \"logits\" [K, N, vocab] (F32) of the first K windows of N "
         "tokens.\n\n" +
         std::string(model_line) + token_lines +
         "  --context N           window length (required)\n"
         "  --windows K           how many windows (required)\n"
         "  --out FILE            the safetensors file (written whole or not at all)\n" +
         device_line + weights_line;
}

inline std::string generate_help() {
  using namespace usage_detail;
  const SamplingOptions sampling;
  return "usage: nlb generate [--model DIR] --prompt TEXT [--max-new-tokens N] [--top-k K]\n"
         "                    [--temperature T] [--seed S] [--device cpu|cuda]\n"
         "                    [--weights f32|f16|bf16|q8]\n\n"
         "Continues the prompt with a KV cache and writes the text as it is generated. The\n"
         "prompt is encoded with the model directory's tokenizer (a byte-level model's tokens\n"
         "are its bytes); <|endoftext|> ends the text.\n\n" +
         std::string(model_line) +
         "  --prompt TEXT         the text to continue (shorter than the model's context)\n"
         "  --max-new-tokens N    how many tokens to generate at most (default " +
         std::to_string(generate_default_max_new_tokens) +
         ")\n"
         "  --top-k K             sample among the K most likely tokens (default " +
         std::to_string(sampling.top_k) +
         ": all)\n"
         "  --temperature T       softmax temperature (default " +
         number(sampling.temperature) +
         "; 0: greedy)\n"
         "  --seed S              seed of the sampler (default " +
         std::to_string(sampling.seed) + ")\n" + device_line + weights_line;
}

namespace usage_detail {

// The window and ridge options of nlb budget and nlb linearize (which fits as budget does).
inline std::string context_and_lambda_lines(const BudgetProtocol& protocol) {
  return "  --context N           window length (default min(" + std::to_string(protocol.context) +
         ", n_positions))\n"
         "  --lambda L            ridge penalty, absolute (default " +
         number(protocol.lambda) + ")\n";
}

// The budget page's synopsis and the options of its inputs.
inline std::string budget_inputs_help(const BudgetProtocol& protocol) {
  return "usage: nlb budget [--model DIR] [--fit-text F] [--label-text F] [--eval-text F]\n"
         "                  [--cross-text F] [--fit-positions N] [--label-positions N]\n"
         "                  [--calibration-positions N] [--calibration allocation|greedy]\n"
         "                  [--attention] [--context N] [--lambda L] [--budget-pct P ...] [--seed "
         "S]\n"
         "                  [--decode-steps N] [--out DIR] [--device cpu|cuda] [--json]\n"
         "                  [--gate-features replicated|split] [--weights f32|f16|bf16|q8]\n"
         "       nlb budget --model DIR --fit-tokens-file F --label-tokens-file F\n"
         "                  --eval-tokens-file F --cross-tokens-file F [--token-dtype u32] ...\n\n"
         "The MLP budget report of PAPERS §A (docs/budget.md). With no arguments: the shipped\n"
         "model and texts, the report in ./" +
         std::string(budget_default_out) +
         ".\nUnder mpirun -n K the forward passes' windows are spread over K ranks; rank 0\n"
         "writes the report one process writes (docs/scaling.md).\n\n" +
         model_line +
         "  --fit-text F          ridge surrogates are fitted here (default data/kjv-fit.txt)\n"
         "  --label-text F        delta labels and gates, then the calibration split "
         "(default\n"
         "                        data/kjv-label.txt)\n"
         "  --eval-text F         every reported eval perplexity (default data/kjv-eval.txt)\n"
         "  --cross-text F        second corpus of the no-fly lists (default "
         "data/jargon-eval.txt)\n"
         "  --fit-tokens-file F   the fit input as a token-id file; likewise\n"
         "                        --label-tokens-file F, --eval-tokens-file F and\n"
         "                        --cross-tokens-file F (all four, or none)\n"
         "  --token-dtype u32     the ids of the token-id files are uint32 (default u16)\n"
         "  --fit-positions N     fitting positions (default " +
         std::to_string(protocol.fit_tokens) +
         ", PAPERS §A1)\n"
         "  --label-positions N   label positions (default " +
         std::to_string(protocol.label_tokens) +
         ", PAPERS §A3)\n"
         "  --calibration-positions N  calibration positions, from the label file's windows\n"
         "                        after the label windows (default: 3 x the label\n"
         "                        positions)\n";
}

// The budget page's options of the protocol and the output.
inline std::string budget_protocol_help(const BudgetProtocol& protocol) {
  return "  --calibration S       allocation: per-layer cost curves and a knapsack, corrected\n"
         "                        until the upper end of the calibration delta's 95% interval\n"
         "                        meets each budget; greedy: the earlier search on the label\n"
         "                        set (default " +
         std::string(to_string(protocol.calibration_search)) +
         ")\n"
         "  --gate-features G     under mpirun: replicated (every rank collects every label\n"
         "                        position's gate features; the report equals one\n"
         "                        process's bit for bit) or split (each rank its own label\n"
         "                        windows', the gates fitted over the ranks: equal up to\n"
         "                        rounding; docs/scaling.md) (default " +
         std::string(to_string(protocol.gate_features)) +
         ")\n"
         "  --attention           also spend each budget across MLP gates and attention\n"
         "                        conversions together (skew rank, linear attention, scalar\n"
         "                        filter; docs/budget.md), measured jointly\n" +
         context_and_lambda_lines(protocol) +
         "  --budget-pct P        joint PPL budget in %, repeat for several (default " +
         budgets(protocol.budgets_pct) +
         ")\n"
         "  --seed S              the bootstrap's random draws (default " +
         std::to_string(protocol.seed) +
         ")\n"
         "  --decode-steps N      tokens decoded one by one to time decoding (default " +
         std::to_string(protocol.decode_steps) +
         ", at most the context)\n"
         "  --out DIR             report directory, written when everything succeeded\n"
         "                        (default ./" +
         budget_default_out +
         ")\n"
         "  --json                also print report.json to stdout\n" +
         device_line +
         "                        (the surrogates' fit, the gates and the calibration's\n"
         "                        search stay on the host, in float64)\n" +
         weights_line;
}

}  // namespace usage_detail

inline std::string budget_help() {
  const BudgetProtocol protocol;
  return usage_detail::budget_inputs_help(protocol) + usage_detail::budget_protocol_help(protocol);
}

inline std::string linearize_help() {
  using namespace usage_detail;
  const BudgetProtocol protocol;
  return "usage: nlb linearize [--model DIR] --layers LIST --out DIR2 [--force]\n"
         "                     [--fit-text F | --fit-tokens-file F [--token-dtype u32]]\n"
         "                     [--fit-positions N] [--context N] [--lambda L]\n"
         "       nlb linearize [--model DIR] --layers LIST --out DIR2 [--force] --gates FILE\n\n"
         "Writes a model directory in which the listed layers' MLPs are linear (fitted as nlb\n"
         "budget fits them) or gated (from a gates file of nlb budget); docs/linearize.md.\n\n" +
         std::string(model_line) +
         "  --layers LIST         layers to replace: 1, 0,2 or 1-3 (from 0)\n"
         "  --out DIR2            the new model directory (must not exist or be empty)\n"
         "  --force               replace a non-empty --out\n"
         "  --gates FILE          gated layers from this gates file (no fit options then)\n"
         "  --fit-text F          fit text (default data/kjv-fit.txt)\n"
         "  --fit-tokens-file F   fit token-id file instead\n"
         "  --token-dtype u32     the ids of --fit-tokens-file are uint32 (default u16)\n"
         "  --fit-positions N     fitting positions (default " +
         std::to_string(protocol.fit_tokens) + ")\n" + context_and_lambda_lines(protocol);
}

inline std::string spectrum_help() {
  using namespace usage_detail;
  return "usage: nlb spectrum [--model DIR] [--text FILE | --tokens FILE [--token-dtype u32]]\n"
         "                    [--context N] [--max-windows K] [--out DIR]\n"
         "                    [--qk-bias exclude|homogeneous] [--json]\n\n"
         "The routing/filtering spectrum of every head and the spectral cascade (PAPERS §B1);\n"
         "with a text or token-id file also the perplexity of the attention conversions. Under\n"
         "mpirun -n K (with a text) each conversion's windows are spread over K ranks; rank 0\n"
         "writes the report one process writes (docs/scaling.md).\n\n" +
         std::string(model_line) + token_lines +
         "  --context N           window length of the conversions (default: n_positions)\n"
         "  --max-windows K       conversion windows (default " +
         std::to_string(spectrum_default_windows) +
         "; 0: all)\n"
         "  --out DIR             report directory (default ./" +
         spectrum_default_out +
         ")\n"
         "  --qk-bias B           exclude (default): decompose the paper's W_Q W_K^T;\n"
         "                        homogeneous: [W_Q; b_Q][W_K; b_K]^T with the q/k biases\n"
         "  --json                print report.json to stdout\n";
}

inline std::string tokenize_help() {
  return "usage: nlb tokenize (--tokenizer DIR | --model DIR) (--text FILE | --string S)\n"
         "                    [--allow-special] [--json | --out FILE [--token-dtype u32]]\n\n"
         "Encodes the text with the directory's tokenizer.json, or vocab.json and merges.txt\n"
         "(docs/text.md). Prints the ids separated by spaces, or as JSON, or writes them as a\n"
         "token-id file that --tokens and --*-tokens-file read.\n\n"
         "  --tokenizer DIR       a directory with tokenizer files\n"
         "  --model DIR           a model directory: its tokenizer, checked against its\n"
         "                        vocabulary (a byte-level model gives the text's bytes)\n"
         "  --text FILE           the text: a file's bytes\n"
         "  --string S            the text: S\n"
         "  --allow-special       <|endoftext|> and other special tokens in the text become\n"
         "                        their ids (default: ordinary text)\n"
         "  --json                print {\"ids\": [...], \"count\": N}\n"
         "  --out FILE            write the ids (little-endian uint16; written whole or not\n"
         "                        at all)\n"
         "  --token-dtype u32     write uint32 ids\n";
}

inline std::string info_help() {
  return "usage: nlb info [--model DIR] [--json]\n\n"
         "Architecture and sizes, parameter count, the safetensors files (or shards) and\n"
         "their dtypes, the tokenizer, and the memory the weights take once loaded; from\n"
         "config.json, the safetensors headers and the tokenizer files (no weights are\n"
         "read, so this is quick on any size of model).\n\n" +
         std::string(usage_detail::model_line) + "  --json                print the same as JSON\n";
}

}  // namespace nlb::cli
