// nlb linearize: placeholder until its issue lands (replaced by the owner of this file).
#include "common.hpp"

namespace nlb::cli {

int run_linearize(const std::vector<std::string>& /*argv*/) {
  throw UsageError("the linearize command is not built yet");
}

}  // namespace nlb::cli
