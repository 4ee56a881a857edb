// nlb forward: logits of the first K windows, written as tensor "logits" [K, N, vocab] F32.
#include <cstdio>

#include "common.hpp"
#include "device_model.hpp"
#include "nlb/io/safetensors_writer.hpp"
#include "nlb/model/load_model.hpp"

namespace nlb::cli {

int run_forward(const std::vector<std::string>& argv) {
  auto options = token_options;
  options.insert({"model", "context", "windows", "out", "device", "weights"});
  const Args args(argv, options, {});
  const std::string out = args.get("out");
  const std::filesystem::path model_dir = args.get("model", default_model().string());
  Index windows = 0, context = 0, vocab = 0;
  std::vector<float> all;
  with_model_weights(args, model_dir, [&](const auto& model) {
    const auto& config = model.config();
    const auto tokens = read_token_stream(args, config, model_dir);
    context = args.integer("context", 1, config.n_positions);
    windows = args.integer("windows", 1, 1LL << 30);
    if (static_cast<Index>(tokens.size()) < windows * context) {
      throw ArgumentError(detail::expected_found("forward: tokens for " + std::to_string(windows) +
                                                     " windows of " + std::to_string(context),
                                                 "at least " + std::to_string(windows * context),
                                                 tokens.size()));
    }
    vocab = config.vocab_size;
    all.resize(static_cast<std::size_t>(windows * context * vocab));
    RowMatrix<float> logits;
    typename std::decay_t<decltype(model)>::Workspace ws;  // one for every window
    std::unique_ptr<DeviceRunner> device;
    if constexpr (has_float_weights<decltype(model)>) {
      if (cuda_device_requested(args))
        device = make_cuda_runner(model);
    }
    const Progress progress("forward windows");
    for (Index w = 0; w < windows; ++w) {
      const auto window = std::span(tokens).subspan(static_cast<std::size_t>(w * context),
                                                    static_cast<std::size_t>(context));
      if (device)
        device->forward(window, logits, false);
      else
        model.forward(window, logits, ws);
      std::copy(logits.data(), logits.data() + logits.size(),
                all.begin() + static_cast<std::ptrdiff_t>(w * context * vocab));
      progress(w + 1, windows);
    }
  });
  io::SafetensorsWriter writer;
  writer.add("logits", io::DType::F32, {windows, context, vocab}, std::span<const float>(all));
  writer.write(out);  // temporary file, renamed when complete
  return 0;
}

}  // namespace nlb::cli
