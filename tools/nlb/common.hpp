// What every nlb subcommand shares: the default paths, the one reader of token inputs (text or
// token-id files, for every subcommand) and progress on stderr.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/config.hpp"
#if NLB_WITH_TEXT
#include "nlb/text/detail/messages.hpp"
#include "nlb/text/load_tokenizer.hpp"
#endif

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
inline constexpr long long generate_default_max_new_tokens = 64;

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

/// What a model directory lacks when it has no tokenizer (one wording for every message).
inline constexpr const char* no_tokenizer_files =
    "no tokenizer files (tokenizer.json, or vocab.json and merges.txt)";

/// The tokens of a byte-level model for `text`: its bytes, 0..255.
inline std::vector<std::int32_t> byte_tokens(std::string_view text) {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size());
  for (const char c : text)
    ids.push_back(static_cast<std::int32_t>(static_cast<unsigned char>(c)));
  return ids;
}

#if NLB_WITH_TEXT
/// The tokenizer of the model directory `dir` (tokenizer.json, or vocab.json + merges.txt), or
/// null when it has none. Loaded once per directory and kept for the program's lifetime, so a
/// subcommand with several text inputs reads the files once. FormatError (from the loaders)
/// when the files are malformed or their vocabulary exceeds the model's embedding.
inline const text::Tokenizer* model_tokenizer(const std::filesystem::path& dir,
                                              const ModelConfig& config) {
  static std::map<std::filesystem::path, std::optional<text::Tokenizer>> loaded;
  auto it = loaded.find(dir);
  if (it == loaded.end())
    it =
        loaded.emplace(dir, text::load_tokenizer(dir, {.embedding_size = config.vocab_size})).first;
  return it->second ? &*it->second : nullptr;
}
#endif

/// The tokens of the text file `path` for the model in `model_dir`: its bytes for a byte-level
/// model (vocab <= 256), else the ids of the directory's own tokenizer (special tokens in the
/// text are ordinary text). A usage error naming `option` and the token-id alternative
/// `ids_option` when the model needs a tokenizer and its directory has none (or this program was
/// built without nlb/text).
inline std::vector<std::int32_t> encode_text_file(const std::filesystem::path& path,
                                                  const std::string& option,
                                                  const std::string& ids_option,
                                                  const std::filesystem::path& model_dir,
                                                  const ModelConfig& config) {
  if (config.vocab_size <= 256)
    return io::read_text_tokens(path);
#if NLB_WITH_TEXT
  if (const text::Tokenizer* tokenizer = model_tokenizer(model_dir, config))
    return tokenizer->encode(text::detail::read_text_file(path.string()));
  throw UsageError(option + " " + path.string() + ": this model's vocabulary has " +
                   std::to_string(config.vocab_size) + " entries and " + model_dir.string() +
                   " has " + no_tokenizer_files + ": add them, or pass " + ids_option +
                   " FILE with token ids (uint16, or --token-dtype u32)");
#else
  (void)model_dir;
  throw UsageError(option + " " + path.string() + ": this model's vocabulary has " +
                   std::to_string(config.vocab_size) +
                   " entries and this nlb was built without tokenizers (utf8proc not found): "
                   "pass " +
                   ids_option + " FILE with token ids (uint16, or --token-dtype u32)");
#endif
}

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
/// text file named on the command line (encode_text_file: bytes, or the tokenizer of
/// `model_dir`); with neither, the text file `default_text`, or a usage error naming both
/// options when there is no default.
inline TokenStream read_token_input(const Args& args, const ModelConfig& config,
                                    const std::filesystem::path& model_dir, const TokenInput& input,
                                    io::TokenDType dtype,
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
  s.tokens = encode_text_file(s.path, s.option + (given ? "" : " (default)"),
                              "--" + input.ids_option, model_dir, config);
  return s;
}

/// The token stream of eval, forward and spectrum: exactly one of --text FILE and --tokens FILE.
inline std::vector<std::int32_t> read_token_stream(const Args& args, const ModelConfig& config,
                                                   const std::filesystem::path& model_dir) {
  if (args.has("text") == args.has("tokens"))
    throw UsageError("pass exactly one of --text FILE and --tokens FILE");
  return read_token_input(args, config, model_dir, single_input, token_dtype(args, {single_input}))
      .tokens;
}

/// Progress on stderr, only when stderr is a terminal (logs and CI stay clean).
class Progress {
 public:
  /// `shown`: false on the ranks of an MPI run other than rank 0.
  explicit Progress(std::string what, bool shown = true)
      : what_(std::move(what)), enabled_(shown && isatty(2) != 0) {}
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

}  // namespace nlb::cli
