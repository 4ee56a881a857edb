// io/dtype.hpp: dtype names and sizes; F16/BF16 decoding and nearest-even encoding, checked
// exhaustively over all 65,536 bit patterns and on random and tie inputs against the
// independent references in small_float_reference.hpp, plus hand-computed constants.
#include <bit>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "nlb/io/dtype.hpp"
#include "small_float_reference.hpp"

namespace {

using nlb::io::bf16_bits_to_float;
using nlb::io::f16_bits_to_float;
using nlb::io::to_bf16_bits;
using nlb::io::to_f16_bits;
using nlb::test::bfloat16_reference;
using nlb::test::binary16_reference;

std::uint32_t bits_of(float f) {
  return std::bit_cast<std::uint32_t>(f);
}

/// Doubles spread log-uniformly over |x| in [2^lo, 2^hi], random sign, full 53-bit mantissas.
std::vector<double> log_uniform(int lo, int hi, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> exponent(lo, hi);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::vector<double> out;
  for (std::size_t i = 0; i < count; ++i) {
    const double v = std::ldexp(mantissa(rng), static_cast<int>(std::floor(exponent(rng))));
    out.push_back((rng() & 1u) != 0 ? -v : v);
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(dtype_names_and_sizes) {
  using nlb::io::DType;
  const struct {
    DType dtype;
    const char* name;
    std::size_t size;
    bool floating;
  } table[] = {{DType::F64, "F64", 8, true},  {DType::F32, "F32", 4, true},
               {DType::F16, "F16", 2, true},  {DType::BF16, "BF16", 2, true},
               {DType::I64, "I64", 8, false}, {DType::I32, "I32", 4, false},
               {DType::U8, "U8", 1, false},   {DType::BOOL, "BOOL", 1, false}};
  BOOST_TEST(std::size(table) == nlb::io::all_dtypes.size());
  for (const auto& row : table) {
    BOOST_TEST(nlb::io::to_string(row.dtype) == row.name);
    BOOST_TEST(nlb::io::dtype_size(row.dtype) == row.size);
    BOOST_TEST(nlb::io::is_floating(row.dtype) == row.floating);
    BOOST_TEST((nlb::io::dtype_from_name(row.name) == row.dtype));
  }
  BOOST_TEST(!nlb::io::dtype_from_name("f32").has_value());  // names are case-sensitive
  BOOST_TEST(!nlb::io::dtype_from_name("F8_E4M3").has_value());
  BOOST_TEST(!nlb::io::dtype_from_name("").has_value());
}

BOOST_AUTO_TEST_CASE(f16_decoding_matches_formula_for_all_patterns) {
  int mismatches = 0;
  for (std::uint32_t p = 0; p <= 0xFFFF; ++p) {
    const auto h = static_cast<std::uint16_t>(p);
    const float got = f16_bits_to_float(h);
    const double want = binary16_reference.decode(h);
    if (std::isnan(want)) {
      // NaN stays NaN with its sign and its 10 payload bits (top of float's mantissa).
      const bool ok = std::isnan(got) && std::signbit(got) == ((h & 0x8000) != 0) &&
                      ((bits_of(got) >> 13) & 0x3FF) == (h & 0x3FFu);
      if (!ok)
        ++mismatches;
    } else if (bits_of(got) != bits_of(static_cast<float>(want))) {  // exact, incl. -0
      ++mismatches;
    }
  }
  BOOST_TEST(mismatches == 0);
  BOOST_TEST(f16_bits_to_float(0x3C00) == 1.0f);
  BOOST_TEST(f16_bits_to_float(0x7BFF) == 65504.0f);
  BOOST_TEST(f16_bits_to_float(0x0001) == std::ldexp(1.0f, -24));
  BOOST_TEST(f16_bits_to_float(0x03FF) == std::ldexp(1023.0f, -24));
  BOOST_TEST(f16_bits_to_float(0xC000) == -2.0f);
  BOOST_TEST(bits_of(f16_bits_to_float(0x8000)) == 0x80000000u);
  BOOST_TEST(f16_bits_to_float(0x7C00) == std::numeric_limits<float>::infinity());
}

BOOST_AUTO_TEST_CASE(bf16_decoding_matches_formula_for_all_patterns) {
  int mismatches = 0;
  for (std::uint32_t p = 0; p <= 0xFFFF; ++p) {
    const auto h = static_cast<std::uint16_t>(p);
    const float got = bf16_bits_to_float(h);
    const double want = bfloat16_reference.decode(h);
    if (std::isnan(want)) {
      if (!(std::isnan(got) && std::signbit(got) == ((h & 0x8000) != 0)))
        ++mismatches;
    } else if (bits_of(got) != bits_of(static_cast<float>(want))) {
      ++mismatches;
    }
  }
  BOOST_TEST(mismatches == 0);
  BOOST_TEST(bf16_bits_to_float(0x3F80) == 1.0f);
  BOOST_TEST(bf16_bits_to_float(0xC2F7) == -123.5f);
  BOOST_TEST(bf16_bits_to_float(0x0001) == std::ldexp(1.0f, -133));
}

BOOST_AUTO_TEST_CASE(encoding_round_trips_every_pattern) {
  // Every finite or infinite value is representable, so encoding its decoded value must give
  // the same pattern back; a NaN comes back quiet (quiet bit set), sign and payload kept.
  int f16_bad = 0, bf16_bad = 0;
  for (std::uint32_t p = 0; p <= 0xFFFF; ++p) {
    const auto h = static_cast<std::uint16_t>(p);
    const bool f16_nan = (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
    const std::uint16_t f16_want = f16_nan ? static_cast<std::uint16_t>(h | 0x0200) : h;
    if (to_f16_bits(f16_bits_to_float(h)) != f16_want)
      ++f16_bad;
    const bool bf16_nan = (h & 0x7F80) == 0x7F80 && (h & 0x007F) != 0;
    const std::uint16_t bf16_want = bf16_nan ? static_cast<std::uint16_t>(h | 0x0040) : h;
    if (to_bf16_bits(bf16_bits_to_float(h)) != bf16_want)
      ++bf16_bad;
  }
  BOOST_TEST(f16_bad == 0);
  BOOST_TEST(bf16_bad == 0);
}

BOOST_AUTO_TEST_CASE(f16_encoding_hand_computed_values) {
  const double tiny = std::ldexp(1.0, -24);  // smallest binary16 subnormal
  const struct {
    double x;
    std::uint16_t bits;
  } table[] = {
      {0.0, 0x0000},
      {-0.0, 0x8000},
      {1.0, 0x3C00},
      {-2.0, 0xC000},
      {0.1, 0x2E66},        // 0.0999755859375 (0x2E66) vs 0.10003662109375: nearer below
      {1.0 / 3.0, 0x3555},  // 0.333251953125
      {3.141592653589793, 0x4248},
      {65504.0, 0x7BFF},                         // largest finite
      {65519.99, 0x7BFF},                        // below max + ulp/2 = 65520
      {65520.0, 0x7C00},                         // max + ulp/2: tie, goes to the even "pattern" inf
      {1e6, 0x7C00},                             // overflow
      {-1e300, 0xFC00},                          // overflow, negative
      {std::ldexp(1.0, -14), 0x0400},            // smallest normal
      {std::ldexp(1023.0, -24), 0x03FF},         // largest subnormal
      {tiny, 0x0001},                            // smallest subnormal
      {tiny / 2, 0x0000},                        // tie between 0 and tiny: even is 0
      {-tiny / 2, 0x8000},                       // ... keeping the sign
      {tiny / 2 * (1 + 1e-15), 0x0001},          // just above the tie
      {1.5 * tiny, 0x0002},                      // tie between 1 and 2: even is 2
      {2.5 * tiny, 0x0002},                      // tie between 2 and 3: even is 2
      {1.0 + std::ldexp(1.0, -11), 0x3C00},      // tie between 0x3C00 and 0x3C01: even
      {1.0 + 3 * std::ldexp(1.0, -11), 0x3C02},  // tie between 0x3C01 and 0x3C02: even
      // Above the tie by 2^-40: a conversion through float would first round this to the
      // tie itself (float keeps 24 bits) and then to even (0x3C00): double rounding.
      {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), 0x3C01},
      {std::ldexp(1.0, -1074), 0x0000},  // double subnormal
      {std::numeric_limits<double>::infinity(), 0x7C00},
      {-std::numeric_limits<double>::infinity(), 0xFC00},
  };
  for (const auto& row : table) {
    BOOST_TEST_CONTEXT("x = " << row.x) {
      BOOST_TEST(to_f16_bits(row.x) == row.bits);
    }
  }
  const std::uint16_t nan = to_f16_bits(std::numeric_limits<double>::quiet_NaN());
  BOOST_TEST((nan & 0x7C00) == 0x7C00);
  BOOST_TEST((nan & 0x0200) == 0x0200);  // quiet, hence never the infinity pattern
  BOOST_TEST((to_f16_bits(-std::numeric_limits<double>::quiet_NaN()) & 0x8000) == 0x8000);
}

BOOST_AUTO_TEST_CASE(bf16_encoding_hand_computed_values) {
  const struct {
    double x;
    std::uint16_t bits;
  } table[] = {
      {1.0, 0x3F80},
      {-123.5, 0xC2F7},
      {3.141592653589793, 0x4049},                  // 3.140625 below, 3.15625 above
      {1.0 + std::ldexp(1.0, -8), 0x3F80},          // tie: even
      {1.0 + 3 * std::ldexp(1.0, -8), 0x3F82},      // tie: even
      {std::numeric_limits<float>::max(), 0x7F80},  // above max + ulp/2: infinity
      {std::ldexp(255.0, 120), 0x7F7F},             // largest finite bfloat16 (2 - 2^-7) 2^127
      {std::ldexp(1.0, -133), 0x0001},              // smallest subnormal
      {std::ldexp(1.0, -134), 0x0000},              // tie with 0: even
      {std::ldexp(1.0, -149), 0x0000},              // smallest float subnormal
      {std::ldexp(1.0, -126), 0x0080},              // smallest normal
      {-0.0, 0x8000},
  };
  for (const auto& row : table) {
    BOOST_TEST_CONTEXT("x = " << row.x) {
      BOOST_TEST(to_bf16_bits(row.x) == row.bits);
    }
  }
  const std::uint16_t nan = to_bf16_bits(std::numeric_limits<float>::quiet_NaN());
  BOOST_TEST((nan & 0x7F80) == 0x7F80);
  BOOST_TEST((nan & 0x0040) == 0x0040);
}

BOOST_AUTO_TEST_CASE(encoding_matches_nearest_even_search) {
  const std::vector<double> f16_table = binary16_reference.positive_table();
  const std::vector<double> bf16_table = bfloat16_reference.positive_table();
  std::vector<double> inputs;
  // Random magnitudes over every regime: below the smallest subnormals, subnormal, normal,
  // and past the overflow threshold of each format.
  for (double v : log_uniform(-30, 18, 200000, 11))
    inputs.push_back(v);
  for (double v : log_uniform(-140, 129, 200000, 12))
    inputs.push_back(v);
  // Random floats (the common case: float weights written as F16/BF16).
  for (double v : log_uniform(-30, 18, 50000, 13))
    inputs.push_back(static_cast<float>(v));
  // Exact ties and their neighbours one double ulp away, for every adjacent pair of values.
  for (const auto* table : {&f16_table, &bf16_table}) {
    for (std::size_t p = 0; p + 1 < table->size(); p += (table == &f16_table ? 1 : 7)) {
      const double mid = ((*table)[p] + (*table)[p + 1]) / 2;
      for (double v : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e300)}) {
        inputs.push_back(v);
        inputs.push_back(-v);
      }
    }
  }
  int f16_bad = 0, bf16_bad = 0;
  for (double x : inputs) {
    if (to_f16_bits(x) != binary16_reference.encode_nearest(x, f16_table))
      ++f16_bad;
    if (to_bf16_bits(x) != bfloat16_reference.encode_nearest(x, bf16_table))
      ++bf16_bad;
  }
  BOOST_TEST_MESSAGE("F16/BF16 encoding checked on " << inputs.size() << " inputs");
  BOOST_TEST(f16_bad == 0);
  BOOST_TEST(bf16_bad == 0);
}

BOOST_AUTO_TEST_CASE(bf16_float_encoding_matches_integer_rounding_formula) {
  // A third, different formulation for finite float inputs: add 0x7FFF plus the lowest kept
  // bit to the float's bits and drop the low 16 bits (round half to even on the bit pattern;
  // a carry out of the mantissa moves to the next exponent, or to infinity).
  std::mt19937 rng(5);
  int bad = 0;
  for (int i = 0; i < 1000000; ++i) {
    const auto u = static_cast<std::uint32_t>(rng());
    const float f = std::bit_cast<float>(u);
    if (!std::isfinite(f))
      continue;
    const auto want = static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    if (to_bf16_bits(f) != want)
      ++bad;
  }
  BOOST_TEST(bad == 0);
}
