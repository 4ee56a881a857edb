// The piece cache of BpeModel: piece bytes -> the ids BPE made of them, as an open-addressing hash
// table over two arenas (the pieces' bytes, their ids), so caching a piece allocates nothing of
// its own and a lookup is one 16-byte slot, then the piece's bytes to confirm. Every piece of a
// text is looked up here first; a node-based std::unordered_map<std::string, ...> cost a division,
// a chain walk and a node per piece (its lookups were 16% of a cold-cache encode of the Jargon
// File, docs/benchmarks.md). The caller hashes the piece once for this table and the vocabulary's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nlb::text::detail {

class PieceCache {
 public:
  /// Pieces of up to this many bytes, with up to this many ids, can be cached.
  static constexpr std::size_t max_piece_bytes = 0xFFFF;

  /// Number of pieces cached.
  std::size_t size() const { return size_; }

  /// The ids cached for `piece` (whose hash is `h`), or an empty span when it is not cached
  /// (a cached piece has at least one id). O(length) expected.
  std::span<const std::int32_t> find(std::string_view piece, std::uint64_t h) const {
    if (slots_.empty())
      return {};
    const Slot& s = slots_[probe(piece, h)];
    if (s.id_count == 0)
      return {};
    return {ids_.data() + s.ids_begin, s.id_count};
  }

  /// Caches `ids` for `piece` (hash `h`) unless it is cached already (then the first entry
  /// stays) or does not fit: an empty piece or none or more than max_piece_bytes ids or bytes,
  /// or the arenas past what 32-bit offsets reach (BpeModel empties the cache far below that).
  /// Amortized O(length + ids).
  void insert(std::string_view piece, std::uint64_t h, std::span<const std::int32_t> ids) {
    constexpr std::size_t offset_limit = std::numeric_limits<std::uint32_t>::max();
    if (piece.empty() || piece.size() > max_piece_bytes || ids.empty() ||
        ids.size() > max_piece_bytes || bytes_.size() + piece.size() > offset_limit ||
        ids_.size() + ids.size() > offset_limit)
      return;
    if (2 * (size_ + 1) > slots_.size())
      grow();
    Slot& s = slots_[probe(piece, h)];
    if (s.id_count != 0)
      return;
    s = {static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(bytes_.size()),
         static_cast<std::uint32_t>(ids_.size()), static_cast<std::uint16_t>(piece.size()),
         static_cast<std::uint16_t>(ids.size())};
    bytes_.append(piece);
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    ++size_;
  }

  /// Empties the cache; keeps its memory. O(slots).
  void clear() {
    slots_.assign(slots_.size(), Slot{});
    bytes_.clear();
    ids_.clear();
    size_ = 0;
  }

 private:
  struct Slot {
    std::uint32_t hash = 0;  // the hash's low half: the slot's place, and a tag to compare
    std::uint32_t bytes_begin = 0;
    std::uint32_t ids_begin = 0;
    std::uint16_t bytes_count = 0;
    std::uint16_t id_count = 0;  // 0: an empty slot
  };

  // The slot that holds `piece` (hash h), or the empty one where it would go: linear probing.
  std::size_t probe(std::string_view piece, std::uint64_t h) const {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = h & mask;
    while (slots_[i].id_count != 0 && !(slots_[i].hash == static_cast<std::uint32_t>(h) &&
                                        std::string_view(bytes_.data() + slots_[i].bytes_begin,
                                                         slots_[i].bytes_count) == piece))
      i = (i + 1) & mask;
    return i;
  }

  // Twice the slots (at least 1024), each entry re-placed by its stored hash (the slots are fewer
  // than 2^32, so its low half decides the place).
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 1024 : 2 * old.size(), Slot{});
    const std::size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.id_count == 0)
        continue;
      std::size_t i = s.hash & mask;
      while (slots_[i].id_count != 0)
        i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  std::string bytes_;              // the cached pieces' bytes, one after another
  std::vector<std::int32_t> ids_;  // their ids, one after another
  std::size_t size_ = 0;
};

}  // namespace nlb::text::detail
