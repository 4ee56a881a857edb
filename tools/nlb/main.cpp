// nlb: run the papers' measurements on a model file. `nlb help` lists the subcommands,
// `nlb help COMMAND` shows one's options; main dispatches through the command table
// (commands.hpp).
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "nlb/core/errors.hpp"
#include "nlb/version.hpp"
#include "ranks.hpp"

namespace {

// Under MPI one rank's error must end every rank (the others may be waiting for it in a
// collective operation): the message names the rank, and MPI ends the run with `code`.
int fail(int code) {
  if (nlb::cli::ranks().size() > 1) {
    std::fflush(stderr);
    nlb::cli::ranks().abort(code);
  }
  return code;
}

// `nlb help [COMMAND]`: the overview, or one subcommand's page.
int run_help(const std::vector<std::string>& rest) {
  if (rest.empty()) {
    std::fputs(nlb::cli::overview_help().c_str(), stdout);
    return 0;
  }
  if (rest.size() > 1)
    throw nlb::cli::UsageError("expected at most one command name, found " +
                               std::to_string(rest.size()) + " arguments");
  const auto* command = nlb::cli::find_command(rest[0]);
  if (!command)
    throw nlb::cli::UsageError("unknown command \"" + rest[0] + "\" (see nlb help)");
  std::fputs(command->page.c_str(), stdout);
  return 0;
}

// `nlb --version`.
int run_version(const std::vector<std::string>& rest) {
  if (!rest.empty())
    throw nlb::cli::UsageError("--version takes no arguments");
  std::printf("nlb %s\n", NLB_VERSION_STRING);
  return 0;
}

// `nlb COMMAND ARGS...`: help and --version, or the subcommand of the table.
int dispatch(const std::string& name, const std::vector<std::string>& rest) {
  if (name == "help" || name == "--help" || name == "-h")
    return run_help(rest);
  if (name == "--version")
    return run_version(rest);
  const auto* command = nlb::cli::find_command(name);
  if (!command)
    throw nlb::cli::UsageError("unknown command \"" + name + "\" (see nlb help)");
  // `nlb COMMAND --help`: the page. Only as the first argument: later, "--help" may be the
  // value of an option (a prompt, a file name), and the parser's error points to the page.
  if (!rest.empty() && (rest[0] == "--help" || rest[0] == "-h"))
    return run_help({name});
  if (nlb::cli::ranks().size() > 1 && !command->spreads_over_ranks) {
    throw nlb::cli::UsageError(
        "runs as one process only (under an MPI launcher, eval, budget and spectrum --text "
        "spread their work over the ranks; docs/scaling.md)");
  }
  return command->run(rest);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    // No command: the overview, on stderr and with the usage-error exit code, since a script
    // that calls nlb without a command is wrong.
    std::fputs(nlb::cli::overview_help().c_str(), stderr);
    return 2;
  }
  const nlb::cli::RanksSession session(argc, argv);
  const std::string command = argv[1];
  const std::vector<std::string> rest(argv + 2, argv + argc);
  try {
    return dispatch(command, rest);
  } catch (const nlb::cli::UsageError& e) {
    std::fprintf(stderr, "nlb %s%s: %s\n", command.c_str(), nlb::cli::rank_label().c_str(),
                 e.what());
    if (nlb::cli::find_command(command))
      std::fprintf(stderr, "(nlb help %s lists its options)\n", command.c_str());
    return fail(2);
  } catch (const nlb::Error& e) {
    std::fprintf(stderr, "nlb %s%s: error: %s\n", command.c_str(), nlb::cli::rank_label().c_str(),
                 e.what());
    return fail(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nlb %s%s: unexpected error: %s\n", command.c_str(),
                 nlb::cli::rank_label().c_str(), e.what());
    return fail(1);
  }
}
