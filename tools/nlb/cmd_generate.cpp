// nlb generate: continue a prompt with a KV cache, greedy or top-k sampling.
#include <cstdio>

#include "common.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/sampling.hpp"

namespace nlb::cli {

int run_generate(const std::vector<std::string>& argv) {
  const Args args(argv, {"model", "prompt", "length", "top-k", "temperature", "seed"}, {},
                  {{"tokens", "--length N",
                    "how many tokens to generate; --tokens is a token-id file in every command"}});
  const auto model = load_model<float>(args.get("model", default_model().string()));
  const auto& config = model.config();
  if (config.vocab_size > 256) {
    throw UsageError("generate reads the prompt as bytes, but this model's vocabulary has " +
                     std::to_string(config.vocab_size) + " entries (no tokenizer is available)");
  }
  const std::string prompt = args.get("prompt");
  if (prompt.empty())
    throw UsageError("--prompt must not be empty");
  if (static_cast<Index>(prompt.size()) >= config.n_positions) {
    throw UsageError("--prompt has " + std::to_string(prompt.size()) +
                     " bytes; the model's context is " + std::to_string(config.n_positions));
  }
  std::vector<std::int32_t> tokens(prompt.begin(), prompt.end());
  for (auto& t : tokens)
    t = static_cast<std::int32_t>(static_cast<unsigned char>(t));
  SamplingOptions sampling;  // its defaults are the documented ones (nlb help generate)
  sampling.top_k = args.integer("top-k", sampling.top_k, 0, config.vocab_size);
  sampling.temperature = args.real("temperature", sampling.temperature, 0.0, 100.0);
  sampling.seed = static_cast<std::uint64_t>(
      args.integer("seed", static_cast<long long>(sampling.seed), 0, (1LL << 62)));
  const Index count = args.integer("length", generate_default_length, 1, config.n_positions);
  TokenSampler sampler(sampling);
  const auto out = generate(model, tokens, count, sampler);
  std::string text = prompt;
  for (auto t : out)
    text.push_back(static_cast<char>(t));
  std::printf("%s\n", text.c_str());
  return 0;
}

}  // namespace nlb::cli
