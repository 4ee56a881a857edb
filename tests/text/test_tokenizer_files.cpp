// text/: strict loading. Malformed, truncated and inconsistent vocab.json, merges.txt and
// tokenizer.json files are FormatErrors naming the file, the entry, what was expected and what
// was found. The files are small synthetic vocabularies (256 byte tokens and a few merges)
// written to a scratch directory, each broken in one way.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "error_message.hpp"
#include "nlb/text.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;
using nlb::text::detail::byte_level_of_bytes;
using nlohmann::json;

// 256 byte tokens, then "ab" (256), "abc" (257), " a" (258): written in the byte-level alphabet.
json small_vocab() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b)
    vocab[byte_level_of_bytes(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  vocab[byte_level_of_bytes(" a")] = 258;
  return vocab;
}
const std::string small_merges = "#version: 0.2\na b\nab c\n\xc4\xa0 a\n";  // "Ġ a"

json byte_level() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", true}};
}
json small_tokenizer_json() {
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens",
           {{{"id", 259},
             {"content", "<|endoftext|>"},
             {"single_word", false},
             {"lstrip", false},
             {"rstrip", false},
             {"normalized", false},
             {"special", true}},
            {{"id", 260},
             {"content", "  "},
             {"single_word", false},
             {"lstrip", false},
             {"rstrip", false},
             {"normalized", true},
             {"special", false}}}},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer", byte_level()},
          {"post_processor", byte_level()},
          {"decoder", byte_level()},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"vocab", small_vocab()},
            {"merges", {"a b", "ab c", "\xc4\xa0 a"}}}}};
}

struct Files {
  nlb::test::ScratchDir dir{"tokenizer-files"};
  void write(const std::string& name, const std::string& text) const { dir.write_text(name, text); }
  void gpt2(const json& vocab, const std::string& merges) const {
    write("vocab.json", vocab.dump());
    write("merges.txt", merges);
  }
  std::string vocab_path() const { return (dir.path / "vocab.json").string(); }
  std::string merges_path() const { return (dir.path / "merges.txt").string(); }
  std::string json_path() const { return (dir.path / "tokenizer.json").string(); }
};

// The FormatError message of loading `files`' directory; checks it names each of `parts`.
void expect_error(const Files& files, std::initializer_list<std::string> parts,
                  nlb::text::TokenizerOptions options = {}) {
  const std::string message = nlb::test::error_message<nlb::FormatError>(
      [&] { nlb::text::load_tokenizer(files.dir.path, options); });
  BOOST_TEST_MESSAGE(message);
  for (const std::string& part : parts)
    BOOST_TEST(message.find(part) != std::string::npos, "\"" << part << "\" in: " << message);
}

void expect_json_error(const json& doc, std::initializer_list<std::string> parts) {
  Files files;
  files.write("tokenizer.json", doc.dump());
  std::vector<std::string> all(parts);
  all.push_back(files.json_path());
  const std::string message = nlb::test::error_message<nlb::FormatError>(
      [&] { nlb::text::load_tokenizer(files.dir.path); });
  BOOST_TEST_MESSAGE(message);
  for (const std::string& part : all)
    BOOST_TEST(message.find(part) != std::string::npos, "\"" << part << "\" in: " << message);
}

}  // namespace

BOOST_AUTO_TEST_CASE(small_files_load) {
  Files files;
  files.gpt2(small_vocab(), small_merges);
  const auto t = nlb::text::load_tokenizer(files.dir.path);
  BOOST_REQUIRE(t.has_value());
  BOOST_TEST(t->vocab_size() == 259);
  BOOST_TEST(t->encode("abc a") == (std::vector<std::int32_t>{257, 258}));
  BOOST_TEST(!t->eos_id().has_value());

  Files json_files;
  json_files.write("tokenizer.json", small_tokenizer_json().dump());
  const auto j = nlb::text::load_tokenizer(json_files.dir.path);
  BOOST_REQUIRE(j.has_value());
  BOOST_TEST(j->vocab_size() == 261);
  BOOST_TEST(j->eos_id().value_or(-1) == 259);
  BOOST_TEST(j->encode("abc  a<|endoftext|>", nlb::text::SpecialTokens::allowed) ==
             (std::vector<std::int32_t>{257, 260, 97, 259}));
}

// ---- vocab.json + merges.txt -------------------------------------------------------------

BOOST_AUTO_TEST_CASE(missing_vocab_json) {
  Files files;
  files.write("merges.txt", small_merges);
  expect_error(files, {files.vocab_path(), "expected an existing file", "No such file"});
}

BOOST_AUTO_TEST_CASE(missing_merges_txt) {
  Files files;
  files.write("vocab.json", small_vocab().dump());
  expect_error(files, {files.merges_path(), "expected an existing file", "No such file"});
}

BOOST_AUTO_TEST_CASE(truncated_vocab_json) {
  Files files;
  const std::string text = small_vocab().dump();
  files.gpt2(small_vocab(), small_merges);
  files.write("vocab.json", text.substr(0, text.size() / 2));
  expect_error(files, {files.vocab_path(), "JSON", "expected a complete JSON document", "parse"});
}

BOOST_AUTO_TEST_CASE(truncated_merges_txt_at_a_line_end) {
  Files files;
  files.gpt2(small_vocab(), "#version: 0.2\na b\nab c\n");  // the " a" merge is lost
  expect_error(files, {files.merges_path(), "merges.txt truncated?",
                       "token \"\xc4\xa0"
                       "a\"",
                       "id 258"});
}

BOOST_AUTO_TEST_CASE(truncated_merges_txt_within_a_line) {
  Files files;
  files.gpt2(small_vocab(), "#version: 0.2\na b\nab");
  expect_error(files, {files.merges_path(), "line 3", "expected two tokens separated by one space",
                       "found \"ab\""});
}

BOOST_AUTO_TEST_CASE(merge_naming_an_unknown_token) {
  Files files;
  files.gpt2(small_vocab(), "#version: 0.2\na b\nab c\n\xc4\xa0 a\nabc zz\n");
  expect_error(files, {files.merges_path(), "line 5", "merge part",
                       "expected a token of vocab.json", "\"zz\", which is not"});
}

BOOST_AUTO_TEST_CASE(merge_result_not_in_vocab) {
  Files files;
  files.gpt2(small_vocab(), "#version: 0.2\na b\nab c\n\xc4\xa0 a\nb c\n");
  expect_error(files, {files.merges_path(), "line 5", "merge result", "\"bc\", which is not"});
}

BOOST_AUTO_TEST_CASE(duplicate_ids) {
  Files files;
  json vocab = small_vocab();
  vocab["abc"] = 256;  // also "ab"'s id
  vocab["zz"] = 257;
  files.gpt2(vocab, small_merges);
  expect_error(files, {files.vocab_path(), "id 256", "expected each id used by one token"});
}

BOOST_AUTO_TEST_CASE(non_contiguous_ids) {
  Files files;
  json vocab = small_vocab();
  vocab[byte_level_of_bytes(" a")] = 300;
  files.gpt2(vocab, small_merges);
  expect_error(files, {files.vocab_path(),
                       "token \"\xc4\xa0"
                       "a\"",
                       "expected 0..258", "found 300"});
}

BOOST_AUTO_TEST_CASE(vocab_larger_than_the_embedding) {
  Files files;
  files.gpt2(small_vocab(), small_merges);
  expect_error(files, {files.vocab_path(), "vocabulary size", "expected at most 100", "found 259"},
               {.embedding_size = 100});
}

BOOST_AUTO_TEST_CASE(wrong_json_types_in_vocab) {
  Files files;
  json vocab = small_vocab();
  vocab["ab"] = "256";
  files.gpt2(vocab, small_merges);
  expect_error(files, {files.vocab_path(), "token \"ab\"", "id: expected an integer",
                       "found string \"256\""});
  Files array;
  array.gpt2(json::array({1, 2}), small_merges);
  expect_error(array,
               {array.vocab_path(), "vocabulary", "expected an object", "an array of 2 elements"});
}

BOOST_AUTO_TEST_CASE(missing_byte_token) {
  Files files;
  json vocab = small_vocab();
  vocab.erase(byte_level_of_bytes("\x7f"));
  vocab[byte_level_of_bytes("\x7f\x7f")] = 127;
  files.gpt2(vocab, small_merges);
  expect_error(files, {files.vocab_path(), "a token for each of the 256 bytes", "byte 127"});
}

BOOST_AUTO_TEST_CASE(token_outside_the_byte_level_alphabet) {
  Files files;
  json vocab = small_vocab();
  vocab.erase("abc");
  vocab["a c"] = 257;  // a literal space: not in the alphabet (it is written "Ġ")
  files.gpt2(vocab, "#version: 0.2\na b\n\xc4\xa0 a\n");
  expect_error(files, {files.vocab_path(), "token \"a c\"", "byte-level alphabet"});
}

// ---- tokenizer.json ------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(json_unknown_normalizer) {
  json doc = small_tokenizer_json();
  doc["normalizer"] = {{"type", "Lowercase"}};
  expect_json_error(doc, {"normalizer", "type", "\"NFC\"", "found string \"Lowercase\""});
}

BOOST_AUTO_TEST_CASE(json_unknown_pre_tokenizer_and_model) {
  json doc = small_tokenizer_json();
  doc["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_json_error(doc, {"pre_tokenizer", "\"ByteLevel\"", "found string \"Whitespace\""});
  doc = small_tokenizer_json();
  doc["pre_tokenizer"] = nullptr;
  expect_json_error(doc, {"pre_tokenizer", "\"ByteLevel\"", "found null"});
  doc = small_tokenizer_json();
  doc["model"]["type"] = "WordPiece";
  expect_json_error(doc, {"model", "\"BPE\"", "found string \"WordPiece\""});
  doc = small_tokenizer_json();
  doc["post_processor"] = {{"type", "RobertaProcessing"}};
  expect_json_error(doc, {"post_processor", "found string \"RobertaProcessing\""});
  doc = small_tokenizer_json();
  doc["decoder"] = {{"type", "WordPiece"}};
  expect_json_error(doc, {"decoder", "found string \"WordPiece\""});
}

BOOST_AUTO_TEST_CASE(json_unsupported_options) {
  json doc = small_tokenizer_json();
  doc["pre_tokenizer"]["add_prefix_space"] = true;
  expect_json_error(doc, {"pre_tokenizer", "add_prefix_space", "expected false", "boolean true"});
  doc = small_tokenizer_json();
  doc["model"]["dropout"] = 0.1;
  expect_json_error(doc, {"model", "dropout", "expected null"});
  doc = small_tokenizer_json();
  doc["added_tokens"][1]["lstrip"] = true;
  expect_json_error(doc, {"added_tokens[1]", "lstrip", "expected false"});
  doc = small_tokenizer_json();
  doc["truncation"] = {{"max_length", 512}};
  expect_json_error(doc, {"truncation", "expected null", "an object with 1 keys"});
  doc = small_tokenizer_json();
  doc["extra"] = 1;
  expect_json_error(doc, {"key \"extra\"", "an unknown key"});
}

BOOST_AUTO_TEST_CASE(json_wrong_types) {
  json doc = small_tokenizer_json();
  doc["model"]["merges"] = "a b";
  expect_json_error(doc, {"model", "merges", "expected an array", "string \"a b\""});
  doc = small_tokenizer_json();
  doc["added_tokens"][0]["special"] = "yes";
  expect_json_error(doc, {"added_tokens[0]", "special", "expected a boolean", "string \"yes\""});
  doc = small_tokenizer_json();
  doc["model"]["merges"][1] = json::array({"ab"});
  expect_json_error(doc, {"model.merges[1]", "an array of two strings", "an array of 1 elements"});
  doc = small_tokenizer_json();
  doc["model"]["vocab"]["ab"] = 256.5;
  expect_json_error(doc, {"model.vocab token \"ab\"", "expected an integer", "256.5"});
}

BOOST_AUTO_TEST_CASE(json_inconsistent_merges_and_added_tokens) {
  json doc = small_tokenizer_json();
  doc["model"]["merges"][2] = "\xc4\xa0 q";
  expect_json_error(doc, {"model.merges[2]", "merge result", "expected a token of model.vocab",
                          "\"\xc4\xa0q\", which is not"});
  doc = small_tokenizer_json();
  doc["added_tokens"][1]["id"] = 262;  // 260 skipped
  expect_json_error(
      doc, {"added_tokens[1]", "expected 260 (ids contiguous after the model's 259", "found 262"});
  doc = small_tokenizer_json();
  doc["added_tokens"][0]["id"] = 97;  // the model's token "a", not "<|endoftext|>"
  expect_json_error(doc,
                    {"added_tokens[0]", "id 97", "model token \"a\"", "content \"<|endoftext|>\""});
  doc = small_tokenizer_json();
  doc["added_tokens"][1]["id"] = 259;
  expect_json_error(doc, {"added_tokens[1]", "each id once"});
}

BOOST_AUTO_TEST_CASE(json_truncated) {
  Files files;
  const std::string text = small_tokenizer_json().dump();
  files.write("tokenizer.json", text.substr(0, text.size() - 10));
  expect_error(files, {files.json_path(), "expected a complete JSON document"});
}

// A token whose bytes BPE merges another way ("abc" is a token, but "b c" outranks "a b", so
// "abc" encodes as "a", "bc"): encoding follows the merges, not the vocabulary.
BOOST_AUTO_TEST_CASE(a_token_bpe_does_not_make_of_its_bytes) {
  Files files;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b)
    vocab[byte_level_of_bytes(std::string(1, static_cast<char>(b)))] = b;
  vocab["bc"] = 256;
  vocab["ab"] = 257;
  vocab["abc"] = 258;
  files.gpt2(vocab, "#version: 0.2\nb c\na b\nab c\n");
  const auto t = nlb::text::load_tokenizer(files.dir.path);
  BOOST_REQUIRE(t.has_value());
  BOOST_TEST(t->encode("abc") == (std::vector<std::int32_t>{97, 256}));
  BOOST_TEST(t->encode("ab") == (std::vector<std::int32_t>{257}));
  BOOST_TEST(t->encode("abcabc") == (std::vector<std::int32_t>{97, 256, 97, 256}));
}
