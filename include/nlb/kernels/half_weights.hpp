// Products of a float row vector with 16-bit weights (HalfMatrix, nlb/core/half_matrix.hpp),
// widened to float in registers and accumulated in float: batch-1 decoding reads each weight
// once per token, so reading 2 bytes instead of 4 is what makes it faster (the memory bound).
//
//   half_vecmat:            y[j] (+)= Σ_i x[i] · w[i·ldw + j]   (x · W,  W [k, n] row-major)
//   half_vecmat_transposed: y[j] (+)= Σ_i x[i] · w[j·ldw + i]   (x · Wᵀ, W [n, k] row-major)
//   widen:                  dst[i] = float(src[i])              (exact)
//
// The scalar overloads are the reference: one float sum per output in the order i = 0, 1, ….
// The SIMD overloads widen W lanes at a time — F16 with the F16C / AVX-512 conversion
// instruction, BF16 by a 16-bit shift into the top half of a float (bfloat16 is that top half) —
// and fall back to Eigen's per-value conversion on instruction sets without them. x · W streams
// W's rows, 16 at a time, into sums held in the L1 cache; x · Wᵀ takes eight rows of W at a time
// as dot products (lanes, then a horizontal sum: another order than the scalar overload's), so
// results agree with the reference to the float summation bound.
// Cost: 2·k·n FLOPs, 2·k·n bytes of weights read.
#pragma once

// First, so xsimd is included under the GCC 12 diagnostic guard (nlb/core/xsimd.hpp).
#include "nlb/core/xsimd.hpp"

#include <algorithm>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "nlb/core.hpp"
#include "nlb/kernels/detail/row_checks.hpp"
#include "nlb/kernels/detail/simd_row.hpp"
#include "nlb/kernels/detail/unroll.hpp"

NLB_XSIMD_GUARD_BEGIN

// The loops over the rows taken side by side are unrolled (NLB_UNROLL_LOOP) so every row pointer
// and factor stays in a register (measured: the rolled loop reads 30% slower).

namespace nlb::kernels {

namespace detail {

// W consecutive 16-bit values at p widened to a float batch.
template <class Arch, class H>
xsimd::batch<float, Arch> load_widened(const H* p) {
  using batch = xsimd::batch<float, Arch>;
  static_assert(sizeof(H) == 2, "load_widened: a 16-bit float type");
  if constexpr (batch::size == 16) {
#if defined(__AVX512F__)
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (std::is_same_v<H, Eigen::half>)
      return batch(_mm512_cvtph_ps(bits));
    else
      return batch(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16)));
#endif
  } else if constexpr (batch::size == 8) {
#if defined(__AVX2__) && defined(__F16C__)
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (std::is_same_v<H, Eigen::half>)
      return batch(_mm256_cvtph_ps(bits));
    else
      return batch(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16)));
#endif
  }
  alignas(Arch::alignment()) float values[batch::size];
  for (std::size_t i = 0; i < batch::size; ++i)
    values[i] = static_cast<float>(p[i]);
  return batch::load_aligned(values);
}

// The blocking of the two products, measured on GPT-2-small shapes (docs/benchmarks.md): a
// core keeps more memory requests in flight with more sequential streams, so x · W reads 16 rows
// side by side into 4096 float sums (16 KiB, in the L1 cache), and x · Wᵀ takes 8 rows at a time,
// asking for each row's data `transposed_prefetch` values ahead (the rows are short streams
// that the hardware prefetcher has no time to learn).
inline constexpr Index vecmat_chunk = 4096;
inline constexpr Index vecmat_rows = 16;
inline constexpr Index transposed_rows = 8;
inline constexpr Index transposed_prefetch = 512;
// x · W also asks for each cache line of the next group's rows as it reads the same line of the
// current group: a row's part of a chunk is a short stream (8 KiB) that the hardware prefetcher
// has no time to learn.
template <class H>
inline constexpr Index values_per_line = 64 / static_cast<Index>(sizeof(H));

}  // namespace detail

/// dst[0, n) = float(src[0, n)), exact. Scalar reference. O(n).
template <class H>
void widen(backend::scalar, const H* src, float* dst, Index n) {
  detail::check_row_length("widen: n", n, 0);
  for (Index i = 0; i < n; ++i)
    dst[i] = static_cast<float>(src[i]);
}

/// dst[0, n) = float(src[0, n)), W values per conversion instruction. O(n).
template <class H, class Arch, class Gemm>
void widen(backend::simd<Arch, Gemm>, const H* src, float* dst, Index n) {
  detail::check_row_length("widen: n", n, 0);
  constexpr Index width = detail::batch_width<float, Arch>;
  Index i = 0;
  for (; i + width <= n; i += width)
    detail::load_widened<Arch>(src + i).store_unaligned(dst + i);
  for (; i < n; ++i)
    dst[i] = static_cast<float>(src[i]);
}

/// y[0, n) (+ with `accumulate`)= x[0, k) · W, W [k, ≥ n] row-major with row stride ldw ≥ n.
/// Scalar reference: each y[j] one float sum over i = 0 … k−1. O(k·n).
/// Throws ArgumentError for negative sizes or ldw < n.
template <class H>
void half_vecmat(backend::scalar, const float* x, const H* w, Index k, Index ldw, float* y, Index n,
                 bool accumulate) {
  detail::check_product("half_vecmat: k, n, ldw", k, n, ldw, n);
  for (Index j = 0; j < n; ++j) {
    float sum = accumulate ? y[j] : 0.0f;
    for (Index i = 0; i < k; ++i)
      sum += x[i] * static_cast<float>(w[i * ldw + j]);
    y[j] = sum;
  }
}

/// y[0, n) (+ with `accumulate`)= x[0, k) · W with W widened in registers. W is read row by row,
/// vecmat_rows rows side by side (as many sequential streams, which is what keeps a core's
/// memory requests in flight), each row's part in order, into float sums of at most
/// vecmat_chunk outputs that stay in the L1 cache: each y[j] is one sum over i = 0 … k−1 in
/// order, as in the scalar reference (with FMA). O(k·n).
template <class H, class Arch, class Gemm>
void half_vecmat(backend::simd<Arch, Gemm>, const float* x, const H* w, Index k, Index ldw,
                 float* y, Index n, bool accumulate) {
  detail::check_product("half_vecmat: k, n, ldw", k, n, ldw, n);
  using batch = xsimd::batch<float, Arch>;
  constexpr Index width = detail::batch_width<float, Arch>;
  constexpr Index rows = detail::vecmat_rows;
  for (Index j0 = 0; j0 < n; j0 += detail::vecmat_chunk) {
    const Index columns = std::min(detail::vecmat_chunk, n - j0);
    const Index full = columns / width * width;
    float* out = y + j0;
    if (!accumulate)
      std::fill(out, out + columns, 0.0f);
    Index i = 0;
    for (; i + rows <= k; i += rows) {
      const H* r[rows];
      batch xs[rows];
      for (Index q = 0; q < rows; ++q) {
        r[q] = w + (i + q) * ldw + j0;
        xs[q] = batch(x[i + q]);
      }
      for (Index j = 0; j < full; j += width) {
        batch acc = batch::load_unaligned(out + j);
        const bool line_start = j % detail::values_per_line<H> == 0;
        NLB_UNROLL_LOOP
        for (Index q = 0; q < rows; ++q) {
          if (line_start)  // the same cache line of the next group's row q
            __builtin_prefetch(r[q] + j + rows * ldw);
          acc = xsimd::fma(xs[q], detail::load_widened<Arch>(r[q] + j), acc);
        }
        acc.store_unaligned(out + j);
      }
      for (Index j = full; j < columns; ++j) {
        float sum = out[j];
        for (Index q = 0; q < rows; ++q)
          sum += x[i + q] * static_cast<float>(r[q][j]);
        out[j] = sum;
      }
    }
    for (; i < k; ++i) {
      const H* row = w + i * ldw + j0;
      const batch xi(x[i]);
      for (Index j = 0; j < full; j += width)
        xsimd::fma(xi, detail::load_widened<Arch>(row + j), batch::load_unaligned(out + j))
            .store_unaligned(out + j);
      for (Index j = full; j < columns; ++j)
        out[j] += x[i] * static_cast<float>(row[j]);
    }
  }
}

/// y[0, n) (+ with `accumulate`)= x[0, k) · Wᵀ, W [n, ≥ k] row-major with row stride ldw ≥ k:
/// y[j] is the dot product of x with row j. Scalar reference. O(k·n).
/// Throws ArgumentError for negative sizes or ldw < k.
template <class H>
void half_vecmat_transposed(backend::scalar, const float* x, const H* w, Index k, Index ldw,
                            float* y, Index n, bool accumulate) {
  detail::check_product("half_vecmat_transposed: k, n, ldw", k, n, ldw, k);
  for (Index j = 0; j < n; ++j) {
    float sum = 0.0f;
    const H* row = w + j * ldw;
    for (Index i = 0; i < k; ++i)
      sum += x[i] * static_cast<float>(row[i]);
    y[j] = accumulate ? y[j] + sum : sum;
  }
}

/// y[0, n) (+ with `accumulate`)= x[0, k) · Wᵀ with W widened in registers: eight rows' dot
/// products at a time, each in two interleaved lane sums (independent FMA chains), then one
/// horizontal sum per row. O(k·n).
template <class H, class Arch, class Gemm>
void half_vecmat_transposed(backend::simd<Arch, Gemm>, const float* x, const H* w, Index k,
                            Index ldw, float* y, Index n, bool accumulate) {
  detail::check_product("half_vecmat_transposed: k, n, ldw", k, n, ldw, k);
  using batch = xsimd::batch<float, Arch>;
  constexpr Index width = detail::batch_width<float, Arch>;
  constexpr Index rows = detail::transposed_rows;
  const Index k_pairs = k / (2 * width) * (2 * width), k_full = k / width * width;
  auto finish = [&](Index j, const batch& acc) {
    float sum = detail::reduce_sum<Arch>(acc);
    for (Index i = k_full; i < k; ++i)
      sum += x[i] * static_cast<float>(w[j * ldw + i]);
    y[j] = accumulate ? y[j] + sum : sum;
  };
  Index j = 0;
  for (; j + rows <= n; j += rows) {
    const H* r[rows];
    batch even[rows], odd[rows];
    for (Index q = 0; q < rows; ++q) {
      r[q] = w + (j + q) * ldw;
      even[q] = odd[q] = batch(0.0f);
    }
    Index i = 0;
    for (; i < k_pairs; i += 2 * width) {
      const batch x0 = batch::load_unaligned(x + i), x1 = batch::load_unaligned(x + i + width);
      NLB_UNROLL_LOOP
      for (Index q = 0; q < rows; ++q) {
        __builtin_prefetch(r[q] + i + detail::transposed_prefetch);
        even[q] = xsimd::fma(x0, detail::load_widened<Arch>(r[q] + i), even[q]);
        odd[q] = xsimd::fma(x1, detail::load_widened<Arch>(r[q] + i + width), odd[q]);
      }
    }
    for (; i < k_full; i += width) {
      const batch x0 = batch::load_unaligned(x + i);
      for (Index q = 0; q < rows; ++q)
        even[q] = xsimd::fma(x0, detail::load_widened<Arch>(r[q] + i), even[q]);
    }
    for (Index q = 0; q < rows; ++q)
      finish(j + q, even[q] + odd[q]);
  }
  for (; j < n; ++j) {
    batch acc(0.0f);
    for (Index i = 0; i < k_full; i += width)
      acc = xsimd::fma(batch::load_unaligned(x + i), detail::load_widened<Arch>(w + j * ldw + i),
                       acc);
    finish(j, acc);
  }
}

}  // namespace nlb::kernels

NLB_XSIMD_GUARD_END
