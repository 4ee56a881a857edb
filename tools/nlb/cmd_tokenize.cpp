// nlb tokenize: text to token ids with a model directory's own tokenizer (or a byte-level
// model's bytes), printed, as JSON, or written as a token-id file the other subcommands read.
#include <cstdio>
#include <string>

#include "common.hpp"
#include "nlb/model/config.hpp"

namespace nlb::cli {

int run_tokenize(const std::vector<std::string>& argv) {
  const Args args(argv, {"tokenizer", "model", "text", "string", "out", "token-dtype"},
                  {"json", "allow-special"});
#if !NLB_WITH_TEXT
  throw UsageError("this nlb was built without tokenizers (utf8proc not found)");
#else
  if (args.has("tokenizer") == args.has("model"))
    throw UsageError("pass exactly one of --tokenizer DIR and --model DIR");
  if (args.has("text") == args.has("string"))
    throw UsageError("pass exactly one of --text FILE and --string S");
  if (args.has("token-dtype") && !args.has("out"))
    throw UsageError("--token-dtype sets the id width of --out: pass --out FILE");
  if (args.flag("json") && args.has("out"))
    throw UsageError("--json prints the ids; --out writes them: pass one of them");

  const std::string text =
      args.has("string") ? args.get("string") : text::detail::read_text_file(args.get("text"));
  const auto special =
      args.flag("allow-special") ? text::SpecialTokens::allowed : text::SpecialTokens::as_text;

  std::vector<std::int32_t> ids;
  if (args.has("tokenizer")) {
    const std::filesystem::path dir = args.get("tokenizer");
    const auto tokenizer = text::load_tokenizer(dir);
    if (!tokenizer) {
      throw UsageError("--tokenizer " + dir.string() + ": " + no_tokenizer_files);
    }
    ids = tokenizer->encode(text, special);
  } else {
    // The model's config is enough: the vocabulary bounds the tokenizer, no weights are read.
    const std::filesystem::path dir = args.get("model");
    const ModelConfig config = read_hf_config(dir / "config.json");
    if (config.vocab_size <= 256) {
      ids = byte_tokens(text);
    } else if (const text::Tokenizer* tokenizer = model_tokenizer(dir, config)) {
      ids = tokenizer->encode(text, special);
    } else {
      throw UsageError("--model " + dir.string() + ": this model's vocabulary has " +
                       std::to_string(config.vocab_size) + " entries and the directory has " +
                       no_tokenizer_files);
    }
  }

  if (args.has("out")) {
    const io::TokenDType dtype = token_dtype(args, {TokenInput{"text", "out"}});
    io::write_token_file(args.get("out"), ids, dtype);
    std::fprintf(stderr, "nlb tokenize: %zu tokens (%s) written to %s\n", ids.size(),
                 std::string(io::to_string(dtype)).c_str(), args.get("out").c_str());
    return 0;
  }
  std::string line = args.flag("json") ? "{\"ids\": [" : "";
  for (std::size_t i = 0; i < ids.size(); ++i)
    line += (i == 0 ? "" : args.flag("json") ? ", " : " ") + std::to_string(ids[i]);
  if (args.flag("json"))
    line += "], \"count\": " + std::to_string(ids.size()) + "}";
  std::printf("%s\n", line.c_str());
  return 0;
#endif
}

}  // namespace nlb::cli
