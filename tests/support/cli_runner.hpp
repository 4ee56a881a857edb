// Runs the nlb program from the CLI tests and captures what it printed. The test target defines
// NLB_BINARY (tests/CMakeLists.txt) as the path of the nlb it was built with.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#ifndef NLB_BINARY
#error "cli_runner.hpp needs NLB_BINARY, the path of the nlb program (tests/CMakeLists.txt)"
#endif

namespace nlb::test {

struct CliResult {
  int exit_code = -1;  ///< -1 when the program was killed by a signal
  std::string out;     ///< everything written to stdout
  std::string err;     ///< everything written to stderr
};

/// The whole content of a file ("" if it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Runs `nlb <args>` with `dir` as the working directory (relative paths in `args` are inside
/// it); stdout and stderr go through dir/stdout.txt and dir/stderr.txt. `args` is read by the
/// shell: quote paths.
/// `prefix` goes before the program on the command line (environment assignments, a launcher).
inline CliResult run_nlb(const std::filesystem::path& dir, const std::string& args,
                         const std::string& prefix = "") {
  const std::filesystem::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string command = "cd '" + dir.string() + "' && " + prefix + "'" + NLB_BINARY + "' " +
                              args + " >'" + out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(command.c_str());
  CliResult r;
  if (WIFEXITED(status))
    r.exit_code = WEXITSTATUS(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace nlb::test
