// nlb: run the papers' measurements on a model file. `nlb help` lists the subcommands.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "common.hpp"
#include "nlb/core/errors.hpp"

namespace {

constexpr const char* usage = R"(usage: nlb <command> [options]

commands:
  eval      perplexity of a model on a text or token file
            --model DIR --text FILE | --tokens FILE [--token-dtype u16|u32]
            [--context N] [--max-windows K] [--json]
  forward   write the logits of the first K windows to a safetensors file
            --model DIR --text FILE | --tokens FILE --context N --windows K --out FILE
  generate  continue a prompt (byte-level models)
            --model DIR --prompt TEXT [--tokens N] [--top-k K] [--temperature T] [--seed S]
  budget    the MLP budget report (PAPERS §A, docs/budget.md): surrogates, per-layer cost,
            gates, probes, joint gating with FLOPs and measured time saved
            [--model DIR] [--fit-text F] [--label-text F] [--eval-text F] [--cross-text F]
            [--context N] [--fit-tokens N] [--label-tokens N] [--lambda L]
            [--budget-pct P ...] [--seed S] [--out DIR] [--json] [--tokens [--token-dtype u32]]
            (no arguments: the shipped model and texts, report in ./budget-report)
  linearize write a model whose chosen layers' MLPs are ridge surrogates (PAPERS §A1) or
            gated MLPs from a gates file (docs/linearize.md); nlb eval loads the result
            [--model DIR] --layers LIST --out DIR2 [--force] [--gates FILE]
            [--fit-text F | --fit-tokens-file F [--token-dtype u32]] [--fit-tokens N]
            [--context N] [--lambda L]   (LIST: 1 or 0,2 or 1-3; default fit: data/kjv-fit.txt)
  spectrum  routing/filtering spectrum of every attention head, the spectral cascade, and
            with a text the PPL of the attention conversions (PAPERS §B, docs/attention_spectrum.md)
            [--model DIR] [--text FILE | --tokens FILE [--token-dtype u32]] [--context N]
            [--max-windows K (default 32; 0: all)] [--out DIR (default ./spectrum-report)]
            [--qk-bias exclude|homogeneous (default exclude: the paper's W_Q W_K^T)] [--json]

--model defaults to the shipped models/tiny-gpt2. Errors go to stderr with a non-zero exit:
1 for bad input files or data, 2 for a wrong command line.
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "help" || std::string(argv[1]) == "--help") {
    std::fputs(usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  const std::vector<std::string> rest(argv + 2, argv + argc);
  try {
    if (command == "eval")
      return nlb::cli::run_eval(rest);
    if (command == "forward")
      return nlb::cli::run_forward(rest);
    if (command == "generate")
      return nlb::cli::run_generate(rest);
    if (command == "budget")
      return nlb::cli::run_budget(rest);
    if (command == "linearize")
      return nlb::cli::run_linearize(rest);
    if (command == "spectrum")
      return nlb::cli::run_spectrum(rest);
    throw nlb::cli::UsageError("unknown command \"" + command + "\" (see nlb help)");
  } catch (const nlb::cli::UsageError& e) {
    std::fprintf(stderr, "nlb %s: %s\n", command.c_str(), e.what());
    return 2;
  } catch (const nlb::Error& e) {
    std::fprintf(stderr, "nlb %s: error: %s\n", command.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nlb %s: unexpected error: %s\n", command.c_str(), e.what());
    return 1;
  }
}
