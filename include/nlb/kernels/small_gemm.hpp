// Matrix products with few rows, C (+)= A · B with B row-major read where it lies (no packing).
//
//   small_gemm: C[i, j] (+)= Σ_p A[i·lda + p] · B[p·ldb + j]   A [m, k], B [k, n], C [m, n]
//
// Why: a BLAS GEMM packs the whole [k, n] right operand into its own layout on every call. With
// hundreds of rows that cost is spread thin; with 16 rows (the full-path block of a gated MLP
// at T = 64 and f = 0.75, PAPERS.md §A5) it is most of the time: OpenBLAS runs such a product at
// about half its 64-row rate (docs/benchmarks.md, "Gated MLP at small batches"). Here B's rows
// are already contiguous runs of n values, which is the order a register tile consumes them in:
// a tile of MR rows × NB batches of C is held in registers while p runs over a block of k, each
// step loading NB batches of B's row p and broadcasting MR values of A's column p. B is blocked
// (k_block × n_block values, sized for the L2 cache) so that the row tiles after the first read
// it from the L2.
//
// Summation: each C entry accumulates its k terms in order p = 0, 1, … in one float lane (split
// at the k blocks, which add onto C in order), so results agree with any GEMM to the float
// summation bound. Cost: 2·m·n·k FLOPs; no allocation.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include <algorithm>
#include <array>

#include "nlb/core/matrix.hpp"
#include "nlb/kernels/detail/unroll.hpp"

NLB_XSIMD_GUARD_BEGIN

namespace nlb::kernels {

// The register tile: Rows × Batches accumulators plus Batches loads of B and one broadcast of A
// must fit the register file. AVX-512 (32 registers): 8 rows × 3 batches (24 + 3 + 1); 16
// registers otherwise: 6 rows × 2 batches (12 + 2 + 1). Of the AVX-512 shapes tried (8 × 2,
// 8 × 3, 16 × 1, 4 × 6), 8 × 3 was the fastest (docs/benchmarks.md, "Gated MLP at small batches").
template <class Arch>
inline constexpr bool small_gemm_wide_registers = xsimd::batch<float, Arch>::size == 16;
template <class Arch>
inline constexpr int small_gemm_tile_rows = small_gemm_wide_registers<Arch> ? 8 : 6;
/// Batches of one register tile's columns (its width is this times the batch size for T): a
/// caller splitting a product's columns over threads splits them in whole tiles.
template <class Arch>
inline constexpr int small_gemm_tile_batches = small_gemm_wide_registers<Arch> ? 3 : 2;

namespace detail {

// C tile [Rows, Batches·W] (+)= A [Rows, kc] · B [kc, Batches·W].
template <class Arch, int Rows, int Batches, class T>
void small_gemm_tile(const T* a, Index lda, const T* b, Index ldb, T* c, Index ldc, Index kc,
                     bool add_to_c) {
  using batch = xsimd::batch<T, Arch>;
  constexpr Index width = batch::size;
  std::array<batch, Rows * Batches> acc;  // [Rows, Batches]
  for (int r = 0; r < Rows; ++r)
    for (int q = 0; q < Batches; ++q)
      acc[r * Batches + q] =
          add_to_c ? batch::load_unaligned(c + r * ldc + q * width) : batch(T(0));
  for (Index p = 0; p < kc; ++p) {
    std::array<batch, Batches> b_row;
    for (int q = 0; q < Batches; ++q)
      b_row[q] = batch::load_unaligned(b + p * ldb + q * width);
    NLB_UNROLL_LOOP
    for (int r = 0; r < Rows; ++r) {
      const batch x(a[r * lda + p]);
      for (int q = 0; q < Batches; ++q)
        acc[r * Batches + q] = xsimd::fma(x, b_row[q], acc[r * Batches + q]);
    }
  }
  for (int r = 0; r < Rows; ++r)
    for (int q = 0; q < Batches; ++q)
      acc[r * Batches + q].store_unaligned(c + r * ldc + q * width);
}

// The last columns [j0, j0 + cols) that do not fill a batch, one entry at a time (same order of
// summation as the tiles).
template <class T>
void small_gemm_columns(Index rows, const T* a, Index lda, const T* b, Index ldb, T* c, Index ldc,
                        Index kc, Index cols, bool add_to_c) {
  for (Index i = 0; i < rows; ++i)
    for (Index j = 0; j < cols; ++j) {
      T sum = add_to_c ? c[i * ldc + j] : T(0);
      for (Index p = 0; p < kc; ++p)
        sum += a[i * lda + p] * b[p * ldb + j];
      c[i * ldc + j] = sum;
    }
}

// Rows of C over nc columns: whole tiles, then single batches, then entry by entry.
template <class Arch, int Rows, class T>
void small_gemm_rows(const T* a, Index lda, const T* b, Index ldb, T* c, Index ldc, Index kc,
                     Index nc, bool add_to_c) {
  constexpr int batches = small_gemm_tile_batches<Arch>;
  constexpr Index width = static_cast<Index>(xsimd::batch<T, Arch>::size);
  Index j = 0;
  for (; j + batches * width <= nc; j += batches * width)
    small_gemm_tile<Arch, Rows, batches>(a, lda, b + j, ldb, c + j, ldc, kc, add_to_c);
  for (; j + width <= nc; j += width)
    small_gemm_tile<Arch, Rows, 1>(a, lda, b + j, ldb, c + j, ldc, kc, add_to_c);
  if (j < nc)
    small_gemm_columns(Rows, a, lda, b + j, ldb, c + j, ldc, kc, nc - j, add_to_c);
}

// Dispatches a remainder of 1 … MR − 1 rows to its compile-time tile.
template <class Arch, int Rows, class T>
void small_gemm_remainder(Index rows, const T* a, Index lda, const T* b, Index ldb, T* c, Index ldc,
                          Index kc, Index nc, bool add_to_c) {
  if constexpr (Rows > 0) {
    if (rows == Rows)
      small_gemm_rows<Arch, Rows>(a, lda, b, ldb, c, ldc, kc, nc, add_to_c);
    else
      small_gemm_remainder<Arch, Rows - 1>(rows, a, lda, b, ldb, c, ldc, kc, nc, add_to_c);
  }
}

}  // namespace detail

/// Blocking of small_gemm: k and n block sizes (values). 256 × 384 floats is 384 KiB of B,
/// held in the L2 of every x86-64 core this project has run on (512 KiB and more); 384 columns
/// are whole tiles at every width.
struct SmallGemmBlocking {
  Index k_block = 256;
  Index n_block = 384;
};

/// C (+)= A · B for row-major float or double operands with unit inner stride: A [m, k] with
/// row stride lda, B [k, n] with ldb, C [m, n] with ldc (C must not overlap A or B). With
/// `accumulate` false C is written, not read. Any m works; it pays off against a packing GEMM
/// for small m (the caller chooses the cut-off by measurement). O(m·n·k), no allocation.
template <class Arch, class T>
void small_gemm(Index m, Index n, Index k, const T* a, Index lda, const T* b, Index ldb, T* c,
                Index ldc, bool accumulate, SmallGemmBlocking blocking = {}) {
  constexpr int tile_rows = small_gemm_tile_rows<Arch>;
  if (m <= 0 || n <= 0)
    return;
  if (k <= 0) {
    if (!accumulate)
      for (Index i = 0; i < m; ++i)
        std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  const Index k_block = std::max<Index>(1, blocking.k_block);
  const Index n_block = std::max<Index>(1, blocking.n_block);
  for (Index j0 = 0; j0 < n; j0 += n_block) {
    const Index nc = std::min(n_block, n - j0);
    for (Index p0 = 0; p0 < k; p0 += k_block) {
      const Index kc = std::min(k_block, k - p0);
      const bool add_to_c = accumulate || p0 > 0;
      const T* b_block = b + p0 * ldb + j0;
      Index i = 0;
      for (; i + tile_rows <= m; i += tile_rows)
        detail::small_gemm_rows<Arch, tile_rows>(a + i * lda + p0, lda, b_block, ldb,
                                                 c + i * ldc + j0, ldc, kc, nc, add_to_c);
      if (i < m)
        detail::small_gemm_remainder<Arch, tile_rows - 1>(
            m - i, a + i * lda + p0, lda, b_block, ldb, c + i * ldc + j0, ldc, kc, nc, add_to_c);
    }
  }
}

}  // namespace nlb::kernels

NLB_XSIMD_GUARD_END
