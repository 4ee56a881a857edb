// The processes of one run and the few collective operations the distributed analyses need
// (docs/scaling.md): an interface, so that the analyses compile without MPI and the single
// process is the trivial case. The MPI implementation is nlb/distributed/mpi_communicator.hpp.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "nlb/core/errors.hpp"

namespace nlb::distributed {

/// A fixed group of `size()` processes ("ranks", numbered 0 .. size − 1) that run the same
/// program on the same inputs. Every collective operation must be called by every rank, in the
/// same order; a rank that throws instead must call abort() so the others do not wait forever.
/// Operations move doubles and 64-bit integers only: what the analyses exchange (losses,
/// route counts, serialized statistics).
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Every rank's `mine` concatenated in rank order, returned on every rank. The parts may have
  /// different lengths (0 included). Cost: the total length, sent to every rank.
  virtual std::vector<double> all_gather(std::span<const double> mine) const = 0;

  /// Replaces `values` on every rank by the element-wise sum over ranks (integers: exact, so the
  /// result does not depend on the order of the sum). All ranks pass the same length.
  virtual void all_sum(std::span<std::int64_t> values) const = 0;

  /// Sends `values` to rank `to` (blocking until the buffer may be reused).
  virtual void send(std::span<const double> values, int to) const = 0;

  /// Receives what rank `from` sent with send(), of any length.
  virtual std::vector<double> receive(int from) const = 0;

  /// Makes `values` on every rank equal to `values` on rank `root` (any length).
  virtual void broadcast(std::vector<double>& values, int root) const = 0;

  /// Ends every rank of the run with exit status `code`, after this rank has written its
  /// message: the way out for an error on one rank while the others wait in a collective.
  [[noreturn]] virtual void abort(int code) const = 0;

  /// Rank 0, the one that writes outputs and progress.
  bool leader() const { return rank() == 0; }
};

/// The group of one process: gathers and sums are copies, send/receive have no partner.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<double> all_gather(std::span<const double> mine) const override {
    return {mine.begin(), mine.end()};
  }
  void all_sum(std::span<std::int64_t>) const override {}
  void send(std::span<const double>, int to) const override { no_partner(to); }
  std::vector<double> receive(int from) const override { no_partner(from); }
  void broadcast(std::vector<double>&, int) const override {}
  [[noreturn]] void abort(int code) const override { std::exit(code); }

 private:
  [[noreturn]] static void no_partner(int rank) {
    throw ArgumentError(nlb::detail::expected_found("SingleProcess: partner rank",
                                                    "none (a group of one process)", rank));
  }
};

}  // namespace nlb::distributed
