// Load a Hugging Face model directory and replace one layer's MLP by a GatedMLP (PAPERS §A1,
// §A3): fit the layer's ridge surrogate on the MLP's own inputs and outputs, train the hyperplane
// gate on which tokens the surrogate serves well, route half of the tokens linear, and print
// the routed fraction and the perplexity change on held-out text.
//
// Usage: example_gated_layer [--quick] [MODEL_DIR [LAYER]]
//   (defaults: the shipped models/tiny-gpt2, layer 2; --quick: fewer fit and eval windows.)
// The model directory must be byte-level (vocabulary 256), as the shipped models are.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "nlb/nlb.hpp"

namespace {

using nlb::Index;
using Model = nlb::Transformer<float>;
using Slot = nlb::MlpSlot<float>;

// Collects layer `layer`'s MLP input x and output y (the pair the surrogate replaces).
struct MlpTaps {
  Index layer;
  nlb::RowMatrix<float> x, y;
  template <class Matrix>
  void operator()(nlb::Tap tap, Index l, const Matrix& m) {
    if (l != layer)
      return;
    if (tap == nlb::Tap::mlp_input)
      x = m;
    if (tap == nlb::Tap::mlp_output)
      y = m;
  }
};

// δ per position (PAPERS §A3): the loss with the layer's MLP replaced by `surrogate` minus
// the loss of the unmodified model, from one window's two forward passes.
std::vector<double> loss_deltas(nlb::Context<nlb::backend::cpu>& ctx, Model& model,
                                Model::Workspace& ws, Index layer, const Slot& linear,
                                std::span<const std::int32_t> window) {
  nlb::RowMatrix<float> logits;
  model.forward(ctx, window, logits, ws);
  const auto base = nlb::next_token_losses(logits, window);
  Slot& slot = model.layers()[static_cast<std::size_t>(layer)].mlp();
  Slot full = linear;
  std::swap(slot, full);
  model.forward(ctx, window, logits, ws);
  std::swap(slot, full);
  const auto lin = nlb::next_token_losses(logits, window);
  std::vector<double> delta(base.size());
  for (std::size_t i = 0; i < base.size(); ++i)
    delta[i] = lin[i] - base[i];
  return delta;
}

}  // namespace

int main(int argc, char** argv) {
  int arg = 1;
  const bool quick = argc > arg && std::strcmp(argv[arg], "--quick") == 0;
  if (quick)
    ++arg;
  const std::string source = NLB_SOURCE_DIR;
  const std::string model_dir = argc > arg ? argv[arg] : source + "/models/tiny-gpt2";
  const Index layer = argc > arg + 1 ? std::stoi(argv[arg + 1]) : 2;

  Model model = nlb::load_model<float>(model_dir);
  nlb::Context<nlb::backend::cpu> ctx;  // one thread; Context(n) for n
  Model::Workspace ws;                  // every forward pass below reuses it
  const Index context = model.config().n_positions;
  const auto fit_text = nlb::io::read_text_tokens(source + "/data/kjv-fit.txt");
  const auto eval_text = nlb::io::read_text_tokens(source + "/data/kjv-eval.txt");
  const Index fit_windows = quick ? 24 : 96, eval_windows = quick ? 16 : 64;
  auto window = [&](const std::vector<std::int32_t>& tokens, Index w) {
    return std::span<const std::int32_t>(tokens).subspan(static_cast<std::size_t>(w * context),
                                                         static_cast<std::size_t>(context));
  };

  // 1. The surrogate: ridge statistics of the layer's MLP over the fit windows, then the
  //    closed-form fit (PAPERS §A1).
  nlb::RidgeStats<> stats(model.config().d_model, model.config().d_model);
  MlpTaps taps{layer, {}, {}};
  nlb::Activations<float> gate_x;  // the layer's MLP inputs of the second half, for the gate
  nlb::RowMatrix<float> logits;
  const Index stats_windows = fit_windows / 2;
  for (Index w = 0; w < stats_windows; ++w) {
    model.forward(ctx, window(fit_text, w), logits, ws, taps);
    stats.add(taps.x, taps.y);
  }
  nlb::RidgeSurrogate<float> surrogate;
  surrogate.fit(stats, 0.01);
  const Slot linear(surrogate);

  // 2. The gate, on the other half: label 1 ("linear is fine") where δ is small (PAPERS §A3).
  std::vector<double> delta;
  std::vector<nlb::RowMatrix<float>> inputs;
  for (Index w = stats_windows; w < fit_windows; ++w) {
    model.forward(ctx, window(fit_text, w), logits, ws, taps);
    inputs.push_back(taps.x.topRows(context - 1));  // position t predicts token t + 1
    const auto d = loss_deltas(ctx, model, ws, layer, linear, window(fit_text, w));
    delta.insert(delta.end(), d.begin(), d.end());
  }
  gate_x.resize(static_cast<Index>(delta.size()), model.config().d_model);
  for (std::size_t i = 0; i < inputs.size(); ++i)
    gate_x.middleRows(static_cast<Index>(i) * (context - 1), context - 1) = inputs[i];
  nlb::HyperplaneGate<float> gate;
  gate.fit(gate_x, nlb::make_gate_labels(delta).labels);
  gate.calibrate_linear_fraction(gate_x, 0.5);

  // 3. Swap the layer's MLP for the gated one, built around the layer's own full MLP.
  const auto before = nlb::evaluate_perplexity(ctx, model, eval_text, context, eval_windows);
  Slot& slot = model.layers()[static_cast<std::size_t>(layer)].mlp();
  const auto& full = std::get<Slot::MlpTanh>(slot.kind());
  slot = Slot(Slot::GatedTanh(full, surrogate, gate));
  nlb::RouteCounts counts;
  double loss = 0;
  Index predicted = 0;
  for (Index w = 0; w < eval_windows; ++w) {
    model.forward(ctx, window(eval_text, w), logits, ws, nlb::NoTaps{}, nullptr, &counts);
    for (double l : nlb::next_token_losses(logits, window(eval_text, w)))
      loss += l;
    predicted += context - 1;
  }
  const double after = std::exp(loss / static_cast<double>(predicted));

  std::printf("model %s, layer %ld: surrogate R^2 %.3f on %ld fit positions\n", model_dir.c_str(),
              static_cast<long>(layer), surrogate.r2(), static_cast<long>(stats.count()));
  // `counts` sums every layer's rows (the full layers count as full): the gated layer saw one
  // row per eval token.
  const auto tokens = static_cast<double>(eval_windows * context);
  const double routed = static_cast<double>(counts.linear) / tokens;
  std::printf("gated MLP routed %.1f%% of %ld eval tokens to the surrogate (calibrated: 50%%)\n",
              100.0 * routed, static_cast<long>(eval_windows * context));
  std::printf("perplexity %.4f -> %.4f (%+.2f%%) over %ld eval windows\n", before.ppl, after,
              100.0 * (after / before.ppl - 1.0), static_cast<long>(eval_windows));
  // The gate was calibrated to 50% on the fit text; the eval text is another part of the same
  // book, so the routed share must land near it, and the perplexity must stay finite.
  return (routed > 0.25 && routed < 0.75 && std::isfinite(after)) ? 0 : 1;
}
