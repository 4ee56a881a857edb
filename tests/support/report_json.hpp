// The deterministic part of a budget report.json, for tests that compare two runs.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace nlb::test {

/// `report` without its wall-clock fields (every key containing "time", at any depth) and without
/// the keys in `also` (e.g. "ranks"): what is left is a function of the inputs and the seed.
inline nlohmann::json without_timing(const nlohmann::json& report,
                                     const std::set<std::string>& also = {}) {
  if (report.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, sub] : report.items())
      if (key.find("time") == std::string::npos && !also.contains(key))
        out[key] = without_timing(sub, also);
    return out;
  }
  if (report.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& sub : report)
      out.push_back(without_timing(sub, also));
    return out;
  }
  return report;
}

}  // namespace nlb::test
