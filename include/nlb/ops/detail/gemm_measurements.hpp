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
  // BEGIN amd 26 avx512: 2 vCPUs of an AMD EPYC (family 26: Zen 5), 2026-12-07, medians of 3 interleaved runs; OpenBLAS as it loads (Haswell kernels)
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 768, 4, {44, 89, 89, 63, 59}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 768, 16, {83, 176, 175, 178, 154}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 768, 64, {118, 157, 171, 165, 187}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 768, 128, {123, 85, 165, 168, 89}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 768, 1024, {128, 88, 170, 184, 101}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 1024, 4, {20, 53, 64, 51, 52}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 1024, 16, {50, 113, 130, 125, 125}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 1024, 64, {85, 139, 150, 138, 136}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 1024, 128, {99, 89, 162, 156, 86}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 1024, 1024, {110, 93, 166, 182, 97}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 2048, 4, {12, 23, 24, 22, 23}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 2048, 16, {37, 71, 82, 71, 76}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 2048, 64, {70, 141, 132, 129, 134}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 2048, 128, {93, 165, 96, 147, 89}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, false, 2048, 1024, {75, 82, 114, 129, 71}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 768, 4, {44, 26, 34, 68, 29}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 768, 16, {59, 53, 79, 119, 62}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 768, 64, {110, 81, 126, 145, 85}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 768, 128, {94, 82, 92, 164, 93}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 768, 1024, {123, 96, 129, 176, 99}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 1024, 4, {16, 22, 17, 53, 22}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 1024, 16, {37, 51, 53, 46, 53}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 1024, 64, {96, 82, 125, 114, 88}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 1024, 128, {88, 82, 132, 142, 92}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 1024, 1024, {121, 97, 181, 188, 99}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 2048, 4, {7, 16, 7, 25, 18}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 2048, 16, {27, 44, 37, 50, 41}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 2048, 64, {63, 71, 99, 99, 71}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 2048, 128, {97, 85, 90, 147, 89}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 1, true, 2048, 1024, {91, 77, 108, 126, 80}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 768, 4, {44, 134, 113, 140, 98}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 768, 16, {49, 323, 288, 279, 318}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 768, 64, {119, 320, 316, 287, 329}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 768, 128, {151, 162, 118, 340, 130}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 768, 1024, {205, 93, 107, 214, 177}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 1024, 4, {17, 117, 99, 95, 101}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 1024, 16, {48, 287, 324, 257, 295}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 1024, 64, {116, 276, 323, 323, 300}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 1024, 128, {158, 127, 98, 257, 148}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 1024, 1024, {211, 174, 172, 85, 171}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 2048, 4, {13, 52, 50, 54, 50}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 2048, 16, {48, 135, 103, 152, 142}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 2048, 64, {105, 252, 256, 201, 250}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 2048, 128, {120, 160, 154, 224, 157}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, false, 2048, 1024, {112, 119, 119, 188, 132}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 768, 4, {33, 18, 40, 109, 20}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 768, 16, {50, 58, 70, 67, 93}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 768, 64, {115, 139, 108, 183, 113}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 768, 128, {147, 156, 154, 237, 171}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 768, 1024, {174, 170, 124, 341, 96}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 1024, 4, {12, 18, 15, 114, 27}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 1024, 16, {51, 96, 40, 25, 63}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 1024, 64, {111, 143, 104, 76, 144}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 1024, 128, {138, 151, 86, 136, 91}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 1024, 1024, {179, 166, 104, 348, 165}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 2048, 4, {9, 16, 7, 42, 16}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 2048, 16, {37, 68, 44, 23, 83}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 2048, 64, {108, 127, 77, 83, 83}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 2048, 128, {125, 161, 96, 128, 85}},
  {CpuVendor::amd, 26, CpuVectorIsa::avx512, 2, true, 2048, 1024, {137, 132, 112, 194, 145}},
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
