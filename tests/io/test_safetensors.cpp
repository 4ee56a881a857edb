// io/safetensors.hpp and io/safetensors_writer.hpp: reading hand-assembled files (aligned
// and unaligned), files written by the independent Python generator, writer round trips
// for every dtype, the writer's byte layout, all-or-nothing writes, transposed reads, the
// memory-mapped file against an in-memory copy, and the malformed corpus in
// tests/fixtures/malformed-safetensors (each file -> its specific FormatError).
#include <algorithm>
#include <bit>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "error_message.hpp"
#include "nlb/io/safetensors.hpp"
#include "nlb/io/safetensors_writer.hpp"
#include "scratch_dir.hpp"
#include "small_float_reference.hpp"

namespace {

namespace fs = std::filesystem;
using nlb::io::DType;
using nlb::io::SafetensorsFile;
using nlb::io::SafetensorsWriter;
using Bytes = std::vector<std::uint8_t>;

const fs::path source_dir = NLB_SOURCE_DIR;

/// A file assembled by hand: u64 little-endian length (written byte by byte), header text
/// (padded with spaces to a multiple of `pad_to` bytes), then `data`.
Bytes assemble(std::string header, const Bytes& data, std::size_t pad_to = 8) {
  while (header.size() % pad_to != 0)
    header += ' ';
  Bytes out;
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<std::uint8_t>((n >> (8 * i)) & 0xFF));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void append(Bytes& out, std::initializer_list<int> bytes) {
  for (int b : bytes)
    out.push_back(static_cast<std::uint8_t>(b));
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(reads_hand_assembled_file) {
  // b: F32 [2, 2] = 1.5, -2, 0.25, 3 at [0, 16); a: I64 [2] = -1, 2^40 at [16, 32).
  Bytes data;
  append(data, {0x00, 0x00, 0xC0, 0x3F, 0x00, 0x00, 0x00, 0xC0,    // 1.5, -2.0
                0x00, 0x00, 0x80, 0x3E, 0x00, 0x00, 0x40, 0x40});  // 0.25, 3.0
  append(data, {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,    // -1
                0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00});  // 2^40
  const auto file = SafetensorsFile::from_bytes(
      assemble(R"({"b":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
               R"("a":{"dtype":"I64","shape":[2],"data_offsets":[16,32]}})",
               data),
      "hand.safetensors");
  BOOST_TEST(file.path() == fs::path("hand.safetensors"));
  BOOST_REQUIRE(file.tensors().size() == 2u);
  BOOST_TEST(file.tensors()[0].name == "a");  // sorted by name
  BOOST_TEST(file.tensors()[1].name == "b");
  BOOST_TEST(file.metadata().empty());
  BOOST_TEST(file.contains("a"));
  BOOST_TEST(!file.contains("c"));
  const auto& b = file.info("b");
  BOOST_TEST((b.dtype == DType::F32));
  BOOST_TEST(b.shape == (std::vector<std::int64_t>{2, 2}), boost::test_tools::per_element());
  BOOST_TEST(b.begin == 0u);
  BOOST_TEST(b.end == 16u);
  BOOST_TEST(b.numel() == 4);

  BOOST_TEST(file.read<float>("b") == (std::vector<float>{1.5f, -2.0f, 0.25f, 3.0f}),
             boost::test_tools::per_element());
  BOOST_TEST(file.read<double>("b", {2, 2}) == (std::vector<double>{1.5, -2.0, 0.25, 3.0}),
             boost::test_tools::per_element());
  BOOST_TEST(file.read<std::int64_t>("a") == (std::vector<std::int64_t>{-1, std::int64_t{1} << 40}),
             boost::test_tools::per_element());
  const auto m = file.read_matrix<float>("b", 2, 2);
  BOOST_TEST(m(0, 0) == 1.5f);
  BOOST_TEST(m(0, 1) == -2.0f);  // row-major: the second element is row 0, column 1
  BOOST_TEST(m(1, 0) == 0.25f);
  BOOST_TEST(m(1, 1) == 3.0f);
  const auto raw = file.raw_bytes("b");
  BOOST_TEST(raw.size() == 16u);
  BOOST_TEST(raw[3] == 0x3F);

  // Errors name the file, the tensor, what was expected and what was found.
  const std::string wrong_shape =
      nlb::test::error_message<nlb::FormatError>([&] { (void)file.read_matrix<float>("b", 2, 3); });
  BOOST_TEST(contains(wrong_shape, "hand.safetensors"));
  BOOST_TEST(contains(wrong_shape, "\"b\""));
  BOOST_TEST(contains(wrong_shape, "expected [2, 3], found [2, 2]"));
  const std::string wrong_kind =
      nlb::test::error_message<nlb::FormatError>([&] { (void)file.read<float>("a"); });
  BOOST_TEST(contains(wrong_kind, "hand.safetensors"));
  BOOST_TEST(contains(wrong_kind, "a floating dtype"));
  BOOST_TEST(contains(wrong_kind, "found I64"));
  const std::string wrong_int =
      nlb::test::error_message<nlb::FormatError>([&] { (void)file.read<std::int32_t>("a"); });
  BOOST_TEST(contains(wrong_int, "element 1 does not fit int32"));
  BOOST_TEST(contains(wrong_int, "found 1099511627776"));
  const std::string missing = nlb::test::error_message<nlb::FormatError>(
      [&] { (void)file.info("transformer.wte.weight"); });
  BOOST_TEST(contains(missing, "hand.safetensors"));
  BOOST_TEST(contains(missing, "missing tensor \"transformer.wte.weight\""));
  BOOST_CHECK_THROW((void)file.read_matrix<float>("b", -1, 2), nlb::ArgumentError);
  BOOST_CHECK_THROW((void)file.read_row_vector<float>("b", 4), nlb::FormatError);  // 2-D
}

BOOST_AUTO_TEST_CASE(unaligned_data_reads_correctly) {
  // Packed back to back with no padding anywhere (header length 101: the data section
  // itself starts at the odd file offset 109), so every tensor but the first sits at an
  // address that is not a multiple of its element size.
  Bytes data;
  append(data, {0xFE});                                            // u  U8 [1] at [0, 1)
  append(data, {0x00, 0x00, 0xC0, 0x3F, 0x00, 0x00, 0x20, 0xC1});  // f  F32 [2] at [1, 9)
  append(data, {0x18, 0x2D, 0x44, 0x54, 0xFB, 0x21, 0x09, 0x40});  // d  F64 [1] at [9, 17): pi
  append(data, {0x00, 0x3C, 0xFF, 0x7B});                          // h  F16 [2] at [17, 21)
  append(data, {0xF7, 0xC2});                                      // bf BF16 [1] at [21, 23)
  append(data, {0xFE, 0xFF, 0xFF, 0xFF});                          // i  I32 [1] at [23, 27): -2
  const std::string header = R"({"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                             R"("f":{"dtype":"F32","shape":[2],"data_offsets":[1,9]},)"
                             R"("d":{"dtype":"F64","shape":[1],"data_offsets":[9,17]},)"
                             R"("h":{"dtype":"F16","shape":[2],"data_offsets":[17,21]},)"
                             R"("bf":{"dtype":"BF16","shape":[1],"data_offsets":[21,23]},)"
                             R"("i":{"dtype":"I32","shape":[1],"data_offsets":[23,27]}})";
  const Bytes bytes = assemble(header, data, /*pad_to=*/1);
  BOOST_REQUIRE((bytes.size() - data.size()) % 2 == 1);  // the data section starts at an odd offset
  const auto file = SafetensorsFile::from_bytes(bytes, "unaligned");
  BOOST_TEST(file.read<std::int32_t>("u") == std::vector<std::int32_t>{254},
             boost::test_tools::per_element());
  BOOST_TEST(file.read<float>("f") == (std::vector<float>{1.5f, -10.0f}),
             boost::test_tools::per_element());
  BOOST_TEST(file.read<double>("d")[0] == 3.141592653589793);
  BOOST_TEST(file.read<float>("h") == (std::vector<float>{1.0f, 65504.0f}),
             boost::test_tools::per_element());
  BOOST_TEST(file.read<float>("bf")[0] == -123.5f);
  BOOST_TEST(file.read<std::int64_t>("i")[0] == -2);
  const auto row = file.read_row_vector<double>("f", 2);
  BOOST_TEST(row.rows() == 1);
  BOOST_TEST(row(0, 1) == -10.0);
}

BOOST_AUTO_TEST_CASE(reads_files_written_by_the_python_generator) {
  // Written with Python's struct module (tools/python/make_malformed_safetensors.py),
  // independently of the C++ writer; F16 packed by Python's own binary16 conversion.
  const fs::path dir = source_dir / "tests/fuzz/corpus";
  const auto every = SafetensorsFile::open(dir / "valid_every_dtype_unaligned.safetensors");
  BOOST_TEST(every.tensors().size() == 8u);
  BOOST_TEST(every.info("b_f16").begin == 3u);  // odd offsets
  BOOST_TEST(every.read<std::int32_t>("a_u8") == (std::vector<std::int32_t>{0, 127, 255}),
             boost::test_tools::per_element());
  BOOST_TEST(every.read<float>("b_f16") == (std::vector<float>{1.5f, -65504.0f}),
             boost::test_tools::per_element());
  BOOST_TEST(every.read<float>("c_bf16") == (std::vector<float>{1.5f, -123.5f}),
             boost::test_tools::per_element());
  BOOST_TEST(every.read<float>("d_f32")[0] == 0.1f);
  BOOST_TEST(every.read<std::int32_t>("e_i32")[0] == std::numeric_limits<std::int32_t>::min());
  BOOST_TEST(every.read<double>("f_f64")[0] == std::ldexp(1.0, -1074));
  BOOST_TEST(every.read<std::int64_t>("g_i64")[0] == (std::int64_t{1} << 62) + 1);
  BOOST_TEST(every.read<std::uint8_t>("h_bool") == (std::vector<std::uint8_t>{1, 0}),
             boost::test_tools::per_element());

  const auto meta = SafetensorsFile::open(dir / "valid_f32_with_metadata.safetensors");
  BOOST_TEST(meta.metadata().size() == 1u);
  BOOST_TEST(meta.metadata().at("format") == "pt");
  BOOST_TEST(meta.read<float>("w", {2, 3}) == (std::vector<float>{1, 2, 3, 4, 5, 6}),
             boost::test_tools::per_element());

  const auto odd = SafetensorsFile::open(dir / "valid_scalar_and_empty.safetensors");
  BOOST_TEST(odd.info("scalar").shape.empty());
  BOOST_TEST(odd.info("scalar").numel() == 1);
  BOOST_TEST(odd.read<float>("scalar")[0] == -2.5f);
  BOOST_TEST(odd.info("empty").numel() == 0);
  BOOST_TEST(odd.read<float>("empty", {0, 5}).empty());

  BOOST_TEST(SafetensorsFile::open(dir / "valid_no_tensors.safetensors").tensors().empty());
}

BOOST_AUTO_TEST_CASE(round_trip_every_dtype) {
  std::mt19937_64 rng(20240611);
  std::normal_distribution<double> normal(0.0, 1.0);
  const int n = 3000;
  // Values over many binades, including F16's subnormal range and overflow, and exact
  // F16 ties (k + 0.5) * 2^-24, which must round to even.
  std::vector<double> d(n);
  for (int i = 0; i < n; ++i) {
    d[i] = normal(rng) * std::ldexp(1.0, static_cast<int>(rng() % 48) - 30);
  }
  for (int i = 0; i < 100; ++i)
    d[i] = (static_cast<double>(i) + 0.5) * std::ldexp(1.0, -24);
  d[100] = 70000.0;
  d[101] = -1e-30;
  std::vector<float> f(d.begin(), d.end());
  std::vector<std::int64_t> i64(n), i32(n), u8(n), flags(n);
  for (int i = 0; i < n; ++i) {
    i64[i] = static_cast<std::int64_t>(rng());
    i32[i] = static_cast<std::int32_t>(rng());
    u8[i] = static_cast<std::int64_t>(rng() % 256);
    flags[i] = static_cast<std::int64_t>(rng() % 2);
  }
  i64[0] = std::numeric_limits<std::int64_t>::min();
  i32[0] = std::numeric_limits<std::int32_t>::min();

  SafetensorsWriter writer;
  const std::vector<std::int64_t> shape = {50, 60};
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    writer.add("from_double." + std::string(nlb::io::to_string(dt)), dt, shape, d);
    writer.add("from_float." + std::string(nlb::io::to_string(dt)), dt, shape, f);
  }
  writer.add_int("i64", DType::I64, shape, i64);
  writer.add_int("i32", DType::I32, {n}, i32);
  writer.add_int("u8", DType::U8, {3, 1000}, u8);
  writer.add_int("bool", DType::BOOL, {n, 1}, flags);
  nlb::test::ScratchDir tmp;
  const fs::path path = tmp.path / "round_trip.safetensors";
  writer.write(path);
  BOOST_TEST(tmp.listing() == std::vector<std::string>{"round_trip.safetensors"},
             boost::test_tools::per_element());
  const auto file = SafetensorsFile::open(path);
  BOOST_TEST(file.path() == path);
  BOOST_TEST(file.tensors().size() == 12u);

  const auto f16_table = nlb::test::binary16_reference.positive_table();
  const auto bf16_table = nlb::test::bfloat16_reference.positive_table();
  auto expected = [&](DType dt, double x) -> double {
    switch (dt) {
      case DType::F64:
        return x;
      case DType::F32:
        return static_cast<float>(x);
      case DType::F16:
        return nlb::test::binary16_reference.decode(
            nlb::test::binary16_reference.encode_nearest(x, f16_table));
      default:
        return nlb::test::bfloat16_reference.decode(
            nlb::test::bfloat16_reference.encode_nearest(x, bf16_table));
    }
  };
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    const std::string name(nlb::io::to_string(dt));
    const auto from_double = file.read<double>("from_double." + name, shape);
    const auto from_float = file.read<double>("from_float." + name, shape);
    const auto as_float = file.read<float>("from_double." + name);
    int bad = 0;
    for (int i = 0; i < n; ++i) {
      const double want_d = expected(dt, d[i]);
      const double want_f = expected(dt, static_cast<double>(f[i]));
      if (std::bit_cast<std::uint64_t>(from_double[i]) != std::bit_cast<std::uint64_t>(want_d))
        ++bad;
      if (std::bit_cast<std::uint64_t>(from_float[i]) != std::bit_cast<std::uint64_t>(want_f))
        ++bad;
      // Reading as float: the stored value rounded once to float (F64 -> float rounds).
      if (as_float[i] != static_cast<float>(want_d))
        ++bad;
    }
    BOOST_TEST_CONTEXT("dtype " << name) {
      BOOST_TEST(bad == 0);
    }
  }
  BOOST_TEST(file.read<std::int64_t>("i64") == i64, boost::test_tools::per_element());
  BOOST_TEST(file.read<std::int64_t>("i32") == i32, boost::test_tools::per_element());
  BOOST_TEST(file.read<std::int64_t>("u8", {3, 1000}) == u8, boost::test_tools::per_element());
  BOOST_TEST(file.read<std::int64_t>("bool", {n, 1}) == flags, boost::test_tools::per_element());
  const auto u8_as_bytes = file.read<std::uint8_t>("u8");
  BOOST_TEST(std::equal(u8_as_bytes.begin(), u8_as_bytes.end(), u8.begin()));
}

BOOST_AUTO_TEST_CASE(writer_layout_matches_the_format) {
  SafetensorsWriter writer;
  writer.add("zeta", DType::F32, {2}, std::vector<float>{1.0f, 2.0f});
  writer.add("alpha", DType::F16, {3}, std::vector<float>{1.0f, -2.0f, 0.5f});
  writer.add("mid", DType::F64, {}, std::vector<double>{4.0});
  writer.set_metadata("format", "pt");
  const Bytes bytes = writer.to_bytes();
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | bytes[static_cast<std::size_t>(i)];
  BOOST_TEST(n % 8 == 0u);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  BOOST_TEST(header.front() == '{');
  const auto close = header.rfind('}');
  BOOST_TEST(header.find_first_not_of(' ', close + 1) == std::string::npos);  // only spaces after
  BOOST_TEST(close + 8 > header.size());                                      // < 8 of them
  const auto json = nlohmann::json::parse(header);
  BOOST_TEST(json["__metadata__"]["format"] == "pt");
  // Data in name order: alpha (6 bytes), mid (8), zeta (8), back to back from 0.
  BOOST_TEST(json["alpha"]["data_offsets"] == nlohmann::json::array({0, 6}));
  BOOST_TEST(json["mid"]["data_offsets"] == nlohmann::json::array({6, 14}));
  BOOST_TEST(json["zeta"]["data_offsets"] == nlohmann::json::array({14, 22}));
  BOOST_TEST(json["mid"]["shape"] == nlohmann::json::array());
  BOOST_TEST(json["alpha"]["dtype"] == "F16");
  BOOST_TEST(bytes.size() == 8 + n + 22);
  // Names appear in sorted order in the header text itself.
  BOOST_TEST(header.find("\"alpha\"") < header.find("\"mid\""));
  BOOST_TEST(header.find("\"mid\"") < header.find("\"zeta\""));
  // alpha's bytes: F16 1.0 = 0x3C00, -2.0 = 0xC000, 0.5 = 0x3800, little-endian.
  const Bytes alpha(bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n),
                    bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n) + 6);
  BOOST_TEST(alpha == (Bytes{0x00, 0x3C, 0x00, 0xC0, 0x00, 0x38}),
             boost::test_tools::per_element());
  // No metadata set: no "__metadata__" key.
  SafetensorsWriter bare;
  bare.add_int("x", DType::I32, {1}, std::vector<std::int64_t>{7});
  const Bytes bare_bytes = bare.to_bytes();
  const std::string bare_text(bare_bytes.begin(), bare_bytes.end());
  BOOST_TEST(!contains(bare_text, "__metadata__"));
  // An empty writer gives the smallest valid file: "{}" padded to 8.
  const Bytes empty = SafetensorsWriter{}.to_bytes();
  BOOST_TEST(empty == (Bytes{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(metadata_round_trip) {
  SafetensorsWriter writer;
  writer.set_metadata("format", "pt");
  writer.set_metadata("note", "replaced");
  writer.set_metadata("note", "λ = 0.01, \"quoted\"\n");
  writer.set_metadata("", "empty key");
  writer.add("w", DType::BF16, {1}, std::vector<float>{1.0f});
  nlb::test::ScratchDir tmp;
  writer.write(tmp.path / "m.safetensors");
  const auto file = SafetensorsFile::open(tmp.path / "m.safetensors");
  const std::map<std::string, std::string> want = {
      {"", "empty key"}, {"format", "pt"}, {"note", "λ = 0.01, \"quoted\"\n"}};
  BOOST_TEST((file.metadata() == want));
}

BOOST_AUTO_TEST_CASE(writer_never_leaves_a_partial_file) {
  nlb::test::ScratchDir tmp;
  SafetensorsWriter writer;
  writer.add("w", DType::F32, {4}, std::vector<float>{1, 2, 3, 4});

  // 1. The directory does not exist: nothing can be created, the error names the path.
  const fs::path missing_dir = tmp.path / "no-such-dir" / "model.safetensors";
  try {
    writer.write(missing_dir);
    BOOST_ERROR("write into a missing directory did not throw");
  } catch (const nlb::Error& e) {
    BOOST_TEST(contains(e.what(), missing_dir.string()));
  }
  BOOST_TEST(tmp.listing().empty());

  // 2. The target is a directory: the temporary file is written, the rename fails, and the
  //    temporary file is removed again.
  fs::create_directory(tmp.path / "taken.safetensors");
  try {
    writer.write(tmp.path / "taken.safetensors");
    BOOST_ERROR("write over a directory did not throw");
  } catch (const nlb::Error& e) {
    BOOST_TEST(contains(e.what(), (tmp.path / "taken.safetensors").string()));
  }
  BOOST_TEST(tmp.listing() == std::vector<std::string>{"taken.safetensors"},
             boost::test_tools::per_element());

  // 3. Overwriting an existing file replaces it whole; no temporary file remains.
  {
    std::ofstream old(tmp.path / "model.safetensors");
    old << "old contents";
  }
  writer.write(tmp.path / "model.safetensors");
  BOOST_TEST(tmp.listing() == (std::vector<std::string>{"model.safetensors", "taken.safetensors"}),
             boost::test_tools::per_element());
  BOOST_TEST(SafetensorsFile::open(tmp.path / "model.safetensors").read<float>("w") ==
                 (std::vector<float>{1, 2, 3, 4}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(writer_rejects_bad_arguments) {
  SafetensorsWriter w;
  const std::vector<float> four = {1, 2, 3, 4};
  const std::vector<std::int64_t> ints = {1, 2, 3, 4};
  w.add("a", DType::F32, {4}, four);
  BOOST_CHECK_THROW(w.add("a", DType::F32, {4}, four), nlb::ArgumentError);  // repeated
  BOOST_CHECK_THROW(w.add("", DType::F32, {4}, four), nlb::ArgumentError);
  BOOST_CHECK_THROW(w.add("__metadata__", DType::F32, {4}, four), nlb::ArgumentError);
  BOOST_CHECK_THROW(w.add("bad\xff", DType::F32, {4}, four), nlb::ArgumentError);  // not UTF-8
  BOOST_CHECK_THROW(w.add("b", DType::I32, {4}, four), nlb::ArgumentError);        // not floating
  BOOST_CHECK_THROW(w.add_int("b", DType::F32, {4}, ints), nlb::ArgumentError);
  BOOST_CHECK_THROW(w.add("b", DType::F32, {2, 3}, four), nlb::ShapeError);  // 6 != 4
  BOOST_CHECK_THROW(w.add("b", DType::F32, {-2, -2}, four), nlb::ShapeError);
  BOOST_CHECK_THROW(w.add_int("b", DType::I32, {1}, std::vector<std::int64_t>{1ll << 31}),
                    nlb::ArgumentError);
  BOOST_CHECK_THROW(w.add_int("b", DType::U8, {1}, std::vector<std::int64_t>{-1}),
                    nlb::ArgumentError);
  BOOST_CHECK_THROW(w.add_int("b", DType::BOOL, {1}, std::vector<std::int64_t>{2}),
                    nlb::ArgumentError);
  BOOST_CHECK_THROW(w.set_metadata("k", "v\xc3"), nlb::ArgumentError);
  // Nothing rejected was added: only "a" is in the file.
  const auto file = SafetensorsFile::from_bytes(w.to_bytes(), "w");
  BOOST_TEST(file.tensors().size() == 1u);
  BOOST_TEST(file.metadata().empty());
}

BOOST_AUTO_TEST_CASE(accepted_edge_cases) {
  // Exactly at the limits: header length = file size - 8 (no data section).
  const auto no_data = SafetensorsFile::from_bytes(assemble("{}", {}), "no_data");
  BOOST_TEST(no_data.tensors().empty());
  // Unreferenced bytes (a gap before the tensor and after it) are allowed; empty tensors may
  // share an offset with anything.
  const auto gaps = SafetensorsFile::from_bytes(
      assemble(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[3,5]},)"
               R"("e":{"dtype":"F32","shape":[0,7],"data_offsets":[4,4]}})",
               Bytes{9, 9, 9, 42, 43, 9, 9}),
      "gaps");
  BOOST_TEST(gaps.read<int>("a") == (std::vector<int>{42, 43}), boost::test_tools::per_element());
  BOOST_TEST(gaps.read<float>("e").empty());
  // Whitespace-padded header with newlines inside the JSON.
  const auto spaced = SafetensorsFile::from_bytes(
      assemble("{\n \"__metadata__\" : { \"k\" : \"v\" } \n}\n", {}), "spaced");
  BOOST_TEST(spaced.metadata().at("k") == "v");
}

BOOST_AUTO_TEST_CASE(reader_rejects_in_memory_violations) {
  // Rules the corpus files also cover, checked here on buffers with the name given to
  // from_bytes appearing in the message.
  const struct {
    std::string header;
    Bytes data;
    std::string phrase;
  } cases[] = {
      {R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
       {0},
       "duplicate key: expected each key once in its object, found \"dtype\" twice"},
      {R"({"__metadata__":{"k":"1","k":"2"}})", {}, "duplicate key"},
      {R"({"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", {0}, ""},  // valid
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       {0, 0, 0, 0},
       "tensors \"a\" and \"b\" overlap"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       {0, 0, 0, 0},
       "end beyond the data section: expected end <= 4 (the data section's size), found 8"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.header) {
      if (c.phrase.empty()) {
        BOOST_CHECK_NO_THROW(SafetensorsFile::from_bytes(assemble(c.header, c.data), "mem"));
        continue;
      }
      const std::string message = nlb::test::error_message<nlb::FormatError>(
          [&] { (void)SafetensorsFile::from_bytes(assemble(c.header, c.data), "in-memory-name"); });
      BOOST_TEST(contains(message, "in-memory-name: "));
      BOOST_TEST(contains(message, c.phrase), message);
    }
  }
  // A BOOL byte other than 0 or 1 is caught when read.
  const auto b = SafetensorsFile::from_bytes(
      assemble(R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", {1, 7}), "bools");
  BOOST_TEST(contains(nlb::test::error_message<nlb::FormatError>([&] { (void)b.read<int>("a"); }),
                      "element 1 of a BOOL tensor: expected 0 or 1, found 7"));
  // An integer tensor read into a too-narrow type names element and value.
  const auto u = SafetensorsFile::from_bytes(
      assemble(R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
               {1, 0, 0, 0, 0x00, 0x01, 0x00, 0x00}),
      "ints");
  BOOST_TEST(
      contains(nlb::test::error_message<nlb::FormatError>([&] { (void)u.read<std::int8_t>("a"); }),
               "element 1 does not fit int8: expected a value in [-128, 127], found 256"));
  BOOST_TEST(contains(nlb::test::error_message<nlb::FormatError>(
                          [&] { (void)SafetensorsFile::open("/nonexistent/x.safetensors"); }),
                      "/nonexistent/x.safetensors: cannot read"));
}

BOOST_AUTO_TEST_CASE(malformed_corpus_gives_specific_errors) {
  // file -> phrase its FormatError must contain (besides the file's name).
  const std::map<std::string, std::string> table = {
      {"empty",
       "file too short for the 8-byte header length: expected at least 8 bytes, found 0 bytes"},
      {"short_5_bytes",
       "file too short for the 8-byte header length: expected at least 8 bytes, found 5 bytes"},
      {"header_length_zero", "header does not start with '{'"},
      {"header_length_beyond_file", "header length runs past the end of the file"},
      {"header_length_over_limit",
       "header length over the 100 MiB limit: expected at most 104857600 bytes, found 104857601 "
       "bytes"},
      {"header_length_u64_max", "header length over the 100 MiB limit"},
      {"truncated_in_header", "header length runs past the end of the file"},
      {"truncated_in_data",
       "tensor \"w\": data_offsets end beyond the data section: expected end <= 21"},
      {"header_not_json", "header is not valid JSON"},
      {"header_trailing_garbage", "header is not valid JSON"},
      {"header_invalid_utf8", "header is not valid JSON"},
      {"header_with_comment", "header is not valid JSON"},
      {"header_nul_padding", "header is not valid JSON"},
      {"header_leading_space",
       "header does not start with '{': expected '{' at byte 8, found byte 32"},
      {"header_json_array", "header does not start with '{'"},
      {"duplicate_tensor_name",
       "header has a duplicate key: expected each key once in its object, found \"a\" twice"},
      {"metadata_not_object",
       "__metadata__ is not an object: expected an object of strings, found string \"x\""},
      {"metadata_value_not_string",
       "__metadata__ value \"format\" is not a string: expected a string, found number 1"},
      {"empty_tensor_name", "tensor name is empty"},
      {"entry_not_object", "tensor \"a\": entry is not an object"},
      {"entry_missing_dtype", "tensor \"a\": missing key \"dtype\""},
      {"entry_unexpected_key", "tensor \"a\": unexpected key \"extra\""},
      {"dtype_not_string", "tensor \"a\": dtype is not a string"},
      {"dtype_unknown",
       "tensor \"a\": unknown dtype: expected one of F64, F32, F16, BF16, I64, I32, U8, BOOL, "
       "found \"F8_E4M3\""},
      {"dtype_lowercase", "unknown dtype"},
      {"shape_not_array", "tensor \"a\": shape is not an array"},
      {"shape_negative_dim",
       "tensor \"a\": dimension shape[0] is negative: expected a non-negative integer, found "
       "number -4"},
      {"shape_fractional_dim", "dimension shape[0] is not an integer"},
      {"shape_dim_too_large",
       "dimension shape[0] is too large: expected at most 9223372036854775807, found "
       "9223372036854775808"},
      {"numel_overflow",
       "tensor \"a\": element count overflows: expected a shape whose product fits in int64, found "
       "[4294967296, 4294967296, 4]"},
      {"byte_count_overflow", "tensor \"a\": byte count overflows"},
      {"offsets_not_array", "data_offsets is not [begin, end]"},
      {"offsets_one_element",
       "data_offsets is not [begin, end]: expected an array of 2 non-negative integers, found an "
       "array of 1 elements"},
      {"offsets_three_elements", "data_offsets is not [begin, end]"},
      {"offsets_not_integers", "data_offsets[0] is not an integer"},
      {"offsets_negative", "data_offsets[0] is negative"},
      {"begin_greater_than_end", "data_offsets begin > end: expected begin <= end, found [8, 4]"},
      {"end_beyond_data", "data_offsets end beyond the data section"},
      {"numel_mismatch",
       "tensor \"a\": byte count does not match shape and dtype: expected 24 bytes (F32 [2, 3]), "
       "found 20 bytes"},
      {"overlapping_tensors",
       "tensors \"a\" and \"b\" overlap: expected disjoint byte ranges, found [0, 16) and [8, 24)"},
      {"nested_overlap", "tensors \"a\" and \"c\" overlap"},
  };
  BOOST_TEST(table.size() >= 15u);
  const fs::path dir = source_dir / "tests/fixtures/malformed-safetensors";
  // The directory holds exactly the files in the table: a new corpus file needs a row.
  std::set<std::string> on_disk;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".safetensors")
      on_disk.insert(e.path().stem().string());
  }
  std::set<std::string> listed;
  for (const auto& [name, phrase] : table)
    listed.insert(name);
  BOOST_TEST(on_disk == listed, boost::test_tools::per_element());

  for (const auto& [name, phrase] : table) {
    BOOST_TEST_CONTEXT(name) {
      const fs::path path = dir / (name + ".safetensors");
      const std::string message =
          nlb::test::error_message<nlb::FormatError>([&] { (void)SafetensorsFile::open(path); });
      BOOST_TEST_MESSAGE(message);
      BOOST_TEST(contains(message, path.string() + ": "), message);
      BOOST_TEST(contains(message, phrase), message);
    }
  }
}

BOOST_AUTO_TEST_CASE(transposed_reads_equal_eigens_transpose) {
  // read_matrix_transposed converts in blocks of 32 rows; sizes around that block and a
  // permutation of the outputs are checked against read_matrix + Eigen's transpose (the
  // permutation applied by hand), for every floating dtype.
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  SafetensorsWriter writer;
  const std::vector<std::pair<nlb::Index, nlb::Index>> shapes = {
      {1, 1}, {31, 5}, {32, 33}, {70, 48}, {96, 3}};
  for (const auto& [rows, cols] : shapes) {
    std::vector<double> v(static_cast<std::size_t>(rows * cols));
    for (auto& x : v)
      x = normal(rng);
    for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
      writer.add("m" + std::to_string(rows) + "x" + std::to_string(cols) + "." +
                     std::string(nlb::io::to_string(dt)),
                 dt, {rows, cols}, v);
    }
  }
  nlb::test::ScratchDir tmp;
  const fs::path path = tmp.path / "transposed.safetensors";
  writer.write(path);
  const SafetensorsFile file = SafetensorsFile::open(path);
  for (const auto& [rows, cols] : shapes) {
    // A permutation: reversed in pairs of rows (and the last row kept when rows is odd).
    std::vector<nlb::Index> column(static_cast<std::size_t>(rows));
    for (nlb::Index o = 0; o < rows; ++o)
      column[static_cast<std::size_t>(o)] = (o ^ 1) < rows ? (o ^ 1) : o;
    for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
      const std::string name = "m" + std::to_string(rows) + "x" + std::to_string(cols) + "." +
                               std::string(nlb::io::to_string(dt));
      const nlb::RowMatrix<float> plain = file.read_matrix<float>(name, rows, cols);
      const nlb::RowMatrix<float> want = plain.transpose();
      BOOST_TEST((file.read_matrix_transposed<float>(name, rows, cols) == want), name);
      nlb::RowMatrix<float> permuted(cols, rows);
      for (nlb::Index o = 0; o < rows; ++o)
        permuted.col(column[static_cast<std::size_t>(o)]) = plain.row(o).transpose();
      BOOST_TEST((file.read_matrix_transposed<float>(name, rows, cols, column) == permuted), name);
      const nlb::RowMatrix<double> want_double =
          file.read_matrix<double>(name, rows, cols).transpose();
      BOOST_TEST((file.read_matrix_transposed<double>(name, rows, cols) == want_double), name);
    }
  }
  // Reading releases the tensor's pages; reading again gives the same values.
  const auto again = file.read_matrix_transposed<float>("m70x48.F32", 70, 48);
  BOOST_TEST((again == file.read_matrix<float>("m70x48.F32", 70, 48).transpose().eval()));
  // The file's size, and the mapped file reads what the in-memory copy reads.
  BOOST_TEST(file.file_size() == fs::file_size(path));
  std::ifstream in(path, std::ios::binary);
  Bytes bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const SafetensorsFile copy = SafetensorsFile::from_bytes(bytes, "copy");
  BOOST_TEST(
      (copy.read_matrix<float>("m96x3.F16", 96, 3) == file.read_matrix<float>("m96x3.F16", 96, 3)));
  // Argument and shape errors.
  BOOST_CHECK_THROW(file.read_matrix_transposed<float>("m31x5.F32", 5, 31), nlb::FormatError);
  BOOST_CHECK_THROW(file.read_matrix_transposed<float>("m31x5.F32", -1, 5), nlb::ArgumentError);
  const std::vector<nlb::Index> short_map(30, 0);
  BOOST_CHECK_THROW(file.read_matrix_transposed<float>("m31x5.F32", 31, 5, short_map),
                    nlb::ArgumentError);
  std::vector<nlb::Index> out_of_range(31, 0);
  out_of_range[3] = 31;
  BOOST_CHECK_THROW(file.read_matrix_transposed<float>("m31x5.F32", 31, 5, out_of_range),
                    nlb::ArgumentError);
  std::vector<nlb::Index> repeated(31);
  for (nlb::Index o = 0; o < 31; ++o)
    repeated[static_cast<std::size_t>(o)] = o;
  repeated[4] = 3;  // 3 twice, 4 never
  BOOST_CHECK_THROW(file.read_matrix_transposed<float>("m31x5.F32", 31, 5, repeated),
                    nlb::ArgumentError);
}
