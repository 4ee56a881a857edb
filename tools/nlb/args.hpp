// A small, strict command-line parser for nlb's subcommands: `--name value` options and
// `--flag` switches, each declared by the subcommand; anything else is a usage error.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace nlb::cli {

/// A mistake in how the program was called (exit code 2).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An option name a subcommand no longer accepts, and what to write instead. Kept so that an old
/// command line fails with the new spelling in the message instead of a bare "unknown option"
/// (or, worse, being read with the new meaning); CHANGELOG.md lists every rename.
struct Renamed {
  std::string old_name;     ///< without the "--"
  std::string replacement;  ///< what to write instead, e.g. "--fit-positions N"
  std::string why;          ///< optional: what the old name means now, or why it changed
};

class Args {
 public:
  /// options: names that take a value; flags: names that do not; renamed: retired names, each
  /// a usage error that names its replacement. Names without the "--".
  Args(const std::vector<std::string>& argv, std::set<std::string> options,
       std::set<std::string> flags, const std::vector<Renamed>& renamed = {}) {
    for (std::size_t i = 0; i < argv.size(); ++i) {
      const std::string& a = argv[i];
      if (a.rfind("--", 0) != 0)
        throw UsageError("unexpected argument \"" + a + "\"");
      const std::string name = a.substr(2);
      for (const Renamed& r : renamed) {
        if (r.old_name == name) {
          throw UsageError("option --" + name + " was renamed: use " + r.replacement +
                           (r.why.empty() ? "" : " (" + r.why + ")"));
        }
      }
      if (flags.count(name)) {
        flags_.insert(name);
      } else if (options.count(name)) {
        if (i + 1 >= argv.size())
          throw UsageError("option --" + name + " needs a value");
        values_[name].push_back(argv[++i]);
      } else {
        throw UsageError("unknown option --" + name);
      }
    }
  }

  bool flag(const std::string& name) const { return flags_.count(name) > 0; }
  bool has(const std::string& name) const { return values_.count(name) > 0; }

  std::string get(const std::string& name) const {
    const auto it = values_.find(name);
    if (it == values_.end())
      throw UsageError("missing required option --" + name);
    if (it->second.size() > 1)
      throw UsageError("option --" + name + " given more than once");
    return it->second.front();
  }
  std::string get(const std::string& name, const std::string& fallback) const {
    return has(name) ? get(name) : fallback;
  }
  /// The value of --name (`fallback` when absent), which must be one of `allowed`; otherwise a
  /// UsageError: option --name: expected a, b or c, found "value".
  std::string choice(const std::string& name, const std::string& fallback,
                     std::initializer_list<std::string_view> allowed) const {
    const std::string value = get(name, fallback);
    std::string expected;
    std::size_t i = 0;
    for (const std::string_view a : allowed) {
      if (value == a)
        return value;
      expected += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + std::string(a);
      ++i;
    }
    throw UsageError("option --" + name + ": expected " + expected + ", found \"" + value + "\"");
  }
  std::vector<std::string> all(const std::string& name) const {
    const auto it = values_.find(name);
    return it == values_.end() ? std::vector<std::string>{} : it->second;
  }

  /// An integer option within [min, max].
  long long integer(const std::string& name, long long fallback, long long min,
                    long long max) const {
    if (!has(name))
      return fallback;
    return parse_integer(name, get(name), min, max);
  }
  long long integer(const std::string& name, long long min, long long max) const {
    return parse_integer(name, get(name), min, max);
  }
  /// A real option within [min, max].
  double real(const std::string& name, double fallback, double min, double max) const {
    if (!has(name))
      return fallback;
    const std::string text = get(name);
    try {
      std::size_t used = 0;
      const double v = std::stod(text, &used);
      if (used != text.size() || !(v >= min && v <= max))
        throw std::invalid_argument(text);
      return v;
    } catch (const std::exception&) {
      throw UsageError("option --" + name + ": expected a number in [" + std::to_string(min) +
                       ", " + std::to_string(max) + "], found \"" + text + "\"");
    }
  }

 private:
  static long long parse_integer(const std::string& name, const std::string& text, long long min,
                                 long long max) {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(text, &used);
      if (used != text.size() || v < min || v > max)
        throw std::invalid_argument(text);
      return v;
    } catch (const std::exception&) {
      throw UsageError("option --" + name + ": expected an integer in [" + std::to_string(min) +
                       ", " + std::to_string(max) + "], found \"" + text + "\"");
    }
  }

  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> flags_;
};

}  // namespace nlb::cli
