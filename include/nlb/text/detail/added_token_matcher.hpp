// Finds added tokens (special tokens such as "<|endoftext|>", and extra vocabulary such as runs
// of spaces) in text the way HF tokenizers does: the leftmost match, and of the matches that
// start there the longest. A byte trie: one node per distinct prefix of a token's content.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace nlb::text::detail {

class AddedTokenMatcher {
 public:
  struct Match {
    std::size_t start;
    std::size_t length;
    std::int32_t id;
  };

  /// Adds `content` (non-empty) for token `id`; `special` ones match only when allowed.
  void add(std::string_view content, std::int32_t id, bool special) {
    std::size_t node = 0;
    for (const char c : content) {
      const auto byte = static_cast<unsigned char>(c);
      std::int32_t child = child_of(node, byte);
      if (child < 0) {
        child = static_cast<std::int32_t>(nodes_.size());
        nodes_[node].children.emplace_back(byte, child);
        nodes_.emplace_back();
      }
      node = static_cast<std::size_t>(child);
    }
    nodes_[node].id = id;
    nodes_[node].special = special;
    starts_[static_cast<unsigned char>(content[0])] = true;
    empty_ = false;
    all_special_ = all_special_ && special;
  }

  bool empty() const { return empty_; }

  /// The leftmost-longest match in `text` at or after `from` (special tokens only when
  /// `allow_special`). O((n - from) * longest token) in the worst case; a byte that starts no
  /// token costs one table read.
  std::optional<Match> find(std::string_view text, std::size_t from, bool allow_special) const {
    if (empty_ || (all_special_ && !allow_special))
      return std::nullopt;  // nothing can match: skip the scan
    for (std::size_t start = from; start < text.size(); ++start) {
      if (!starts_[static_cast<unsigned char>(text[start])])
        continue;
      std::size_t node = 0;
      std::optional<Match> best;
      for (std::size_t pos = start; pos < text.size(); ++pos) {
        const std::int32_t child = child_of(node, static_cast<unsigned char>(text[pos]));
        if (child < 0)
          break;
        node = static_cast<std::size_t>(child);
        if (nodes_[node].id >= 0 && (allow_special || !nodes_[node].special))
          best = Match{start, pos + 1 - start, nodes_[node].id};
      }
      if (best)
        return best;
    }
    return std::nullopt;
  }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, std::int32_t>> children;
    std::int32_t id = -1;
    bool special = false;
  };
  std::int32_t child_of(std::size_t node, unsigned char byte) const {
    for (const auto& [b, child] : nodes_[node].children)
      if (b == byte)
        return child;
    return -1;
  }

  std::vector<Node> nodes_ = std::vector<Node>(1);
  std::array<bool, 256> starts_{};
  bool empty_ = true;
  bool all_special_ = true;
};

}  // namespace nlb::text::detail
