// nlb without MPI: every run is one process.
#include "ranks.hpp"

namespace nlb::cli {

RanksSession::RanksSession(int&, char**&) {}
RanksSession::~RanksSession() = default;

const distributed::Communicator& ranks() {
  static const distributed::SingleProcess one;
  return one;
}

std::string rank_label() {
  return "";
}

}  // namespace nlb::cli
