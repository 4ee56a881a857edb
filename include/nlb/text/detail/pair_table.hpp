// The merge table of BpeModel: (left id, right id) -> (rank, result id), as an open-addressing
// hash table with linear probing over flat arrays. The merge loop looks a pair up for every
// candidate, so this lookup is the inner loop of encoding; a node-based std::unordered_map
// costs a pointer chase and a division per lookup, this one a multiply and usually one probe.
// When every id and rank fits in 16 bits (GPT-2's and Pythia's 50 000 merges do) a slot is 8
// bytes instead of 16: the table of a 50 000-merge vocabulary is then 1 MB, not 2, and the
// lookups of a text with many rare words miss the CPU's caches half as often.
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

  /// Room for `count` pairs of ids below `id_count` at a load factor of at most 1/2.
  void reserve(std::size_t count, std::size_t id_count) {
    std::size_t capacity = 16;
    while (capacity < 2 * count)
      capacity *= 2;
    narrow_form_ = id_count < narrow_limit && count < narrow_limit;
    wide_.clear();
    narrow_.clear();
    if (narrow_form_)
      narrow_.assign(capacity, NarrowSlot{narrow_key_empty, 0, 0});
    else
      wide_.assign(capacity, WideSlot{wide_empty, {-1, -1}});
    size_ = 0;
  }

  /// Adds `rule` for `k` unless `k` is there already (then the first rule stays). Needs a
  /// reserve() for at least the number of pairs added, with ids and ranks below its bounds.
  void insert(std::uint64_t k, MergeRule rule) {
    if (narrow_form_) {
      const std::uint32_t nk = narrow_key(k);
      NarrowSlot& s = narrow_[probe(narrow_, nk, narrow_key_empty)];
      if (s.key == narrow_key_empty) {
        s = {nk, static_cast<std::uint16_t>(rule.rank), static_cast<std::uint16_t>(rule.result)};
        ++size_;
      }
      return;
    }
    WideSlot& s = wide_[probe(wide_, k, wide_empty)];
    if (s.key == wide_empty) {
      s = {k, rule};
      ++size_;
    }
  }

  /// The rule of `k` in `rule`, if there is one. O(1) expected.
  bool find(std::uint64_t k, MergeRule& rule) const {
    if (narrow_form_) {
      const NarrowSlot s = narrow_[probe(narrow_, narrow_key(k), narrow_key_empty)];
      if (s.key == narrow_key_empty)
        return false;
      rule = {s.rank, s.result};
      return true;
    }
    if (wide_.empty())
      return false;
    const WideSlot& s = wide_[probe(wide_, k, wide_empty)];
    if (s.key == wide_empty)
      return false;
    rule = s.rule;
    return true;
  }

  std::size_t size() const { return size_; }

  /// Calls f(key, rule) for every pair, in no particular order.
  template <class F>
  void for_each(F&& f) const {
    for (const NarrowSlot& s : narrow_)
      if (s.key != narrow_key_empty)
        f(key(static_cast<std::int32_t>(s.key >> 16), static_cast<std::int32_t>(s.key & 0xFFFFu)),
          MergeRule{s.rank, s.result});
    for (const WideSlot& s : wide_)
      if (s.key != wide_empty)
        f(s.key, s.rule);
  }

 private:
  // No pair of non-negative ids has both halves 0xFFFFFFFF; in the narrow form ids, ranks and
  // counts are below narrow_limit, so no pair has both halves 0xFFFF.
  static constexpr std::uint64_t wide_empty = ~std::uint64_t{0};
  static constexpr std::uint32_t narrow_limit = 0xFFFFu;
  static constexpr std::uint32_t narrow_key_empty = ~std::uint32_t{0};
  // A key of the narrow form: both ids in 16 bits each.
  static std::uint32_t narrow_key(std::uint64_t k) {
    return static_cast<std::uint32_t>(((k >> 32) << 16) | (k & 0xFFFFu));
  }
  // The slot of `k` in `slots` (either form): the one that holds it, or the empty one where it
  // would go. Fibonacci hashing (the high bits of k * 2^64/phi) picks the first, linear probing
  // the next.
  template <class Slot, class Key>
  static std::size_t probe(const std::vector<Slot>& slots, Key k, Key empty) {
    const std::size_t mask = slots.size() - 1;
    std::size_t i = static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> 32) & mask;
    while (slots[i].key != k && slots[i].key != empty)
      i = (i + 1) & mask;
    return i;
  }

  // Key and rule side by side (16 or 8 bytes): a lookup touches one cache line.
  struct WideSlot {
    std::uint64_t key;
    MergeRule rule;
  };
  struct NarrowSlot {
    std::uint32_t key;
    std::uint16_t rank;
    std::uint16_t result;
  };
  bool narrow_form_ = false;
  std::vector<WideSlot> wide_;
  std::vector<NarrowSlot> narrow_;
  std::size_t size_ = 0;
};

}  // namespace nlb::text::detail
