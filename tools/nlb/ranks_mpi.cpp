// nlb with MPI: started by a launcher, every process is one rank of MPI_COMM_WORLD; started
// directly, it is one process and MPI is not initialised (a singleton MPI_Init costs ~0.4 s and
// may start a daemon).
#include <mpi.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "nlb/distributed/mpi_communicator.hpp"
#include "ranks.hpp"

namespace nlb::cli {

namespace {

std::unique_ptr<distributed::Communicator>& current() {
  static std::unique_ptr<distributed::Communicator> c;
  return c;
}

// Set by Open MPI's mpirun, by the PMI of MPICH's hydra and of Slurm's srun, and by PMIx.
bool started_by_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(name) != nullptr)
      return true;
  return false;
}

}  // namespace

RanksSession::RanksSession(int& argc, char**& argv) {
  if (!started_by_launcher())
    return;
  // Funneled: only the main thread calls MPI; the GEMM provider's threads never do.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  current() = std::make_unique<distributed::MpiCommunicator>(MPI_COMM_WORLD);
}

RanksSession::~RanksSession() {
  if (current()) {
    current().reset();
    MPI_Finalize();
  }
}

const distributed::Communicator& ranks() {
  static const distributed::SingleProcess one;
  if (current())
    return *current();
  return one;
}

std::string rank_label() {
  const auto& r = ranks();
  if (r.size() == 1)
    return "";
  return " (rank " + std::to_string(r.rank()) + " of " + std::to_string(r.size()) + ")";
}

}  // namespace nlb::cli
