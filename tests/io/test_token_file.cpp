// io/token_file.hpp: text token files (bytes are tokens), binary uint16/uint32 token files
// (hand-assembled little-endian bytes), size and vocabulary checks, and the writer.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "error_message.hpp"
#include "nlb/io/token_file.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;
using nlb::io::TokenDType;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(u16_round_trip) {
  nlb::test::ScratchDir tmp;
  // 0, 1, 255, 256, 50256, 65535 as little-endian uint16, assembled by hand.
  const std::vector<std::uint8_t> bytes = {0x00, 0x00, 0x01, 0x00, 0xFF, 0x00,
                                           0x00, 0x01, 0x50, 0xC4, 0xFF, 0xFF};
  const std::vector<std::int32_t> tokens = {0, 1, 255, 256, 50256, 65535};
  const auto path = tmp.write("a.bin", bytes);
  BOOST_TEST(nlb::io::read_token_file(path) == tokens, boost::test_tools::per_element());
  BOOST_TEST(nlb::io::read_token_file(path, TokenDType::U16, 65536) == tokens,
             boost::test_tools::per_element());
  nlb::io::write_token_file(tmp.path / "b.bin", tokens);
  BOOST_TEST(tmp.read("b.bin") == bytes, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(u32_round_trip) {
  nlb::test::ScratchDir tmp;
  const std::vector<std::uint8_t> bytes = {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
                                           0x51, 0xC4, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0x7F};
  const std::vector<std::int32_t> tokens = {0, 65536, 50257, 2147483647};
  const auto path = tmp.write("a.bin", bytes);
  BOOST_TEST(nlb::io::read_token_file(path, TokenDType::U32) == tokens,
             boost::test_tools::per_element());
  nlb::io::write_token_file(tmp.path / "b.bin", tokens, TokenDType::U32);
  BOOST_TEST(tmp.read("b.bin") == bytes, boost::test_tools::per_element());
  // Random ids through the writer and reader.
  std::mt19937 rng(3);
  std::vector<std::int32_t> random(1000);
  for (auto& t : random)
    t = static_cast<std::int32_t>(rng() % 100000);
  nlb::io::write_token_file(tmp.path / "c.bin", random, TokenDType::U32);
  BOOST_TEST(nlb::io::read_token_file(tmp.path / "c.bin", TokenDType::U32) == random,
             boost::test_tools::per_element());
  BOOST_TEST(fs::file_size(tmp.path / "c.bin") == 4000u);
}

BOOST_AUTO_TEST_CASE(sizes_that_are_not_whole_tokens_are_rejected) {
  nlb::test::ScratchDir tmp;
  const auto odd = tmp.write("odd.bin", {1, 0, 2});
  const std::string m16 =
      nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::io::read_token_file(odd); });
  BOOST_TEST(contains(m16, odd.string()));
  BOOST_TEST(contains(m16, "expected a multiple of 2 bytes, found 3 bytes"));
  const auto six = tmp.write("six.bin", {1, 0, 0, 0, 2, 0});
  const std::string m32 = nlb::test::error_message<nlb::FormatError>(
      [&] { (void)nlb::io::read_token_file(six, TokenDType::U32); });
  BOOST_TEST(contains(m32, "u32 token file"));
  BOOST_TEST(contains(m32, "expected a multiple of 4 bytes, found 6 bytes"));
  BOOST_TEST(nlb::io::read_token_file(six, TokenDType::U16).size() == 3u);  // fine as u16
  // A u32 id beyond int32 is an error naming its position and value.
  const auto big = tmp.write("big.bin", {5, 0, 0, 0, 0x00, 0x00, 0x00, 0x80});
  const std::string mbig = nlb::test::error_message<nlb::FormatError>(
      [&] { (void)nlb::io::read_token_file(big, TokenDType::U32); });
  BOOST_TEST(contains(mbig, "token at position 1"));
  BOOST_TEST(contains(mbig, "found 2147483648"));
}

BOOST_AUTO_TEST_CASE(vocabulary_bound) {
  nlb::test::ScratchDir tmp;
  const auto path = tmp.write("v.bin", {1, 0, 2, 0, 0x51, 0xC4});  // 1, 2, 50257
  BOOST_TEST(nlb::io::read_token_file(path, TokenDType::U16, 50258).size() == 3u);
  const std::string m = nlb::test::error_message<nlb::FormatError>(
      [&] { (void)nlb::io::read_token_file(path, TokenDType::U16, 50257); });
  BOOST_TEST(contains(m, path.string()));
  BOOST_TEST(contains(m, "token at position 2: expected an id < vocab_size 50257, found 50257"));
  BOOST_CHECK_THROW((void)nlb::io::read_token_file(path, TokenDType::U16, 0), nlb::ArgumentError);
  BOOST_CHECK_THROW((void)nlb::io::read_token_file(path, TokenDType::U16, -5), nlb::ArgumentError);
}

BOOST_AUTO_TEST_CASE(text_tokens_are_bytes) {
  nlb::test::ScratchDir tmp;
  // Bytes >= 0x80 must not sign-extend (char is signed on x86).
  const auto path = tmp.write("t.txt", {'A', 0x00, 0xFF, 0x80, '\n'});
  BOOST_TEST(nlb::io::read_text_tokens(path) == (std::vector<std::int32_t>{65, 0, 255, 128, 10}),
             boost::test_tools::per_element());
  BOOST_TEST(nlb::io::read_text_tokens(tmp.write("empty.txt", {})).empty());
  const std::string missing = nlb::test::error_message<nlb::FormatError>(
      [&] { (void)nlb::io::read_text_tokens(tmp.path / "missing.txt"); });
  BOOST_TEST(contains(missing, (tmp.path / "missing.txt").string()));
  BOOST_TEST(contains(missing, "cannot read"));
  const std::string directory =
      nlb::test::error_message<nlb::FormatError>([&] { (void)nlb::io::read_token_file(tmp.path); });
  BOOST_TEST(contains(directory, "expected a regular file, found a directory"));
}

BOOST_AUTO_TEST_CASE(token_dtype_names_and_writer_checks) {
  BOOST_TEST((nlb::io::parse_token_dtype("u16") == TokenDType::U16));
  BOOST_TEST((nlb::io::parse_token_dtype("u32") == TokenDType::U32));
  BOOST_TEST(nlb::io::to_string(TokenDType::U32) == "u32");
  BOOST_CHECK_THROW((void)nlb::io::parse_token_dtype("uint16"), nlb::ArgumentError);
  nlb::test::ScratchDir tmp;
  BOOST_CHECK_THROW(nlb::io::write_token_file(tmp.path / "x.bin", std::vector<std::int32_t>{70000}),
                    nlb::ArgumentError);
  BOOST_CHECK_THROW(
      nlb::io::write_token_file(tmp.path / "x.bin", std::vector<std::int32_t>{-1}, TokenDType::U32),
      nlb::ArgumentError);
  BOOST_TEST(!fs::exists(tmp.path / "x.bin"));
  BOOST_CHECK_THROW(
      nlb::io::write_token_file(tmp.path / "no-dir" / "x.bin", std::vector<std::int32_t>{1}),
      nlb::Error);
}
