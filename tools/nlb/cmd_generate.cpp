// nlb generate: continue a prompt with a KV cache, greedy or top-k sampling (nlb::generate,
// model/sampling.hpp, through the session). The prompt is encoded with the model directory's own
// tokenizer (or taken as bytes by a byte-level model) and the continuation is written to stdout
// token by token as it is generated.
#include <cstdio>

#include "common.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/sampling.hpp"
#include "session.hpp"

namespace nlb::cli {

namespace {

// Writes the bytes of `piece` to stdout now (a token may end inside a UTF-8 character; the
// next one completes it, so the bytes are written as they are).
void write_piece(std::string_view piece) {
  std::fwrite(piece.data(), 1, piece.size(), stdout);
  std::fflush(stdout);
}

// The prompt's tokens, how a token is written back, and the token that ends the text.
struct PromptText {
  std::vector<std::int32_t> tokens;
  std::function<std::string(std::int32_t)> piece;
  std::optional<std::int32_t> eos;
};

// Byte-level models read the prompt's bytes; others need the directory's tokenizer.
PromptText encode_prompt(const std::string& prompt, const std::filesystem::path& model_dir,
                         const ModelConfig& config) {
  PromptText out;
  if (config.vocab_size <= 256) {
    out.tokens = byte_tokens(prompt);
    out.piece = [](std::int32_t t) { return std::string(1, static_cast<char>(t)); };
    return out;
  }
#if NLB_WITH_TEXT
  const text::Tokenizer* tokenizer = model_tokenizer(model_dir, config);
  if (!tokenizer) {
    throw UsageError("this model's vocabulary has " + std::to_string(config.vocab_size) +
                     " entries and " + model_dir.string() + " has " + no_tokenizer_files);
  }
  out.tokens = tokenizer->encode(prompt);
  out.eos = tokenizer->eos_id();
  out.piece = [tokenizer](std::int32_t t) { return tokenizer->token_bytes(t); };
  return out;
#else
  (void)model_dir;
  throw UsageError("this model's vocabulary has " + std::to_string(config.vocab_size) +
                   " entries and this nlb was built without tokenizers (utf8proc not found)");
#endif
}

// --top-k, --temperature and --seed; SamplingOptions{}'s defaults are the documented ones
// (nlb help generate).
SamplingOptions sampling_options(const Args& args, const ModelConfig& config) {
  SamplingOptions sampling;
  sampling.top_k = args.integer("top-k", sampling.top_k, 0, config.vocab_size);
  sampling.temperature = args.real("temperature", sampling.temperature, 0.0, 100.0);
  sampling.seed = static_cast<std::uint64_t>(
      args.integer("seed", static_cast<long long>(sampling.seed), 0, (1LL << 62)));
  return sampling;
}

}  // namespace

int run_generate(const std::vector<std::string>& argv) {
  const Args args(
      argv,
      {"model", "prompt", "max-new-tokens", "top-k", "temperature", "seed", "device", "weights"},
      {},
      {{"tokens", "--max-new-tokens N",
        "how many tokens to generate; --tokens is a token-id file in every command"},
       {"length", "--max-new-tokens N", "how many tokens to generate"}});
  const std::filesystem::path model_dir = args.get("model", default_model().string());
  const std::string weights = weights_option(args);
  const auto model = load_model<float>(model_dir);
  const auto& config = model.config();
  const std::string prompt = args.get("prompt");
  if (prompt.empty())
    throw UsageError("--prompt must not be empty");
  const PromptText text = encode_prompt(prompt, model_dir, config);
  if (static_cast<Index>(text.tokens.size()) >= config.n_positions) {
    throw UsageError("--prompt is " + std::to_string(text.tokens.size()) +
                     " tokens; the model's context is " + std::to_string(config.n_positions));
  }
  const SamplingOptions sampling = sampling_options(args, config);
  const Index count =
      args.integer("max-new-tokens", generate_default_max_new_tokens, 1, config.n_positions);
  TokenSampler sampler(sampling);
  const auto session = make_session(model, cuda_device_option(args), weights);
  write_piece(prompt);  // after the session: a device that cannot run refuses before any output
  session->generate(text.tokens, count, sampler, [&](std::int32_t next) {
    if (text.eos && next == *text.eos)
      return false;  // end of text: not printed
    write_piece(text.piece(next));
    return true;
  });
  write_piece("\n");
  return 0;
}

}  // namespace nlb::cli
