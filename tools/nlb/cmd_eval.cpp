// nlb eval: perplexity under the windowed protocol (PAPERS §A2; model/loss.hpp).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "device_model.hpp"
#include "nlb/distributed/sharded_perplexity.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/loss.hpp"
#include "ranks.hpp"

namespace nlb::cli {

int run_eval(const std::vector<std::string>& argv) {
  auto options = token_options;
  options.insert({"model", "context", "max-windows", "device", "weights"});
  const Args args(argv, options, {"json"});
  const std::filesystem::path model_dir = args.get("model", default_model().string());
  const auto& group = ranks();
  const PerplexityResult r = with_model_weights(args, model_dir, [&](const auto& model) {
    const auto& config = model.config();
    const auto tokens = read_token_stream(args, config, model_dir);
    const Index context = args.integer("context", config.n_positions, 2, config.n_positions);
    const Index max_windows = args.integer("max-windows", 0, 0, 1LL << 40);
    const Progress progress("eval windows", group.leader());
    refuse_device_with_ranks(cuda_device_requested(args));
    if constexpr (has_float_weights<decltype(model)>) {
      if (cuda_device_requested(args)) {
        return evaluate_perplexity(DeviceModel(make_cuda_runner(model), config), tokens, context,
                                   max_windows, progress);
      }
    }
    if (group.size() > 1) {
      // Windows spread over the ranks, loss sums gathered in window order: the same result.
      return distributed::sharded_perplexity(model, tokens, context, group, max_windows, progress);
    }
    return evaluate_perplexity(model, tokens, context, max_windows, progress);
  });
  if (!group.leader())
    return 0;  // only rank 0 prints
  if (args.flag("json")) {
    const nlohmann::json out{{"ppl", r.ppl},
                             {"mean_loss", r.mean_loss},
                             {"predicted_tokens", r.predicted_tokens},
                             {"windows", r.windows},
                             {"context", r.context}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf(
        "perplexity %.6f (mean loss %.6f nats) over %lld predicted tokens in %lld windows "
        "of %lld\n",
        r.ppl, r.mean_loss, static_cast<long long>(r.predicted_tokens),
        static_cast<long long>(r.windows), static_cast<long long>(r.context));
  }
  return 0;
}

}  // namespace nlb::cli
