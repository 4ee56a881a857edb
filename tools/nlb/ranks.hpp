// The processes of one nlb run: MPI ranks when nlb was built with MPI (NLB_ENABLE_MPI) and started
// by an MPI launcher (mpirun, srun), one process otherwise (docs/scaling.md).
#pragma once

#include <string>

#include "args.hpp"
#include "nlb/distributed/communicator.hpp"

namespace nlb::cli {

/// Starts MPI for the lifetime of the object when this process was started by an MPI launcher
/// (ranks_mpi.cpp; ranks_none.cpp: never), ends it on destruction. One per program, in main.
class RanksSession {
 public:
  RanksSession(int& argc, char**& argv);
  ~RanksSession();
  RanksSession(const RanksSession&) = delete;
  RanksSession& operator=(const RanksSession&) = delete;
};

/// The ranks of this run (a group of one outside MPI). Valid while the RanksSession lives.
const distributed::Communicator& ranks();

/// "" for one process, else " (rank R of K)": appended to error messages.
std::string rank_label();

/// UsageError when `--device cuda` was asked for and this run has more than one rank: one
/// process per GPU is not built, so the ranks would share one device.
inline void refuse_device_with_ranks(bool cuda_requested) {
  if (cuda_requested && ranks().size() > 1) {
    throw UsageError(
        "--device cuda under an MPI launcher: not supported (one process per GPU is not built "
        "yet); run it as one process");
  }
}

}  // namespace nlb::cli
