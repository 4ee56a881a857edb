// nlb spectrum: placeholder until its issue lands (replaced by the owner of this file).
#include "common.hpp"

namespace nlb::cli {

int run_spectrum(const std::vector<std::string>& /*argv*/) {
  throw UsageError("the spectrum command is not built yet");
}

}  // namespace nlb::cli
