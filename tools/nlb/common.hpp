// What every nlb subcommand shares: the default paths, the one reader of token inputs (text or
// token-id files, for every subcommand), progress on stderr, and the subcommand entry points.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "args.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/config.hpp"

namespace nlb::cli {

/// The shipped model and texts, found relative to the source tree this program was built from.
inline std::filesystem::path source_dir() {
  return NLB_SOURCE_DIR;
}
inline std::filesystem::path default_model() {
  return source_dir() / "models/tiny-gpt2";
}

/// Defaults that a subcommand and its usage text (usage.hpp) share. Those of the budget protocol
/// (context, fit and label positions, lambda, budgets, seed) are BudgetProtocol{}'s, never copied.
inline constexpr const char* budget_default_out = "budget-report";
inline constexpr const char* spectrum_default_out = "spectrum-report";
inline constexpr long long spectrum_default_windows = 32;  // conversions; 0 means all windows
inline constexpr long long generate_default_length = 64;

/// One token input of a subcommand, given as either of two options: a text file whose bytes
/// are the tokens (byte-level models, vocab <= 256), or a token-id file (little-endian u16, or
/// u32 with --token-dtype u32). Names without the "--". Every option with "tokens" in its name
/// is a token-id file (CHANGELOG.md): a single input is {"text", "tokens"}, one of several is
/// {"<set>-text", "<set>-tokens-file"} (budget's fit/label/eval/cross, linearize's fit).
struct TokenInput {
  std::string text_option;
  std::string ids_option;
};

/// The --text / --tokens input of eval, forward and spectrum.
inline const TokenInput single_input{"text", "tokens"};

/// The options every subcommand that reads one token stream accepts.
inline const std::set<std::string> token_options{"text", "tokens", "token-dtype"};

/// A token stream and where it came from.
struct TokenStream {
  std::vector<std::int32_t> tokens;
  std::string option;  ///< "--text", "--fit-tokens-file", ...: the option naming the file
  std::string path;
  bool ids = false;  ///< a token-id file (else the bytes of a text file)
};

/// Whether `input` was given on the command line; a usage error if both of its options are.
inline bool has_token_input(const Args& args, const TokenInput& input) {
  const bool text = args.has(input.text_option), ids = args.has(input.ids_option);
  if (text && ids) {
    throw UsageError("pass at most one of --" + input.text_option + " FILE and --" +
                     input.ids_option + " FILE");
  }
  return text || ids;
}

/// The width of the token ids in token-id files: --token-dtype u16 (the default) or u32.
/// `inputs` are the inputs the subcommand reads: --token-dtype without a token-id file among them
/// is a usage error, since it would silently do nothing.
inline io::TokenDType token_dtype(const Args& args, const std::vector<TokenInput>& inputs) {
  if (!args.has("token-dtype"))
    return io::TokenDType::U16;
  bool any_ids = false;
  std::string names;
  for (const auto& input : inputs) {
    any_ids = any_ids || args.has(input.ids_option);
    names += (names.empty() ? "--" : ", --") + input.ids_option + " FILE";
  }
  if (!any_ids) {
    throw UsageError("--token-dtype sets the width of token-id files, but none is given (" + names +
                     ")");
  }
  const std::string text = args.get("token-dtype");
  try {
    return io::parse_token_dtype(text);
  } catch (const ArgumentError&) {
    throw UsageError("option --token-dtype: expected u16 or u32, found \"" + text + "\"");
  }
}

/// Reads `input`: the token-id file (in `dtype`; every id checked against the vocabulary) or the
/// text file named on the command line; with neither, the text file `default_text`, or a usage
/// error naming both options when there is no default.
inline TokenStream read_token_input(const Args& args, const ModelConfig& config,
                                    const TokenInput& input, io::TokenDType dtype,
                                    const std::filesystem::path& default_text = {}) {
  TokenStream s;
  if (!has_token_input(args, input) && default_text.empty()) {
    throw UsageError("pass one of --" + input.text_option + " FILE and --" + input.ids_option +
                     " FILE");
  }
  s.ids = args.has(input.ids_option);
  s.option = "--" + (s.ids ? input.ids_option : input.text_option);
  if (s.ids) {
    s.path = args.get(input.ids_option);
    s.tokens = io::read_token_file(s.path, dtype, config.vocab_size);
    return s;
  }
  const bool given = args.has(input.text_option);
  s.path = given ? args.get(input.text_option) : default_text.string();
  if (config.vocab_size > 256) {
    throw UsageError(s.option + (given ? "" : " (default " + s.path + ")") +
                     " reads a file's bytes as tokens, but this model's vocabulary has " +
                     std::to_string(config.vocab_size) + " entries: pass --" + input.ids_option +
                     " FILE with token ids (uint16, or --token-dtype u32)");
  }
  s.tokens = io::read_text_tokens(s.path);
  return s;
}

/// The token stream of eval, forward and spectrum: exactly one of --text FILE and --tokens FILE.
inline std::vector<std::int32_t> read_token_stream(const Args& args, const ModelConfig& config) {
  if (args.has("text") == args.has("tokens"))
    throw UsageError("pass exactly one of --text FILE and --tokens FILE");
  return read_token_input(args, config, single_input, token_dtype(args, {single_input})).tokens;
}

/// Progress on stderr, only when stderr is a terminal (logs and CI stay clean).
class Progress {
 public:
  explicit Progress(std::string what) : what_(std::move(what)), enabled_(isatty(2) != 0) {}
  void operator()(long long done, long long total) const {
    if (!enabled_)
      return;
    std::fprintf(stderr, "\r%s: %lld/%lld", what_.c_str(), done, total);
    if (done == total)
      std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  std::string what_;
  bool enabled_;
};

int run_eval(const std::vector<std::string>& argv);
int run_forward(const std::vector<std::string>& argv);
int run_generate(const std::vector<std::string>& argv);
int run_budget(const std::vector<std::string>& argv);
int run_linearize(const std::vector<std::string>& argv);
int run_spectrum(const std::vector<std::string>& argv);

}  // namespace nlb::cli
