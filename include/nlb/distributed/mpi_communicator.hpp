// The Communicator of an MPI run (Open MPI, MPICH): the ranks of a communicator, by default
// MPI_COMM_WORLD. Needs <mpi.h> and linking MPI::MPI_CXX (the CMake target nlbudget::mpi).
#pragma once

#include <mpi.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "nlb/core/errors.hpp"
#include "nlb/distributed/communicator.hpp"

namespace nlb::distributed {

/// A Communicator over the ranks of an MPI communicator. Does not own MPI: the program calls
/// MPI_Init before and MPI_Finalize after (e.g. through MpiSession). A failed MPI call throws
/// Error naming it (with MPI's default error handler the run has ended before that).
class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD) : comm_(comm) {
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::vector<double> all_gather(std::span<const double> mine) const override {
    const int count = int_count(mine.size(), "all_gather");
    std::vector<int> counts(static_cast<std::size_t>(size_));
    check(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_), "MPI_Allgather");
    std::vector<int> offsets(counts.size());
    std::size_t total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      offsets[r] = int_count(total, "all_gather");
      total += static_cast<std::size_t>(counts[r]);
    }
    int_count(total, "all_gather");
    std::vector<double> out(total);
    check(MPI_Allgatherv(mine.data(), count, MPI_DOUBLE, out.data(), counts.data(), offsets.data(),
                         MPI_DOUBLE, comm_),
          "MPI_Allgatherv");
    return out;
  }

  void all_sum(std::span<std::int64_t> values) const override {
    check(MPI_Allreduce(MPI_IN_PLACE, values.data(), int_count(values.size(), "all_sum"),
                        MPI_INT64_T, MPI_SUM, comm_),
          "MPI_Allreduce");
  }

  void send(std::span<const double> values, int to) const override {
    check(MPI_Send(values.data(), int_count(values.size(), "send"), MPI_DOUBLE, to, tag, comm_),
          "MPI_Send");
  }

  std::vector<double> receive(int from) const override {
    MPI_Status status;
    check(MPI_Probe(from, tag, comm_, &status), "MPI_Probe");
    int count = 0;
    check(MPI_Get_count(&status, MPI_DOUBLE, &count), "MPI_Get_count");
    std::vector<double> out(static_cast<std::size_t>(count));
    check(MPI_Recv(out.data(), count, MPI_DOUBLE, from, tag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
    return out;
  }

  void broadcast(std::vector<double>& values, int root) const override {
    std::int64_t length = static_cast<std::int64_t>(values.size());
    check(MPI_Bcast(&length, 1, MPI_INT64_T, root, comm_), "MPI_Bcast");
    values.resize(static_cast<std::size_t>(length));
    check(MPI_Bcast(values.data(), int_count(values.size(), "broadcast"), MPI_DOUBLE, root, comm_),
          "MPI_Bcast");
  }

  [[noreturn]] void abort(int code) const override {
    MPI_Abort(comm_, code);
    std::exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest if it did
  }

 private:
  static constexpr int tag = 7071;  // the point-to-point messages of this library

  static void check(int result, const char* call) {
    if (result != MPI_SUCCESS)
      throw Error(std::string(call) + " failed with MPI error code " + std::to_string(result));
  }

  // MPI counts are int: larger messages would need splitting, which nothing here sends.
  static int int_count(std::size_t n, const char* what) {
    if (n > static_cast<std::size_t>(INT_MAX)) {
      throw ArgumentError(nlb::detail::expected_found(
          std::string("MpiCommunicator::") + what + ": doubles in one message",
          "at most " + std::to_string(INT_MAX), n));
    }
    return static_cast<int>(n);
  }

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace nlb::distributed
