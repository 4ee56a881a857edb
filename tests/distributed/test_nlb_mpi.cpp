// `mpirun -n 2 nlb ...` as a user runs it (docs/scaling.md): the budget report and the
// perplexity equal the one-process run's, and an error on the ranks ends the run with the
// error's message, a non-zero exit and no report. Both runs keep the GEMM to one thread, so
// every window's arithmetic is the same and the fields are compared for exact equality.
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.hpp"
#include "report_json.hpp"
#include "scratch_dir.hpp"
#include "tolerances.hpp"

#ifndef NLB_MPIEXEC
#error "test_nlb_mpi needs NLB_MPIEXEC, the MPI launcher (tests/CMakeLists.txt)"
#endif

namespace {

namespace fs = std::filesystem;
namespace tol = nlb::test::tol;
using json = nlohmann::json;
using nlb::test::contains;
using nlb::test::slurp;
const fs::path source_dir = NLB_SOURCE_DIR;

// `nlb <args>` in `dir` as `ranks` MPI ranks (ranks = 0: without the launcher), one GEMM thread
// per process, on this machine only.
nlb::test::CliResult run(const fs::path& dir, int ranks, const std::string& args) {
  const std::string launcher = ranks == 0 ? std::string()
                                          : std::string("'") + NLB_MPIEXEC + "' -n " +
                                                std::to_string(ranks) + " --oversubscribe ";
  return nlb::test::run_nlb(dir, args,
                            "OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 "
                            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader " +
                                launcher);
}

// Every field but the wall-clock ones (names containing "time") and the rank count.
json deterministic(const json& report) {
  return nlb::test::without_timing(report, {"ranks"});
}

// Short eval and cross texts (12 windows of 128 bytes each), small fit and label sets.
struct Inputs {
  nlb::test::ScratchDir dir{"nlb-mpi"};
  fs::path eval, cross;
  Inputs() {
    eval = dir.write_text("eval.txt", slurp(source_dir / "data/kjv-eval.txt").substr(0, 12 * 128));
    cross =
        dir.write_text("cross.txt", slurp(source_dir / "data/jargon-eval.txt").substr(0, 12 * 128));
  }
  std::string budget(const std::string& model, const fs::path& out) const {
    return "budget --model '" + (source_dir / "models" / model).string() +
           "' --fit-positions 1000 --label-positions 2000 --calibration-positions 2000 "
           "--eval-text '" +
           eval.string() + "' --cross-text '" + cross.string() +
           "' --seed 7 --budget-pct 1 --budget-pct 3 --decode-steps 8 --out '" + out.string() + "'";
  }
};

void check_budget_equal(const std::string& model, bool also_split = false) {
  Inputs in;
  const auto one = run(in.dir.path, 0, in.budget(model, in.dir.path / "one"));
  BOOST_REQUIRE_MESSAGE(one.exit_code == 0, one.err);
  if (also_split) {
    // Each rank collects the gate features of its own label windows and the gates are fitted
    // over both ranks: every field within tol::budget_split_features_rel of one process's
    // (the gates differ by rounding only; no row routes differently on these inputs).
    const auto split =
        run(in.dir.path, 2, in.budget(model, in.dir.path / "split") + " --gate-features split");
    BOOST_REQUIRE_MESSAGE(split.exit_code == 0, split.err);
    const json a = json::parse(slurp(in.dir.path / "one/report.json"));
    const json c = json::parse(slurp(in.dir.path / "split/report.json"));
    BOOST_TEST(a["protocol"]["gate_features"] == "replicated");
    BOOST_TEST(c["protocol"]["gate_features"] == "split");
    const std::string difference = nlb::test::first_difference(
        nlb::test::without_timing(a, {"ranks", "gate_features"}),
        nlb::test::without_timing(c, {"ranks", "gate_features"}), tol::budget_split_features_rel);
    BOOST_TEST(difference.empty(), model << ": split gate features: " << difference);
    BOOST_TEST(contains(slurp(in.dir.path / "split/report.md"), "its own label windows"));
  }
  const auto two = run(in.dir.path, 2, in.budget(model, in.dir.path / "two"));
  BOOST_REQUIRE_MESSAGE(two.exit_code == 0, two.err);
  const json a = json::parse(slurp(in.dir.path / "one/report.json"));
  const json b = json::parse(slurp(in.dir.path / "two/report.json"));
  BOOST_TEST(a["protocol"]["ranks"] == 1);
  BOOST_TEST(b["protocol"]["ranks"] == 2);
  BOOST_TEST((deterministic(a) == deterministic(b)),
             model << ": the reports differ:\n"
                   << json::diff(deterministic(a), deterministic(b)).dump(1));
  BOOST_TEST(slurp(in.dir.path / "one/layers.csv") == slurp(in.dir.path / "two/layers.csv"));
  BOOST_TEST(contains(slurp(in.dir.path / "two/report.md"), "spread over 2 MPI ranks"));
  // Only rank 0 reported progress: each stage line once.
  std::size_t lines = 0;
  for (std::size_t at = two.err.find("nlb budget: fit: surrogates ..."); at != std::string::npos;
       at = two.err.find("nlb budget: fit: surrogates ...", at + 1))
    ++lines;
  BOOST_TEST(lines == 1u);
}

}  // namespace

BOOST_AUTO_TEST_CASE(budget_on_two_ranks_equals_one_process_gpt2) {
  check_budget_equal("tiny-gpt2", true);
}

BOOST_AUTO_TEST_CASE(budget_on_two_ranks_equals_one_process_neox) {
  check_budget_equal("tiny-neox");
}

BOOST_AUTO_TEST_CASE(eval_on_two_and_three_ranks_equals_one_process) {
  nlb::test::ScratchDir dir("nlb-mpi-eval");
  const std::string args = "eval --text '" + (source_dir / "data/kjv-eval.txt").string() +
                           "' --context 64 --max-windows 7 --json";
  const auto one = run(dir.path, 0, args);
  BOOST_REQUIRE_MESSAGE(one.exit_code == 0, one.err);
  for (int ranks : {2, 3}) {
    const auto many = run(dir.path, ranks, args);
    BOOST_REQUIRE_MESSAGE(many.exit_code == 0, many.err);
    BOOST_TEST(many.out == one.out, ranks << " ranks printed " << many.out << ", one process "
                                          << one.out);  // once, with the same digits
  }
}

BOOST_AUTO_TEST_CASE(spectrum_conversions_on_two_ranks_equal_one_process) {
  // tiny-gpt2: every conversion (a), (b), (c) evaluated with its windows spread over 2 ranks;
  // tiny-sd: its S-D heads' conversions. report.json is equal in every field.
  nlb::test::ScratchDir dir("nlb-mpi-spectrum");
  for (const char* model : {"tiny-gpt2", "tiny-sd"}) {
    BOOST_TEST_CONTEXT(model) {
      const auto args = [&](const std::string& out) {
        return "spectrum --model '" + (source_dir / "models" / model).string() + "' --text '" +
               (source_dir / "data/kjv-eval.txt").string() +
               "' --context 64 --max-windows 5 --out '" + (dir.path / out).string() + "'";
      };
      const auto one = run(dir.path, 0, args(std::string(model) + "-one"));
      BOOST_REQUIRE_MESSAGE(one.exit_code == 0, one.err);
      const auto two = run(dir.path, 2, args(std::string(model) + "-two"));
      BOOST_REQUIRE_MESSAGE(two.exit_code == 0, two.err);
      const json a = json::parse(slurp(dir.path / (std::string(model) + "-one") / "report.json"));
      const json b = json::parse(slurp(dir.path / (std::string(model) + "-two") / "report.json"));
      BOOST_TEST(a.at("conversions").at("rows").size() >= 3u);
      BOOST_TEST((a == b), "2 ranks: " << b.at("conversions").dump()
                                       << "\none process: " << a.at("conversions").dump());
      BOOST_TEST(contains(slurp(dir.path / (std::string(model) + "-two") / "report.md"),
                          "spread over 2 MPI ranks"));
    }
  }
  // Without a text there is nothing to spread: refused under the launcher (exit 2).
  const auto bare = run(dir.path, 2, "spectrum --out '" + (dir.path / "bare").string() + "'");
  BOOST_TEST(bare.exit_code == 2);
  BOOST_TEST(contains(bare.err, "nothing to spread"), bare.err);
  BOOST_TEST(!fs::exists(dir.path / "bare"));
}

BOOST_AUTO_TEST_CASE(an_error_ends_every_rank_and_leaves_no_report) {
  Inputs in;
  // A missing input: every rank fails on it; the message names the file and the rank.
  const fs::path out = in.dir.path / "report";
  const auto missing = run(in.dir.path, 2,
                           in.budget("tiny-gpt2", out) + " --label-text '" +
                               (in.dir.path / "no-such.txt").string() + "'");
  BOOST_TEST(missing.exit_code != 0);
  BOOST_TEST(contains(missing.err, "no-such.txt"), missing.err);
  BOOST_TEST(contains(missing.err, "of 2)"), missing.err);
  BOOST_TEST(!fs::exists(out));
  // The report cannot be written (its directory would be inside a file): only rank 0 writes,
  // so only rank 0 fails, after the others finished; the run still ends non-zero.
  const fs::path blocker = in.dir.write_text("a-file", "x");
  const auto unwritable = run(in.dir.path, 2, in.budget("tiny-gpt2", blocker / "report"));
  BOOST_TEST(unwritable.exit_code != 0);
  BOOST_TEST(contains(unwritable.err, "(rank 0 of 2)"), unwritable.err);
  BOOST_TEST(!fs::exists(blocker / "report"));
  // One process per GPU is not built: --device cuda with ranks is a usage error (exit 2).
  const auto cuda =
      run(in.dir.path, 2, "eval --text '" + in.eval.string() + "' --context 64 --device cuda");
  BOOST_TEST(cuda.exit_code == 2);
  BOOST_TEST(contains(cuda.err, "--device cuda under an MPI launcher"), cuda.err);
  // The other commands would run once per rank and write the same files: refused.
  const auto forward = run(in.dir.path, 2,
                           "forward --text '" + in.eval.string() +
                               "' --context 64 --windows 1 --out logits.safetensors");
  BOOST_TEST(forward.exit_code == 2);
  BOOST_TEST(contains(forward.err, "runs as one process only"), forward.err);
  BOOST_TEST(!fs::exists(in.dir.path / "logits.safetensors"));
}
