// The subcommands of nlb in one table: each name with its entry point, its line in the overview
// (`nlb help`) and its help page (usage.hpp). main.cpp dispatches through it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "usage.hpp"

namespace nlb::cli {

int run_eval(const std::vector<std::string>& argv);
int run_forward(const std::vector<std::string>& argv);
int run_generate(const std::vector<std::string>& argv);
int run_budget(const std::vector<std::string>& argv);
int run_linearize(const std::vector<std::string>& argv);
int run_spectrum(const std::vector<std::string>& argv);
int run_tokenize(const std::vector<std::string>& argv);
int run_info(const std::vector<std::string>& argv);

/// One subcommand.
struct Command {
  std::string name;
  int (*run)(const std::vector<std::string>& argv);
  std::string summary;  ///< its line in the overview (a second line indented to match)
  std::string page;     ///< `nlb help NAME`
  /// Runs under an MPI launcher, its windows spread over the ranks (docs/scaling.md); any other
  /// command would run K times over and its ranks would write the same output files.
  bool spreads_over_ranks = false;
};

/// Every subcommand, in the overview's order.
inline const std::vector<Command>& commands() {
  static const std::vector<Command> table{
      {"eval", run_eval, "perplexity of a model on a text or token-id file", eval_help(), true},
      {"forward", run_forward, "write the logits of the first K windows to a safetensors file",
       forward_help()},
      {"generate", run_generate, "continue a prompt, streaming the text", generate_help()},
      {"budget", run_budget,
       "the MLP budget report (PAPERS §A, docs/budget.md): surrogates, per-layer cost, gates,\n"
       "            probes, joint gating with FLOPs and measured time saved",
       budget_help(), true},
      {"linearize", run_linearize,
       "write a model whose chosen layers' MLPs are ridge surrogates (PAPERS §A1) or gated\n"
       "            MLPs from a gates file (docs/linearize.md); nlb eval loads the result",
       linearize_help()},
      // spectrum spreads only its --text conversions and refuses to run without them there.
      {"spectrum", run_spectrum,
       "routing/filtering spectrum of every attention head, the spectral cascade, and with a\n"
       "            text the PPL of the attention conversions (PAPERS §B, "
       "docs/attention_spectrum.md)",
       spectrum_help(), true},
      {"tokenize", run_tokenize, "text to token ids with a model directory's tokenizer",
       tokenize_help()},
      {"info", run_info, "what a model directory holds and what loading it needs", info_help()},
  };
  return table;
}

/// The subcommand `name`, or nullptr for a name that is none.
inline const Command* find_command(std::string_view name) {
  for (const auto& c : commands())
    if (c.name == name)
      return &c;
  return nullptr;
}

/// The overview: every subcommand with its summary.
inline std::string overview_help() {
  std::string out =
      "usage: nlb <command> [options]\n"
      "       nlb help [COMMAND]   this overview, or the options of COMMAND\n"
      "       nlb --version\n\n"
      "commands:\n";
  for (const auto& c : commands()) {
    std::string name = c.name;
    name.resize(10, ' ');
    out += "  " + name + c.summary + "\n";
  }
  out +=
      "\nOptions with \"tokens\" in their name are token-id files (little-endian uint16, or\n"
      "uint32 with --token-dtype u32); --text options are texts, encoded with the model\n"
      "directory's tokenizer (a byte-level model's tokens are the bytes).\n"
      "--model defaults to the shipped models/tiny-gpt2. Errors go to stderr with a non-zero\n"
      "exit: 1 for bad input files or data, 2 for a wrong command line.\n";
  return out;
}

}  // namespace nlb::cli
