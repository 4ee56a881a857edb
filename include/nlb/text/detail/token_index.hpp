// The vocabulary's index of BpeModel: token bytes -> id, as an open-addressing hash table of ids
// over the model's own token strings. Every piece of text that misses the piece cache is looked
// up here, and a 50 000-token vocabulary is too large for the CPU's caches: a node-based
// std::unordered_map<std::string, id> took three dependent loads per lookup (bucket, the node
// before, the node) and held a second copy of every token; this table takes one 8-byte slot, then
// the token's own bytes to confirm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace nlb::text::detail {

class TokenIndex {
 public:
  /// Indexes `tokens` (id -> bytes). A string listed twice keeps its first id. O(tokens).
  /// `tokens` must outlive the index's lookups and be the vector passed to find().
  void build(const std::vector<std::string>& tokens) {
    std::size_t capacity = 16;
    while (capacity < 2 * tokens.size())  // load factor at most 1/2
      capacity *= 2;
    slots_.assign(capacity, Slot{0, empty});
    for (std::size_t id = 0; id < tokens.size(); ++id) {
      const std::uint64_t h = hash(tokens[id]);
      Slot& s = slots_[probe(tokens[id], h, tokens)];
      if (s.id == empty)
        s = {tag(h), static_cast<std::int32_t>(id)};
    }
  }

  /// The hash this index uses (a caller that also looks the bytes up elsewhere hashes once).
  static std::uint64_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }

  /// The id of the token whose bytes are `bytes`, or -1. O(length) expected.
  std::int32_t find(std::string_view bytes, const std::vector<std::string>& tokens) const {
    return find(bytes, hash(bytes), tokens);
  }
  /// As above, with `h` == hash(bytes).
  std::int32_t find(std::string_view bytes, std::uint64_t h,
                    const std::vector<std::string>& tokens) const {
    if (slots_.empty())
      return -1;
    return slots_[probe(bytes, h, tokens)].id;  // an empty slot's id is -1
  }

 private:
  static constexpr std::int32_t empty = -1;
  // The hash's high half: a slot whose tag differs is skipped without touching the token's bytes.
  static std::uint32_t tag(std::uint64_t h) { return static_cast<std::uint32_t>(h >> 32); }

  // The slot that holds `bytes` (hash h), or the empty one where it would go: linear probing.
  std::size_t probe(std::string_view bytes, std::uint64_t h,
                    const std::vector<std::string>& tokens) const {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = h & mask;
    while (slots_[i].id != empty &&
           !(slots_[i].tag == tag(h) && tokens[static_cast<std::size_t>(slots_[i].id)] == bytes))
      i = (i + 1) & mask;
    return i;
  }

  struct Slot {
    std::uint32_t tag;
    std::int32_t id;
  };
  std::vector<Slot> slots_;
};

}  // namespace nlb::text::detail
