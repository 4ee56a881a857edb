// nlb eval: perplexity under the windowed protocol (PAPERS §A2): nlb::perplexity through the
// session's runner (analysis/variant_runner.hpp), on the CPU, a device or the ranks of an MPI run.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "nlb/model/load_model.hpp"
#include "ranks.hpp"
#include "session.hpp"

namespace nlb::cli {

namespace {

// The result as one JSON object or one line.
void print_perplexity(const PerplexityResult& r, bool json) {
  if (json) {
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
}

}  // namespace

int run_eval(const std::vector<std::string>& argv) {
  auto options = token_options;
  options.insert({"model", "context", "max-windows", "device", "weights"});
  const Args args(argv, options, {"json"});
  const std::filesystem::path model_dir = args.get("model", default_model().string());
  const std::string weights = weights_option(args);
  const auto model = load_model<float>(model_dir);
  const auto& config = model.config();
  const auto tokens = read_token_stream(args, config, model_dir);
  const Index context = args.integer("context", config.n_positions, 2, config.n_positions);
  const Index max_windows = args.integer("max-windows", 0, 0, 1LL << 40);
  const Progress progress("eval windows", ranks().leader());
  const auto session = make_session(model, cuda_device_option(args), weights);
  // Under MPI the windows are spread over the ranks and their loss sums gathered in window
  // order: the one-process result on every rank.
  AnalysisRunner runner(session->runner());
  const PerplexityResult r = perplexity(runner.get(), tokens, context, max_windows, progress);
  if (ranks().leader())  // only rank 0 prints
    print_perplexity(r, args.flag("json"));
  return 0;
}

}  // namespace nlb::cli
