// nlb generate: continue a prompt with a KV cache, greedy or top-k sampling. The prompt is
// encoded with the model directory's own tokenizer (or taken as bytes by a byte-level model)
// and the continuation is written to stdout token by token as it is generated.
#include <cstdio>

#include "common.hpp"
#include "device_model.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/sampling.hpp"

namespace nlb::cli {

namespace {

// Writes the bytes of `piece` to stdout now (a token may end inside a UTF-8 character; the
// next one completes it, so the bytes are written as they are).
void write_piece(std::string_view piece) {
  std::fwrite(piece.data(), 1, piece.size(), stdout);
  std::fflush(stdout);
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
  with_model_weights(args, model_dir, [&](const auto& model) {
    const auto& config = model.config();
    const std::string prompt = args.get("prompt");
    if (prompt.empty())
      throw UsageError("--prompt must not be empty");

    // Byte-level models read the prompt's bytes; others need the directory's tokenizer.
    std::vector<std::int32_t> tokens;
    std::function<std::string(std::int32_t)> piece;
    std::optional<std::int32_t> eos;
    if (config.vocab_size <= 256) {
      tokens = byte_tokens(prompt);
      piece = [](std::int32_t t) { return std::string(1, static_cast<char>(t)); };
    } else {
#if NLB_WITH_TEXT
      const text::Tokenizer* tokenizer = model_tokenizer(model_dir, config);
      if (!tokenizer) {
        throw UsageError("this model's vocabulary has " + std::to_string(config.vocab_size) +
                         " entries and " + model_dir.string() + " has " + no_tokenizer_files);
      }
      tokens = tokenizer->encode(prompt);
      eos = tokenizer->eos_id();
      piece = [tokenizer](std::int32_t t) { return tokenizer->token_bytes(t); };
#else
    throw UsageError("this model's vocabulary has " + std::to_string(config.vocab_size) +
                     " entries and this nlb was built without tokenizers (utf8proc not found)");
#endif
    }
    if (static_cast<Index>(tokens.size()) >= config.n_positions) {
      throw UsageError("--prompt is " + std::to_string(tokens.size()) +
                       " tokens; the model's context is " + std::to_string(config.n_positions));
    }
    SamplingOptions sampling;  // its defaults are the documented ones (nlb help generate)
    sampling.top_k = args.integer("top-k", sampling.top_k, 0, config.vocab_size);
    sampling.temperature = args.real("temperature", sampling.temperature, 0.0, 100.0);
    sampling.seed = static_cast<std::uint64_t>(
        args.integer("seed", static_cast<long long>(sampling.seed), 0, (1LL << 62)));
    const Index count =
        args.integer("max-new-tokens", generate_default_max_new_tokens, 1, config.n_positions);
    TokenSampler sampler(sampling);
    const auto on_token = [&](std::int32_t next) {
      if (eos && next == *eos)
        return false;  // end of text: not printed
      write_piece(piece(next));
      return true;
    };
    if constexpr (has_float_weights<decltype(model)>) {
      if (cuda_device_requested(args)) {
        const DeviceModel device(make_cuda_runner(model), config);  // before the prompt is echoed
        write_piece(prompt);
        generate(device, tokens, count, sampler, on_token);
        return;
      }
    }
    write_piece(prompt);
    generate(model, tokens, count, sampler, on_token);
  });
  write_piece("\n");
  return 0;
}

}  // namespace nlb::cli
