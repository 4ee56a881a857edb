// What every nlb subcommand shares: the default paths, reading the token stream
// (--text or --tokens), progress on stderr, and the subcommand entry points.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
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

/// The options every subcommand that reads tokens accepts.
inline const std::set<std::string> token_options{"text", "tokens", "token-dtype"};

/// Reads the token stream named by --text FILE (its bytes are the tokens; only for byte-level
/// models, vocab ≤ 256) or --tokens FILE (little-endian u16, or u32 with --token-dtype u32).
inline std::vector<std::int32_t> read_token_stream(const Args& args, const ModelConfig& config,
                                                   const std::string& text_option = "text") {
  if (args.has(text_option) == args.has("tokens")) {
    throw UsageError("pass exactly one of --" + text_option + " FILE and --tokens FILE");
  }
  if (args.has(text_option)) {
    if (config.vocab_size > 256) {
      throw UsageError(
          "--" + text_option + " reads bytes as tokens, but this model's vocabulary has " +
          std::to_string(config.vocab_size) +
          " entries: pass --tokens FILE with token ids (uint16, or --token-dtype u32)");
    }
    return io::read_text_tokens(args.get(text_option));
  }
  const std::string dtype = args.get("token-dtype", "u16");
  if (dtype != "u16" && dtype != "u32") {
    throw UsageError("--token-dtype: expected u16 or u32, found \"" + dtype + "\"");
  }
  return io::read_token_file(args.get("tokens"),
                             dtype == "u16" ? io::TokenDType::U16 : io::TokenDType::U32,
                             config.vocab_size);
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
