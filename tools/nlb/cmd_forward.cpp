// nlb forward: logits of the first K windows, written as tensor "logits" [K, N, vocab] F32.
#include <algorithm>
#include <cstdio>

#include "common.hpp"
#include "nlb/io/safetensors_writer.hpp"
#include "nlb/model/load_model.hpp"
#include "session.hpp"

namespace nlb::cli {

namespace {

// ArgumentError unless `tokens` hold `windows` windows of `context` tokens.
void check_windows(std::span<const std::int32_t> tokens, Index windows, Index context) {
  if (static_cast<Index>(tokens.size()) < windows * context) {
    throw ArgumentError(detail::expected_found(
        "forward: tokens for " + std::to_string(windows) + " windows of " + std::to_string(context),
        "at least " + std::to_string(windows * context), tokens.size()));
  }
}

// The logits of the first `windows` windows of `context` tokens, one after another
// ([windows, context, vocab] row-major).
std::vector<float> window_logits(ModelSession& session, std::span<const std::int32_t> tokens,
                                 Index windows, Index context, Index vocab) {
  std::vector<float> all(static_cast<std::size_t>(windows * context * vocab));
  RowMatrix<float> logits;
  const Progress progress("forward windows");
  for (Index w = 0; w < windows; ++w) {
    session.forward(
        tokens.subspan(static_cast<std::size_t>(w * context), static_cast<std::size_t>(context)),
        logits);
    std::copy(logits.data(), logits.data() + logits.size(),
              all.begin() + static_cast<std::ptrdiff_t>(w * context * vocab));
    progress(w + 1, windows);
  }
  return all;
}

}  // namespace

int run_forward(const std::vector<std::string>& argv) {
  auto options = token_options;
  options.insert({"model", "context", "windows", "out", "device", "weights"});
  const Args args(argv, options, {});
  const std::string out = args.get("out");
  const std::filesystem::path model_dir = args.get("model", default_model().string());
  const std::string weights = weights_option(args);
  const auto model = load_model<float>(model_dir);
  const auto& config = model.config();
  const auto tokens = read_token_stream(args, config, model_dir);
  const Index context = args.integer("context", 1, config.n_positions);
  const Index windows = args.integer("windows", 1, 1LL << 30);
  check_windows(tokens, windows, context);
  const auto session = make_session(model, cuda_device_option(args), weights);
  const auto all = window_logits(*session, tokens, windows, context, config.vocab_size);
  io::SafetensorsWriter writer;
  writer.add("logits", io::DType::F32, {windows, context, config.vocab_size},
             std::span<const float>(all));
  writer.write(out);  // temporary file, renamed when complete
  return 0;
}

}  // namespace nlb::cli
