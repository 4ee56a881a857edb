// The distributed analyses (nlb/distributed, docs/scaling.md) against their one-process
// references, computed on every rank: the window assignment, the sharded runner's measurements
// and perplexity (bit for bit), the ridge statistics' tree reduction (against one pass, within the
// merge tolerance), and RidgeStats' packed form. Built with MPI (NLB_TEST_MPI) this suite is run
// by CTest as 1, 2 and 3 ranks under mpirun; without MPI it runs as one process.
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "error_message.hpp"
#include "nlb/analysis/budget/pipeline.hpp"
#include "nlb/distributed.hpp"  // the umbrella compiles; the pieces under test, by name:
#include "nlb/distributed/communicator.hpp"
#include "nlb/distributed/ridge_reduction.hpp"
#include "nlb/distributed/row_parts.hpp"
#include "nlb/distributed/sharded_runner.hpp"
#include "nlb/distributed/window_shard.hpp"
#include "nlb/io/token_file.hpp"
#include "nlb/model/load_model.hpp"
#include "tolerances.hpp"

#if NLB_TEST_MPI
#include <cstdlib>

#include "nlb/distributed/mpi_communicator.hpp"
#endif

namespace {

namespace fs = std::filesystem;
namespace tol = nlb::test::tol;
namespace dist = nlb::distributed;
using nlb::Index;
using Model = nlb::Transformer<float>;
const fs::path source_dir = NLB_SOURCE_DIR;

// The group the suite runs in: every MPI rank when started by mpirun, else one process.
struct Group {
  std::unique_ptr<dist::Communicator> comm;
  Group() {
#if NLB_TEST_MPI
    if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
        std::getenv("PMIX_RANK")) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      comm = std::make_unique<dist::MpiCommunicator>();
      return;
    }
#endif
    comm = std::make_unique<dist::SingleProcess>();
  }
  ~Group() {
#if NLB_TEST_MPI
    if (comm->size() > 1 || dynamic_cast<dist::MpiCommunicator*>(comm.get())) {
      comm.reset();
      MPI_Finalize();
    }
#endif
  }
  static Group*& instance() {
    static Group* g = nullptr;
    return g;
  }
};
struct GroupFixture {
  Group group;
  GroupFixture() { Group::instance() = &group; }
  ~GroupFixture() { Group::instance() = nullptr; }
};
const dist::Communicator& comm() {
  return *Group::instance()->comm;
}

std::vector<std::int32_t> text(const std::string& name, std::size_t n) {
  auto t = nlb::io::read_text_tokens(source_dir / "data" / name);
  t.resize(n);
  return t;
}

// Every variant kind the pipeline measures: each layer linear, all layers linear, and a gated
// layer whose gate (fixed random hyperplane) routes part of the rows each way.
struct Variants {
  nlb::SurrogateFit<float> fit;
  std::vector<nlb::ModelVariant<float>> list;
};
Variants variants_of(const Model& model) {
  nlb::BudgetProtocol p;
  p.fit_tokens = 600;
  Variants v;
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ModelRunner<float> runner(ctx, model);
  v.fit = nlb::fit_surrogates(runner, text("kjv-fit.txt", 1024), p);
  v.list = nlb::one_layer_linear_variants(v.fit.surrogates);
  nlb::ModelVariant<float> all;
  for (std::size_t l = 0; l < v.fit.surrogates.size(); ++l)
    all.add_linear(static_cast<Index>(l), v.fit.surrogates[l]);
  v.list.push_back(all);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  nlb::ColVector<float> w(model.config().d_model);
  for (Index i = 0; i < w.size(); ++i)
    w(i) = normal(rng);
  nlb::ModelVariant<float> gated;
  gated.add_gated(1, v.fit.surrogates[1], nlb::HyperplaneGate<float>(w, 0.0f));
  v.list.push_back(gated);
  return v;
}

// The call throws an E whose message names every part.
template <class E, class Fn>
void says(Fn&& fn, std::initializer_list<std::string> parts) {
  const std::string message = nlb::test::error_message<E>(fn);
  for (const auto& part : parts)
    BOOST_TEST(message.find(part) != std::string::npos, "\"" << message << "\" names " << part);
}

}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(GroupFixture);

BOOST_AUTO_TEST_CASE(window_shards_cover_every_window_once_in_order) {
  for (int ranks = 1; ranks <= 5; ++ranks) {
    for (Index windows = 0; windows <= 11; ++windows) {
      Index next = 0, smallest = windows, largest = 0;
      for (int r = 0; r < ranks; ++r) {
        const auto s = dist::window_shard(windows, r, ranks);
        BOOST_TEST(s.first == next);
        next += s.count;
        smallest = std::min(smallest, s.count);
        largest = std::max(largest, s.count);
      }
      BOOST_TEST(next == windows);
      BOOST_TEST(largest - smallest <= 1);
    }
  }
  BOOST_CHECK_THROW(dist::window_shard(4, 2, 2), nlb::ArgumentError);
  BOOST_CHECK_THROW(dist::window_shard(4, 0, 0), nlb::ArgumentError);
  BOOST_CHECK_THROW(dist::window_shard(-1, 0, 1), nlb::ArgumentError);
}

BOOST_AUTO_TEST_CASE(sharded_runner_equals_one_process_bit_for_bit) {
  const Model model = nlb::load_model<float>(source_dir / "models/tiny-gpt2");
  const Variants v = variants_of(model);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ModelRunner<float> local(ctx, model);
  dist::ShardedRunner<float> sharded(local, comm());
  const Index context = 64;
  const auto tokens = text("kjv-label.txt", 5 * 64 + 10);  // 5 windows: uneven shards
  for (const bool with_base : {true, false}) {
    const auto expected = nlb::measure_variants(ctx, model, tokens, 5, context, v.list, with_base);
    const auto got = sharded.measure(tokens, 5, context, v.list, with_base, {});
    BOOST_TEST(got.windows == 5);
    BOOST_TEST(got.context == context);
    BOOST_TEST(got.base == expected.base);  // the same arithmetic per window: equal bits
    BOOST_REQUIRE_EQUAL(got.variant.size(), expected.variant.size());
    for (std::size_t i = 0; i < got.variant.size(); ++i) {
      BOOST_TEST(got.variant[i] == expected.variant[i]);
      for (std::size_t l = 0; l < got.counts[i].size(); ++l) {
        BOOST_TEST(got.counts[i][l].linear == expected.counts[i][l].linear);
        BOOST_TEST(got.counts[i][l].full == expected.counts[i][l].full);
      }
    }
  }
  // Without the unmodified model each rank's runner runs from a kept prefix (built on the first
  // such call, replaced when the windows change): still the same losses as from the embedding.
  const auto other = text("kjv-eval.txt", 5 * 64);
  for (const auto* set : {&other, &tokens, &tokens}) {
    const auto expected = nlb::measure_variants(ctx, model, *set, 5, context, v.list, false);
    const auto got = sharded.measure(*set, 5, context, v.list, false, {});
    for (std::size_t i = 0; i < got.variant.size(); ++i)
      BOOST_TEST(got.variant[i] == expected.variant[i]);
  }
  // The gated variant routed rows both ways, so the counts compared above were not trivial.
  const auto gated =
      nlb::measure_variants(ctx, model, tokens, 5, context, v.list, true).counts.back();
  BOOST_TEST(gated[1].linear > 0);
  BOOST_TEST(gated[1].full > 0);
  says<nlb::ArgumentError>([&] { sharded.measure(tokens, 6, context, v.list, true, {}); },
                           {"ShardedRunner::measure: tokens", "at least 384"});
}

BOOST_AUTO_TEST_CASE(perplexity_over_a_sharded_runner_equals_one_process_bit_for_bit) {
  const Model model = nlb::load_model<float>(source_dir / "models/tiny-gpt2");
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ModelRunner<float> local(ctx, model);
  dist::ShardedRunner<float> sharded(local, comm());
  // 41 windows: a sum long enough that another order of adding the window sums changes bits.
  const auto tokens = text("kjv-eval.txt", 41 * 16 + 5);
  for (const Index max_windows : {Index{0}, Index{1}, Index{3}}) {
    const auto expected = nlb::evaluate_perplexity(ctx, model, tokens, 16, max_windows);
    const auto got = nlb::perplexity(sharded, tokens, 16, max_windows);
    BOOST_TEST(got.ppl == expected.ppl);
    BOOST_TEST(got.mean_loss == expected.mean_loss);
    BOOST_TEST(got.predicted_tokens == expected.predicted_tokens);
    BOOST_TEST(got.windows == expected.windows);
    BOOST_TEST(got.window_loss_sums == expected.window_loss_sums);
  }
  BOOST_CHECK_THROW(nlb::perplexity(sharded, tokens, 1), nlb::ArgumentError);
  BOOST_CHECK_THROW(nlb::perplexity(sharded, std::span(tokens).first(10), 16), nlb::ArgumentError);
}

BOOST_AUTO_TEST_CASE(attention_conversions_over_ranks_equal_one_process_bit_for_bit) {
  // nlb spectrum --text under mpirun: every conversion's evaluation spread over the ranks.
  const Model model = nlb::load_model<float>(source_dir / "models/tiny-gpt2");
  const auto tokens = text("kjv-eval.txt", 7 * 32);
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ModelRunner<float> one(ctx, model);
  const auto expected = nlb::measure_attention_conversions(one, tokens, 32, 0);
  nlb::ModelRunner<float> local(ctx, model);
  dist::ShardedRunner<float> sharded(local, comm());
  const auto got = nlb::measure_attention_conversions(sharded, tokens, 32, 0);
  BOOST_TEST(got.baseline.window_loss_sums == expected.baseline.window_loss_sums);
  BOOST_TEST_REQUIRE(got.rows.size() == expected.rows.size());
  for (std::size_t i = 0; i < got.rows.size(); ++i) {
    BOOST_TEST_CONTEXT(got.rows[i].conversion << " " << got.rows[i].parameter) {
      BOOST_TEST(got.rows[i].ppl == expected.rows[i].ppl);
      BOOST_TEST(got.rows[i].delta_percent == expected.rows[i].delta_percent);
    }
  }
}

BOOST_AUTO_TEST_CASE(ridge_statistics_reduced_over_ranks_equal_one_pass) {
  // Rows with a large common mean (the case the shifted merge exists for), 50 per rank block
  // of a 7-block split, so ranks hold different numbers of rows.
  const Index d_in = 6, d_out = 3, blocks = 7, per_block = 50;
  std::mt19937 rng(11);
  std::normal_distribution<double> normal;
  nlb::RowMatrix<double> x(blocks * per_block, d_in), y(blocks * per_block, d_out);
  for (Index i = 0; i < x.rows(); ++i) {
    for (Index j = 0; j < d_in; ++j)
      x(i, j) = 1e3 + normal(rng);
    for (Index j = 0; j < d_out; ++j)
      y(i, j) = -5e2 + normal(rng) + 0.1 * x(i, j % d_in);
  }
  nlb::RidgeStats<> one(d_in, d_out);
  one.add(x, y);
  const auto mine = dist::window_shard(blocks, comm().rank(), comm().size());
  nlb::RidgeStats<> part(d_in, d_out);
  part.add(x.middleRows(mine.first * per_block, mine.count * per_block),
           y.middleRows(mine.first * per_block, mine.count * per_block));
  dist::reduce_ridge_stats(comm(), part);
  BOOST_TEST(part.count() == one.count());
  auto close = [](const auto& a, const auto& b) {
    return (a - b).norm() <= tol::ridge_merge_rel * b.norm();
  };
  BOOST_TEST(close(part.mean_x(), one.mean_x()));
  BOOST_TEST(close(part.mean_y(), one.mean_y()));
  BOOST_TEST(close(part.cxx(), one.cxx()));
  BOOST_TEST(close(part.cxy(), one.cxy()));
  BOOST_TEST(close(part.syy(), one.syy()));
  // Every rank holds the same bits: rank 0's packed statistics, gathered from all.
  const auto packed = part.packed();
  const auto all = comm().all_gather(packed);
  for (int r = 0; r < comm().size(); ++r)
    BOOST_TEST(std::vector<double>(
                   all.begin() + r * static_cast<std::ptrdiff_t>(packed.size()),
                   all.begin() + (r + 1) * static_cast<std::ptrdiff_t>(packed.size())) == packed);
}

BOOST_AUTO_TEST_CASE(gate_fitted_over_ranks_equals_one_fit) {
  // 350 rows in 2 blocks (with 3 ranks one rank holds none), 6 features: a noisy linear rule, a
  // feature constant everywhere (3.0) and one constant only on the first block's rows.
  const Index d = 6, blocks = 2, per_block = 175, n = blocks * per_block;
  std::mt19937 rng(5);
  std::normal_distribution<double> normal;
  nlb::Activations<double> x(n, d);
  std::vector<std::uint8_t> labels(static_cast<std::size_t>(n));
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < 4; ++j)
      x(i, j) = 2.0 + normal(rng);
    x(i, 4) = 3.0;
    x(i, 5) = i < per_block ? 1.0 : normal(rng);
    const double score = x(i, 0) - 0.5 * x(i, 1) + 0.3 * x(i, 5) - 1.0 + 0.5 * normal(rng);
    labels[static_cast<std::size_t>(i)] = score > 0 ? 1 : 0;
  }
  nlb::GateFitOptions options;
  options.gradient_tolerance = 1e-12;
  nlb::HyperplaneGate<double> one;
  const auto one_report = one.fit(x, labels, options);
  const auto mine = dist::window_shard(blocks, comm().rank(), comm().size());
  const Index first = mine.first * per_block, rows = mine.count * per_block;
  nlb::HyperplaneGate<double> part;
  const auto part_report = part.fit(
      x.middleRows(first, rows),
      std::span(labels).subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(rows)),
      options, dist::row_parts(comm()));
  BOOST_TEST(part_report.gradient_norm <= options.gradient_tolerance);
  BOOST_TEST(one_report.gradient_norm <= options.gradient_tolerance);
  BOOST_TEST(part_report.iterations == one_report.iterations);
  BOOST_TEST(std::abs(part_report.training_accuracy - one_report.training_accuracy) <= 1e-12);
  BOOST_TEST(part.constant_features() == one.constant_features());
  BOOST_TEST(one.constant_features().size() == 1u);  // feature 4 only: 5 varies on block 2
  const double weights = (part.folded_weight() - one.folded_weight()).cwiseAbs().maxCoeff();
  BOOST_TEST_MESSAGE("gate over " << comm().size() << " ranks: max |Δw'| " << weights << ", |Δb'| "
                                  << std::abs(part.folded_bias() - one.folded_bias()));
  BOOST_TEST(weights <= tol::gate_distributed_abs);
  BOOST_TEST(std::abs(part.folded_bias() - one.folded_bias()) <= tol::gate_distributed_abs);
  // Every rank ended with the same gate, bit for bit.
  std::vector<double> theta(part.folded_weight().data(),
                            part.folded_weight().data() + part.folded_weight().size());
  theta.push_back(part.folded_bias());
  const auto all = comm().all_gather(theta);
  for (int r = 0; r < comm().size(); ++r)
    BOOST_TEST(std::equal(theta.begin(), theta.end(), all.begin() + r * std::ptrdiff_t(d + 1)));
}

BOOST_AUTO_TEST_CASE(label_stage_with_split_features_equals_one_process) {
  // The label stage with each rank collecting the gate features of its own label windows
  // (gate_features = split: the gates' sums reduced over the ranks, the scores gathered) against
  // one process that collects them all: 16 label windows of 64 tokens (2 ranks: 8 + 8; 3 ranks:
  // 6 + 5 + 5, the second rank's rows straddling the training / held-out boundary at row 806).
  const Model model = nlb::load_model<float>(source_dir / "models/tiny-gpt2");
  nlb::BudgetProtocol p;
  p.context = 64;
  p.fit_tokens = 600;
  p.label_tokens = 1008;       // 16 windows of 63 predicted positions
  p.calibration_tokens = 630;  // 10 windows after them
  p.budgets_pct = {3.0};
  nlb::Context<nlb::backend::cpu> ctx;
  nlb::ModelRunner<float> one_runner(ctx, model);
  const auto fit = nlb::fit_surrogates(one_runner, text("kjv-fit.txt", 1024), p);
  const auto tokens = text("kjv-label.txt", 26 * 64);
  std::vector<std::pair<std::string, double>> times;
  const auto one = nlb::run_label_stage(one_runner, fit, tokens, p, {}, times);
  p.gate_features = nlb::GateFeatures::split;
  nlb::ModelRunner<float> local(ctx, model);
  dist::ShardedRunner<float> sharded(local, comm());
  const auto split = nlb::run_label_stage(sharded, fit, tokens, p, {}, times, "label");
  // The losses come from the same windows' arithmetic: equal bits.
  BOOST_TEST(split.base_losses == one.base_losses);
  BOOST_TEST(split.delta == one.delta);
  double weights = 0, thresholds = 0;
  for (std::size_t l = 0; l < one.gates.size(); ++l) {
    const auto& a = one.gates[l];
    const auto& b = split.gates[l];
    BOOST_TEST(b.label_threshold == a.label_threshold);  // from δ alone
    BOOST_TEST(b.train_positions == a.train_positions);
    BOOST_TEST(b.fit.iterations == a.fit.iterations);
    weights = std::max(weights,
                       (b.gate.unfolded_weight() - a.gate.unfolded_weight()).cwiseAbs().maxCoeff());
    weights = std::max(weights, std::abs(b.gate.unfolded_bias() - a.gate.unfolded_bias()));
    // Held-out AUCs are rank statistics of scores that differ by rounding: equal unless two
    // held-out scores swap places.
    BOOST_TEST(b.holdout_auc == a.holdout_auc);
    BOOST_TEST(split.probes[l].embedding == one.probes[l].embedding);
    BOOST_TEST(split.probes[l].context == one.probes[l].context);
    for (std::size_t k = 1; k < one.thresholds[l].size(); ++k) {
      thresholds = std::max(thresholds, std::abs(split.thresholds[l][k] - one.thresholds[l][k]) /
                                            std::max(1.0, std::abs(one.thresholds[l][k])));
    }
  }
  BOOST_TEST_MESSAGE("label stage, gate features split over "
                     << comm().size() << " ranks: max |Δθ| " << weights
                     << ", max relative Δ threshold " << thresholds);
  BOOST_TEST(weights <= tol::gate_split_features_abs);
  BOOST_TEST(thresholds <= tol::gate_split_features_abs);
  // The same states chosen, with the same measured costs (no row routed differently).
  BOOST_REQUIRE_EQUAL(split.joint.size(), one.joint.size());
  for (std::size_t b = 0; b < one.joint.size(); ++b) {
    BOOST_TEST(split.joint[b].fractions == one.joint[b].fractions);
    BOOST_TEST(split.joint[b].label_delta_pct == one.joint[b].label_delta_pct);
    BOOST_TEST(split.joint[b].calibration_delta_pct.value ==
               one.joint[b].calibration_delta_pct.value);
    BOOST_TEST(split.joint[b].calibration_delta_pct.high ==
               one.joint[b].calibration_delta_pct.high);
  }
  BOOST_TEST(std::any_of(one.joint[0].fractions.begin(), one.joint[0].fractions.end(),
                         [](double f) { return f > 0; }));  // some layer gated: not trivial
  // A rank's rows collected here: its windows' share of the label rows only.
  const nlb::LabelRows rows = sharded.held_windows(p.label_windows());
  const auto mine = dist::window_shard(p.label_windows(), comm().rank(), comm().size());
  BOOST_TEST(rows.first_window == mine.first);
  BOOST_TEST(rows.windows == mine.count);
}

BOOST_AUTO_TEST_CASE(ridge_statistics_packed_round_trip_and_refusals) {
  nlb::RidgeStats<> s(4, 2);
  nlb::RowMatrix<double> x = nlb::RowMatrix<double>::Random(9, 4);
  nlb::RowMatrix<double> y = nlb::RowMatrix<double>::Random(9, 2);
  s.add(x, y);
  const auto packed = s.packed();
  BOOST_TEST(static_cast<Index>(packed.size()) == nlb::RidgeStats<>::packed_size(4, 2));
  const auto back = nlb::RidgeStats<>::unpacked(packed, 4, 2);
  BOOST_TEST(back.packed() == packed);
  BOOST_TEST(back.count() == 9);
  BOOST_TEST(back.mean_x() == s.mean_x());
  says<nlb::FormatError>(
      [&] { nlb::RidgeStats<>::unpacked(std::span(packed).first(packed.size() - 1), 4, 2); },
      {"RidgeStats::unpacked: length", std::to_string(packed.size())});
  auto bad = packed;
  bad[0] = 2.5;
  says<nlb::FormatError>([&] { nlb::RidgeStats<>::unpacked(bad, 4, 2); },
                         {"RidgeStats::unpacked: count", "whole number"});
  bad = packed;
  bad[5] = std::numeric_limits<double>::quiet_NaN();
  says<nlb::FormatError>([&] { nlb::RidgeStats<>::unpacked(bad, 4, 2); },
                         {"RidgeStats::unpacked: entry 5", "finite"});
}
