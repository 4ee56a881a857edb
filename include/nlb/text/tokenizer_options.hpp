// Options of the tokenizer loaders (gpt2_files.hpp, tokenizer_json.hpp, load_tokenizer.hpp).
#pragma once

#include <cstdint>

namespace nlb::text {

struct TokenizerOptions {
  /// The model's embedding rows: a vocabulary with more ids is a FormatError (its ids could
  /// index past the embedding). -1 checks nothing. Pythia pads its embedding (50 304 rows for
  /// 50 277 ids), so a smaller vocabulary is fine.
  std::int64_t embedding_size = -1;
};

}  // namespace nlb::text
