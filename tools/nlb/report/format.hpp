// How the report files write numbers and names (budget_*.cpp, spectrum_report.cpp): JSON values
// that stay valid for NaN, printf-style cells with "n/a", the shortest round-trip text of a
// double, a token as text.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "nlb/analysis/bootstrap.hpp"

namespace nlb::cli::report {

using json = nlohmann::json;

/// NaN and ±Inf are not JSON numbers: they become null.
inline json num(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}
/// [low, high] of an interval (num each).
inline json interval(const Interval& i) {
  return json::array({num(i.low), num(i.high)});
}

/// `v` printed with the printf `format` (one double), "n/a" when it is not finite.
inline std::string fmt(const char* format, double v) {
  if (!std::isfinite(v))
    return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

/// `v` with `digits` decimals ("%.*f"; NaN printed as printf prints it).
inline std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

/// Shortest round-trip text of a double, as in the JSON (CSV cells); NaN → empty cell.
inline std::string exact(double v) {
  return std::isfinite(v) ? json(v).dump() : std::string();
}

/// A token of a model with `vocab` ids: "id N" beyond bytes, the character when printable and
/// harmless in a markdown table, else its hex code.
inline std::string token_text(std::int32_t token, Index vocab) {
  if (vocab > 256)
    return "id " + std::to_string(token);
  if (token >= 33 && token < 127 && token != '|' && token != '`' && token != '\\')
    return std::string(1, static_cast<char>(token));
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", static_cast<unsigned>(token));
  return buf;
}

/// "skew_rank 4", "linear", "" (unchanged).
inline std::string conversion_name(const std::string& conversion, Index parameter) {
  return conversion == "skew_rank" ? conversion + " " + std::to_string(parameter) : conversion;
}

}  // namespace nlb::cli::report
