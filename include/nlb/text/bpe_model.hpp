// BpeModel: byte-pair encoding. A vocabulary of byte strings (id -> bytes) and a ranked list of
// merges (left id, right id -> the id of their concatenation). A piece of text starts as its
// initial symbols — its bytes, each its single-byte token (byte-level vocabularies: GPT-2,
// GPT-NeoX, Llama 3, Qwen2), or its characters, each its token, with byte-fallback tokens or the
// unknown token for characters the vocabulary lacks (SentencePiece-style vocabularies: Llama 2,
// Mistral, TinyLlama) —; then the adjacent pair with the lowest merge rank is merged (the
// leftmost of equal ranks first) until no adjacent pair has a merge: the rule of GPT-2's
// encoder.py and HF tokenizers' BPE model. The loaders (gpt2_files.hpp, tokenizer_json.hpp)
// check a vocabulary and its merges before building one.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlb/text/detail/pair_table.hpp"
#include "nlb/text/detail/piece_cache.hpp"
#include "nlb/text/detail/token_index.hpp"
#include "nlb/text/detail/utf8.hpp"

namespace nlb::text {

/// One merge: the pair `left`, `right` (token ids) becomes `result`.
struct BpeMerge {
  std::int32_t left;
  std::int32_t right;
  std::int32_t result;
};

/// How BpeModel makes a piece's initial symbols, and HF tokenizers' BPE options that change ids.
struct BpeOptions {
  /// true: the symbols are the piece's bytes (every byte must be a token). false: its
  /// characters (UTF-8; a maximal ill-formed subpart counts as one character that is never a
  /// token), each looked up in the vocabulary.
  bool byte_level = true;
  /// A piece that is a token is that token, whatever the merges would make of it (Llama 3).
  bool ignore_merges = false;
  /// Characters mode: a character that is not a token becomes the tokens of its bytes,
  /// byte_fallback_ids[byte] ("<0xNN>"), when every one of them exists.
  bool byte_fallback = false;
  std::array<std::int32_t, 256> byte_fallback_ids{};  ///< -1: none
  /// Characters mode: the unknown token for a character neither a token nor byte-fallen-back
  /// (-1: none, and the character is dropped, as HF tokenizers drops it).
  std::int32_t unk_id = -1;
  /// Consecutive unknown characters are one unknown token.
  bool fuse_unk = false;
  /// Characters mode: SentencePiece's word boundary ("▁"), or empty. When it is one character
  /// and a token, and no token has it anywhere but at its start, no merge can join the symbols
  /// on both sides of one (and unknown characters are neither fused nor reordered across it),
  /// so a piece is encoded word by word, each part cached, with the same ids as in one go —
  /// the SentencePiece layouts give BPE the whole text as one piece. Not used with
  /// ignore_merges, where a part that is a token would be emitted whole although the whole
  /// piece is not one.
  std::string boundary;
};

class BpeModel {
 public:
  /// Pieces longer than this are not cached (long pieces rarely repeat).
  static constexpr std::size_t max_cached_piece = 64;
  /// The cache is emptied when it holds this many pieces, which bounds its memory.
  static constexpr std::size_t max_cached_pieces = 1 << 16;
  static_assert(max_cached_piece <= detail::PieceCache::max_piece_bytes);

  /// `tokens[id]` are the bytes of token `id`; `merges` in rank order (rank = index). The
  /// preconditions — which the loaders check and report as FormatError — are: the tokens are
  /// distinct, every byte value is one of them, and each merge's result is the concatenation of
  /// its parts. O(merges + the bytes of all tokens · log): each token is run through the merge
  /// loop once, to know which tokens encode_piece may emit without it.
  /// With `options.byte_level` false, the tokens are the vocabulary's text (UTF-8) and no
  /// byte need be a token.
  BpeModel(std::vector<std::string> tokens, const std::vector<BpeMerge>& merges,
           const BpeOptions& options = {})
      : tokens_(std::move(tokens)), options_(options) {
    byte_ids_.fill(-1);
    ids_.build(tokens_);
    if (options_.byte_level) {
      for (std::size_t id = 0; id < tokens_.size(); ++id) {
        if (tokens_[id].size() == 1)
          byte_ids_[static_cast<unsigned char>(tokens_[id][0])] = static_cast<std::int32_t>(id);
      }
    } else if (options_.byte_fallback) {
      byte_ids_ = options_.byte_fallback_ids;
    }
    merges_.reserve(merges.size(), tokens_.size());
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      // A pair listed twice keeps its first (lowest) rank, as HF tokenizers does.
      merges_.insert(detail::PairTable::key(merges[rank].left, merges[rank].right),
                     {static_cast<std::int32_t>(rank), merges[rank].result});
    }
    // Which tokens BPE makes of their own bytes. Usually true, but not always (a token whose
    // bytes merge another way first), so encode_piece may emit a piece that is a token as that
    // token only when this says so: then the shortcut gives exactly the merge loop's result.
    whole_.assign(tokens_.size(), false);
    std::vector<std::int32_t> ids;
    for (std::size_t id = 0; id < tokens_.size(); ++id) {
      ids.clear();
      merge(tokens_[id], ids);
      // With ignore_merges every token is emitted whole, whatever the merges make of it.
      whole_[id] =
          options_.ignore_merges || (ids.size() == 1 && ids[0] == static_cast<std::int32_t>(id));
    }
    // What a piece of one byte encodes to (no merge applies to one symbol): its byte's token,
    // or in characters mode the initial symbol of that one character (-1: none, it is dropped).
    for (unsigned byte = 0; byte < 256; ++byte) {
      const char c = static_cast<char>(byte);
      std::array<std::int32_t, 1> symbol{-1};
      if (options_.byte_level || initial_symbols(std::string_view(&c, 1), symbol.data()) == 1)
        single_ids_[byte] = options_.byte_level ? byte_ids_[byte] : symbol[0];
      else
        single_ids_[byte] = -1;
    }
    const std::string& boundary = options_.boundary;
    const bool one_character = !boundary.empty() && [&] {
      const detail::Utf8Unit unit = detail::decode_utf8(boundary, 0);
      return unit.valid && unit.length == boundary.size();
    }();
    split_at_boundary_ = !options_.byte_level && !options_.ignore_merges && one_character &&
                         ids_.find(boundary, tokens_) >= 0 &&
                         std::none_of(tokens_.begin(), tokens_.end(), [&](const std::string& t) {
                           return t.find(boundary, 1) != std::string::npos;
                         });
  }

  // Copies and moves take the vocabulary and merges, not the cache (a cache is per object).
  BpeModel(const BpeModel& other)
      : tokens_(other.tokens_),
        ids_(other.ids_),
        merges_(other.merges_),
        whole_(other.whole_),
        byte_ids_(other.byte_ids_),
        single_ids_(other.single_ids_),
        split_at_boundary_(other.split_at_boundary_),
        options_(other.options_) {}
  BpeModel(BpeModel&& other) noexcept
      : tokens_(std::move(other.tokens_)),
        ids_(std::move(other.ids_)),
        merges_(std::move(other.merges_)),
        whole_(std::move(other.whole_)),
        byte_ids_(other.byte_ids_),
        single_ids_(other.single_ids_),
        split_at_boundary_(other.split_at_boundary_),
        options_(std::move(other.options_)) {}
  BpeModel& operator=(BpeModel other) noexcept {
    tokens_ = std::move(other.tokens_);
    options_ = other.options_;
    ids_ = std::move(other.ids_);
    merges_ = std::move(other.merges_);
    whole_ = std::move(other.whole_);
    byte_ids_ = other.byte_ids_;
    single_ids_ = other.single_ids_;
    split_at_boundary_ = other.split_at_boundary_;
    std::lock_guard lock(cache_mutex_);
    cache_.clear();
    return *this;
  }
  ~BpeModel() = default;

  /// Number of tokens.
  std::int32_t size() const { return static_cast<std::int32_t>(tokens_.size()); }
  /// The bytes of token `id` (0 <= id < size()).
  const std::string& token(std::int32_t id) const { return tokens_[static_cast<std::size_t>(id)]; }
  /// The id of the token whose bytes are `bytes`, if any. O(length) expected.
  std::optional<std::int32_t> find(std::string_view bytes) const {
    const std::int32_t id = ids_.find(bytes, tokens_);
    return id < 0 ? std::nullopt : std::optional<std::int32_t>(id);
  }
  /// The id of the single-byte token of `byte` (characters mode: its byte-fallback token, or
  /// -1).
  std::int32_t byte_id(unsigned char byte) const { return byte_ids_[byte]; }
  /// The options the model was built with.
  const BpeOptions& options() const { return options_; }
  /// True when a piece starts as its bytes (BpeOptions::byte_level).
  bool byte_level() const { return options_.byte_level; }
  /// Number of merges (distinct pairs).
  std::size_t merge_count() const { return merges_.size(); }

  /// Appends the ids of `piece` (bytes) to `out`. O(n log n) in the bytes of the piece: a
  /// binary heap of candidate pairs, each merge invalidating at most two and adding two (pieces
  /// of up to 24 bytes: a scan of at most 24 pairs per merge, which is faster there). Pieces
  /// of up to max_cached_piece bytes are cached: a cache shared by the threads that use this
  /// model, behind a mutex, so concurrent calls are safe. With BpeOptions::boundary in effect,
  /// the piece is encoded word by word (the same ids: see there).
  void encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const {
    if (split_at_boundary_ && piece.find(options_.boundary, 1) != std::string_view::npos)
        [[unlikely]] {
      encode_words(piece, out);
      return;
    }
    if (piece.empty())
      return;
    if (piece.size() == 1) {
      if (const std::int32_t id = single_ids_[static_cast<unsigned char>(piece[0])]; id >= 0)
        out.push_back(id);
      return;
    }
    // The cache first: it holds only the text's distinct pieces, so it stays in the CPU's caches,
    // where the 50 000-token vocabulary does not (a vocabulary lookup for every piece was 39% of
    // a cold-cache encode of the Jargon File, docs/benchmarks.md).
    const bool cacheable = piece.size() <= max_cached_piece;
    const std::uint64_t hash = detail::TokenIndex::hash(piece);  // for the cache and ids_
    if (cacheable) {
      std::lock_guard lock(cache_mutex_);
      if (const auto ids = cache_.find(piece, hash); !ids.empty()) {
        out.insert(out.end(), ids.begin(), ids.end());
        return;
      }
    }
    const std::size_t first = out.size();
    // A piece that is a token BPE makes of its own bytes (most words of common text) is that
    // token: one lookup instead of the merge loop (with ignore_merges: any token, see whole_).
    if (const std::int32_t id = ids_.find(piece, hash, tokens_);
        id >= 0 && whole_[static_cast<std::size_t>(id)])
      out.push_back(id);
    else if (piece.size() <= max_scanned_piece)
      merge_by_scan(piece, out);
    else
      merge(piece, out);
    if (cacheable) {
      std::lock_guard lock(cache_mutex_);
      if (cache_.size() >= max_cached_pieces)
        cache_.clear();
      // Another thread may have cached the piece meanwhile: then its entry stays.
      cache_.insert(piece, hash, std::span(out).subspan(first));
    }
  }

  /// Empties the piece cache (its memory is bounded anyway; this is for measurements and for
  /// callers that want the memory back).
  void clear_cache() const {
    std::lock_guard lock(cache_mutex_);
    cache_.clear();
  }

  /// The merges in rank order (a pair listed twice once, at its first rank).
  /// O(merges log merges).
  std::vector<BpeMerge> merge_list() const {
    std::vector<std::pair<std::int32_t, BpeMerge>> ranked;
    ranked.reserve(merges_.size());
    merges_.for_each([&](std::uint64_t key, const detail::MergeRule& rule) {
      ranked.push_back({rule.rank,
                        {static_cast<std::int32_t>(key >> 32),
                         static_cast<std::int32_t>(key & 0xFFFFFFFFu), rule.result}});
    });
    std::sort(ranked.begin(), ranked.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<BpeMerge> list;
    list.reserve(ranked.size());
    for (const auto& [rank, m] : ranked)
      list.push_back(m);
    return list;
  }

 private:
  // encode_piece word by word: each word has the boundary only at its start, so encode_piece
  // encodes it in one go. Out of line, so that encode_piece stays as small as without it.
  [[gnu::noinline]] void encode_words(std::string_view piece,
                                      std::vector<std::int32_t>& out) const {
    const std::string_view boundary = options_.boundary;
    std::size_t start = 0;
    while (start < piece.size()) {
      std::size_t cut = piece.find(boundary, start + 1);
      if (cut == std::string_view::npos)
        cut = piece.size();
      encode_piece(piece.substr(start, cut - start), out);
      start = cut;
    }
  }

  // Pieces of up to this many bytes (nearly every word) are merged by merge_by_scan.
  static constexpr std::size_t max_scanned_piece = 24;

  // The merge rule of the loop below, for a short piece: the symbols in an array with the rule
  // of each adjacent pair beside them; each step scans for the lowest rank (the leftmost of
  // equal ranks) and looks up the two pairs the merge made. At most max_scanned_piece symbols,
  // so the scans cost less than a heap's bookkeeping would; the result is the heap loop's.
  void merge_by_scan(std::string_view piece, std::vector<std::int32_t>& out) const {
    constexpr std::int32_t none = std::numeric_limits<std::int32_t>::max();
    std::array<std::int32_t, max_scanned_piece> ids{};        // the symbols' ids
    std::array<detail::MergeRule, max_scanned_piece> pair{};  // pair (k, k + 1); rank none: none
    auto n = static_cast<std::int32_t>(initial_symbols(piece, ids.data()));
    const auto rule_of = [&](std::int32_t k) {
      detail::MergeRule rule;
      if (!merges_.find(detail::PairTable::key(ids[static_cast<std::size_t>(k)],
                                               ids[static_cast<std::size_t>(k + 1)]),
                        rule))
        rule.rank = none;
      pair[static_cast<std::size_t>(k)] = rule;
    };
    for (std::int32_t k = 0; k + 1 < n; ++k)
      rule_of(k);
    while (n > 1) {
      std::int32_t best = 0;
      for (std::int32_t k = 1; k + 1 < n; ++k) {
        if (pair[static_cast<std::size_t>(k)].rank < pair[static_cast<std::size_t>(best)].rank)
          best = k;
      }
      if (pair[static_cast<std::size_t>(best)].rank == none)
        break;
      const auto b = static_cast<std::size_t>(best);
      ids[b] = pair[b].result;
      // Symbol best + 1 is gone: the later symbols and their pairs move down by one.
      for (std::size_t k = b + 1; k + 1 < static_cast<std::size_t>(n); ++k) {
        ids[k] = ids[k + 1];
        pair[k] = pair[k + 1];
      }
      --n;
      if (best + 1 < n)
        rule_of(best);
      if (best > 0)
        rule_of(best - 1);
    }
    out.insert(out.end(), ids.begin(), ids.begin() + n);
  }

  // The merge loop. Symbols form a doubly linked list over the piece's bytes; the heap holds
  // (rank, position of the left symbol, the two ids it was made for), so an entry whose symbols
  // have changed since is recognised and dropped when popped. A symbol's id only ever grows
  // into a longer token, so equal ids mean unchanged symbols.
  void merge(std::string_view piece, std::vector<std::int32_t>& out) const {
    struct Symbol {
      std::int32_t id;
      std::int32_t prev;
      std::int32_t next;  // -1: none
    };
    struct Candidate {
      std::int32_t rank;
      std::int32_t pos;
      std::int32_t left;
      std::int32_t right;
      std::int32_t result;
      bool operator>(const Candidate& other) const {
        return rank != other.rank ? rank > other.rank : pos > other.pos;
      }
    };
    // Scratch reused across calls on this thread: a piece allocates nothing once the buffers
    // have grown to the longest piece seen.
    thread_local std::vector<Symbol> symbols;
    thread_local std::vector<Candidate> storage;
    thread_local std::vector<std::int32_t> initial;
    initial.resize(piece.size());
    const auto n = static_cast<std::int32_t>(initial_symbols(piece, initial.data()));
    if (n == 0)
      return;
    symbols.resize(static_cast<std::size_t>(n));
    for (std::int32_t i = 0; i < n; ++i) {
      symbols[static_cast<std::size_t>(i)] = {initial[static_cast<std::size_t>(i)], i - 1,
                                              i + 1 < n ? i + 1 : -1};
    }
    storage.clear();
    // A binary min-heap on `storage` (push_heap / pop_heap with greater: the lowest rank, then
    // the leftmost position, on top).
    const auto push = [&](const Candidate& c) {
      storage.push_back(c);
      std::push_heap(storage.begin(), storage.end(), std::greater<>{});
    };
    const auto consider = [&](std::int32_t pos) {
      const Symbol& left = symbols[static_cast<std::size_t>(pos)];
      if (left.next < 0)
        return;
      const std::int32_t right = symbols[static_cast<std::size_t>(left.next)].id;
      if (detail::MergeRule rule; merges_.find(detail::PairTable::key(left.id, right), rule))
        push({rule.rank, pos, left.id, right, rule.result});
    };
    for (std::int32_t i = 0; i + 1 < n; ++i)
      consider(i);
    while (!storage.empty()) {
      std::pop_heap(storage.begin(), storage.end(), std::greater<>{});
      const Candidate c = storage.back();
      storage.pop_back();
      Symbol& left = symbols[static_cast<std::size_t>(c.pos)];
      if (left.id != c.left || left.next < 0 ||
          symbols[static_cast<std::size_t>(left.next)].id != c.right)
        continue;  // stale: one of the two symbols has been merged since
      Symbol& right = symbols[static_cast<std::size_t>(left.next)];
      left.id = c.result;
      left.next = right.next;
      if (right.next >= 0)
        symbols[static_cast<std::size_t>(right.next)].prev = c.pos;
      right.id = -1;  // removed
      if (left.prev >= 0)
        consider(left.prev);
      consider(c.pos);
    }
    for (std::int32_t i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next)
      out.push_back(symbols[static_cast<std::size_t>(i)].id);
  }

  // Writes the initial symbols of `piece` to `ids` (room for piece.size(): there are never more
  // symbols than bytes) and returns their number.
  std::size_t initial_symbols(std::string_view piece, std::int32_t* ids) const {
    if (options_.byte_level) {
      for (std::size_t i = 0; i < piece.size(); ++i)
        ids[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
      return piece.size();
    }
    // HF tokenizers' order, kept for identical ids: an unknown character's token waits until
    // the next known character or the end (so fuse_unk can extend it), while byte-fallback
    // tokens are written at once — after a still-waiting unknown token's place.
    std::size_t n = 0;
    bool unk_waiting = false;
    for (std::size_t pos = 0; pos < piece.size();) {
      const detail::Utf8Unit unit = detail::decode_utf8(piece, pos);
      const std::string_view character = piece.substr(pos, unit.length);
      pos += unit.length;
      const std::int32_t id = unit.valid ? ids_.find(character, tokens_) : -1;
      if (id >= 0) {
        if (unk_waiting)
          ids[n++] = options_.unk_id;
        unk_waiting = false;
        ids[n++] = id;
        continue;
      }
      if (options_.byte_fallback) {
        bool all = true;
        for (const char c : character)
          all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
        if (all) {
          for (const char c : character)
            ids[n++] = byte_ids_[static_cast<unsigned char>(c)];
          continue;
        }
      }
      if (options_.unk_id < 0)
        continue;  // dropped: no unknown token
      if (unk_waiting && !options_.fuse_unk)
        ids[n++] = options_.unk_id;
      unk_waiting = true;
    }
    if (unk_waiting)
      ids[n++] = options_.unk_id;
    return n;
  }

  std::vector<std::string> tokens_;  // id -> bytes
  detail::TokenIndex ids_;           // bytes -> id, over tokens_
  detail::PairTable merges_;
  std::vector<bool> whole_;  // id -> a piece equal to the token is the token (see the constructor)
  std::array<std::int32_t, 256> byte_ids_{};
  std::array<std::int32_t, 256> single_ids_{};  // byte -> the id of the one-byte piece, or -1
  bool split_at_boundary_ = false;              // BpeOptions::boundary applies
  mutable std::mutex cache_mutex_;
  mutable detail::PieceCache cache_;  // piece -> its ids
  // Last: its 1 KB byte-fallback table would otherwise sit between the members the encode
  // loop reads (GPT-2's warm encode was 8% slower with it after tokens_).
  BpeOptions options_;
};

}  // namespace nlb::text
