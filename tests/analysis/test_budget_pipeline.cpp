// The MLP budget pipeline (analysis/budget/pipeline.hpp): the staged forward (Transformer::embed,
// run_layers, head) against Transformer::forward,
// split discipline (eval data never reaches the fit and label stages), the joint calibration
// meeting its budget on the label set (re-measured by plain forward passes), bootstrap, no-fly
// lists, and the errors for short inputs and missing taps.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <stdexcept>

#include "error_message.hpp"
#include "nlb/analysis/budget/pipeline.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"
#include "nlb/model/loss.hpp"
#include "tolerances.hpp"

namespace {

namespace fs = std::filesystem;
namespace tol = nlb::test::tol;
const fs::path source_dir = NLB_SOURCE_DIR;
using Model = nlb::Transformer<float>;

Model tiny_gpt2() {
  return nlb::load_model<float>(source_dir / "models/tiny-gpt2");
}
std::vector<std::int32_t> text(const std::string& name) {
  return nlb::io::read_text_tokens(source_dir / "data" / name);
}
std::vector<std::int32_t> first(const std::vector<std::int32_t>& t, std::size_t n) {
  return {t.begin(), t.begin() + static_cast<std::ptrdiff_t>(n)};
}

// A small protocol: fast, but every stage runs.
nlb::BudgetProtocol small_protocol() {
  nlb::BudgetProtocol p;
  p.fit_tokens = 1000;
  p.label_tokens = 2000;
  p.calibration_tokens = 2000;
  p.bootstrap_resamples = 200;
  p.calibration_step = 0.1;
  p.timing_windows = 2;
  p.timing_repetitions = 1;
  p.no_fly_min_count = 3;
  return p;
}

// A runner whose forward passes never fire the MLP taps (its model, for the shapes: `shape`).
class Silent final : public nlb::VariantRunner<float> {
 public:
  explicit Silent(const Model& shape) : model_(&shape) {}
  std::string name() const override { return "silent"; }
  const Model& model() const override { return *model_; }
  nlb::VariantLosses measure(Tokens, nlb::Index, nlb::Index, const std::vector<Variant>&, bool,
                             const Progress&, const HostTaps&) override {
    throw std::logic_error("Silent::measure: not used");
  }
  void collect(Tokens, nlb::Index, nlb::Index, const HostTaps&, const Progress&) override {}
  nlb::ForwardTiming time_forward(Tokens, nlb::Index, nlb::Index, const Variant&,
                                  nlb::Index) override {
    return {};
  }
  nlb::ForwardTiming time_decode(Tokens, nlb::Index, const Variant&, nlb::Index) override {
    return {};
  }

 private:
  const Model* model_;
};

// run_budget on `model` through a ModelRunner of its own (no kept streams from another run).
nlb::BudgetReport<float> budget_report(const Model& model, std::span<const std::int32_t> fit,
                                       std::span<const std::int32_t> label,
                                       std::span<const std::int32_t> eval,
                                       std::span<const std::int32_t> cross,
                                       const nlb::BudgetProtocol& protocol) {
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ModelRunner<float> runner(ctx, model);
  return nlb::run_budget(runner, fit, label, eval, cross, protocol);
}

// fit_surrogates on `model` through a ModelRunner.
nlb::SurrogateFit<float> surrogates_of(const Model& model, std::span<const std::int32_t> tokens,
                                       const nlb::BudgetProtocol& protocol) {
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ModelRunner<float> runner(ctx, model);
  return nlb::fit_surrogates(runner, tokens, protocol);
}

}  // namespace

namespace {

// Per-window loss sums of `model` on windows [first, first + count) of `tokens` by plain
// Transformer::forward passes (no overrides, no kept prefix).
std::vector<double> window_sums(const Model& model, const std::vector<std::int32_t>& tokens,
                                nlb::Index first, nlb::Index count, nlb::Index ctx) {
  std::vector<double> out;
  nlb::Context<nlb::backend::cpu> host;
  Model::Workspace ws;
  nlb::RowMatrix<float> logits;
  for (nlb::Index w = first; w < first + count; ++w) {
    const std::span<const std::int32_t> win(tokens.data() + w * ctx, static_cast<std::size_t>(ctx));
    model.forward(host, win, logits, ws);
    double s = 0;
    for (double v : nlb::next_token_losses(logits, win))
      s += v;
    out.push_back(s);
  }
  return out;
}

// A copy of `model` with every layer that `state` gates replaced by a GatedMLP slot.
Model gated_copy(const Model& model, const nlb::BudgetReport<float>& r,
                 const nlb::JointState& state) {
  Model gated = model;
  const auto gates = r.label.plain_gates();
  for (std::size_t l = 0; l < gates.size(); ++l) {
    if (state.fractions[l] <= 0)
      continue;
    auto g = gates[l];
    g.set_threshold(static_cast<float>(state.thresholds[l]));
    gated.layers()[l].mlp() = nlb::gated_slot(model.layers()[l].mlp(), r.fit.surrogates[l], g);
  }
  return gated;
}

// Joint Δ% of `gated` against `model` over the first n predicted positions of the first
// `windows` windows of `tokens`, by plain forward passes.
double label_delta_pct(const Model& model, const Model& gated,
                       const std::vector<std::int32_t>& tokens, nlb::Index windows, nlb::Index n,
                       nlb::Index ctx) {
  double sum_gated = 0, sum_base = 0;
  nlb::Index counted = 0;
  nlb::Context<nlb::backend::cpu> host;
  Model::Workspace gated_ws, ws;
  nlb::RowMatrix<float> logits;
  for (nlb::Index w = 0; w < windows && counted < n; ++w) {
    const std::span<const std::int32_t> win(tokens.data() + w * ctx, static_cast<std::size_t>(ctx));
    gated.forward(host, win, logits, gated_ws);
    const auto lg = nlb::next_token_losses(logits, win);
    model.forward(host, win, logits, ws);
    const auto lb = nlb::next_token_losses(logits, win);
    for (std::size_t i = 0; i < lg.size() && counted < n; ++i, ++counted) {
      sum_gated += lg[i];
      sum_base += lb[i];
    }
  }
  return 100.0 * std::expm1((sum_gated - sum_base) / static_cast<double>(n));
}

}  // namespace

BOOST_AUTO_TEST_CASE(staged_forward_equals_transformer_forward) {
  Model model = tiny_gpt2();
  const auto tokens = first(text("kjv-eval.txt"), 128);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::RowMatrix<float> expected, got;
  Model::Workspace forward_ws;
  model.forward(ctx, tokens, expected, forward_ws);
  Model::Workspace ws;
  Model::Stream x;
  model.embed(ctx, tokens, x, ws);
  model.run_layers(ctx, x, 0, 2, ws);
  model.run_layers(ctx, x, 2, model.layer_count(), ws);
  model.head(ctx, x, got, ws);
  BOOST_REQUIRE_EQUAL(got.rows(), expected.rows());
  BOOST_CHECK(got == expected);  // the same operations: bit for bit
}

BOOST_AUTO_TEST_CASE(overrides_equal_a_changed_copy_bit_for_bit) {
  // A layer override (surrogate, gated with the layer's own MLP, another attention) against an
  // independent reference: a copy of the model with that slot replaced, through plain forward.
  const Model model = tiny_gpt2();
  const auto tokens = first(text("kjv-eval.txt"), 128);
  const auto fit = surrogates_of(model, text("kjv-fit.txt"), small_protocol());
  nlb::ColVector<float> w = nlb::ColVector<float>::Zero(model.config().d_model);
  w(3) = 1;  // route by one feature's sign: some rows each way
  const nlb::HyperplaneGate<float> gate(w, 0.0f, 0.0f);
  const auto& dense = model.layers()[0].attention().get<nlb::AttentionSlot<float>::Dense>();
  const nlb::AttentionSlot<float> linear_attention(nlb::LinearAttention<float>(
      dense.weights(), dense.heads(), dense.rotary_dims(), dense.rotary_base()));
  std::vector<Model::Override> overrides(static_cast<std::size_t>(model.layer_count()));
  overrides[0].attention = &linear_attention;
  overrides[1].mlp = nlb::MlpOverride<float>::linear(fit.surrogates[1]);
  overrides[2].mlp = nlb::MlpOverride<float>::gated(fit.surrogates[2], gate);
  Model changed = model;
  auto& b0 = changed.layers()[0];
  b0 = nlb::DynamicBlock<float>(b0.ln1(), linear_attention, b0.ln2(), b0.mlp(),
                                b0.parallel_residual(), b0.layer_norm_eps(), b0.attn_layer_norm());
  changed.layers()[1].mlp() = nlb::linear_slot(fit.surrogates[1]);
  changed.layers()[2].mlp() = nlb::gated_slot(model.layers()[2].mlp(), fit.surrogates[2], gate);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::RowMatrix<float> expected, got;
  nlb::RouteCounts expected_counts;
  Model::Workspace changed_ws;
  changed.forward(ctx, tokens, expected, changed_ws, nlb::NoTaps{}, nullptr, &expected_counts);
  Model::Workspace ws;
  Model::Stream x;
  std::vector<nlb::RouteCounts> counts(static_cast<std::size_t>(model.layer_count()));
  model.embed(ctx, tokens, x, ws);
  model.run_layers(ctx, x, 0, model.layer_count(), ws, overrides, nullptr, nlb::NoTaps{}, counts);
  model.head(ctx, x, got, ws);
  BOOST_CHECK(got == expected);
  BOOST_CHECK_GT(counts[2].linear, 0);
  BOOST_CHECK_GT(counts[2].full, 0);
  nlb::RouteCounts total;
  for (const auto& c : counts) {
    total.linear += c.linear;
    total.full += c.full;
  }
  BOOST_CHECK_EQUAL(total.linear, expected_counts.linear);
  BOOST_CHECK_EQUAL(total.full, expected_counts.full);
  // A gated override needs the layer's own full MLP: a surrogate slot has none.
  std::vector<Model::Override> bad(static_cast<std::size_t>(model.layer_count()));
  bad[1].mlp = nlb::MlpOverride<float>::gated(fit.surrogates[1], gate);
  model.embed(ctx, tokens, x, ws);
  BOOST_CHECK_THROW(changed.run_layers(ctx, x, 0, model.layer_count(), ws, bad),
                    nlb::ArgumentError);
  BOOST_CHECK_THROW(model.run_layers(ctx, x, 0, 2, ws, std::span(bad).first(2)), nlb::ShapeError);
  BOOST_CHECK_THROW(model.run_layers(ctx, x, 2, 1, ws), nlb::ArgumentError);
}

BOOST_AUTO_TEST_CASE(variants_reuse_the_prefix_and_restore_the_model) {
  Model model = tiny_gpt2();
  const auto fit_tokens = text("kjv-fit.txt");
  const auto tokens = first(text("kjv-eval.txt"), 4 * 128);
  auto protocol = small_protocol();
  const auto fit = surrogates_of(model, fit_tokens, protocol);
  // Variant: layer 2 linear. Reference: a copy of the model with that slot replaced, run
  // through plain Transformer::forward (no prefix reuse).
  std::vector<nlb::ModelVariant<float>> variants(1);
  variants[0].add_linear(2, fit.surrogates[2]);
  nlb::Context<nlb::backend::cpu> ctx;
  const auto r = nlb::measure_variants(ctx, model, tokens, 4, 128, variants, true);
  Model changed = model;
  changed.layers()[2].mlp() = nlb::MlpSlot<float>(fit.surrogates[2]);
  const auto ref = nlb::evaluate_perplexity(ctx, changed, tokens, 128);
  const auto base = nlb::evaluate_perplexity(ctx, model, tokens, 128);  // model restored?
  for (nlb::Index w = 0; w < 4; ++w) {
    BOOST_CHECK_LE(std::fabs(r.window_sum(r.variant[0], w) - ref.window_loss_sums[w]),
                   tol::budget_same_path_abs);
    BOOST_CHECK_LE(std::fabs(r.window_sum(r.base, w) - base.window_loss_sums[w]),
                   tol::budget_same_path_abs);
  }
  BOOST_CHECK(model.layers()[2].mlp().is_full());
  BOOST_CHECK_EQUAL(r.counts[0][2].linear, 4 * 128);
}

BOOST_AUTO_TEST_CASE(split_discipline_eval_data_reaches_only_eval_numbers) {
  // The same fit and label texts with two different eval (and cross) texts: the real one and
  // random bytes. Everything computed from fit and label data must be identical; the eval
  // numbers must change.
  const auto fit_tokens = text("kjv-fit.txt");
  const auto label_tokens = text("kjv-label.txt");
  const auto real_eval = first(text("kjv-eval.txt"), 12 * 128);
  const auto real_cross = first(text("jargon-eval.txt"), 12 * 128);
  std::mt19937 rng(5);
  std::vector<std::int32_t> garbage(12 * 128);
  for (auto& t : garbage)
    t = static_cast<std::int32_t>(rng() % 256);
  const auto protocol = small_protocol();
  Model model = tiny_gpt2();
  const auto a = budget_report(model, fit_tokens, label_tokens, real_eval, real_cross, protocol);
  const auto b = budget_report(model, fit_tokens, label_tokens, garbage, garbage, protocol);
  const auto layers = static_cast<std::size_t>(model.layer_count());
  for (std::size_t l = 0; l < layers; ++l) {
    BOOST_CHECK_EQUAL(a.fit.reports[l].r2, b.fit.reports[l].r2);
    BOOST_CHECK(a.fit.surrogates[l].weight() == b.fit.surrogates[l].weight());
    BOOST_CHECK(a.label.delta[l] == b.label.delta[l]);
    BOOST_CHECK(a.label.gates[l].gate.folded_weight() == b.label.gates[l].gate.folded_weight());
    BOOST_CHECK_EQUAL(a.label.gates[l].holdout_auc, b.label.gates[l].holdout_auc);
    BOOST_CHECK_EQUAL(a.label.probes[l].embedding, b.label.probes[l].embedding);
    BOOST_CHECK_EQUAL(a.label.probes[l].context, b.label.probes[l].context);
  }
  BOOST_REQUIRE_EQUAL(a.label.calibration.path.size(), b.label.calibration.path.size());
  for (std::size_t b_i = 0; b_i < protocol.budgets_pct.size(); ++b_i)
    BOOST_CHECK(a.label.joint[b_i].thresholds == b.label.joint[b_i].thresholds);
  BOOST_CHECK_EQUAL(a.label.baseline_ppl, b.label.baseline_ppl);
  // The eval stage did read the eval text.
  BOOST_CHECK_NE(a.eval.baseline_ppl, b.eval.baseline_ppl);
  BOOST_CHECK_GT(b.eval.baseline_ppl, 2 * a.eval.baseline_ppl);  // random bytes are surprising
  BOOST_CHECK_NE(a.eval.layers[1].all_linear_ppl, b.eval.layers[1].all_linear_ppl);
  BOOST_CHECK_NE(a.no_fly.cross_baseline_ppl, b.no_fly.cross_baseline_ppl);
}

BOOST_AUTO_TEST_CASE(greedy_calibration_meets_its_budget_on_the_label_set) {
  const auto fit_tokens = text("kjv-fit.txt");
  const auto label_tokens = text("kjv-label.txt");
  const auto eval = first(text("kjv-eval.txt"), 4 * 128);
  auto protocol = small_protocol();
  protocol.calibration_search = nlb::CalibrationSearch::greedy;
  protocol.budgets_pct = {0.5, 2.0};
  Model model = tiny_gpt2();
  const auto r = budget_report(model, fit_tokens, label_tokens, eval, eval, protocol);
  const auto& path = r.label.calibration.path;
  BOOST_REQUIRE_GE(path.size(), 2u);  // at least one step fits a 2% budget
  const nlb::Index n = protocol.label_tokens;
  const auto windows = protocol.label_windows();
  for (std::size_t b = 0; b < protocol.budgets_pct.size(); ++b) {
    const auto& state = r.label.joint[b];
    const double budget = protocol.budgets_pct[b];
    BOOST_CHECK_LE(state.label_delta_pct, budget);
    // Re-measure independently: a model copy with the gated slots, plain forward per window.
    const double delta = label_delta_pct(model, gated_copy(model, r, state), label_tokens, windows,
                                         n, protocol.context);
    BOOST_TEST_MESSAGE("budget " << budget << "%: label delta " << state.label_delta_pct
                                 << "% (re-measured " << delta << "%)");
    BOOST_CHECK_LE(std::fabs(delta - state.label_delta_pct), tol::budget_same_path_abs);
    BOOST_CHECK_LE(delta, budget);
    // Where the path went further, the next step broke this budget (the greedy's stop rule).
    std::size_t i = 0;
    while (i + 1 < path.size() && path[i + 1].label_delta_pct <= budget)
      ++i;
    BOOST_CHECK(path[i].fractions == state.fractions);
    if (i + 1 < path.size())
      BOOST_CHECK_GT(path[i + 1].label_delta_pct, budget);
  }
  // FLOP accounting against the closed form of PAPERS §A5 for the last budget.
  const auto& j = r.eval.joint.back();
  const double d = 128, h = 512, L = 4;
  double saved = 0;
  for (std::size_t l = 0; l < 4; ++l)
    if (r.label.joint.back().fractions[l] > 0)
      saved += j.layer_linear_fraction[l] * (4 * d * h - 2 * d * d) - 2 * d;
  BOOST_CHECK_CLOSE(j.flops.mlp_pct, 100 * saved / (L * 4 * d * h), 1e-9);
}

BOOST_AUTO_TEST_CASE(allocation_meets_its_budget_on_the_calibration_split) {
  // The default search: the chosen gates' joint calibration Δ%, its bootstrap interval and the
  // label Δ% re-measured by plain forward passes of a gated copy of the model, on the
  // calibration windows (the label file's windows after the label windows) and the label
  // windows; the upper end of the interval meets each budget.
  const auto fit_tokens = text("kjv-fit.txt");
  const auto label_tokens = text("kjv-label.txt");
  const auto eval = first(text("kjv-eval.txt"), 4 * 128);
  auto protocol = small_protocol();
  protocol.budgets_pct = {1.0, 3.0};
  Model model = tiny_gpt2();
  const auto r = budget_report(model, fit_tokens, label_tokens, eval, eval, protocol);
  const nlb::Index ctx = protocol.context;
  const nlb::Index label_windows = protocol.label_windows();
  const nlb::Index cal_windows = protocol.calibration_windows();
  BOOST_REQUIRE_EQUAL(r.label.calibration_windows, cal_windows);
  const auto base_cal = window_sums(model, label_tokens, label_windows, cal_windows, ctx);
  BOOST_REQUIRE_EQUAL(r.label.allocations.size(), 2u);
  bool any_gate = false;
  for (std::size_t b = 0; b < protocol.budgets_pct.size(); ++b) {
    const auto& state = r.label.joint[b];
    const double budget = protocol.budgets_pct[b];
    const auto& a = r.label.allocations[b];
    BOOST_TEST_CONTEXT("budget " << budget << "%") {
      BOOST_CHECK_LE(state.calibration_delta_pct.high, budget);
      if (a.chosen < 0) {
        BOOST_CHECK_EQUAL(state.calibration_delta_pct.value, 0.0);
        continue;
      }
      any_gate = true;
      // The chosen try met the budget and no meeting try saved more FLOPs (the rule the
      // search states), by the joint linear fractions.
      const auto saved = [&](const nlb::AllocationTry& t) {
        double s = 0;
        for (std::size_t l = 0; l < t.steps.size(); ++l)
          if (t.steps[l] > 0)
            s += nlb::flops::mlp_saving_per_token(128, 512, t.calibration.layer_linear_fraction[l]);
        return s;
      };
      const auto& chosen = a.tries[static_cast<std::size_t>(a.chosen)];
      BOOST_CHECK(chosen.meets);
      for (const auto& t : a.tries) {
        if (t.meets)
          BOOST_CHECK_LE(saved(t), saved(chosen));
        BOOST_CHECK_EQUAL(t.meets, t.calibration.delta_pct.high <= budget);
      }
      const Model gated = gated_copy(model, r, state);
      const auto cal = window_sums(gated, label_tokens, label_windows, cal_windows, ctx);
      const auto again = nlb::bootstrap_delta_pct(base_cal, cal, ctx - 1,
                                                  protocol.bootstrap_resamples, protocol.seed);
      BOOST_TEST_MESSAGE("calibration delta "
                         << state.calibration_delta_pct.value << "% (re-measured " << again.value
                         << "%), high " << state.calibration_delta_pct.high << "% (" << again.high
                         << "%)");
      BOOST_CHECK_LE(std::fabs(again.value - state.calibration_delta_pct.value),
                     tol::budget_same_path_abs);
      BOOST_CHECK_LE(std::fabs(again.high - state.calibration_delta_pct.high),
                     tol::budget_same_path_abs);
      // Label Δ% over the first N label positions.
      const double label_delta =
          label_delta_pct(model, gated, label_tokens, label_windows, protocol.label_tokens, ctx);
      BOOST_CHECK_LE(std::fabs(label_delta - state.label_delta_pct), tol::budget_same_path_abs);
    }
  }
  BOOST_CHECK(any_gate);  // a 3% budget buys some gates on this model
}

BOOST_AUTO_TEST_CASE(one_budget_across_mlp_and_attention_meets_it_on_the_calibration_split) {
  // tiny-sd (S–D layers: the routing rank can be cut): each budget spent on gates and attention
  // conversions together. The chosen state re-measured by plain forward passes of a copy of the
  // model with those gates and those attention layers in its slots, on the calibration windows
  // and on the eval windows: the same Δ% and intervals; the upper end meets the budget.
  const auto fit_tokens = text("kjv-fit.txt");
  const auto label_tokens = text("kjv-label.txt");
  const auto eval = first(text("kjv-eval.txt"), 4 * 128);
  auto protocol = small_protocol();
  protocol.budgets_pct = {1.0, 3.0};
  protocol.across_attention = true;
  const Model model = nlb::load_model<float>(source_dir / "models/tiny-sd");
  const auto r = budget_report(model, fit_tokens, label_tokens, eval, eval, protocol);
  BOOST_REQUIRE(r.across.has_value());
  const auto& a = *r.across;
  const nlb::Index ctx = protocol.context;
  const nlb::Index label_windows = protocol.label_windows();
  const nlb::Index cal_windows = protocol.calibration_windows();
  const auto base_cal = window_sums(model, label_tokens, label_windows, cal_windows, ctx);
  const auto base_eval = window_sums(model, eval, 0, 4, ctx);
  // Only conversions that save FLOPs are offered (S–D: every cut rank; the scalar filter keeps
  // the d-wide filter term, so it saves nothing).
  for (std::size_t l = 0; l < a.options.size(); ++l) {
    for (std::size_t o : a.groups.offered[l])
      BOOST_CHECK_GT(a.options[l].options[o].saving_per_token, 0.0);
  }
  BOOST_REQUIRE_EQUAL(a.results.size(), 2u);
  bool any_attention = false;
  for (std::size_t b = 0; b < a.results.size(); ++b) {
    const auto& res = a.results[b];
    const double budget = protocol.budgets_pct[b];
    BOOST_TEST_CONTEXT("budget " << budget << "%") {
      const auto& al = a.allocations[b];
      BOOST_REQUIRE_GE(al.chosen, 0);
      BOOST_CHECK_LE(res.calibration_delta_pct.high, budget);
      for (const auto& t : al.tries)
        BOOST_CHECK_EQUAL(t.meets, t.calibration.delta_pct.high <= budget);
      // The copy: gates at the chosen thresholds, converted attention layers in their slots.
      nlb::JointState state;
      for (std::size_t l = 0; l < res.gate_fractions.size(); ++l) {
        const auto k = static_cast<std::size_t>(
            std::llround(res.gate_fractions[l] / protocol.calibration_step));
        state.fractions.push_back(res.gate_fractions[l]);
        state.thresholds.push_back(r.label.thresholds[l][k]);
      }
      Model copy = gated_copy(model, r, state);
      const auto& steps = al.tries[static_cast<std::size_t>(al.chosen)].steps;
      for (std::size_t l = 0; l < res.attention.size(); ++l) {
        const auto* o = nlb::chosen_attention(a.options, a.groups, steps, l);
        BOOST_CHECK_EQUAL(o ? o->conversion : std::string(), res.attention[l]);
        if (o) {
          any_attention = true;
          copy = nlb::with_layer_attention(copy, static_cast<nlb::Index>(l), o->attention);
        }
      }
      const auto cal = window_sums(copy, label_tokens, label_windows, cal_windows, ctx);
      const auto again_cal = nlb::bootstrap_delta_pct(base_cal, cal, ctx - 1,
                                                      protocol.bootstrap_resamples, protocol.seed);
      BOOST_CHECK_LE(std::fabs(again_cal.value - res.calibration_delta_pct.value),
                     tol::budget_same_path_abs);
      BOOST_CHECK_LE(std::fabs(again_cal.high - res.calibration_delta_pct.high),
                     tol::budget_same_path_abs);
      const auto ev = window_sums(copy, eval, 0, 4, ctx);
      const auto again_eval = nlb::bootstrap_delta_pct(
          base_eval, ev, ctx - 1, protocol.bootstrap_resamples, protocol.seed + b);
      BOOST_CHECK_LE(std::fabs(again_eval.value - res.eval_delta_pct.value),
                     tol::budget_same_path_abs);
      BOOST_CHECK_LE(std::fabs(again_eval.low - res.eval_delta_pct.low), tol::budget_same_path_abs);
      // The saving splits into its parts; decode was timed (S–D layers keep a KV cache).
      BOOST_CHECK_GE(res.attention_share, 0.0);
      BOOST_CHECK_LE(res.attention_share, 1.0);
      BOOST_CHECK(res.decode.has_value());
    }
  }
  BOOST_CHECK(any_attention);  // a 3% budget cuts some routing rank on this model
}

BOOST_AUTO_TEST_CASE(calibration_split_reads_only_its_windows) {
  // Changing the calibration windows changes the calibration and nothing fitted before it;
  // changing tokens after them changes nothing.
  const auto fit_tokens = text("kjv-fit.txt");
  const auto label_tokens = text("kjv-label.txt");
  const auto eval = first(text("kjv-eval.txt"), 2 * 128);
  const auto protocol = small_protocol();
  const auto start = static_cast<std::size_t>(protocol.label_windows() * protocol.context);
  const auto end =
      start + static_cast<std::size_t>(protocol.calibration_windows() * protocol.context);
  auto other_cal = label_tokens;  // other text in the calibration windows: the jargon file
  const auto jargon = text("jargon-eval.txt");
  std::copy(jargon.begin(), jargon.begin() + static_cast<std::ptrdiff_t>(end - start),
            other_cal.begin() + static_cast<std::ptrdiff_t>(start));
  auto other_tail = label_tokens;  // other text after them
  std::fill(other_tail.begin() + static_cast<std::ptrdiff_t>(end), other_tail.end(), 'x');
  Model model = tiny_gpt2();
  const auto a = budget_report(model, fit_tokens, label_tokens, eval, eval, protocol);
  const auto b = budget_report(model, fit_tokens, other_cal, eval, eval, protocol);
  const auto c = budget_report(model, fit_tokens, other_tail, eval, eval, protocol);
  for (std::size_t l = 0; l < a.label.gates.size(); ++l) {
    BOOST_CHECK(a.label.delta[l] == b.label.delta[l]);
    BOOST_CHECK(a.label.gates[l].gate.folded_weight() == b.label.gates[l].gate.folded_weight());
    BOOST_CHECK(a.label.cost_curves.delta_pct[l] == c.label.cost_curves.delta_pct[l]);
  }
  BOOST_CHECK(a.label.cost_curves.delta_pct != b.label.cost_curves.delta_pct);
  for (std::size_t i = 0; i < a.label.joint.size(); ++i) {
    BOOST_CHECK(a.label.joint[i].thresholds == c.label.joint[i].thresholds);
    BOOST_CHECK_EQUAL(a.label.joint[i].calibration_delta_pct.high,
                      c.label.joint[i].calibration_delta_pct.high);
  }
}

BOOST_AUTO_TEST_CASE(bootstrap_interval_properties) {
  // Every window changes by the same amount: every resample gives the same Δ%, so the interval
  // collapses onto the closed form 100 (exp(diff / tokens) − 1).
  const std::vector<double> base{10, 12, 9, 11, 13};
  std::vector<double> same_shift;
  for (double v : base)
    same_shift.push_back(v + 0.5);
  const auto flat = nlb::bootstrap_delta_pct(base, same_shift, 100, 500, 1);
  const double expected = 100 * std::expm1(0.5 / 100);
  BOOST_CHECK_CLOSE(flat.value, expected, 1e-10);
  BOOST_CHECK_CLOSE(flat.low, expected, 1e-10);
  BOOST_CHECK_CLOSE(flat.high, expected, 1e-10);
  // Unequal changes: the interval brackets the estimate, the seed fixes the draws.
  const std::vector<double> varied{10.1, 12.9, 9.0, 11.4, 13.2};
  const auto a = nlb::bootstrap_delta_pct(base, varied, 100, 1000, 7);
  const auto b = nlb::bootstrap_delta_pct(base, varied, 100, 1000, 7);
  const auto c = nlb::bootstrap_delta_pct(base, varied, 100, 1000, 8);
  BOOST_CHECK_LT(a.low, a.value);
  BOOST_CHECK_GT(a.high, a.value);
  BOOST_CHECK_EQUAL(a.low, b.low);
  BOOST_CHECK_EQUAL(a.high, b.high);
  BOOST_CHECK(a.low != c.low || a.high != c.high);
  // The extreme resamples bound the interval: all draws of the smallest / largest window diff.
  BOOST_CHECK_GE(a.low, 100 * std::expm1(0.0 / 100));
  BOOST_CHECK_LE(a.high, 100 * std::expm1(1.1 / 100));
}

BOOST_AUTO_TEST_CASE(no_fly_lists_and_correlation) {
  // Two windows of context 3 (2 predicted positions each): tokens at rows 0, 1 are the inputs.
  const std::vector<std::int32_t> tokens{5, 7, 9, 5, 5, 1};
  const std::vector<double> delta{0.1, 0.3, 0.2, 0.0};
  const auto m = nlb::token_delta_means(tokens, delta, 3);
  BOOST_REQUIRE_EQUAL(m.size(), 2u);
  BOOST_CHECK_EQUAL(m[0].token, 5);
  BOOST_CHECK_EQUAL(m[0].count, 3);
  BOOST_CHECK_CLOSE(m[0].mean, (0.1 + 0.2 + 0.0) / 3, 1e-12);
  BOOST_CHECK_EQUAL(m[1].token, 7);
  BOOST_CHECK_CLOSE(m[1].mean, 0.3, 1e-12);
  // Correlation: b's means are an affine function of a's (r = 1), then reversed (r = −1).
  std::vector<nlb::TokenDelta> a, b, c;
  for (int t = 0; t < 6; ++t) {
    a.push_back({t, 0.01 * t * t, 20});
    b.push_back({t, 3 + 2 * 0.01 * t * t, 15});
    c.push_back({t, -0.01 * t * t, 15});
  }
  b.push_back({9, 1.0, 2});  // too rare: on no list, not correlated
  const auto ab = nlb::compare_no_fly(a, b, 0.05, 10);
  BOOST_CHECK_CLOSE(ab.correlation, 1.0, 1e-9);
  BOOST_CHECK_EQUAL(ab.common_tokens, 6);
  BOOST_CHECK_EQUAL(ab.no_fly_a.size(), 3u);  // 0.09, 0.16, 0.25
  BOOST_CHECK_EQUAL(ab.no_fly_a.front().token, 5);
  BOOST_CHECK_EQUAL(ab.no_fly_b.size(), 6u);  // every mean ≥ 3
  BOOST_CHECK_EQUAL(ab.overlap, 3);
  BOOST_CHECK_CLOSE(nlb::compare_no_fly(a, c, 0.05, 10).correlation, -1.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(short_inputs_and_missing_taps_are_clear_errors) {
  Model model = tiny_gpt2();
  const auto protocol = small_protocol();
  const auto fit_tokens = text("kjv-fit.txt");
  const auto short_label = first(text("kjv-label.txt"), 500);
  const auto eval = first(text("kjv-eval.txt"), 256);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ModelRunner<float> runner(ctx, model);
  const auto msg = nlb::test::error_message<nlb::ArgumentError>([&] {
    nlb::run_budget(runner, fit_tokens, short_label, eval, eval, protocol, {},
                    {"fit", "label file L.txt", "eval", "cross"});
  });
  BOOST_TEST_MESSAGE(msg);
  BOOST_CHECK(msg.find("label file L.txt") != std::string::npos);
  // 16 label windows and 16 calibration windows of 128
  BOOST_CHECK(msg.find("expected at least 4096 tokens") != std::string::npos);
  BOOST_CHECK(msg.find("2000 label positions and 2000 calibration positions") != std::string::npos);
  BOOST_CHECK(msg.find("found 500 tokens") != std::string::npos);
  auto bad = protocol;
  bad.budgets_pct = {1.0, 0.0};
  const auto budget_msg = nlb::test::error_message<nlb::ArgumentError>(
      [&] { nlb::run_budget(runner, fit_tokens, fit_tokens, eval, eval, bad); });
  BOOST_CHECK(budget_msg.find("budget_pct") != std::string::npos);

  Silent silent(model);
  const auto taps_msg = nlb::test::error_message<nlb::FormatError>(
      [&] { nlb::collect_ridge_stats(silent, fit_tokens, 128, 300); });
  BOOST_TEST_MESSAGE(taps_msg);
  BOOST_CHECK(taps_msg.find("MLP taps") != std::string::npos);
  BOOST_CHECK(taps_msg.find("layer 0") != std::string::npos);
  BOOST_CHECK(taps_msg.find("expected 300 (x, y) rows, found 0") != std::string::npos);
}
