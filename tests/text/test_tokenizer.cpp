// text/: GPT-2 byte-level BPE (vocab.json + merges.txt, and the same vocabulary as a
// tokenizer.json) and a GPT-NeoX-style tokenizer.json against the ids of independent references
// (tests/fixtures/tokenizer-reference.json, written by tools/node/generate_fixtures.mjs from
// tiktoken, gpt-3-encoder and HF tokenizers); round trips, ill-formed UTF-8, special tokens.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "error_message.hpp"
#include "nlb/text.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;
using nlb::text::SpecialTokens;
using nlb::text::Tokenizer;
using Ids = std::vector<std::int32_t>;

const fs::path source_dir = NLB_SOURCE_DIR;
const fs::path gpt2_dir = source_dir / "models/gpt2-tokenizer";
const fs::path neox_file = source_dir / "models/neox-style-tokenizer/tokenizer.json";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(
      in, "missing file " << path.string() << " (tools/node/README.md regenerates it)");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The fixture; a missing or empty fixture fails the test that asks for it.
const nlohmann::json& fixture() {
  static const nlohmann::json data =
      nlohmann::json::parse(read_file(source_dir / "tests/fixtures/tokenizer-reference.json"));
  return data;
}
const nlohmann::json& cases() {
  const nlohmann::json& c = fixture().at("cases");
  BOOST_REQUIRE_GE(c.size(), 150u);
  return c;
}

const Tokenizer& gpt2() {
  static const Tokenizer t = nlb::text::load_gpt2_tokenizer(gpt2_dir);
  return t;
}
const Tokenizer& neox() {
  static const Tokenizer t = nlb::text::load_tokenizer_json(neox_file);
  return t;
}

// GPT-2's vocabulary written as a Hugging Face tokenizer.json (the layout of HF's gpt2 repo).
fs::path write_gpt2_tokenizer_json(const nlb::test::ScratchDir& dir) {
  const nlohmann::json vocab = nlohmann::json::parse(read_file(gpt2_dir / "vocab.json"));
  const std::string merges_text = read_file(gpt2_dir / "merges.txt");
  nlohmann::json merges = nlohmann::json::array();
  std::size_t pos = merges_text.find('\n') + 1;  // after "#version: 0.2"
  while (pos < merges_text.size()) {
    const std::size_t end = merges_text.find('\n', pos);
    merges.push_back(merges_text.substr(pos, end - pos));
    pos = end + 1;
  }
  const nlohmann::json byte_level = {{"type", "ByteLevel"},
                                     {"add_prefix_space", false},
                                     {"trim_offsets", true},
                                     {"use_regex", true}};
  const nlohmann::json doc = {{"version", "1.0"},
                              {"truncation", nullptr},
                              {"padding", nullptr},
                              {"added_tokens",
                               {{{"id", 50256},
                                 {"content", "<|endoftext|>"},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", true},
                                 {"special", true}}}},
                              {"normalizer", nullptr},
                              {"pre_tokenizer", byte_level},
                              {"post_processor", byte_level},
                              {"decoder", byte_level},
                              {"model",
                               {{"type", "BPE"},
                                {"dropout", nullptr},
                                {"unk_token", nullptr},
                                {"continuing_subword_prefix", ""},
                                {"end_of_word_suffix", ""},
                                {"fuse_unk", false},
                                {"vocab", vocab},
                                {"merges", merges}}}};
  return dir.write_text("tokenizer.json", doc.dump());
}

Ids ids_of(const nlohmann::json& value) {
  return value.get<Ids>();
}

}  // namespace

BOOST_AUTO_TEST_CASE(fixture_is_complete) {
  BOOST_TEST(cases().size() >= 150u);
  BOOST_TEST(fixture().at("white_space").size() == 25u);
  std::size_t long_texts = 0;
  for (const auto& c : cases())
    long_texts += c.at("text").get<std::string>().size() >= 20000 ? 1 : 0;
  BOOST_TEST(long_texts >= 1u);
}

// GPT-2 from vocab.json + merges.txt gives tiktoken's ids for every string (with special tokens
// as text: tiktoken's encode_ordinary; allowed: encode(text, "all")). HF tokenizers agrees with
// tiktoken on every string; gpt-3-encoder does not on a few (fixture README: it splits with
// JavaScript's \s), and is checked only where the fixture says it agrees.
BOOST_AUTO_TEST_CASE(gpt2_matches_tiktoken_and_hf_tokenizers) {
  std::size_t checked = 0, gpt3_checked = 0;
  std::set<std::string> disagreeing;
  for (const auto& d : fixture().at("disagreements"))
    disagreeing.insert(d.at("name").get<std::string>());
  for (const auto& c : cases()) {
    const std::string text = c.at("text");
    const std::string name = c.at("name");
    const Ids expected = ids_of(c.at("gpt2").at("tiktoken"));
    const Ids got = gpt2().encode(text);
    BOOST_TEST(got == expected, "case \"" << name << "\"");
    if (!c.at("gpt2").at("hf_tokenizers").is_null())
      BOOST_TEST(ids_of(c.at("gpt2").at("hf_tokenizers")) == expected, "case \"" << name << "\"");
    if (!disagreeing.count(name)) {
      BOOST_TEST(ids_of(c.at("gpt2").at("gpt3_encoder")) == expected, "case \"" << name << "\"");
      ++gpt3_checked;
    }
    if (c.contains("gpt2_allow_special")) {
      const Ids allowed = ids_of(c.at("gpt2_allow_special").at("tiktoken"));
      BOOST_TEST(ids_of(c.at("gpt2_allow_special").at("hf_tokenizers")) == allowed);
      BOOST_TEST(gpt2().encode(text, SpecialTokens::allowed) == allowed, "case \"" << name << "\"");
    } else {
      BOOST_TEST(gpt2().encode(text, SpecialTokens::allowed) == expected);
    }
    ++checked;
  }
  BOOST_TEST_MESSAGE("GPT-2: " << checked << " strings match tiktoken; gpt-3-encoder agrees on "
                               << gpt3_checked);
  // gpt-3-encoder disagrees only where JavaScript's \s differs from Unicode White_Space: on
  // strings with U+0085 or U+FEFF (tests/fixtures/README.md).
  for (const auto& c : cases()) {
    if (disagreeing.count(c.at("name").get<std::string>())) {
      const std::string text = c.at("text");
      BOOST_TEST(
          (text.find("\u0085") != std::string::npos || text.find("\uFEFF") != std::string::npos),
          "case " << c.at("name"));
    }
  }
}

// The same vocabulary read from a tokenizer.json gives the same ids (both loaders, one model).
BOOST_AUTO_TEST_CASE(gpt2_tokenizer_json_equals_vocab_and_merges) {
  nlb::test::ScratchDir dir("gpt2-json");
  const Tokenizer from_json = nlb::text::load_tokenizer_json(write_gpt2_tokenizer_json(dir));
  BOOST_TEST(from_json.vocab_size() == 50257);
  BOOST_TEST(from_json.eos_id().value_or(-1) == 50256);
  for (const auto& c : cases()) {
    const std::string text = c.at("text");
    BOOST_TEST(from_json.encode(text) == gpt2().encode(text), "case " << c.at("name"));
    BOOST_TEST(from_json.encode(text, SpecialTokens::allowed) ==
               gpt2().encode(text, SpecialTokens::allowed));
  }
}

// The NeoX-style tokenizer.json (NFC, added special and white-space tokens) gives HF
// tokenizers' ids and decodes to what HF decodes.
BOOST_AUTO_TEST_CASE(neox_style_matches_hf_tokenizers) {
  BOOST_TEST((neox().normalizer() == nlb::text::Normalizer::nfc));
  for (const auto& c : cases()) {
    const std::string text = c.at("text");
    const Ids expected = ids_of(c.at("neox_style").at("hf_tokenizers"));
    const Ids got = neox().encode(text, SpecialTokens::allowed);
    BOOST_TEST(got == expected, "case \"" << c.at("name").get<std::string>() << "\"");
    BOOST_TEST(neox().decode(got) == c.at("neox_style_decoded").get<std::string>());
  }
}

BOOST_AUTO_TEST_CASE(round_trips_are_exact) {
  for (const auto& c : cases()) {
    const std::string text = c.at("text");
    for (const SpecialTokens s : {SpecialTokens::as_text, SpecialTokens::allowed}) {
      BOOST_TEST(gpt2().decode(gpt2().encode(text, s)) == text);
      // NFC normalizes before splitting: the round trip gives the NFC form.
      BOOST_TEST(neox().decode(neox().encode(text, s)) == nlb::text::detail::nfc(text));
    }
  }
}

// Ill-formed UTF-8 is encoded byte-wise: never an exception, never a lost byte.
BOOST_AUTO_TEST_CASE(ill_formed_utf8_round_trips) {
  const std::vector<std::string> crafted = {"\xff",
                                            "\xfe\xff",
                                            "\xc0\x80",
                                            "\xc1\xbf",
                                            "\xe0\x80\xaf",
                                            "\xed\xa0\x80",
                                            "\xf4\x90\x80\x80",
                                            "\xf8\x88\x80\x80\x80",
                                            "\xe2\x82",
                                            "caf\xc3",
                                            "a\x80"
                                            "b",
                                            "\xf0\x9f\x98",
                                            "\xf0\x9f\x98 x",
                                            std::string("nul\0byte", 8),
                                            "\xef\xbb\xbf"
                                            "bom",
                                            "\xc3\xa9\xcc",
                                            " \xff\xfe!",
                                            "don\x92t"};
  for (const std::string& text : crafted) {
    BOOST_TEST(gpt2().decode(gpt2().encode(text)) == text);
    BOOST_TEST(neox().decode(neox().encode(text)) == nlb::text::detail::nfc(text));
  }
  std::mt19937 rng(11);
  for (int round = 0; round < 300; ++round) {
    std::string text(rng() % 64, '\0');
    for (char& c : text) {
      const unsigned r = rng() % 8;
      c = static_cast<char>(r < 3 ? 'a' + rng() % 26 : r == 3 ? ' ' : rng() % 256);
    }
    BOOST_TEST(gpt2().decode(gpt2().encode(text)) == text);
    BOOST_TEST(neox().decode(neox().encode(text)) == nlb::text::detail::nfc(text));
  }
}

// The documented rule: each maximal ill-formed subpart is one unit, split as U+FFFD would be.
BOOST_AUTO_TEST_CASE(ill_formed_utf8_splits_as_replacement_characters) {
  using nlb::text::detail::decode_utf8;
  const auto lengths = [](std::string_view text) {
    std::vector<int> out;
    for (std::size_t pos = 0; pos < text.size();) {
      const auto unit = decode_utf8(text, pos);
      out.push_back(unit.valid ? unit.length : -unit.length);
      pos += unit.length;
    }
    return out;
  };
  BOOST_TEST(lengths("\xe2\x82") == (std::vector<int>{-2}));  // truncated 3-byte
  BOOST_TEST(lengths("\xf0\x9f\x98"
                     "a") == (std::vector<int>{-3, 1}));                  // truncated 4-byte
  BOOST_TEST(lengths("\xed\xa0\x80") == (std::vector<int>{-1, -1, -1}));  // a surrogate
  BOOST_TEST(lengths("\xc0\xaf") == (std::vector<int>{-1, -1}));          // overlong
  BOOST_TEST(lengths("\xf4\x90\x80\x80") == (std::vector<int>{-1, -1, -1, -1}));  // > U+10FFFF
  BOOST_TEST(lengths("\xc3\xa9\xe2\x82\xac") == (std::vector<int>{2, 3}));

  using V = std::vector<std::string_view>;
  BOOST_TEST(nlb::text::split_gpt2_pieces("ab\xff"
                                          "cd") == (V{"ab", "\xff", "cd"}));
  BOOST_TEST(nlb::text::split_gpt2_pieces("a \xff\xfe!") == (V{"a", " \xff\xfe!"}));
  BOOST_TEST(nlb::text::split_gpt2_pieces("\xe2\x82 x") == (V{"\xe2\x82", " x"}));
  BOOST_TEST(nlb::text::split_gpt2_pieces("1\xc3"
                                          "2") == (V{"1", "\xc3", "2"}));

  // Property: the cuts of any byte string are those of the string with each ill-formed subpart
  // replaced by U+FFFD, mapped back.
  std::mt19937 rng(5);
  const char* alphabet[] = {"a",
                            "Z",
                            "1",
                            " ",
                            "  ",
                            "\n",
                            "!",
                            "'s",
                            "\xc3\xa9",
                            "\xe2\x82",
                            "\xff",
                            "\x80",
                            "\xf0\x9f\x98\x80",
                            "\xed\xa0\x80",
                            "\t",
                            "\xe3\x80\x80"};
  for (int round = 0; round < 500; ++round) {
    std::string text;
    const int parts = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < parts; ++i)
      text += alphabet[rng() % std::size(alphabet)];
    std::string replaced;
    std::vector<std::size_t> cut_text, cut_replaced;
    std::vector<std::size_t> map(text.size() + 1, 0);  // text offset -> replaced offset
    for (std::size_t pos = 0; pos < text.size();) {
      const auto unit = decode_utf8(text, pos);
      map[pos] = replaced.size();
      replaced += unit.valid ? text.substr(pos, unit.length) : std::string("\xef\xbf\xbd");
      pos += unit.length;
    }
    map[text.size()] = replaced.size();
    std::size_t end = 0;
    for (const auto piece : nlb::text::split_gpt2_pieces(text))
      cut_text.push_back(map[end += piece.size()]);
    end = 0;
    for (const auto piece : nlb::text::split_gpt2_pieces(replaced))
      cut_replaced.push_back(end += piece.size());
    BOOST_TEST(cut_text == cut_replaced);
  }
}

// \s is Unicode White_Space, checked over every code point against node's Unicode data.
BOOST_AUTO_TEST_CASE(white_space_is_unicode_white_space) {
  std::set<char32_t> expected;
  for (const auto& cp : fixture().at("white_space"))
    expected.insert(static_cast<char32_t>(cp.get<std::uint32_t>()));
  std::size_t mismatches = 0;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (nlb::text::detail::is_white_space(cp) != (expected.count(cp) == 1)) {
      BOOST_ERROR("code point " << static_cast<unsigned>(cp));
      ++mismatches;
    }
  }
  BOOST_TEST(mismatches == 0u);
  BOOST_TEST(nlb::text::detail::is_white_space(0x85));
  BOOST_TEST(!nlb::text::detail::is_white_space(0xFEFF));
}

BOOST_AUTO_TEST_CASE(special_tokens_only_when_allowed) {
  BOOST_TEST(gpt2().eos_id().value_or(-1) == 50256);
  BOOST_TEST(gpt2().encode("<|endoftext|>", SpecialTokens::allowed) == (Ids{50256}));
  const Ids as_text = gpt2().encode("<|endoftext|>");
  BOOST_TEST(as_text.size() > 1u);
  BOOST_TEST(gpt2().decode(as_text) == "<|endoftext|>");
  BOOST_TEST(gpt2().encode("a<|endoftext|>b", SpecialTokens::allowed) ==
             (Ids{gpt2().encode("a")[0], 50256, gpt2().encode("b")[0]}));

  BOOST_TEST(neox().eos_id().value_or(-1) == 0);
  BOOST_TEST(neox().encode("<|endoftext|>", SpecialTokens::allowed) == (Ids{0}));
  BOOST_TEST(neox().encode("<|padding|>", SpecialTokens::allowed) == (Ids{1}));
  for (const std::string text : {"<|endoftext|>", "x<|padding|>y", "a <|endoftext|> b"}) {
    for (const std::int32_t id : neox().encode(text))
      BOOST_TEST((id != 0 && id != 1));
  }
  // Non-special added tokens (runs of spaces) are vocabulary: found in both modes.
  const auto five = neox().token_id("     ");
  BOOST_REQUIRE(five.has_value());
  const Ids spaced = neox().encode("a     b");
  BOOST_TEST(std::count(spaced.begin(), spaced.end(), *five) == 1);
  BOOST_TEST(neox().encode("a     b", SpecialTokens::allowed) == spaced);
}

BOOST_AUTO_TEST_CASE(load_tokenizer_finds_each_layout) {
  const auto from_vocab = nlb::text::load_tokenizer(gpt2_dir);
  BOOST_REQUIRE(from_vocab.has_value());
  BOOST_TEST(from_vocab->vocab_size() == 50257);
  BOOST_TEST(from_vocab->encode("Hello world") == (Ids{15496, 995}));
  const auto from_json = nlb::text::load_tokenizer(neox_file.parent_path());
  BOOST_REQUIRE(from_json.has_value());
  BOOST_TEST(from_json->vocab_size() == neox().vocab_size());
  nlb::test::ScratchDir empty("no-tokenizer");
  BOOST_TEST(!nlb::text::load_tokenizer(empty.path).has_value());
  BOOST_TEST((nlb::text::find_tokenizer_files(empty.path) == nlb::text::TokenizerFiles::none));
  // The embedding bound: 50 257 ids fit 50 257 rows, not 50 000.
  BOOST_TEST(nlb::text::load_tokenizer(gpt2_dir, {.embedding_size = 50257}).has_value());
  const std::string message = nlb::test::error_message<nlb::FormatError>(
      [&] { nlb::text::load_tokenizer(gpt2_dir, {.embedding_size = 50000}); });
  BOOST_TEST(message.find("vocab.json") != std::string::npos);
  BOOST_TEST(message.find("expected at most 50000") != std::string::npos);
  BOOST_TEST(message.find("found 50257") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(decode_rejects_unknown_ids) {
  const std::string message = nlb::test::error_message<nlb::ArgumentError>([&] {
    gpt2().decode(Ids{15496, 50257});
  });
  BOOST_TEST(message.find("token 1") != std::string::npos);
  BOOST_TEST(message.find("found 50257") != std::string::npos);
  BOOST_TEST(gpt2().decode(Ids{}).empty());
}

// Long pieces (a 200 000-letter word, a 100 000-space run) merge in O(n log n) and round-trip;
// repeated encodes (cached pieces) give the same ids.
BOOST_AUTO_TEST_CASE(long_pieces_and_the_cache) {
  std::string word;
  for (int i = 0; i < 200000; ++i)
    word += static_cast<char>('a' + (i * 7 + i / 13) % 26);
  const Ids ids = gpt2().encode(word);
  BOOST_TEST(gpt2().decode(ids) == word);
  BOOST_TEST(ids.size() < word.size());  // some pairs merged (pseudo-random letters)
  const std::string spaces(100000, ' ');
  BOOST_TEST(gpt2().decode(gpt2().encode(spaces)) == spaces);
  BOOST_TEST(neox().decode(neox().encode(spaces)) == spaces);
  const std::string text = cases().back().at("text");
  BOOST_TEST(gpt2().encode(text) == gpt2().encode(text));
  const Tokenizer copy = gpt2();
  BOOST_TEST(copy.encode(text) == gpt2().encode(text));
}

// More distinct pieces than the cache holds (BpeModel::max_cached_pieces): the cache grows, is
// emptied when full and fills again; every encode gives the ids of encoding the text in chunks
// with the cache emptied before each (so that no chunk sees a piece cached by another).
BOOST_AUTO_TEST_CASE(a_cache_emptied_when_full_encodes_the_same) {
  std::vector<std::string> chunks(1);
  constexpr int words = 70000;
  static_assert(words > static_cast<int>(nlb::text::BpeModel::max_cached_pieces));
  for (int i = 0; i < words; ++i) {
    std::string word = " ";
    for (int k = 0, n = i; k < 4; ++k, n /= 26)
      word += static_cast<char>('a' + n % 26);
    if (chunks.back().size() >= 5000 * word.size())
      chunks.emplace_back();
    chunks.back() += word;
  }
  const Tokenizer reference = gpt2();
  Ids want;
  std::string text;
  for (const std::string& chunk : chunks) {
    reference.clear_cache();
    const Ids ids = reference.encode(chunk);
    want.insert(want.end(), ids.begin(), ids.end());
    text += chunk;
  }
  const Tokenizer fresh = gpt2();  // a copy: its own, empty cache
  BOOST_TEST(fresh.encode(text) == want);
  BOOST_TEST(fresh.encode(text) == want);  // the cache as the first encode left it
  BOOST_TEST(fresh.decode(want) == text);
}

// The piece cache on its own: pieces with the same hash are told apart by their bytes, a piece
// cached twice keeps its first ids, and an emptied cache finds nothing.
BOOST_AUTO_TEST_CASE(piece_cache_keeps_pieces_apart) {
  nlb::text::detail::PieceCache cache;
  BOOST_TEST(cache.find("ab", 7).empty());
  const std::int32_t first[] = {1, 2}, second[] = {3}, again[] = {9, 9, 9};
  cache.insert("ab", 7, first);
  cache.insert("ba", 7, second);  // the same hash, other bytes
  cache.insert("ab", 7, again);   // cached already: kept as it was
  const auto ab = cache.find("ab", 7);
  const auto ba = cache.find("ba", 7);
  BOOST_TEST(Ids(ab.begin(), ab.end()) == (Ids{1, 2}));
  BOOST_TEST(Ids(ba.begin(), ba.end()) == (Ids{3}));
  BOOST_TEST(cache.find("abc", 7).empty());
  cache.insert("", 7, first);                       // declined: no bytes
  cache.insert("abc", 7, {});                       // declined: no ids
  cache.insert(std::string(70000, 'x'), 7, first);  // declined: past max_piece_bytes
  BOOST_TEST(cache.find("abc", 7).empty());
  BOOST_TEST(cache.size() == 2u);
  for (std::int32_t i = 0; i < 3000; ++i) {  // past two growths of the slots
    const std::string piece = "p" + std::to_string(i);
    const std::int32_t id[] = {i};
    cache.insert(piece, static_cast<std::uint64_t>(i % 5), id);  // long runs of equal hashes
  }
  BOOST_TEST(cache.size() == 3002u);
  int wrong = 0;
  for (std::int32_t i = 0; i < 3000; ++i) {
    const auto ids = cache.find("p" + std::to_string(i), static_cast<std::uint64_t>(i % 5));
    wrong += ids.size() != 1 || ids[0] != i;
  }
  BOOST_TEST(wrong == 0);
  BOOST_TEST(Ids(cache.find("ab", 7).begin(), cache.find("ab", 7).end()) == (Ids{1, 2}));
  cache.clear();
  BOOST_TEST(cache.size() == 0u);
  BOOST_TEST(cache.find("ab", 7).empty());
  BOOST_TEST(cache.find("p1", 1).empty());
}

// Ids past 16 bits: the merge table then keeps 16-byte slots instead of 8-byte ones
// (detail/pair_table.hpp). GPT-2's vocabulary and merges with 20 000 other tokens put first, so
// that every GPT-2 token's id is 20 000 higher (up to 70 256): every piece of the texts must come
// out as the same tokens.
BOOST_AUTO_TEST_CASE(ids_past_16_bits_merge_the_same) {
  const nlb::text::BpeModel& model = gpt2().model();
  constexpr std::int32_t shift = 20000;
  std::vector<std::string> tokens;
  for (std::int32_t i = 0; i < shift; ++i) {
    std::string filler = "\x01\x02#" + std::to_string(i);  // not a GPT-2 token
    BOOST_REQUIRE(!model.find(filler));
    tokens.push_back(std::move(filler));
  }
  for (std::int32_t id = 0; id < model.size(); ++id)
    tokens.push_back(model.token(id));
  std::vector<nlb::text::BpeMerge> merges = model.merge_list();
  for (auto& m : merges)
    m = {m.left + shift, m.right + shift, m.result + shift};
  const nlb::text::BpeModel wide(std::move(tokens), merges);
  BOOST_TEST(wide.merge_count() == model.merge_count());

  std::size_t pieces = 0;
  for (const char* name : {"jargon-eval.txt", "kjv-eval.txt"}) {
    const std::string text = read_file(source_dir / "data" / name).substr(0, 40000);
    nlb::text::for_each_gpt2_piece(text, [&](std::string_view piece) {
      Ids want, got;
      model.encode_piece(piece, want);
      wide.encode_piece(piece, got);
      for (auto& id : got)
        id -= shift;
      if (got != want)
        BOOST_ERROR("piece \"" << piece << "\" differs");
      ++pieces;
    });
  }
  BOOST_TEST(pieces > 10000u);
}

// One tokenizer shared by threads (the piece cache is locked): the same ids as one thread.
BOOST_AUTO_TEST_CASE(concurrent_encodes_agree) {
  const Tokenizer shared = neox();      // a copy: its own, empty cache
  const nlohmann::json& all = cases();  // no Boost.Test call inside the threads
  std::vector<Ids> expected;
  for (const auto& c : all)
    expected.push_back(neox().encode(c.at("text").get<std::string>(), SpecialTokens::allowed));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = 0; i < all.size(); ++i) {
        const std::size_t k = (i * 7 + static_cast<std::size_t>(t) * 13) % all.size();
        const std::string text = all[k].at("text");
        if (shared.encode(text, SpecialTokens::allowed) != expected[k])
          ++mismatches[static_cast<std::size_t>(t)];
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  BOOST_TEST(mismatches == (std::vector<int>{0, 0, 0, 0}), boost::test_tools::per_element());
}
