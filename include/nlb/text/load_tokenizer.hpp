// load_tokenizer: the tokenizer of a model directory, whichever layout it has. The entry point
// for tools (`nlb tokenize`, `--text`): they need not know the file formats.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "nlb/core/errors.hpp"
#include "nlb/text/gpt2_files.hpp"
#include "nlb/text/tokenizer.hpp"
#include "nlb/text/tokenizer_json.hpp"
#include "nlb/text/tokenizer_options.hpp"

namespace nlb::text {

/// The tokenizer files `dir` has, in the order load_tokenizer tries them.
enum class TokenizerFiles {
  none,              ///< neither tokenizer.json nor vocab.json / merges.txt
  tokenizer_json,    ///< tokenizer.json (preferred: it also names normalizer and added tokens)
  vocab_and_merges,  ///< vocab.json and merges.txt
};

/// Which tokenizer files `dir` has. O(1) file-system queries.
inline TokenizerFiles find_tokenizer_files(const std::filesystem::path& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir / "tokenizer.json", ec))
    return TokenizerFiles::tokenizer_json;
  if (std::filesystem::exists(dir / "vocab.json", ec) ||
      std::filesystem::exists(dir / "merges.txt", ec))
    return TokenizerFiles::vocab_and_merges;  // one without the other fails to load, by name
  return TokenizerFiles::none;
}

/// The tokenizer of the model directory `dir`: from tokenizer.json when it has one, else from
/// vocab.json and merges.txt; nullopt when it has none of them. FormatError (naming the file,
/// the entry, what was expected and what was found) when the files are malformed or
/// inconsistent, when only one of vocab.json and merges.txt is there, or when the vocabulary
/// has more ids than `options.embedding_size` (pass the model's embedding rows). O(files).
inline std::optional<Tokenizer> load_tokenizer(const std::filesystem::path& dir,
                                               const TokenizerOptions& options = {}) {
  switch (find_tokenizer_files(dir)) {
    case TokenizerFiles::tokenizer_json:
      return load_tokenizer_json(dir / "tokenizer.json", options);
    case TokenizerFiles::vocab_and_merges:
      return load_gpt2_tokenizer(dir, options);
    case TokenizerFiles::none:
      break;
  }
  return std::nullopt;
}

}  // namespace nlb::text
