// The GEMM sweeps recorded in the library, which gemm_provider::measured chooses from
// (gemm_measured.hpp). Each CPU kind's block is written by benchmarks/gemm_measurements.py from
// one run of bench_gemm's sweep on such a machine (docs/benchmarks.md, "GEMM providers at the
// model's products", gives the command and the tables); edit the script's input, not the rows.
// A row: GFLOP/s of ops::gemm for [rows, width] · [width, 4 · width] (rhs_transposed: the right
// operand stored as [4 · width, width] and read transposed) on `threads` threads, per provider in
// MeasuredProvider's order; 0 where the provider was not measured.
#pragma once

#include "nlb/core/cpu_kind.hpp"
#include "nlb/core/matrix.hpp"

namespace nlb::ops::detail {

/// The providers a measurement row compares, in the order of its gflops array.
enum class MeasuredProvider : int { eigen, openblas, blis, onednn, libxsmm };
inline constexpr int measured_provider_count = 5;

struct GemmMeasurement {
  CpuVendor vendor;
  int family;
  CpuVectorIsa isa;
  int threads;
  bool rhs_transposed;
  Index width;
  Index rows;
  float gflops[measured_provider_count];
};

// clang-format off
inline constexpr GemmMeasurement gemm_measurements[] = {
  // BEGIN amd 26 avx512: 2 vCPUs of an AMD EPYC (family 26: Zen 5), 2026-12-07, OpenBLAS as it loads (Haswell kernels)
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 768, 4, {38, 62, 95, 92, 91}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 768, 16, {77, 143, 200, 176, 188}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 768, 64, {102, 132, 187, 184, 175}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 768, 128, {95, 62, 183, 167, 92}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 768, 1024, {104, 86, 229, 120, 99}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 1024, 4, {19, 37, 65, 63, 53}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 1024, 16, {36, 112, 141, 131, 137}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 1024, 64, {79, 140, 159, 171, 160}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 1024, 128, {96, 92, 89, 192, 92}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 1024, 1024, {101, 67, 179, 194, 99}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 2048, 4, {11, 23, 22, 24, 30}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 2048, 16, {35, 73, 67, 63, 75}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 2048, 64, {67, 124, 92, 143, 136}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 2048, 128, {98, 90, 145, 153, 87}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 2048, 1024, {73, 81, 108, 151, 93}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 768, 4, {34, 25, 51, 72, 31}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 768, 16, {69, 41, 65, 101, 64}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 768, 64, {92, 77, 144, 166, 62}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 768, 128, {98, 89, 176, 137, 87}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 768, 1024, {104, 86, 217, 110, 100}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 1024, 4, {16, 23, 17, 37, 26}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 1024, 16, {35, 47, 63, 58, 63}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 1024, 64, {89, 61, 141, 124, 85}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 1024, 128, {83, 57, 136, 150, 88}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 1024, 1024, {92, 102, 184, 181, 96}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 2048, 4, {7, 14, 8, 22, 18}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 2048, 16, {44, 42, 42, 54, 46}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 2048, 64, {50, 71, 100, 116, 82}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 2048, 128, {72, 86, 90, 134, 81}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 2048, 1024, {90, 85, 109, 133, 95}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 768, 4, {39, 104, 152, 158, 145}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 768, 16, {57, 212, 331, 190, 343}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 768, 64, {121, 279, 376, 221, 252}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 768, 128, {168, 47, 175, 119, 174}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 768, 1024, {189, 95, 229, 231, 157}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 1024, 4, {19, 92, 108, 140, 110}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 1024, 16, {47, 125, 339, 206, 332}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 1024, 64, {129, 231, 360, 205, 363}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 1024, 128, {164, 114, 171, 204, 175}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 1024, 1024, {169, 191, 183, 211, 184}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 2048, 4, {13, 46, 55, 53, 60}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 2048, 16, {51, 161, 138, 77, 143}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 2048, 64, {106, 237, 178, 256, 261}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 2048, 128, {138, 168, 144, 289, 162}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 2048, 1024, {153, 153, 108, 296, 179}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 768, 4, {31, 16, 51, 134, 22}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 768, 16, {36, 73, 63, 58, 104}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 768, 64, {111, 136, 142, 118, 106}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 768, 128, {153, 119, 171, 148, 171}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 768, 1024, {183, 137, 193, 212, 190}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 1024, 4, {13, 17, 17, 132, 22}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 1024, 16, {50, 71, 63, 24, 116}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 1024, 64, {137, 104, 137, 77, 160}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 1024, 128, {164, 124, 131, 106, 174}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 1024, 1024, {171, 179, 119, 184, 161}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 2048, 4, {7, 19, 8, 56, 18}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 2048, 16, {41, 85, 41, 22, 84}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 2048, 64, {101, 148, 52, 58, 147}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 2048, 128, {120, 171, 123, 133, 153}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 2048, 1024, {159, 156, 113, 289, 170}},
  // END amd 26 avx512
  // BEGIN intel 6 avx512: 2 vCPUs of a Xeon (family 6 model 167), 2026-12-07; its openblas column was BLIS's cblas_sgemm (link order), so it is left out
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 768, 4, {22, 0, 40, 44, 42}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 768, 16, {55, 0, 71, 75, 79}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 768, 64, {111, 0, 115, 120, 111}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 768, 128, {129, 0, 91, 151, 170}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 768, 1024, {137, 0, 100, 159, 197}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 1024, 4, {15, 0, 39, 40, 40}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 1024, 16, {44, 0, 71, 67, 72}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 1024, 64, {94, 0, 81, 81, 106}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 1024, 128, {102, 0, 78, 143, 170}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 1024, 1024, {115, 0, 93, 148, 202}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 2048, 4, {10, 0, 11, 11, 11}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 2048, 16, {32, 0, 23, 23, 30}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 2048, 64, {72, 0, 58, 60, 63}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 2048, 128, {89, 0, 77, 134, 143}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, false, 2048, 1024, {109, 0, 95, 147, 170}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 768, 4, {29, 0, 28, 26, 67}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 768, 16, {79, 0, 57, 73, 122}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 768, 64, {133, 0, 82, 133, 167}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 768, 128, {144, 0, 88, 152, 175}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 768, 1024, {140, 0, 100, 164, 207}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 1024, 4, {14, 0, 29, 26, 61}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 1024, 16, {45, 0, 57, 60, 122}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 1024, 64, {96, 0, 75, 116, 167}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 1024, 128, {100, 0, 74, 133, 174}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 1024, 1024, {127, 0, 100, 149, 200}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 2048, 4, {8, 0, 25, 22, 53}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 2048, 16, {29, 0, 49, 33, 101}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 2048, 64, {70, 0, 67, 94, 140}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 2048, 128, {85, 0, 73, 131, 141}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 1, true, 2048, 1024, {112, 0, 94, 153, 195}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 768, 4, {22, 0, 77, 84, 79}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 768, 16, {77, 0, 135, 147, 153}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 768, 64, {181, 0, 227, 221, 226}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 768, 128, {215, 0, 174, 296, 175}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 768, 1024, {267, 0, 186, 293, 200}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 1024, 4, {16, 0, 73, 74, 79}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 1024, 16, {73, 0, 134, 138, 154}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 1024, 64, {161, 0, 202, 212, 228}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 1024, 128, {200, 0, 164, 281, 171}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 1024, 1024, {249, 0, 187, 299, 201}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 2048, 4, {9, 0, 38, 25, 35}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 2048, 16, {66, 0, 60, 54, 59}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 2048, 64, {152, 0, 118, 119, 129}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 2048, 128, {186, 0, 152, 274, 142}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, false, 2048, 1024, {206, 0, 193, 324, 192}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 768, 4, {29, 0, 64, 51, 65}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 768, 16, {67, 0, 110, 132, 123}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 768, 64, {153, 0, 163, 237, 159}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 768, 128, {212, 0, 177, 272, 181}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 768, 1024, {251, 0, 196, 320, 196}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 1024, 4, {15, 0, 60, 49, 60}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 1024, 16, {67, 0, 114, 75, 121}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 1024, 64, {150, 0, 150, 169, 158}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 1024, 128, {193, 0, 159, 218, 174}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 1024, 1024, {249, 0, 192, 291, 201}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 2048, 4, {8, 0, 50, 48, 52}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 2048, 16, {49, 0, 104, 67, 99}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 2048, 64, {152, 0, 140, 158, 139}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 2048, 128, {171, 0, 155, 210, 147}},
  {CpuVendor::intel, 6, CpuVectorIsa::avx512, 2, true, 2048, 1024, {210, 0, 195, 311, 202}},
  // END intel 6 avx512
};
// clang-format on

}  // namespace nlb::ops::detail
