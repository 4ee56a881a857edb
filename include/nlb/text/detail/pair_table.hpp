// The merge table of BpeModel: (left id, right id) -> (rank, result id), as an open-addressing
// hash table with linear probing over flat arrays. The merge loop looks a pair up for every
// candidate, so this lookup is the inner loop of encoding; a node-based std::unordered_map
// costs a pointer chase and a division per lookup, this one a multiply and usually one probe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace nlb::text::detail {

struct MergeRule {
  std::int32_t rank;
  std::int32_t result;
};

class PairTable {
 public:
  /// The key of the pair (left, right) (ids >= 0).
  static std::uint64_t key(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
  }

  /// Room for `count` pairs at a load factor of at most 1/2.
  void reserve(std::size_t count) {
    std::size_t capacity = 16;
    while (capacity < 2 * count)
      capacity *= 2;
    slots_.assign(capacity, Slot{empty, {-1, -1}});
    size_ = 0;
  }

  /// Adds `rule` for `k` unless `k` is there already (then the first rule stays). Needs a
  /// reserve() for at least the number of pairs added.
  void insert(std::uint64_t k, MergeRule rule) {
    for (std::size_t i = slot(k);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == k)
        return;
      if (slots_[i].key == empty) {
        slots_[i] = {k, rule};
        ++size_;
        return;
      }
    }
  }

  /// The rule of `k`, or nullptr. O(1) expected.
  const MergeRule* find(std::uint64_t k) const {
    if (slots_.empty())
      return nullptr;
    for (std::size_t i = slot(k);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == k)
        return &slots_[i].rule;
      if (slots_[i].key == empty)
        return nullptr;
    }
  }

  std::size_t size() const { return size_; }

  /// Calls f(key, rule) for every pair, in no particular order.
  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.key != empty)
        f(s.key, s.rule);
  }

 private:
  // No pair of non-negative ids has both halves 0xFFFFFFFF.
  static constexpr std::uint64_t empty = ~std::uint64_t{0};
  std::size_t slot(std::uint64_t k) const {
    // Fibonacci hashing: the high bits of k * 2^64/phi index the table.
    return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> 32) & (slots_.size() - 1);
  }

  // Key and rule side by side (16 bytes): a lookup touches one cache line.
  struct Slot {
    std::uint64_t key;
    MergeRule rule;
  };
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace nlb::text::detail
