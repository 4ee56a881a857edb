// text/: the tokenizer.json kinds the Llama family ships — Llama 3's and Qwen2's byte-level BPE
// behind a Split pre-tokenizer, and the SentencePiece-style BPE of Llama 2 / Mistral /
// TinyLlama (Prepend + Replace normalizers, or a Metaspace pre-tokenizer; byte fallback; <unk>)
// — against Hugging Face tokenizers' ids for the four files of models/*-style-tokenizer
// (tests/fixtures/llama-tokenizers-reference.json, written by
// tools/node/generate_llama_tokenizers.mjs): encode, encode with the template's special tokens,
// decode, decode of ids that are not well-formed UTF-8; the split patterns piece by piece; and
// malformed variants of the files, each a FormatError naming what is wrong.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "error_message.hpp"
#include "nlb/text.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;
using nlb::text::IllFormedUtf8;
using nlb::text::SpecialTokens;
using nlb::text::Tokenizer;
using nlohmann::json;
using Ids = std::vector<std::int32_t>;

const fs::path source_dir = NLB_SOURCE_DIR;
const char* const kinds[] = {"llama3-style", "qwen2-style", "sentencepiece-style",
                             "metaspace-style"};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(
      in, "missing file " << path.string() << " (tools/node/README.md regenerates it)");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The fixture; a missing or malformed one fails the test that asks for it (never a skip).
const json& fixture() {
  static const json data =
      json::parse(read_file(source_dir / "tests/fixtures/llama-tokenizers-reference.json"));
  return data;
}
const json& cases() {
  const json& c = fixture().at("cases");
  BOOST_REQUIRE_GE(c.size(), 300u);
  return c;
}

fs::path file_of(const std::string& kind) {
  return source_dir / fixture().at("files").at(kind).get<std::string>();
}

const Tokenizer& tokenizer(const std::string& kind) {
  static std::map<std::string, Tokenizer> loaded;
  auto it = loaded.find(kind);
  if (it == loaded.end())
    it = loaded.emplace(kind, nlb::text::load_tokenizer_json(file_of(kind))).first;
  return it->second;
}

json document(const std::string& kind) {
  return json::parse(read_file(file_of(kind)));
}

// Loading `doc` from a scratch directory is a FormatError whose message names the file and
// each of `parts`.
void expect_error(const json& doc, std::initializer_list<std::string> parts) {
  nlb::test::ScratchDir dir("llama-tokenizer");
  const fs::path path = dir.write_text("tokenizer.json", doc.dump());
  const std::string message =
      nlb::test::error_message<nlb::FormatError>([&] { nlb::text::load_tokenizer_json(path); });
  BOOST_TEST_MESSAGE(message);
  BOOST_TEST(message.find(path.string()) != std::string::npos, message);
  for (const std::string& part : parts)
    BOOST_TEST(message.find(part) != std::string::npos, "\"" << part << "\" in: " << message);
}

}  // namespace

BOOST_AUTO_TEST_CASE(fixture_is_complete) {
  BOOST_TEST(cases().size() == 319u);
  for (const char* kind : kinds) {
    BOOST_TEST(fs::exists(file_of(kind)), kind);
    BOOST_TEST(fixture().at("decode_cases").at(kind).size() == 3u, kind);
    for (const auto& c : cases())
      BOOST_TEST_REQUIRE(c.contains(kind), c.at("name") << " " << kind);
  }
}

// Every string: ids, ids with the template's special tokens, and the decode of the ids equal
// to HF tokenizers'. HF always matches special added tokens in the text: its ids are the
// SpecialTokens::allowed ids.
BOOST_AUTO_TEST_CASE(ids_and_decode_match_hf_tokenizers) {
  for (const char* kind : kinds) {
    const Tokenizer& t = tokenizer(kind);
    std::size_t checked = 0;
    for (const auto& c : cases()) {
      const std::string text = c.at("text");
      const json& expected = c.at(kind);
      const std::string name = c.at("name");
      const Ids ids = t.encode(text, SpecialTokens::allowed);
      BOOST_TEST(ids == expected.at("ids").get<Ids>(), kind << " \"" << name << "\"");
      BOOST_TEST(t.with_special_tokens(ids) == expected.at("ids_with_specials").get<Ids>(),
                 kind << " \"" << name << "\"");
      const std::string decoded = expected.at("decoded");
      BOOST_TEST(t.decode(expected.at("ids").get<Ids>(), IllFormedUtf8::replace) == decoded,
                 kind << " \"" << name << "\"");
      // The ids of whole texts are well-formed: keeping or replacing gives the same text.
      BOOST_TEST(t.decode(expected.at("ids").get<Ids>()) == decoded, kind << " " << name);
      ++checked;
    }
    BOOST_TEST_MESSAGE(kind << ": " << checked << " strings match HF tokenizers");
  }
}

// Ids that are not well-formed UTF-8 decode as HF's decode does (U+FFFD per maximal ill-formed
// subpart after ByteLevel; one per byte token of a byte-fallback run that is ill-formed as a
// whole), and to the bytes themselves with IllFormedUtf8::keep.
BOOST_AUTO_TEST_CASE(ill_formed_decode_matches_hf_tokenizers) {
  for (const char* kind : kinds) {
    const Tokenizer& t = tokenizer(kind);
    for (const auto& c : fixture().at("decode_cases").at(kind)) {
      const Ids ids = c.at("ids").get<Ids>();
      BOOST_TEST(t.decode(ids, IllFormedUtf8::replace) == c.at("decoded").get<std::string>(),
                 kind << " " << c.at("ids").dump());
    }
  }
  // The kept bytes: Llama 3's ids 0..255 are the bytes; the SentencePiece-style "<0xNN>" are
  // ids 3 + NN, and "▁the" decodes to "the" at the start.
  BOOST_TEST(tokenizer("llama3-style").decode(Ids{0x41, 0xff, 0x42}) ==
             "A\xff"
             "B");
  const Tokenizer& sp = tokenizer("sentencepiece-style");
  BOOST_TEST(sp.decode(Ids{3 + 0xe6, 3 + 0xbc}) == "\xe6\xbc");
  BOOST_TEST(sp.decode(Ids{3 + 0xe6, 3 + 0xbc}, IllFormedUtf8::replace) ==
             "\xef\xbf\xbd\xef\xbf\xbd");
}

// Special tokens: found in the text only when allowed; the template puts BOS in front (Llama 3
// and the SentencePiece kinds) or nothing (Qwen2); eos_id is the family's end token.
BOOST_AUTO_TEST_CASE(special_tokens_and_template) {
  const Tokenizer& llama = tokenizer("llama3-style");
  const std::int32_t bos = llama.token_id("<|begin_of_text|>").value_or(-1);
  BOOST_TEST(bos == 3256);
  BOOST_TEST(llama.encode("<|begin_of_text|>", SpecialTokens::allowed) == Ids{bos});
  BOOST_TEST(llama.encode("<|begin_of_text|>").size() > 1u);
  BOOST_TEST(llama.with_special_tokens(Ids{}) == Ids{bos});
  BOOST_TEST(llama.eos_id().value_or(-1) == 3257);  // <|end_of_text|>
  const Tokenizer& qwen = tokenizer("qwen2-style");
  BOOST_TEST(qwen.with_special_tokens(Ids{5, 6}) == (Ids{5, 6}));
  BOOST_TEST(qwen.eos_id().value_or(-1) == 3256);  // <|endoftext|>
  BOOST_TEST(qwen.encode("<|im_start|>user", SpecialTokens::allowed).front() == 3257);
  for (const char* kind : {"sentencepiece-style", "metaspace-style"}) {
    const Tokenizer& t = tokenizer(kind);
    BOOST_TEST(t.with_special_tokens(Ids{7}) == (Ids{1, 7}));
    BOOST_TEST(t.eos_id().value_or(-1) == 2);  // </s>
    BOOST_TEST(t.encode("<s>", SpecialTokens::allowed) == Ids{1});
    BOOST_TEST(t.encode("<s>") != Ids{1});
  }
}

// The SentencePiece kinds differ where Prepend (every segment between added tokens) and
// Metaspace's "first" (only the text's first segment, and not when it starts with a space)
// differ; HF's ids (from the fixture, and probed with the npm binding) say so.
BOOST_AUTO_TEST_CASE(prepend_and_metaspace_first_differ_where_hf_differs) {
  const Tokenizer& sp = tokenizer("sentencepiece-style");
  const Tokenizer& ms = tokenizer("metaspace-style");
  const auto word = [&](const Tokenizer& t, const char* text) {
    return t.token_id(text).value_or(-1);
  };
  BOOST_TEST(ms.encode("<s>x", SpecialTokens::allowed) == (Ids{1, word(ms, "x")}));
  BOOST_TEST(sp.encode("<s>x", SpecialTokens::allowed) == (Ids{1, word(sp, "\xe2\x96\x81x")}));
  BOOST_TEST(ms.encode(" a") == (Ids{word(ms,
                                          "\xe2\x96\x81"
                                          "a")}));
  BOOST_TEST(sp.encode(" a") == (Ids{word(sp, "\xe2\x96\x81"), word(sp,
                                                                    "\xe2\x96\x81"
                                                                    "a")}));
  BOOST_TEST(sp.decode(sp.encode(" a")) == " a");
}

// The Llama 3 and Qwen2 patterns piece by piece, where they differ from GPT-2's.
BOOST_AUTO_TEST_CASE(llama_and_qwen_split_patterns) {
  using V = std::vector<std::string_view>;
  const auto llama = [](std::string_view text) { return nlb::text::split_llama_pieces(text, 3); };
  const auto qwen = [](std::string_view text) { return nlb::text::split_llama_pieces(text, 1); };
  BOOST_TEST(llama("12345 x") == (V{"123", "45", " x"}));
  BOOST_TEST(qwen("123") == (V{"1", "2", "3"}));
  BOOST_TEST(llama("DON'T we'VE") == (V{"DON", "'T", " we", "'VE"}));
  BOOST_TEST(llama("(hello \thi") == (V{"(hello", " ", "\thi"}));
  BOOST_TEST(llama("'\xc5\xbf 'S") == (V{"'\xc5\xbf", " '", "S"}));  // U+017F folds to s
  BOOST_TEST(llama("  \n  x") == (V{"  \n", " ", " x"}));
  BOOST_TEST(llama("x!!\n\ny") == (V{"x", "!!\n\n", "y"}));
  BOOST_TEST(llama("a   ") == (V{"a", "   "}));
  BOOST_TEST(llama("\r\nword") == (V{"\r\n", "word"}));
  BOOST_TEST(llama("a\xff"
                   "b") == (V{"a",
                              "\xff"
                              "b"}));  // an ill-formed byte glues like U+FFFD
  BOOST_TEST(llama("") == V{});
}

// Any bytes encode, and a byte-level kind gives them back; a SentencePiece kind gives back
// what its normalization made of them (the first space dropped by the decoder's Strip).
BOOST_AUTO_TEST_CASE(ill_formed_text_round_trips) {
  for (const std::string text : {"caf\xc3 \xff\xfe!", "\xe2\x82 x",
                                 "a\x80"
                                 "b"}) {
    BOOST_TEST(tokenizer("llama3-style").decode(tokenizer("llama3-style").encode(text)) == text);
    for (const char* kind : {"sentencepiece-style", "metaspace-style"})
      BOOST_TEST(tokenizer(kind).decode(tokenizer(kind).encode(text)) == text, kind);
  }
}

// Options the four files do not set, on variants of them written here; the expected ids and
// decodes are HF tokenizers' (the npm binding of tools/node, 0.23.2) for the same variants.
BOOST_AUTO_TEST_CASE(variants_match_hf_tokenizers) {
  nlb::test::ScratchDir dir("llama-variants");
  const auto load = [&](const json& doc) {
    return nlb::text::load_tokenizer_json(dir.write_text("tokenizer.json", doc.dump()));
  };
  const auto check = [&](const Tokenizer& t, const std::string& text, const Ids& ids,
                         const std::string& decoded) {
    BOOST_TEST(t.encode(text, SpecialTokens::allowed) == ids, text);
    BOOST_TEST(t.decode(ids, IllFormedUtf8::replace) == decoded, text);
  };
  // No byte fallback: characters the vocabulary lacks are <unk> (id 0), one per character or
  // fused, or dropped without an unknown token.
  json doc = document("sentencepiece-style");
  doc["model"]["byte_fallback"] = false;
  doc["model"]["fuse_unk"] = false;
  check(load(doc), "a\u6f22\u5b57 b", Ids{357, 0, 0, 368}, "a<unk><unk> b");
  doc["model"]["fuse_unk"] = true;
  check(load(doc), "a\u6f22\u5b57 b", Ids{357, 0, 368}, "a<unk> b");
  doc["model"]["unk_token"] = nullptr;
  check(load(doc), "a\u6f22\u5b57 b", Ids{357, 368}, "a b");
  // No decoder: HF joins the tokens with spaces.
  doc = document("sentencepiece-style");
  doc["decoder"] = nullptr;
  check(load(doc), "Hi you", Ids{572, 332, 476}, "\xe2\x96\x81H i \xe2\x96\x81you");
  // Metaspace splitting before each "▁", prepending always or never, with a Metaspace decoder;
  // the legacy add_prefix_space: true is prepend_scheme "always" with split.
  doc = document("metaspace-style");
  doc["pre_tokenizer"]["split"] = true;
  doc["pre_tokenizer"]["prepend_scheme"] = "always";
  doc["decoder"] = {{"type", "Sequence"},
                    {"decoders",
                     {{{"type", "ByteFallback"}},
                      {{"type", "Metaspace"},
                       {"replacement", "\xe2\x96\x81"},
                       {"prepend_scheme", "always"},
                       {"split", true}}}}};
  check(load(doc), "Hey  friend<s>x", Ids{572, 793, 354, 2264, 1, 2147}, "Hey  friend<s> x");
  doc["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "\xe2\x96\x81"}, {"add_prefix_space", true}};
  check(load(doc), "Hey  friend<s>x", Ids{572, 793, 354, 2264, 1, 2147}, "Hey  friend<s> x");
  doc = document("metaspace-style");
  doc["pre_tokenizer"]["split"] = true;
  doc["pre_tokenizer"]["prepend_scheme"] = "never";
  doc["decoder"] = {{"type", "Sequence"},
                    {"decoders",
                     {{{"type", "Metaspace"},
                       {"replacement", "\xe2\x96\x81"},
                       {"prepend_scheme", "never"},
                       {"split", true}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Strip"}, {"content", " "}, {"start", 2}, {"stop", 0}}}}};
  check(load(doc), "Hey  friend<s>x", Ids{299, 793, 354, 2264, 1, 347}, "Heyfriend<s>x");
  // A normalized added token is matched on normalized text and decoded from its normalized
  // form ("\u2581hello\u2581world").
  doc = document("sentencepiece-style");
  doc["added_tokens"].push_back({{"id", 2355},
                                 {"content", "hello world"},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", true},
                                 {"special", false}});
  const Tokenizer added = load(doc);
  check(added, "x hello world", Ids{2147, 2355}, "x hello world");
  BOOST_TEST(added.decode(Ids{354, 2355}, IllFormedUtf8::replace) == " hello world");
  // ignore_merges off and ByteLevel's own GPT-2 split after Llama 3's; GPT-2's pattern as a Split.
  doc = document("llama3-style");
  doc["model"]["ignore_merges"] = false;
  doc["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true;
  check(load(doc), "DON'T  (hello)12345", Ids{2878, 39, 84, 32, 364, 2070, 41, 1033, 885},
        "DON'T  (hello)12345");
  doc = document("qwen2-style");
  doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] =
      "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
  check(load(doc), "DON'T  (hello)12345", Ids{2799, 39, 84, 32, 363, 2015, 41, 49, 50, 51, 52, 53},
        "DON'T  (hello)12345");
}

// The SentencePiece layouts give BPE the whole text as one piece; BpeModel encodes it word by
// word at "▁" (BpeOptions::boundary) only where that cannot change the ids. Checked against the
// same model without the boundary, on every string, and on a vocabulary where a token has "▁"
// inside (then the boundary is not used).
BOOST_AUTO_TEST_CASE(word_by_word_bpe_equals_one_piece) {
  const nlb::text::BpeModel& model = tokenizer("sentencepiece-style").model();
  BOOST_TEST(model.options().boundary == "\xe2\x96\x81");
  std::vector<std::string> tokens;
  for (std::int32_t id = 0; id < model.size(); ++id)
    tokens.push_back(model.token(id));
  nlb::text::BpeOptions whole = model.options();
  whole.boundary.clear();
  const nlb::text::BpeModel one_piece(tokens, model.merge_list(), whole);
  // "a▁b" as a token (no merge makes it): a part boundary inside a token disables the split.
  std::vector<std::string> with_inner = tokens;
  with_inner.push_back(
      "a\xe2\x96\x81"
      "b");
  const nlb::text::BpeModel inner(with_inner, model.merge_list(), model.options());
  const nlb::text::BpeModel inner_whole(with_inner, model.merge_list(), whole);
  const nlb::text::Normalization& normalization =
      tokenizer("sentencepiece-style").pipeline().normalization;
  for (const auto& c : cases()) {
    const std::string text = normalization.apply(c.at("text").get<std::string>());
    Ids split, together, inner_split, inner_together;
    model.encode_piece(text, split);
    one_piece.encode_piece(text, together);
    inner.encode_piece(text, inner_split);
    inner_whole.encode_piece(text, inner_together);
    BOOST_TEST(split == together, c.at("name"));
    BOOST_TEST(inner_split == inner_together, c.at("name"));
  }
}

// ---- malformed files ------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(unknown_split_pattern) {
  json doc = document("llama3-style");
  doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+|\\s+";
  expect_error(doc,
               {"pre_tokenizer.pretokenizers[0]", "pattern", "Llama 3", "regex \"\\p{L}+|\\s+\""});
  doc = document("llama3-style");
  doc["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", " "}};
  expect_error(doc, {"pre_tokenizer.pretokenizers[0]", "pattern", "{\"Regex\": ...}"});
}

BOOST_AUTO_TEST_CASE(unsupported_split_behavior_and_invert) {
  json doc = document("qwen2-style");
  doc["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithPrevious";
  expect_error(doc, {"pre_tokenizer.pretokenizers[0]", "behavior", "\"Isolated\"",
                     "string \"MergedWithPrevious\""});
  doc = document("qwen2-style");
  doc["pre_tokenizer"]["pretokenizers"][0]["invert"] = true;
  expect_error(doc, {"pre_tokenizer.pretokenizers[0]", "invert", "expected false"});
}

BOOST_AUTO_TEST_CASE(unknown_component_kinds) {
  json doc = document("llama3-style");
  doc["pre_tokenizer"]["pretokenizers"][1] = {{"type", "Digits"}};
  expect_error(doc,
               {"pre_tokenizer.pretokenizers[1]", "type", "\"Split\"", "found string \"Digits\""});
  doc = document("sentencepiece-style");
  doc["normalizer"]["normalizers"][1] = {{"type", "Lowercase"}};
  expect_error(doc,
               {"normalizer.normalizers[1]", "type", "\"Prepend\"", "found string \"Lowercase\""});
  doc = document("sentencepiece-style");
  doc["decoder"]["decoders"][2] = {{"type", "CTC"}};
  expect_error(doc, {"decoder.decoders[2]", "type", "\"ByteFallback\"", "found string \"CTC\""});
  doc = document("llama3-style");
  doc["post_processor"]["processors"][1] = {{"type", "BertProcessing"}};
  expect_error(doc, {"post_processor.processors[1]", "type", "\"TemplateProcessing\"",
                     "found string \"BertProcessing\""});
  doc = document("metaspace-style");
  doc["model"]["type"] = "Unigram";
  expect_error(doc, {"model", "type", "\"BPE\"", "found string \"Unigram\""});
}

BOOST_AUTO_TEST_CASE(regex_replace_pattern) {
  json doc = document("sentencepiece-style");
  doc["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", " +"}};
  expect_error(doc,
               {"normalizer.normalizers[1]", "pattern", "not regular expressions", "regex \" +\""});
  doc = document("sentencepiece-style");
  doc["decoder"]["decoders"][0]["pattern"] = {{"String", ""}};
  expect_error(doc, {"decoder.decoders[0]", "pattern", "non-empty string"});
}

BOOST_AUTO_TEST_CASE(wrong_json_types_in_the_new_components) {
  json doc = document("sentencepiece-style");
  doc["normalizer"]["normalizers"][0]["prepend"] = 1;
  expect_error(doc, {"normalizer.normalizers[0]", "prepend", "expected a string", "number 1"});
  doc = document("metaspace-style");
  doc["pre_tokenizer"]["prepend_scheme"] = "sometimes";
  expect_error(doc, {"pre_tokenizer", "prepend_scheme", "\"first\", \"always\" or \"never\"",
                     "string \"sometimes\""});
  doc = document("metaspace-style");
  doc["pre_tokenizer"]["replacement"] = "__";
  expect_error(doc, {"pre_tokenizer", "replacement", "a string of one character", "string \"__\""});
  doc = document("metaspace-style");
  doc["decoder"]["decoders"][3]["start"] = -1;
  expect_error(doc, {"decoder.decoders[3]", "start", "a non-negative integer", "-1"});
  doc = document("llama3-style");
  doc["pre_tokenizer"]["pretokenizers"] = {{"type", "ByteLevel"}};
  expect_error(doc, {"pre_tokenizer", "pretokenizers", "expected an array"});
  doc = document("llama3-style");
  doc["model"]["ignore_merges"] = "yes";
  expect_error(doc, {"model", "ignore_merges", "expected a boolean", "string \"yes\""});
}

BOOST_AUTO_TEST_CASE(bad_byte_fallback_tokens) {
  json doc = document("sentencepiece-style");
  doc["model"]["vocab"].erase("<0x3F>");
  doc["model"]["vocab"]["<0x3f>"] = 3 + 0x3f;  // lower-case: the decoder reads it, BPE never
  expect_error(doc, {"model.vocab", "byte-fallback tokens", "for each of the 256 bytes",
                     "byte 63 (\"<0x3F>\")"});
  doc = document("sentencepiece-style");
  doc["model"]["vocab"]["<0x0a>"] = doc["model"]["vocab"].size();
  expect_error(doc,
               {"model.vocab token \"<0x0a>\"", "byte-fallback token", "\"<0x0A>\"", "upper-case"});
  doc = document("llama3-style");
  doc["model"]["byte_fallback"] = true;
  expect_error(doc, {"model", "byte_fallback", "expected false"});
}

BOOST_AUTO_TEST_CASE(unknown_token_not_in_the_vocabulary) {
  json doc = document("sentencepiece-style");
  doc["model"]["unk_token"] = "<UNK>";
  expect_error(doc, {"model", "unk_token", "a token of model.vocab", "\"<UNK>\", which is not"});
}

BOOST_AUTO_TEST_CASE(malformed_templates) {
  json doc = document("llama3-style");
  doc["post_processor"]["processors"][1]["single"][0]["SpecialToken"]["id"] = "<|bos|>";
  expect_error(doc,
               {"post_processor.processors[1].single[0].SpecialToken", "id",
                "a name in post_processor.processors[1].special_tokens", "string \"<|bos|>\""});
  doc = document("sentencepiece-style");
  doc["post_processor"]["special_tokens"]["<s>"]["ids"] = {2};  // </s>'s id
  expect_error(doc, {"post_processor special_tokens.<s>", "tokens[0]",
                     "\"</s>\" (the token of "
                     "id 2)",
                     "\"<s>\""});
  doc = document("sentencepiece-style");
  doc["post_processor"]["special_tokens"]["<s>"]["ids"] = {99999};
  expect_error(doc, {"post_processor special_tokens.<s>", "ids[0]", "found 99999"});
  doc = document("sentencepiece-style");
  doc["post_processor"]["single"] =
      json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}});
  expect_error(doc, {"post_processor", "single", "the sequence \"A\""});
  doc = document("metaspace-style");
  doc["post_processor"]["single"][1] = {{"Sequence", {{"id", "B"}, {"type_id", 0}}}};
  expect_error(doc, {"post_processor.single[1].Sequence", "id", "\"A\"", "string \"B\""});
}

BOOST_AUTO_TEST_CASE(inconsistent_byte_level_components) {
  // A ByteLevel decoder needs the ByteLevel pre-tokenizer; a byte-level vocabulary needs the
  // ByteLevel decoder; nothing follows ByteLevel in a Sequence.
  json doc = document("sentencepiece-style");
  doc["decoder"] = {{"type", "ByteLevel"}};
  expect_error(doc, {"pre_tokenizer", "\"ByteLevel\"", "the decoder is ByteLevel", "found null"});
  doc = document("llama3-style");
  doc["decoder"] = document("sentencepiece-style")["decoder"];
  expect_error(doc, {"decoder", "null or \"ByteLevel\"", "the tokens are bytes"});
  doc = document("llama3-style");
  auto& steps = doc["pre_tokenizer"]["pretokenizers"];
  steps.push_back(steps[0]);
  expect_error(doc, {"pre_tokenizer.pretokenizers[2]", "no pre-tokenizer after ByteLevel"});
  doc = document("metaspace-style");
  doc["pre_tokenizer"]["add_prefix_space"] = false;
  expect_error(doc, {"pre_tokenizer", "add_prefix_space", "prepend_scheme \"never\""});
}
