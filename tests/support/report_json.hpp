// The deterministic part of a budget report.json, for tests that compare two runs.
#pragma once

#include <algorithm>
#include <cmath>
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

/// Compares two reports of the same shape: every string, boolean and key equal, numbers within
/// relative `rel` (|a − b| <= rel · max(|a|, |b|, 1e-300)). Returns "" or the path and values of
/// the first difference.
inline std::string first_difference(const nlohmann::json& a, const nlohmann::json& b, double rel,
                                    const std::string& path = "") {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    const double scale = std::max({std::abs(x), std::abs(y), 1e-300});
    if (x == y || std::abs(x - y) <= rel * scale)
      return "";
    return path + ": " + a.dump() + " vs " + b.dump();
  }
  if (a.type() != b.type() || a.size() != b.size())
    return path + ": " + a.dump().substr(0, 80) + " vs " + b.dump().substr(0, 80);
  if (a.is_object()) {
    for (const auto& [key, sub] : a.items()) {
      if (!b.contains(key))
        return path + "/" + key + ": missing in the second";
      if (auto d = first_difference(sub, b[key], rel, path + "/" + key); !d.empty())
        return d;
    }
    return "";
  }
  if (a.is_array()) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (auto d = first_difference(a[i], b[i], rel, path + "/" + std::to_string(i)); !d.empty())
        return d;
    }
    return "";
  }
  return a == b ? "" : path + ": " + a.dump() + " vs " + b.dump();
}

}  // namespace nlb::test
