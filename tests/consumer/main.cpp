// A downstream engine's view of the installed package: one include, <nlb/nlb.hpp>, and every
// component family used through it, each checked against a closed form or a second path.
// Usage: consumer MODEL_DIR (a shipped model directory, e.g. models/tiny-gpt2). Exits non-zero
// on any wrong result.
#include <nlb/nlb.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

using nlb::Index;
constexpr int d = 8;
std::mt19937 rng(1);
int failures = 0;

nlb::RowMatrix<float> random(Index rows, Index cols, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  nlb::RowMatrix<float> m(rows, cols);
  for (Index i = 0; i < m.size(); ++i)
    m.data()[i] = normal(rng);
  return m;
}

void check(bool ok, const std::string& what) {
  std::printf("consumer: %-62s %s\n", what.c_str(), ok ? "ok" : "FAILED");
  if (!ok)
    ++failures;
}

// Y = component(X) for a [T, d] → [T, d] component, in a fresh workspace: the one call every
// component has, forward(ctx, X, Y, ws).
template <class Component, class In>
typename Component::Output apply(nlb::Context<nlb::backend::cpu>& ctx, const Component& component,
                                 const In& X) {
  typename Component::Workspace ws;
  typename Component::Output Y(X.rows(), X.cols());
  component.forward(ctx, X, Y, ws);
  return Y;
}

// The MLP-budget components: Mlp, RidgeStats (merged from two halves), RidgeSurrogate,
// HyperplaneGate, GatedMLP, and the kernels and FLOP accounting under them.
void mlp_family() {
  nlb::Context<nlb::backend::cpu> ctx;
  std::vector<float> row{1.0f, 2.0f, 3.0f};
  nlb::kernels::softmax(nlb::backend::cpu{}, row.data(), 3, 3);
  check(std::abs(row[0] + row[1] + row[2] - 1.0f) < 1e-6f, "kernels::softmax sums to 1");

  using MlpT = nlb::Mlp<float, d, 4 * d, nlb::GeluErf>;
  const MlpT mlp(random(d, 4 * d), random(1, 4 * d), random(4 * d, d), random(1, d));
  const nlb::Activations<float, d> X = random(256, d);
  const auto Y = apply(ctx, mlp, X);

  // Statistics of the two halves, merged, fit the same surrogate as one pass (PAPERS §A1).
  nlb::RidgeStats<d, d> one_pass, first, second;
  one_pass.add(X, Y);
  first.add(X.topRows(128), Y.topRows(128));
  second.add(X.bottomRows(128), Y.bottomRows(128));
  first.merge(second);
  nlb::RidgeSurrogate<float, d, d> surrogate, merged;
  surrogate.fit(one_pass, 0.01);
  merged.fit(first, 0.01);
  const float gap = (apply(ctx, surrogate, X) - apply(ctx, merged, X)).cwiseAbs().maxCoeff();
  check(gap < 1e-4f, "RidgeStats::merge fits the one-pass surrogate");

  std::vector<double> delta(256);
  const auto Y_lin = apply(ctx, surrogate, X);
  for (Index t = 0; t < 256; ++t)
    delta[static_cast<std::size_t>(t)] = (Y_lin.row(t) - Y.row(t)).squaredNorm();
  const auto labels = nlb::make_gate_labels(delta);
  nlb::HyperplaneGate<float, d> gate;
  gate.fit(X, labels.labels);
  gate.calibrate_linear_fraction(X, 0.5);

  const nlb::GatedMLP<MlpT, nlb::RidgeSurrogate<float, d, d>, nlb::HyperplaneGate<float, d>> gated(
      mlp, surrogate, gate);
  nlb::Activations<float, d> out(256, d);
  decltype(gated)::Workspace gated_ws;
  const auto counts = gated.forward(ctx, X, out, gated_ws);
  check(counts.linear == 128 && counts.full == 128, "GatedMLP routes half the rows linear");
  // Each row took exactly one path: its output equals the MLP's or the surrogate's.
  bool rows_match = true;
  for (Index t = 0; t < 256; ++t) {
    const float to_mlp = (out.row(t) - Y.row(t)).cwiseAbs().maxCoeff();
    const float to_lin = (out.row(t) - Y_lin.row(t)).cwiseAbs().maxCoeff();
    rows_match = rows_match && std::min(to_mlp, to_lin) < 1e-5f;
  }
  check(rows_match, "GatedMLP rows equal the MLP or the surrogate");
  const double saved = nlb::flops::mlp_saving_per_token(d, 4 * d, counts.linear_fraction());
  check(saved > 0.0, "flops::mlp_saving_per_token is positive");
  try {
    MlpT::Workspace ws;
    MlpT::Output wrong_out(2, d);
    mlp.forward(ctx, random(2, d + 1), wrong_out, ws);
    check(false, "Mlp refuses a wrong width");
  } catch (const nlb::ShapeError&) {
    check(true, "Mlp refuses a wrong width");
  }
}

// Attention: SkewSymmetricRouting<float, 4>, DiagonalFilter, SDAttention, LinearAttention.
void attention_family() {
  constexpr int width = 16;
  const Index T = 12, heads = 2;
  nlb::Context<nlb::backend::cpu> ctx;
  const nlb::SkewSymmetricRouting<float, 4> routing(random(width, 2, 0.3f), random(width, 2, 0.3f));
  const nlb::Activations<float> X = random(T, width);
  nlb::RowMatrix<float> scores(T, T);
  routing.scores(X, scores, /*causal=*/false);
  const nlb::RowMatrix<float> direct = X * routing.dense() * X.transpose();  // x_i S x_jᵀ
  check((scores - direct).cwiseAbs().maxCoeff() < 1e-4f,
        "SkewSymmetricRouting<float, 4> scores = X S Xᵀ");
  check((scores + scores.transpose()).cwiseAbs().maxCoeff() == 0.0f,
        "routing scores are exactly antisymmetric");

  using Routing = nlb::SkewSymmetricRouting<float, 4>;
  using Filter = nlb::DiagonalFilter<float, width>;
  std::vector<Routing> routings;
  std::vector<Filter> filters;
  for (Index h = 0; h < heads; ++h) {
    routings.emplace_back(random(width, 2, 0.3f), random(width, 2, 0.3f));
    filters.emplace_back(random(1, width));
  }
  const nlb::SDAttention<Routing, Filter> sd(std::move(routings), std::move(filters),
                                             random(width, width, 0.3f), random(1, width),
                                             random(width, width, 0.3f), random(1, width));
  // Causal: the first k rows' outputs do not depend on the rows after them.
  auto causal = [&](const auto& attn, const std::string& name) {
    typename std::decay_t<decltype(attn)>::Workspace ws;
    nlb::Activations<float> all(T, width), prefix(5, width);
    attn.forward(ctx, X, all, ws);
    attn.forward(ctx, X.topRows(5), prefix, ws);
    const bool finite = all.allFinite();
    check(finite && (all.topRows(5) - prefix).cwiseAbs().maxCoeff() < 1e-5f,
          name + " is causal and finite");
  };
  causal(sd, "SDAttention<SkewSymmetricRouting<float, 4>, DiagonalFilter>");

  const nlb::AttentionWeights<float> weights{random(width, 3 * width, 0.3f), random(1, 3 * width),
                                             random(width, width, 0.3f), random(1, width)};
  const nlb::LinearAttention<float> linear(weights, heads);
  causal(linear, "LinearAttention (ELU+1)");
}

// The model family: load_model on a shipped directory, the same model as a fixed-size type,
// and the eval protocol; io reads the files underneath.
void model_family(const std::string& model_dir) {
  const auto model = nlb::load_model<float>(model_dir);
  const auto weights = nlb::load_model_weights<float>(model_dir);
  const auto& c = model.config();
  check(c.d_model == 128 && c.d_hidden == 512 && c.n_layers == 4,
        "load_model reads the shipped tiny-gpt2 (d 128, h 512, 4 layers)");
  const auto fixed = nlb::make_fixed_transformer<float, 128, 512, nlb::GeluTanh, 4>(weights);

  std::vector<std::int32_t> tokens;
  const std::string text = "In the beginning God created the heaven and the earth. ";
  for (int rep = 0; tokens.size() < 128; ++rep)
    for (unsigned char ch : text)
      tokens.push_back(ch);
  tokens.resize(128);
  nlb::Context<nlb::backend::cpu> ctx;
  decltype(model)::Workspace dynamic_ws;
  decltype(fixed)::Workspace fixed_ws;
  nlb::RowMatrix<float> dynamic_logits, fixed_logits;
  model.forward(ctx, tokens, dynamic_logits, dynamic_ws);
  fixed.forward(ctx, tokens, fixed_logits, fixed_ws);
  const float scale = dynamic_logits.cwiseAbs().maxCoeff();
  check((dynamic_logits - fixed_logits).cwiseAbs().maxCoeff() <= 1e-5f * scale,
        "FixedTransformer<float, 128, 512, GeluTanh, 4> = the loaded model");
  const auto ppl = nlb::evaluate_perplexity(ctx, model, tokens, 64);
  // A byte-level model that learned English does far better than uniform over 256 bytes.
  check(std::isfinite(ppl.ppl) && ppl.ppl > 1.0 && ppl.ppl < 64.0,
        "evaluate_perplexity on repeated English text: " + std::to_string(ppl.ppl));
}

// nlb/text through the installed package (its utf8proc dependency comes with nlbudget::nlbudget):
// GPT-2's vocabulary shipped next to the model directory, checked against tiktoken's ids.
void text_family(const std::string& model_dir) {
  const auto tokenizer = nlb::text::load_tokenizer(model_dir + "/../gpt2-tokenizer");
  check(tokenizer.has_value() && tokenizer->vocab_size() == 50257,
        "load_tokenizer reads models/gpt2-tokenizer (50 257 ids)");
  if (!tokenizer)
    return;
  const std::vector<std::int32_t> ids = tokenizer->encode("Hello world");
  check(ids == std::vector<std::int32_t>{15496, 995}, "GPT-2 encodes \"Hello world\" as 15496 995");
  check(tokenizer->decode(ids) == "Hello world", "decode(encode(text)) == text");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer MODEL_DIR (e.g. models/tiny-gpt2)\n");
    return 2;
  }
  // nlb.hpp brings nlb/version.hpp, which must state the version find_package found.
  check(nlb::version.string == std::string_view(NLB_PACKAGE_VERSION),
        std::string("nlb/version.hpp says ") + NLB_VERSION_STRING + ", the package " +
            NLB_PACKAGE_VERSION);
  mlp_family();
  attention_family();
  model_family(argv[1]);
  text_family(argv[1]);
  std::printf("consumer: %d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
